"""Recipes: one folder each (config.py, recipe.py, default.yaml, tiny.yaml); installed as agentkit.recipes."""
