"""Shared by every test: the extension modules that pytester's in-process runs load, loaded once up front, no trace
of a pytest-xdist worker in the runs a test starts, and each large stored run read once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

# An extension module (numpy's FFT, scipy's) loads only once a process, and pytester unloads what a test loaded:
# loaded here, before any test, they stay loaded through every in-process run, whichever helper module ran it
# (tests/plugin/conftest.py keeps the ones a run loads, but tests/browser loads that file under a name of its own).
import matplotlib
import numpy.fft  # noqa: F401
import pytest
import scipy.stats  # noqa: F401

from pytest_rnnperf.model.records import StoredRun

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


# A stored run of the real history is megabytes of JSON (the H100's 59 runs take 4 s to read on the 2-core machine)
# and the command tests read the whole history in each test: each such file is read once a process, by name, size
# and modification time (a copy keeps all three). Small files, which tests write and break on purpose, are read
# every time, as the commands read them.
HISTORY_FILE_BYTES = 1_000_000


@pytest.fixture(autouse=True, scope="session")
def _stored_history_read_once() -> Iterator[None]:
    """Serve repeated reads of the same large stored run from memory for the whole session."""
    import pytest_rnnperf.cli.args
    import pytest_rnnperf.cli.compare
    import pytest_rnnperf.history.runs
    import pytest_rnnperf.store.runs as runs

    read = runs.load_run
    kept: dict[tuple[str, int, int], StoredRun] = {}

    def load_run(path: Path) -> StoredRun:
        """``read(path)``, once for each large file."""
        try:
            stat = Path(path).stat()
        except OSError:
            return read(path)  # its own one-line error
        if stat.st_size < HISTORY_FILE_BYTES:
            return read(path)
        key = (Path(path).name, stat.st_size, stat.st_mtime_ns)
        if key not in kept:
            kept[key] = read(path)
        return replace(kept[key], path=Path(path))

    with pytest.MonkeyPatch.context() as patch:
        for module in (runs, pytest_rnnperf.cli.args, pytest_rnnperf.cli.compare, pytest_rnnperf.history.runs):
            patch.setattr(module, "load_run", load_run)
        yield
