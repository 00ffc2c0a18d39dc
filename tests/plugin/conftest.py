"""Helpers for end-to-end plugin tests: a pytester project with a fake GPU and a fake torch backend."""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import sysconfig
import types
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import pytest_rnnperf.backends as backends
import pytest_rnnperf.backends.compile_cache as compile_cache
import pytest_rnnperf.measure.device_time as device_time
import pytest_rnnperf.measure.gpu as gpu
import pytest_rnnperf.session.measuring as measuring
from pytest_rnnperf.cli.main import main

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# conftest.py of the project under test: it runs before the plugin's pytest_configure, so it can swap
# the NVML binding for the fake one (a pretend H200) and the torch backend for the fake backend.
FAKE_GPU_CONFTEST = f"""
import dataclasses, functools, json, os, sys, types
sys.path[:0] = [{str(HERE)!r}, {str(REPO / 'tests' / 'unit')!r}]
import pytest
import pytest_rnnperf.measure.gpu as device
import pytest_rnnperf.backends as backends
import pytest_rnnperf.session.measuring as measuring
from pytest_rnnperf.plugin import SESSION_KEY
from pytest_rnnperf.measure.device_time import DeviceTimer
from pytest_rnnperf.measure.wall import WallTimer
import fake_backend
from fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, FakeNVML

FAKE = FakeNVML()
if os.environ.get("FAKE_GPU_NAME", "NVIDIA H200") == "none":
    # No driver: NVML fails to load, as on a CPU runner (the real NVML of a GPU machine stays out of it).
    FAKE.init_error = NVML_ERROR_LIBRARY_NOT_FOUND
else:
    # Several GPUs: FAKE_GPU_NAME="A,B" (one per model) or FAKE_GPU_COUNT=2 of one model, each with its own UUID.
    names = os.environ.get("FAKE_GPU_NAME", "NVIDIA H200").split(",")
    FAKE.name = names[0]
    if len(names) > 1 or os.environ.get("FAKE_GPU_COUNT"):
        FAKE.devices(*(names if len(names) > 1 else names * int(os.environ["FAKE_GPU_COUNT"])))
    FAKE.driver = os.environ.get("FAKE_DRIVER", FAKE.driver)
if os.environ.get("FAKE_NO_RUPTURES"):  # an install without the change-point library: find_spec says None
    sys.modules["ruptures"] = None
sys.modules["pynvml"] = FAKE  # every NVML read of this process (GPU placement, nvml_index) sees the fake
_read = device.read_gpu_info
device.read_gpu_info = lambda index=0, nvml=None: _read(index, nvml=FAKE)
measuring.TelemetryWindow = functools.partial(device.TelemetryWindow, nvml=FAKE)
if os.environ.get("FAKE_WORKER_BACKEND"):
    # Another framework that needs its own environment: its cases run in a subprocess started with it.
    # "compiles": its builds compile, as JAX's do, so a night whose compile cache starts empty builds them ahead.
    backends.register(dataclasses.replace(backends.spec("torch"), name="faraway", runtime_prefix="faraway.",
                                          module="fake_backend", env={{"RNNPERF_FAKE_WORKER": "1"}},
                                          compiles=os.environ["FAKE_WORKER_BACKEND"] == "compiles"))
if os.environ.get("FAKE_BUSY"):  # GPU utilization in percent: one driver sample, always the newest
    import time
    from types import SimpleNamespace

    class BusySample:
        sampleValue = SimpleNamespace(uiVal=int(os.environ["FAKE_BUSY"]))

        @property
        def timeStamp(self):
            return time.monotonic_ns() // 1000

    FAKE.samples[1] = [BusySample()]
# The fake backends take the registered names, as another package's entry point would.
sys.modules["fake_tf_backend"] = types.SimpleNamespace(get_backend=fake_backend.get_tf_backend)
backends.register(dataclasses.replace(backends.spec("torch"), module="fake_backend"))
backends.register(dataclasses.replace(backends.spec("tf"), module="fake_tf_backend"))


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    # Fake steps advance a fake clock and launch kernels on a fake CUPTI: timings are known in advance,
    # whatever the load on the machine. FAKE_NO_CUPTI leaves device time to the real (absent) cupti-python.
    run = config.stash[SESSION_KEY]
    wheels = json.loads(os.environ.get("FAKE_WHEELS", "{{}}"))  # NVIDIA wheels this run pretends to have
    run.run = dataclasses.replace(run.run, software={{**run.run.software, **wheels}})
    run.timer = WallTimer(clock=fake_backend.CLOCK)
    if not os.environ.get("FAKE_NO_CUPTI"):
        run.device_timer = DeviceTimer(cupti=fake_backend.CUPTI, host_clock=fake_backend.host_ns)
"""

TEST_FILE = """
import pytest
from pytest_rnnperf.model.cases import Case, Shape

CASES = [Case("torch", "lstm", Shape(4, 2, 3, 5), floor=FLOOR), Case("torch", "gru", Shape(4, 2, 3, 5), floor=FLOOR)]

@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_pair(case, rnnperf):
    rnnperf.check(rnnperf.measure(case))
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project with the fake GPU conftest, two fake cases (floor 2x) and fast timing settings."""
    return make_project(pytester, monkeypatch)


