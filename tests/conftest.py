"""Shared by every test: this package's bytecode caches written up front, the extension modules that pytester's
in-process runs load, loaded once up front, no trace of a pytest-xdist worker in the runs a test starts, each large
stored run read once, and the installed packages and the CPU read once for the in-process runs."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

# An extension module (numpy's FFT, scipy's) loads only once a process, and pytester unloads what a test loaded:
# loaded here, before any test, they stay loaded through every in-process run, whichever helper module ran it
# (tests/plugin/conftest.py keeps the ones a run loads, but tests/browser loads that file under a name of its own).
import matplotlib
import numpy.fft  # noqa: F401
import pytest
import scipy.stats  # noqa: F401

import pytest_rnnperf
from pytest_rnnperf.model.records import StoredRun

# matplotlib too: imported first inside an in-process run and again by a test after it, its modules came from two
# loads, and a later run's plot failed (a Figure of one load given to an Artist method of the other).
matplotlib.use("Agg")  # as the report's plot does: headless
import matplotlib.figure  # noqa: E402,F401
import matplotlib.pyplot  # noqa: E402,F401

# Where PYTHONDONTWRITEBYTECODE is set (as on the CI machine) no process caches bytecode, and pytest rewrites the
# asserts of every module of this package (a plugin's) in each pytest it starts: each of the hundreds of fresh
# interpreters the tests start spent ~0.8 s of CPU on it. One pytest, started before the workers, writes both caches
# (the plain one and pytest's) into the package's __pycache__ (git ignores them); every process after it reads them.
# Nothing else changes: the tests and the runs they start keep the environment as given (no caches in their folders).
WARM_CONFTEST = """
import compileall, importlib, pkgutil, pytest_rnnperf
for folder in FOLDERS:
    compileall.compile_dir(folder, quiet=2)
for module in pkgutil.walk_packages(pytest_rnnperf.__path__, "pytest_rnnperf."):
    if not module.name.endswith(".__main__"):  # that one runs the command line (the suite is no part of the walk)
        importlib.import_module(module.name)
"""
_warming: list[tuple[subprocess.Popen[bytes], tempfile.TemporaryDirectory[str]]] = []


def pytest_configure(config: pytest.Config) -> None:
    """Write the bytecode caches that PYTHONDONTWRITEBYTECODE leaves out, once, before the workers start."""
    if not sys.flags.dont_write_bytecode or hasattr(config, "workerinput"):
        return
    folders = [str(Path(pytest_rnnperf.__file__).parent), str(Path(__file__).parent)]  # the package, the tests
    folder = tempfile.TemporaryDirectory(prefix="rnnperf-bytecode-")
    Path(folder.name, "conftest.py").write_text(WARM_CONFTEST.replace("FOLDERS", repr(folders)))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTEST_ADDOPTS")}
    # In the background: the workers collect meanwhile, and a process that finds no cache yet makes its own.
    done = subprocess.Popen([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             "-p", "no:rnnperf", folder.name], cwd=folder.name, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _warming.append((done, folder))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Wait for the pytest that writes the bytecode caches, and remove its folder."""
    while _warming:
        done, folder = _warming.pop()
        done.wait()
        folder.cleanup()


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


# Each in-process run's plugin reads the metadata of every installed distribution (software_info, ~0.07 s) and, where
# it writes benchmark JSON, pytest-benchmark asks py-cpuinfo, which starts a process for it (~0.2 s): hundreds of runs
# in a session that installs nothing and changes no CPU: read once a process. No run fakes either (runs fake NVIDIA
# wheels with FAKE_WHEELS, applied after this read); test_environment.py tests environment.software_info itself.
@pytest.fixture(autouse=True, scope="session")
def _installed_software_read_once() -> Iterator[None]:
    """Serve the plugin's reads of the installed packages, and pytest-benchmark's of the CPU, from memory."""
    import cpuinfo

    import pytest_rnnperf.plugin as plugin
    from pytest_rnnperf.measure import environment

    software: dict[tuple[tuple[str, tuple[str, ...]], ...], dict[str, str]] = {}
    cpu: list[dict[str, Any]] = []

    def software_info() -> dict[str, str]:
        """``environment.software_info()``, read once for each set of distributions the registered backends name."""
        key = tuple(sorted(environment.distributions().items()))
        if key not in software:
            software[key] = environment.software_info()
        return dict(software[key])

    def get_cpu_info() -> dict[str, Any]:
        """``cpuinfo.get_cpu_info()``, read once."""
        if not cpu:
            cpu.append(read())
        return copy.deepcopy(cpu[0])

    read = cpuinfo.get_cpu_info
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plugin, "software_info", software_info)
        patch.setattr(cpuinfo, "get_cpu_info", get_cpu_info)
        yield
