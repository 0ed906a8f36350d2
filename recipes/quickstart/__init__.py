"""Recipe `quickstart`."""