def make_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The ``project`` fixture's work, for tests elsewhere (tests/browser) that load this file under another name."""
    for name in ("CUDNN_MS", "GENERIC_MS", "CUDNN_DEV_MS", "GENERIC_DEV_MS", "CUDNN_KERNEL", "CUDNN_GEMMS", "NO_CUPTI", "WRONG_PATH", "FALLBACK",
                 "PARITY_ERROR", "TF_ERROR", "UNAVAILABLE", "TF_UNAVAILABLE", "NO_GPU", "OOM", "CUDNN_VERSION",
                 "GPU_NAME", "GPU_COUNT", "DRIVER", "BUSY", "WORKER_BACKEND", "WORKER_CRASH", "SEEN", "MAPS",
                 "LIB_VERSIONS", "WHEELS", "SLOW_CASE", "FIRST_CALL_MS", "LOADED"):
        monkeypatch.delenv("FAKE_" + name, raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    # The widest terminal the summary draws for: tests match what a line says; test_terminal_e2e.py checks the fit.
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)  # the default compile cache goes under pytester's HOME
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # the fake GPUs are all the run may use
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.delenv("RNNPERF_FAKE_WORKER", raising=False)
    monkeypatch.delenv("RNNPERF_INJECT_CUDNN_DELAY_US", raising=False)
    monkeypatch.delenv("RNNPERF_INJECT_HOST_DELAY_US", raising=False)
    monkeypatch.delenv("RNNPERF_INJECT_NO_TENSOR_OP", raising=False)
    monkeypatch.delenv("RNNPERF_INJECT_SERIALIZE_BIDIRECTIONAL", raising=False)
    monkeypatch.delenv("RNNPERF_INJECT_LONGER_STEP", raising=False)
    monkeypatch.delenv("RNNPERF_INJECT_COLD_DELAY_MS", raising=False)
    pytester.makeconftest(FAKE_GPU_CONFTEST)
    pytester.makepyfile(test_cases=TEST_FILE.replace("FLOOR", "2.0"))
    # Every round runs (max_noise 0): tests count samples; test_rechecks_e2e.py checks the noise stop.
    pytester.makeini("[pytest]\nrnnperf_rounds = 8\nrnnperf_energy_s = 0\nrnnperf_min_block_ms = 2\n"
                     "rnnperf_max_noise = 0\n")
    return pytester


# What the fake GPU conftest and a run change in modules this process keeps: put back after an in-process run,
# so no fake (or cached answer about one) leaks into the next test.
PROCESS_STATE = ((backends, "_registry"), (backends, "_broken"), (compile_cache, "_folder"),
                 (device_time, "_PROBLEM"), (gpu, "_INIT_CACHE"), (gpu, "read_gpu_info"),
                 (measuring, "TelemetryWindow"))

# Projects of tests marked ``subprocess``: their runs need a fresh interpreter (a framework or environment read
# once a process); every other run is in-process, which saves starting Python and importing the plugin each time.
_IN_SUBPROCESS: weakref.WeakSet[pytest.Pytester] = weakref.WeakSet()


@pytest.fixture(autouse=True)
def _subprocess_marker(request: pytest.FixtureRequest) -> None:
    """Note the pytester of a test marked ``subprocess``, so that ``run`` starts a fresh interpreter for it."""
    if "pytester" in request.fixturenames and request.node.get_closest_marker("subprocess"):
        _IN_SUBPROCESS.add(request.getfixturevalue("pytester"))


@contextmanager
def process_state_kept() -> Iterator[None]:
    """Put back the environment and the module state in PROCESS_STATE as they were before the block."""
    environ = dict(os.environ)
    saved = [(module, name, getattr(module, name)) for module, name in PROCESS_STATE]
    for module, name, value in saved:
        setattr(module, name, copy.copy(value))
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        os.environ.clear()
        os.environ.update(environ)


