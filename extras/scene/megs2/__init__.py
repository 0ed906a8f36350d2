"""extras.scene.megs2: memory-efficient 3D Gaussian Splatting (MEGS²)."""
