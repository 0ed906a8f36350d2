"""extras.vision.crd: concept–rule decomposition (GP rule scores, MH concept selection) on RAVEN-style matrices."""
