"""extras.scene.upnet: uncertainty maps for active view selection (UPNet / PUN)."""
