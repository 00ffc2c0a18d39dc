"""Deciding: verdicts against the stored history, noise, and the claims' verdicts."""
