"""Rendering a run: terminal text, failure tables, Markdown, JSON and plots."""

from typing import Any

from pytest_rnnperf._moved import PACKAGES, find_moved


def __getattr__(name: str) -> Any:
    """Names of the old ``pytest_rnnperf.report`` module, found where they went (for one release)."""
    return find_moved(__name__, name, PACKAGES["report"])
