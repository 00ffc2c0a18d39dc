"""Rendering a run: terminal text, failure tables, Markdown, JSON and plots."""
