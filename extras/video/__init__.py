"""extras.video: video generation (Astraea)."""
