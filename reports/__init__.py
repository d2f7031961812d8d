"""Reports (to come)."""
