"""HTTP tool services (python sandbox, search); installed as agentkit.tool_servers."""
