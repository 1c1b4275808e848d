"""CLI commands (filled in by its area)."""
