"""extras.vision.svg: diffusion on self-supervised features without a VAE (SVG)."""
