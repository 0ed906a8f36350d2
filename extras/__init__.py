"""The 32 extra methods, <area>/<method>/, behind the recipe interface; installed as agentkit.extras."""
