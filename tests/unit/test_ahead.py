"""Compiling ahead: the processes a first night's compiling cases are built in, never running while a case is timed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Pipe
from pathlib import Path
from typing import Any, Iterator

import pytest

from pytest_rnnperf.measure import ahead
from pytest_rnnperf.measure.ahead_pool import Ahead, AheadProcess, Built
from pytest_rnnperf.measure.subprocesses import BackendSubprocess, SubprocessFailed
from pytest_rnnperf.model.cases import Case, ModelCase, Shape

CASES = (Case("jax", "lstm", Shape(4, 2, 3, 5)), Case("jax", "lstm", Shape(6, 2, 3, 5)),
         Case("jax", "lstm", Shape(8, 2, 3, 5)))


def _state(pid: int) -> str:
    """The process's state letter in /proc (T: stopped)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rfind(")") + 2:].split()[0]


def _settled(pid: int, stopped: bool) -> bool:
    """Whether the process reaches the state asked for within a second (a signal is delivered asynchronously)."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        if (_state(pid) == "T") == stopped:
            return True
        time.sleep(0.01)
    return False


# A compile-ahead process and a worker it started, as Inductor starts its compile workers.
_LEADER = ("import subprocess, sys, time; worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
           "print(worker.pid, flush=True); time.sleep(60)")


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A child process standing in for a compile-ahead one (leading its own group), and the pids file naming it."""
    child = subprocess.Popen([sys.executable, "-c", _LEADER], stdout=subprocess.PIPE, start_new_session=True)
    assert child.stdout is not None
    child.worker = int(child.stdout.readline())  # type: ignore[attr-defined]
    path = tmp_path / "ahead.pids"
    path.write_text(f"{child.pid} {ahead.process_start(child.pid)}\n")
    ahead.use(path)
    try:
        yield child, path
    finally:
        ahead.use(None)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def test_a_timed_block_stops_the_listed_processes_and_their_workers_and_lets_them_go_on_after(
        sleeper: tuple[subprocess.Popen[bytes], Path]) -> None:
    child, _ = sleeper
    with ahead.paused():
        assert _settled(child.pid, stopped=True) and _settled(child.worker, stopped=True)  # type: ignore[attr-defined]
    assert _settled(child.pid, stopped=False) and _settled(child.worker, stopped=False)  # type: ignore[attr-defined]


def test_they_go_on_after_a_timed_block_that_raised(sleeper: tuple[subprocess.Popen[bytes], Path]) -> None:
    child, _ = sleeper
    with pytest.raises(RuntimeError), ahead.paused():
        raise RuntimeError("a case failed mid-round")
    assert _settled(child.pid, stopped=False)


def test_a_listed_pid_that_now_names_another_process_is_never_signalled(
        sleeper: tuple[subprocess.Popen[bytes], Path]) -> None:
    """The start time written beside the pid no longer matches: the pid was reused, so it is left alone."""
    child, path = sleeper
    path.write_text(f"{child.pid} 1\n")
    assert ahead.listed(path) == []
    with ahead.paused():
        assert _settled(child.pid, stopped=False)


def test_without_a_pids_file_a_timed_block_signals_nothing(tmp_path: Path) -> None:
    assert ahead.listed(tmp_path / "missing") == [] and ahead.listed(None) == []
    ahead.use(tmp_path / "missing")
    try:
        with ahead.paused():
            pass
    finally:
        ahead.use(None)


def test_the_file_comes_from_the_environment_in_a_subprocess() -> None:
    assert ahead.pids_file({ahead.PIDS_ENV: "/logs/ahead.pids"}) == Path("/logs/ahead.pids")
    assert ahead.pids_file({}) is None


