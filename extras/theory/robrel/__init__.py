"""Rob-ReL: robust reward learning under partial identifiability (extras.md §11)."""
