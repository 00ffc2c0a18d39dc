"""Shared by every test: the extension modules that pytester's in-process runs load, loaded once up front, and
no trace of a pytest-xdist worker in the runs a test starts."""

from __future__ import annotations

# An extension module (numpy's FFT, scipy's) loads only once a process, and pytester unloads what a test loaded:
# loaded here, before any test, they stay loaded through every in-process run, whichever helper module ran it
# (tests/plugin/conftest.py keeps the ones a run loads, but tests/browser loads that file under a name of its own).
import matplotlib
import numpy.fft  # noqa: F401
import pytest
import scipy.stats  # noqa: F401

# matplotlib too: imported first inside an in-process run and again by a test after it, its modules came from two
# loads, and a later run's plot failed (a Figure of one load given to an Artist method of the other).
matplotlib.use("Agg")  # as the report's plot does: headless
import matplotlib.figure  # noqa: E402,F401
import matplotlib.pyplot  # noqa: E402,F401

# What pytest-xdist sets in its workers' environment: the test command runs under -n, but a run a test starts (in
# this process or a subprocess) is a user's own, and the plugin and pytest-benchmark read these to act as a worker.
XDIST_WORKER_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide this process's pytest-xdist worker variables from the test (put back after it)."""
    for name in XDIST_WORKER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
