"""extras.physics: molecular dynamics (ATOM)."""
