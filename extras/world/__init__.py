"""extras.world: world models (LPWM)."""
