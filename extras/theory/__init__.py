"""Theory-driven extras: methods whose claims are about what can be learned or identified."""