BEHIND = """
import os, subprocess, sys, threading
from pytest_rnnperf.measure import ahead

ahead._behind_the_run()
seen = []
thread = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
thread.start()
thread.join()
child = subprocess.run([sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"], capture_output=True,
                       text=True, check=True)
print(os.sched_getscheduler(0) == os.SCHED_IDLE, seen == [os.SCHED_IDLE], int(child.stdout) == os.SCHED_IDLE)
"""


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
def test_a_compile_ahead_process_its_threads_and_its_compile_workers_run_only_on_idle_cpu_time() -> None:
    """A real process: it, a thread it starts and a process it starts after are all SCHED_IDLE."""
    out = subprocess.run([sys.executable, "-c", BEHIND], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True"], out.stdout + out.stderr


class _Builds:
    """A backend whose builds are noted; a case of ``failing`` shape raises."""

    def __init__(self, failing: int = 0) -> None:
        self.built: list[str] = []
        self.failing = failing

    def build(self, case: Case, weights: Any, inputs: Any, impls: tuple[str, ...]) -> Any:
        """Note the case, or fail like a backend that cannot build it."""
        if case.shape.seq_len == self.failing:
            raise RuntimeError("no such kernel")
        self.built.append(case.id)
        return self

    def close(self) -> None:
        """The pair is dropped at once."""


def _messages(conn: Any) -> list[tuple[str, Any]]:
    """Every message waiting on ``conn``."""
    out = []
    while conn.poll():
        out.append(conn.recv())
    return out


def _no_model(backend: Any, model: ahead.AheadModel, seed: int) -> None:
    """A model builder no test here expects to be called."""
    raise AssertionError(f"{model.id} was built as a model")


def test_the_subprocess_builds_each_case_in_order_and_tells_each_as_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ahead, "_behind_the_run", lambda: "as it was")  # this test process keeps its priority
    ours, theirs = Pipe()
    backend = _Builds(failing=6)
    assert ahead.build_ahead(backend, theirs, CASES, 0, _no_model) == 2
    assert backend.built == [CASES[0].id, CASES[2].id]
    told = _messages(ours)
    assert [payload[0] for _, payload in told] == [case.id for case in CASES]
    assert [bool(payload[2]) for _, payload in told] == [False, True, False]
    assert told[1][1][2] == "RuntimeError: no such kernel"


def test_a_declared_model_is_built_by_the_model_builder_in_its_place_among_the_cases(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ahead, "_behind_the_run", lambda: "as it was")  # this test process keeps its priority
    ours, theirs = Pipe()
    backend = _Builds()
    model = ahead.AheadModel(ModelCase("test_x.py::test_tagger[jax]", "keras_jax"), b"pickled arguments")
    order: list[str] = []

    def build_model(given: Any, declared: ahead.AheadModel, seed: int) -> None:
        """Note the model, and what the cases before it had built by then."""
        assert given is backend and seed == 3
        order.extend([*backend.built, declared.id])

    assert ahead.build_ahead(backend, theirs, [CASES[0], model, CASES[2]], 3, build_model) == 3
    assert order == [CASES[0].id, model.id] and backend.built == [CASES[0].id, CASES[2].id]
    assert [payload[0] for _, payload in _messages(ours)] == [CASES[0].id, model.id, CASES[2].id]


def test_the_subprocess_stops_before_the_next_case_once_the_parent_speaks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ahead, "_behind_the_run", lambda: "as it was")  # this test process keeps its priority
    ours, theirs = Pipe()
    ours.send(("stop", ()))
    backend = _Builds()
    assert ahead.build_ahead(backend, theirs, CASES, 0, _no_model) == 0
    assert backend.built == [] and theirs.recv() == ("stop", ())  # left for its loop to answer


class _Proc:
    """A compile-ahead subprocess's pipe, scripted: the messages it sends, in order; what it was sent."""

    def __init__(self, *messages: tuple[str, Any], dies: bool = False, stuck: bool = False) -> None:
        self.messages = list(messages)
        self.dies, self.stuck, self.killed = dies, stuck, False
        self.sent: list[str] = []

    def receive(self) -> tuple[str, Any]:
        """The next scripted message; once they run out, the process is gone (or answers the end of its list)."""
        if self.messages:
            return self.messages.pop(0)
        if self.dies:
            raise SubprocessFailed("the jax subprocess exited (code -9)")
        return ("ok", 0)

    def send(self, kind: str, payload: Any) -> None:
        """Note the request."""
        self.sent.append(kind)

    def settle(self) -> None:
        """Its registration was answered long ago."""

    def heard(self, timeout: float) -> bool:
        """A message is waiting, or the process is gone; a stuck one says nothing."""
        return not self.stuck

    def kill_group(self) -> None:
        """Note the kill."""
        self.killed = True


