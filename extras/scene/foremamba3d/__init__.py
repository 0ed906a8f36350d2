"""extras.scene.foremamba3d: foreground-only Mamba encoding for 3D detection (Fore-Mamba3D)."""
