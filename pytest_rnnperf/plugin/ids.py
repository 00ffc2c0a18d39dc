"""How a test is named in stored runs, wherever the ready suite is installed."""

from __future__ import annotations

import pytest

# The ready suite installed; from a clone its tests are already named suites/... relative to the rootdir.
INSTALLED_SUITE = "pytest_rnnperf.suites."


def stored_test_id(item: pytest.Item) -> str:
    """The test's id as stored runs know it: the installed suite's tests are named ``suites/...`` as in a clone, so
    one history serves a clone and any virtualenv the suite is installed in (whose path is in the node id)."""
    module = getattr(getattr(item, "module", None), "__name__", "")
    if module.startswith(INSTALLED_SUITE) and "::" in item.nodeid:
        return f"suites/{module[len(INSTALLED_SUITE):].replace('.', '/')}.py::{item.nodeid.split('::', 1)[1]}"
    return item.nodeid


def model_case_id(item: pytest.Item, name: str = "") -> str:
    """The case id of a model ``item`` checks with ``rnnperf.model(name=...)``: what its record is stored under and
    what a declared model's test waits for."""
    return stored_test_id(item) + (f"::{name}" if name else "")
