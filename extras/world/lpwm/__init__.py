"""extras.world.lpwm: Latent Particle World Model."""
