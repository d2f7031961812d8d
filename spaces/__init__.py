"""Search spaces (to come)."""
