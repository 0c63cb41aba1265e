"""gridbus."""
