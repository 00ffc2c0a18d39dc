"""The run's owner (knows nothing of pytest), its settings, and the pytest-xdist merge."""

from typing import Any

from pytest_rnnperf._moved import PACKAGES, find_moved


def __getattr__(name: str) -> Any:
    """Names of the old ``pytest_rnnperf.session`` module, found where they went (for one release)."""
    return find_moved(__name__, name, PACKAGES["session"])