def _process(proc: _Proc) -> AheadProcess:
    """An AheadProcess of ``CASES`` over the scripted ``proc``."""
    return AheadProcess("jax", proc, tuple(case.id for case in CASES))  # type: ignore[arg-type]


def test_a_case_waits_for_its_own_compile_and_no_further() -> None:
    proc = _Proc(("built", (CASES[0].id, 4.0, "")), ("built", (CASES[1].id, 9.0, "")), ("built", (CASES[2].id, 2.0, "")))
    process = _process(proc)
    process.wait_for(CASES[1].id)
    assert list(process.built) == [CASES[0].id, CASES[1].id] and not process.finished
    process.wait_for("torch-lstm-train")  # not one of its cases: no wait
    assert len(proc.messages) == 1


def test_a_stop_reads_to_the_end_of_its_list_and_sends_nothing_once_finished() -> None:
    proc = _Proc(("built", (CASES[0].id, 4.0, "")))
    process = _process(proc)
    process.stop()
    assert proc.sent == ["stop"] and process.finished and list(process.built) == [CASES[0].id]
    process.stop()
    assert proc.sent == ["stop"]


def test_a_compile_ahead_process_that_dies_ends_its_list_with_why() -> None:
    process = _process(_Proc(("built", (CASES[0].id, 4.0, "")), dies=True))
    process.wait_for(CASES[2].id)
    assert process.finished and process.failed == "the jax subprocess exited (code -9)"


def test_a_compile_ahead_process_silent_past_its_limit_is_killed_and_no_case_waits_on_it_again() -> None:
    """A stuck compile must not hang the night: the case builds itself, as on a night without compiling ahead."""
    proc = _Proc(stuck=True)
    process = _process(proc)
    process.wait_for(CASES[0].id)
    assert proc.killed and process.finished and process.failed.startswith("it said nothing for 600 s and was killed")
    process.wait_for(CASES[1].id)
    process.stop()
    assert proc.sent == []


def test_the_summary_line_counts_what_was_built_and_how_long_cases_waited() -> None:
    jax = _process(_Proc())
    jax.built = {CASES[0].id: Built(20.0), CASES[1].id: Built(30.0, "RuntimeError: no such kernel")}
    jax.waited_s, jax.finished = 4.2, True
    keras = AheadProcess("keras_jax", _Proc(), ("keras_jax-lstm",), {"keras_jax-lstm": Built(11.0)})  # type: ignore[arg-type]
    assert Ahead({"jax": jax, "keras_jax": keras}).line() == (
        "compiled ahead: 2 of 4 case(s) (jax 1, keras_jax 1) in 61 s behind the other cases, paused while any case "
        "was timed; cases waited 4 s for theirs")
    jax.failed = "the jax subprocess exited (code -9)"
    assert Ahead({"jax": jax}).line() == (
        "compiled ahead: 1 of 3 case(s) (jax 1) in 50 s behind the other cases, paused while any case was timed; "
        "cases waited 4 s for theirs; stopped early: jax: the jax subprocess exited (code -9)")
    assert Ahead().line() is None


def test_a_silent_subprocess_is_not_heard_and_killing_its_group_ends_its_workers_too(tmp_path: Path) -> None:
    ours, _theirs = Pipe()
    child = subprocess.Popen([sys.executable, "-c", _LEADER], stdout=subprocess.PIPE, start_new_session=True)
    assert child.stdout is not None
    worker = int(child.stdout.readline())
    proc = BackendSubprocess(None, child, ours, tmp_path / "ahead-jax.log")  # type: ignore[arg-type]
    assert not proc.heard(0.05)
    proc.kill_group()
    assert child.returncode == -signal.SIGKILL
    assert _gone(worker)


def _gone(pid: int) -> bool:
    """Whether the process has exited within a second (gone from /proc, or a zombie not yet reaped)."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            if _state(pid) == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.01)
    return False
