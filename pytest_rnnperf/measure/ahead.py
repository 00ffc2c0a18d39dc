"""Compiling ahead: on a first night, the cases that compile are built once, in processes of their own, behind the others.

A first night on a fresh runner starts with an empty compile cache, and each JAX, Keras-on-JAX and torch.compile case
compiles from scratch at its build, the GPU idle meanwhile (the evidence README has the H100 figures). A compile-ahead
process per such backend builds each of its collected cases once, in the run's order, and drops it; XLA's and
Inductor's persistent caches keep what was compiled, so the case's own build reads it.

Such a process never runs while a case is timed: whichever process times a case stops them (SIGSTOP) for its rounds
and lets them go on after (``paused``), so only the untimed phases of other cases (building, proving, parity) share the
host and the GPU with them. A case whose compile ahead is still under way waits for it; a test that is not such a case
stops them all first. A test of a team's own model joins them when it declares its model (``AheadModel``).

This module is what every process needs (the pause, the subprocess's loop); ``ahead_pool`` is the parent's side.
Nothing here knows pytest or imports a framework.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence, Union

if TYPE_CHECKING:
    from pytest_rnnperf.model.cases import Case, ModelCase

# The file naming the run's compile-ahead processes, one "PID START" line each; every process that times reads it.
PIDS_ENV = "RNNPERF_AHEAD_PIDS_FILE"
PIDS_NAME = "ahead.pids"  # in the folder of the run's subprocess logs
NICE = 19  # where SCHED_IDLE is refused: the least a process can ask for without it
_PR_SET_PDEATHSIG = 1  # prctl(2)

_file: Path | None = None  # set by use(): this process's file, ahead of PIDS_ENV


def use(path: Path | None) -> None:
    """Make ``path`` the file this process reads the compile-ahead processes from (None: the environment's)."""
    global _file
    _file = path


def pids_file(environ: Mapping[str, str] | None = None) -> Path | None:
    """The file naming the compile-ahead processes: the one ``use()`` set, else the one the parent passed."""
    if _file is not None:
        return _file
    value = (os.environ if environ is None else environ).get(PIDS_ENV, "")
    return Path(value) if value else None


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (/proc/PID/stat's 22nd field), or None if gone.

    A pid alone may name another process once its own has exited; the pid with its start names one process for good.
    """
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: the fields after it start past its last ')'.
    fields = text[text.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def listed(path: Path | None) -> list[int]:
    """The pids in ``path`` whose processes are still the ones written there (their start matches)."""
    if path is None:
        return []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    pids = []
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and process_start(int(parts[0])) == parts[1]:
            pids.append(int(parts[0]))
    return pids


def _signal(pids: Sequence[int], sig: signal.Signals) -> None:
    """Send ``sig`` to the process group each of ``pids`` leads, passing over those that exited since they were read.

    The group: Inductor compiles in worker processes of its own, which a signal to their parent alone leaves running.
    """
    for pid in pids:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue


@contextmanager
def paused() -> Iterator[None]:
    """Stop the run's compile-ahead processes while the block runs (a case's timed rounds), then let them go on."""
    pids = listed(pids_file())
    _signal(pids, signal.SIGSTOP)
    try:
        yield
    finally:
        _signal(pids, signal.SIGCONT)


# ------------------------------------------------------------------------------------------------ the subprocess side


@dataclass(frozen=True)
class AheadModel:
    """A team's model a test declared, to compile ahead: its case and its ``rnnperf.model()`` arguments as
    ``subprocesses.model_payload`` pickles them."""

    case: ModelCase
    payload: bytes

    @property
    def id(self) -> str:
        """The test's case id, which its test waits for."""
        return self.case.id

    @property
    def framework(self) -> str:
        """The backend whose compile-ahead process builds it."""
        return self.case.framework


Buildable = Union["Case", AheadModel]  # what a compile-ahead process builds


def _behind_the_run() -> str:
    """Run only on CPU time the run leaves idle (Linux SCHED_IDLE, inherited by the threads and compile workers started
    after it), elsewhere at nice 19: at nice 10 the compile threads of several such processes still took CPU from the
    run's float64 parity checks, which no pause covers."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return "SCHED_IDLE"
    except (AttributeError, OSError):  # not Linux, or refused: the lowest nice is the next best
        os.nice(NICE)
        return f"nice {NICE}"


def _die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies (Linux): one left stopped by a run killed mid-round
    would hold its GPU memory for good; SIGKILL ends a stopped process too."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the parent's close is all there is
        pass


def build_ahead(backend: Any, conn: Connection, cases: Sequence[Buildable], seed: int,
                build_model: Callable[[Any, AheadModel, int], None]) -> int:
    """Build each case once and drop it, telling the parent each as it ends; stop early once the parent says anything.
    ``build_model(backend, model, seed)`` builds a declared model and drops it.

    Runs in the compile-ahead subprocess; returns how many cases it built. A case that cannot be built here is
    passed over with its error: its own build in the run meets it again and reports it.
    """
    from pytest_rnnperf.backends import IMPLS
    from pytest_rnnperf.model import reference

    print(f"ahead: compiling at {_behind_the_run()}", flush=True)
    _die_with_parent()
    built = 0
    for case in cases:
        if conn.poll():  # the parent's stop: the cases left compile at their own build
            break
        started = time.perf_counter()
        error = ""
        try:
            if isinstance(case, AheadModel):
                build_model(backend, case, seed)
            else:
                s = case.shape
                weights = reference.init_weights(case.cell, s.input_size, s.hidden_size, s.num_layers, s.bidirectional,
                                                 seed=seed)
                backend.build(case, weights, reference.make_inputs(case, seed=seed), impls=IMPLS).close()
            built += 1
        except Exception as exc:  # noqa: BLE001 - passed over here, reported by the case's own build
            traceback.print_exc()
            error = f"{type(exc).__name__}: {exc}"[:200]
        seconds = time.perf_counter() - started
        # Its log says when each case was ready, for setting beside the run's own timeline (the clock is the wall's).
        print(f"ahead: {case.id} {'failed' if error else 'built'} in {seconds:.1f} s, done at {time.time():.1f}",
              flush=True)
        conn.send(("built", (case.id, seconds, error)))
    return built


__all__ = ["AheadModel", "Buildable", "NICE", "PIDS_ENV", "PIDS_NAME", "build_ahead", "listed", "paused", "pids_file",
           "process_start", "use"]