# Where installed libraries live: their modules stay loaded after an in-process run.
LIBRARY_PATHS = tuple({sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")})
# The library modules in-process runs loaded: pytester unloads them after each run and test, and an extension
# module (numpy's, scipy's, torch's) loads only once per process, so every in-process run gets them back.
_LIBRARIES: dict[str, types.ModuleType] = {}


def note_libraries() -> None:
    """Note the library modules loaded now into _LIBRARIES."""
    _LIBRARIES.update((name, module) for name, module in sys.modules.items() if isinstance(module, types.ModuleType)
                      and (name in sys.builtin_module_names
                           or str(getattr(module, "__file__", "")).startswith(LIBRARY_PATHS)))


def reload_libraries() -> None:
    """Put the library modules of earlier in-process runs back into sys.modules."""
    for name, module in _LIBRARIES.items():
        sys.modules.setdefault(name, module)


class LoadedModules:
    """Plugin of an in-process run: notes the library modules loaded at its end into _LIBRARIES."""

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        """Note the library modules loaded now."""
        note_libraries()


def run(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run pytest on the project: in-process, or in a subprocess for a test marked ``subprocess``; a recording that
    an identical project already made in this process is copied instead (``_recorded``)."""
    args = ("-p", "no:cacheprovider", "-rs", *args)
    if "--rnnperf-update-baseline" in args:
        return _recorded(project, args)
    return _run(project, args)


def _run(project: pytest.Pytester, args: tuple[str, ...]) -> pytest.RunResult:
    """Run pytest on the project with ``args`` as they are."""
    if project in _IN_SUBPROCESS:
        return project.runpytest_subprocess(*args)
    reload_libraries()
    with process_state_kept():
        return project.runpytest_inprocess(*args, plugins=[LoadedModules()], no_reraise_ctrlc=True)


# Recordings made in this process, by everything that decides one: the project's files, the environment and the
# arguments, each with the project's own folder written as "<project>". A recording takes ~1.5 s (three processes and
# a report) and most tests record the same untouched project first; the same recording is copied instead. What a
# test changed (a file, a FAKE_ variable, an option) makes another key, and a run again.
_RECORDINGS: dict[tuple[Any, ...], tuple[pytest.RunResult, dict[str, bytes | None]]] = {}
# Variables that name this test rather than anything the run depends on.
_PER_TEST_VARIABLES = ("PYTEST_CURRENT_TEST", "PYTEST_DEBUG_TEMPROOT")


def _recorded(project: pytest.Pytester, args: tuple[str, ...]) -> pytest.RunResult:
    """``_run(project, args)`` for a recording, or what an identical recording wrote and printed, put in its place."""
    home = str(project.path)
    env = tuple(sorted((k, v.replace(home, "<project>")) for k, v in os.environ.items()
                       if k not in _PER_TEST_VARIABLES))
    before = _project_files(project.path)
    key = (tuple(sorted(before.items())), env, tuple(a.replace(home, "<project>") for a in args),
           project in _IN_SUBPROCESS)
    if key not in _RECORDINGS:
        result = _run(project, args)
        after = _project_files(project.path)
        changes = {name: after.get(name) for name in before.keys() | after.keys()
                   if before.get(name) != after.get(name)}
        kept = {name: None if data is None else data.replace(home.encode(), b"<project>")
                for name, data in changes.items()}
        _RECORDINGS[key] = (_with_home(result, home, "<project>"), kept)
        return result
    result, changes = _RECORDINGS[key]
    for name, data in changes.items():
        path = project.path / name
        if data is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data.replace(b"<project>", home.encode()))
    return _with_home(result, "<project>", home)


def _project_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (compiled bytecode aside) by its path relative to it: its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _with_home(result: pytest.RunResult, old: str, new: str) -> pytest.RunResult:
    """``result`` with ``old`` written as ``new`` in its output."""
    return pytest.RunResult(result.ret, [line.replace(old, new) for line in result.outlines],
                            [line.replace(old, new) for line in result.errlines], result.duration)


# sys.argv[0] of ``python -m pytest_rnnperf``: the CLI names itself from it (cli/args.py prog()).
MAIN_ARGV0 = str(REPO / "pytest_rnnperf" / "__main__.py")


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_rnnperf ARGS`` run in ``folder``, in this process: its exit code, stdout and stderr.

    What the entry point adds (``sys.exit(main())``) is checked by test_baselines_e2e.py's offline compare, which
    starts the real one; every other call saves starting Python and importing the commands.
    """
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv[:]
    sys.argv[:] = [MAIN_ARGV0, *args]
    reload_libraries()
    try:
        with contextlib.chdir(folder), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse: exit 2 on a bad argument, 0 for --help
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv[:] = argv
        note_libraries()
    return subprocess.CompletedProcess(["python", "-m", "pytest_rnnperf", *args], code, out.getvalue(), err.getvalue())


def unwrapped(text: str) -> list[str]:
    """The lines of ``text`` with the lines the summary wrapped to the terminal (continued 2+ spaces in) joined."""
    return re.sub(r"\n {2,}", " ", text).splitlines()


def whole_lines(result: pytest.RunResult) -> pytest.LineMatcher:
    """A matcher over a run's stdout with each wrapped line whole again (for a line with long temporary paths)."""
    return pytest.LineMatcher(unwrapped(result.stdout.str()))


def needs_a_cpu_machine_with(modules: tuple[str, ...], what: str) -> None:
    """Skip unless ``modules`` are installed and torch sees no GPU (the test is about a machine without one)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{what}: {', '.join(missing)} not installed")
    if torch_sees_a_gpu():
        pytest.skip("this test is about a machine without a GPU")


@functools.cache  # the answer holds for the whole session, and each ask imports torch (seconds)
def torch_sees_a_gpu() -> bool | None:
    """Whether torch sees a CUDA GPU (None without torch), asked in a subprocess.

    Importing torch in this process inside a pytester test would not survive: pytester restores sys.modules
    afterwards, and torch's C extension cannot be imported a second time.
    """
    if importlib.util.find_spec("torch") is None:
        return None
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip().endswith("True")


def load_json(path: Path) -> Any:
    """Parse a JSON file."""
    return json.loads(Path(path).read_text())
