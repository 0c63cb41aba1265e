"""The gridbus command line (filled by its owner)."""
