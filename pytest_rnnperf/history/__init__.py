"""Each case's series over stored runs, its change points, and their rendering."""

from typing import Any

from pytest_rnnperf._moved import PACKAGES, find_moved


def __getattr__(name: str) -> Any:
    """Names of the old ``pytest_rnnperf.history`` module, found where they went (for one release)."""
    return find_moved(__name__, name, PACKAGES["history"])
