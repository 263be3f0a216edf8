"""Switches written as docs/switches-api.md's worked examples (their names are no real switch's)."""
