"""extras.scene: 3D scenes, physics and video (UPNet, …)."""
