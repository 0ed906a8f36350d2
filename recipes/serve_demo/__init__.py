"""Recipe `serve_demo`."""
