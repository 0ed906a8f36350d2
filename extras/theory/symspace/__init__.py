"""extras.theory.symspace: symmetric-space latents (Cartan bases, geodesic-symmetry consistency) for combinatorial generalisation."""
