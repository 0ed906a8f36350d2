"""extras.physics.atom: a transformer neural operator for molecular dynamics (ATOM)."""
