"""``python -m agentkit`` and ``accelerate launch -m agentkit …``."""

from agentkit.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
