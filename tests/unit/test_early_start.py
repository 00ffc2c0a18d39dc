"""Backend subprocesses started right after collection: the pool starts them without waiting, reports a failed
start when a case first needs it, and the session starts only those the collected frameworks need."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pytest

from pytest_rnnperf.backends import BackendSpec, spec
from pytest_rnnperf.backends.keras import KERAS_JAX
from fake_nvml import FakeNVML
from pytest_rnnperf.measure.gpu import GpuInfo, read_gpu_info
from pytest_rnnperf.measure.subprocesses import SubprocessFailed, SubprocessPool
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.session import RnnperfSession


@dataclass
class _FakeProcess:
    """A Popen that has not exited."""

    def poll(self) -> int | None:
        """Still running."""
        return None


@dataclass
class _FakeSubprocess:
    """A launched subprocess: when it was started, with what, and whether its start fails once settled."""

    spec: BackendSpec
    env: Mapping[str, str]
    warm: bool
    fails: str = ""
    started_at: float = field(default_factory=time.monotonic)
    settled: int = 0
    pending: list[tuple[str, bool]] = field(default_factory=lambda: [("register", True)])
    process: _FakeProcess = field(default_factory=_FakeProcess)

    killed: bool = False

    def kill(self) -> None:
        """Killed without being asked to exit."""
        self.killed = True

    def settle(self) -> None:
        """Read the launch's answers: the registration's failure, if it fails."""
        self.settled += 1
        self.pending = []
        if self.fails:
            raise SubprocessFailed(self.fails)


@dataclass
class _Launcher:
    """``BackendSubprocess.launch`` stand-in that records every launch."""

    fails: str = ""
    raises: Exception | None = None
    launched: list[_FakeSubprocess] = field(default_factory=list)

    def __call__(self, spec: BackendSpec, log_dir: Path, env: Mapping[str, str] | None = None,
                 warm: bool = False) -> Any:
        """Launch (or fail to) one fake subprocess."""
        if self.raises is not None:
            raise self.raises
        proc = _FakeSubprocess(spec, dict(env or {}), warm, self.fails)
        self.launched.append(proc)
        return proc


def test_an_early_start_launches_with_a_warm_up_and_returns_before_any_answer(tmp_path: Path) -> None:
    launcher = _Launcher()
    pool = SubprocessPool(tmp_path, env={"X": "1"}, launch=launcher)
    pool.start_early(KERAS_JAX)
    pool.start_early(KERAS_JAX)  # asked twice (two frameworks' hooks): still one subprocess
    assert [(p.spec.name, p.warm, p.env, p.settled) for p in launcher.launched] == [("keras_jax", True, {"X": "1"}, 0)]
    assert pool.get(KERAS_JAX) is launcher.launched[0] and launcher.launched[0].settled == 1
    assert len(launcher.launched) == 1  # the first case used the early subprocess, no second start


def test_a_start_that_fails_early_is_reported_when_a_case_first_needs_the_subprocess(tmp_path: Path) -> None:
    launcher = _Launcher(raises=OSError("no python here"))
    pool = SubprocessPool(tmp_path, launch=launcher)
    pool.start_early(KERAS_JAX)  # nothing raised at collection
    for _ in range(2):  # and every later case hears the same reason, without a new start
        with pytest.raises(SubprocessFailed, match="no python here"):
            pool.get(KERAS_JAX)


def test_a_registration_that_fails_in_the_subprocess_is_raised_by_the_first_get_and_kept(tmp_path: Path) -> None:
    launcher = _Launcher(fails="the keras_jax subprocess exited (code 1)")
    pool = SubprocessPool(tmp_path, launch=launcher)
    pool.start_early(KERAS_JAX)
    with pytest.raises(SubprocessFailed, match="exited"):
        pool.get(KERAS_JAX)
    assert "keras_jax" not in pool.subprocesses and "exited" in pool.broken["keras_jax"]
    with pytest.raises(SubprocessFailed, match="exited"):
        pool.get(KERAS_JAX)
    assert len(launcher.launched) == 1


def test_a_get_without_an_early_start_launches_without_a_warm_up_and_waits(tmp_path: Path) -> None:
    launcher = _Launcher()
    pool = SubprocessPool(tmp_path, launch=launcher)
    proc = pool.get(KERAS_JAX)
    assert proc is launcher.launched[0] and not launcher.launched[0].warm and launcher.launched[0].settled == 1


def _session_with_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RnnperfSession, _Launcher]:
    """A session without a GPU whose subprocesses are fakes recorded by the launcher (no backend env set here)."""
    for name in ("KERAS_BACKEND", "XLA_PYTHON_CLIENT_PREALLOCATE", "RNNPERF_SUBPROCESS"):
        monkeypatch.delenv(name, raising=False)
    launcher = _Launcher()
    gpu = GpuInfo.from_dict({"available": False, "reason": "test"})
    session = RnnperfSession(Run(gpu=gpu, software={}, compile_cache=tmp_path))
    session.backends.pool().launch = launcher
    return session, launcher


def test_the_session_starts_only_the_subprocesses_its_frameworks_need_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session, launcher = _session_with_launcher(tmp_path, monkeypatch)
    # torch runs here; an unknown name is left for its cases to report; keras_jax and jax need their own environment.
    started = session.backends.start(["torch", "keras_jax", "no_such_backend", "jax", "keras_jax"])
    assert started == ["keras_jax", "jax"]
    assert [p.spec.name for p in launcher.launched] == ["keras_jax", "jax"]
    assert launcher.launched[0].started_at <= launcher.launched[1].started_at
    assert all(p.warm and p.env["RNNPERF_COMPILE_CACHE"] == str(tmp_path) for p in launcher.launched)
    assert spec("torch").in_process({})


def test_subprocesses_started_for_cases_that_were_then_deselected_are_killed_and_the_rest_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session, launcher = _session_with_launcher(tmp_path, monkeypatch)
    session.backends.start(["keras_jax", "jax"])  # as the modules were collected
    session.backends.stop(keep=["torch", "jax"])  # -k left torch and jax cases
    assert [(p.spec.name, p.killed) for p in launcher.launched] == [("keras_jax", True), ("jax", False)]
    assert list(session.backends.pool().subprocesses) == ["jax"]
    session.backends.start(["jax"])  # the selected cases' frameworks: already running, not started twice
    assert len(launcher.launched) == 2


@dataclass
class _Exiting:
    """A subprocess stand-in that logs when it is asked to exit and when it is awaited."""

    name: str
    log: list[str]

    def ask_exit(self) -> None:
        """Asked to exit."""
        self.log.append(f"ask {self.name}")

    def await_exit(self, timeout: float) -> None:
        """Awaited for at most ``timeout`` seconds."""
        assert 0.0 <= timeout <= 10.0
        self.log.append(f"await {self.name}")


def test_closing_the_pool_asks_every_subprocess_to_exit_before_waiting_for_any(tmp_path: Path) -> None:
    """Their exits overlap: each is asked before any is awaited, and none is awaited past the shared deadline."""
    log: list[str] = []
    pool = SubprocessPool(tmp_path)
    pool.subprocesses.update({name: _Exiting(name, log) for name in ("keras_jax", "jax", "torch_compile")})  # type: ignore[misc]
    pool.close()
    assert log == ["ask keras_jax", "ask jax", "ask torch_compile", "await keras_jax", "await jax", "await torch_compile"]
    assert pool.subprocesses == {}


def test_a_claims_or_parity_decision_first_reads_the_frameworks_whose_fields_it_compares(tmp_path: Path) -> None:
    """A pytest-xdist worker reads a framework at its first test that needs it; a parity test's frameworks (none
    given: every collected one) are read before its stored answer is compared with tonight's environment."""
    session = RnnperfSession(Run(gpu=read_gpu_info(0, FakeNVML()), software={}, root=tmp_path))
    session.frameworks = ("torch", "tf", "jax")
    read: list[str] = []
    session.backends.backend = lambda name: read.append(name)  # type: ignore[method-assign,assignment,return-value]
    session.claims_reason("test_scoped", kind="parity", frameworks=("tf",))
    assert read == ["tf"]
    session.claims_reason("test_claims")
    assert read == ["tf", "torch", "tf", "jax"]


TEARDOWN_MARKER = '''
import atexit
import pathlib


class Backend:
    name = "slowexit"


def get_backend():
    # A framework whose teardown at interpreter exit is slow: the marker shows whether that teardown ran.
    atexit.register(pathlib.Path(__file__).with_name("torn-down").write_text, "yes")
    return Backend()
'''


def test_a_subprocess_asked_to_exit_leaves_without_its_frameworks_teardown(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The subprocess skips interpreter teardown (seconds for a framework and its CUDA context) once it has answered."""
    (tmp_path / "slowexit_backend.py").write_text(TEARDOWN_MARKER)
    monkeypatch.syspath_prepend(str(tmp_path))  # the subprocess imports what this process can
    pool = SubprocessPool(tmp_path / "logs")
    proc = pool.get(BackendSpec(name="slowexit", title="x", module="slowexit_backend", cudnn_cells=()))
    pool.close()
    assert proc.process.returncode == 0
    assert not (tmp_path / "torn-down").exists()
