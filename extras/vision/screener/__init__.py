"""extras.vision.screener: density-based anomaly segmentation on dense SSL features with a masking-invariant condition."""
