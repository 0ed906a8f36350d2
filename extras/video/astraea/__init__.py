"""extras.video.astraea: token budgets for video diffusion transformers (Astraea)."""
