"""Subprocesses for backends that need an environment of their own (Keras picks its backend once per process).

A backend whose spec carries ``env`` (``KERAS_BACKEND=torch``, ...) that this process lacks runs its cases in a
subprocess: a child Python started with that environment, one per backend, kept for the whole session. The case is
still a test of this session: the subprocess builds the pair, proves, checks parity and times it exactly as
``runner.run_case`` does here, and sends the record back; the judge (this session's baseline comparison)
stays here and may ask the subprocess to time the still-built pair again. Records come back as the same
dataclasses, so reports, baselines and pytest-benchmark see one run.

Messages are pickled over a pipe (``multiprocessing.connection``); the subprocess's own output goes to a log file
whose last lines are quoted when it dies. Nothing here knows pytest.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, Pipe
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from pytest_rnnperf.backends import (IMPLS, BackendSpec, BackendUnavailable, ModelError, ModelOptions,
                                     OutOfDeviceMemory, model_backend_for, register)
from pytest_rnnperf.measure.ahead import AheadModel, build_ahead
from pytest_rnnperf.measure.gpu import TelemetryWindow
from pytest_rnnperf.measure.runner import RunConfig, prepare_model, run_case, run_model
from pytest_rnnperf.model.cases import Case, ModelCase
from pytest_rnnperf.model.records import CaseRecord
from pytest_rnnperf.model.reference import CaseInputs
from pytest_rnnperf.model.results import ImplResult, PathProof

# Seconds a subprocess may stay silent before we look at whether it is still alive (it is never killed for
# being slow: a case may take minutes).
_POLL_S = 5.0
_EXIT_S = 10.0  # how long the subprocesses asked to exit may take before they are killed
_LOG_TAIL = 6


class SubprocessFailed(RuntimeError):
    """A subprocess could not be started or died; the message says which and quotes its log."""


@dataclass(frozen=True)
class SideResult:
    """One side of a cross check, built in a subprocess: its path proof and results."""

    proof: PathProof
    result: ImplResult


def _tail(path: Path, lines: int = _LOG_TAIL) -> str:
    """The last non-empty lines of a log file, joined with ' | ' (empty when unreadable)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    return " | ".join(kept)


@dataclass
class BackendSubprocess:
    """One live subprocess for one backend."""

    spec: BackendSpec
    process: subprocess.Popen[bytes]
    conn: Connection
    log: Path
    # Requests sent at launch whose answers are still in the pipe: (op, whether its failure is the start's).
    pending: list[tuple[str, bool]] = field(default_factory=list)

    @classmethod
    def start(cls, spec: BackendSpec, log_dir: Path, env: Mapping[str, str] | None = None) -> BackendSubprocess:
        """Start a subprocess with the spec's environment and register the spec there; SubprocessFailed if it fails."""
        started = cls.launch(spec, log_dir, env)
        started.settle()
        return started

    @classmethod
    def launch(cls, spec: BackendSpec, log_dir: Path, env: Mapping[str, str] | None = None,
               warm: bool = False, log_name: str = "", group: bool = False) -> BackendSubprocess:
        """Start the subprocess and send its registration without waiting for the answer (``settle`` reads it).

        ``warm`` also asks it to import its framework now, so that import runs while this process does other work.
        ``log_name``: its log's name (``<log_name>.log``) where it is not the backend's one serving subprocess.
        ``group``: it leads a process group of its own, which the processes it starts join (``ahead.paused``).
        """
        log_dir.mkdir(parents=True, exist_ok=True)
        log = log_dir / f"{log_name or 'subprocess-' + spec.name}.log"
        ours, theirs = Pipe()
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-c", "import sys; from pytest_rnnperf.measure.subprocesses import serve_then_exit; "
                 "serve_then_exit(int(sys.argv[1]))",
                 str(theirs.fileno())],
                env=subprocess_env(spec, env or {}), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                pass_fds=(theirs.fileno(),), start_new_session=group,
            )
        theirs.close()
        started = cls(spec, process, ours, log)
        started.send("register", (spec,))
        started.pending.append(("register", True))
        if warm:
            started.send("warm", ())
            started.pending.append(("warm", False))
        return started

    def settle(self) -> None:
        """Read the answers to the requests sent at launch; a failed registration is raised, a failed warm-up is not.

        A warm-up that failed says nothing new: the first real question meets the same failure and reports it.
        """
        while self.pending:
            op, fatal = self.pending[0]
            kind, payload = self.receive()
            self.pending.pop(0)
            if kind == "raise" and fatal:
                raise payload
            if kind not in ("ok", "raise"):
                raise SubprocessFailed(f"the {self.spec.name} subprocess sent {kind!r} in answer to {op!r}")

    def receive(self) -> tuple[str, Any]:
        """The next message, or SubprocessFailed once the process has exited without sending one."""
        while not self.conn.poll(_POLL_S):
            code = self.process.poll()
            if code is not None:
                raise self._died(code)
        try:
            message: tuple[str, Any] = self.conn.recv()
        except (EOFError, OSError):
            raise self._died(self.process.wait()) from None
        return message

    def _died(self, code: int | None) -> SubprocessFailed:
        """The error that says this subprocess is gone, with the end of its log."""
        tail = _tail(self.log)
        return SubprocessFailed(f"the {self.spec.name} subprocess exited (code {code})"
                           + (f"; its log {self.log} ends: {tail}" if tail else f"; log {self.log}"))

    def send(self, kind: str, payload: Any) -> None:
        """Send one message; SubprocessFailed when the subprocess is already gone."""
        try:
            self.conn.send((kind, payload))
        except (BrokenPipeError, OSError):
            raise self._died(self.process.wait()) from None

    def call(self, op: str, *args: Any, judge: Callable[[CaseRecord, Callable[[], CaseRecord]], CaseRecord] | None = None
             ) -> Any:
        """Run ``op`` in the subprocess and return its answer; its exceptions are raised here.

        While a case runs the subprocess may hand over a record to judge: ``judge`` gets it with a function that
        has the subprocess time the same pair again, and its answer goes back as the case's record.
        """
        self.settle()
        self.send(op, args)
        while True:
            kind, payload = self.receive()
            if kind == "ok":
                return payload
            if kind == "raise":
                raise payload
            if kind == "judge":
                verdict = payload if judge is None else judge(payload, self._again)
                self.send("judged", verdict)
            else:
                raise SubprocessFailed(f"the {self.spec.name} subprocess sent {kind!r}, which no request asked for")

    def _again(self) -> CaseRecord:
        """Have the subprocess time the pair it is judging once more."""
        self.send("again", None)
        kind, payload = self.receive()
        if kind == "raise":
            raise payload
        record: CaseRecord = payload
        return record

    def heard(self, timeout: float) -> bool:
        """Whether a message, or the subprocess's end, comes within ``timeout`` seconds."""
        return bool(self.conn.poll(timeout)) or self.process.poll() is not None

    def kill_group(self) -> None:
        """Kill the subprocess and the processes it started, its group (``launch(group=True)``), without asking."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()

    def kill(self) -> None:
        """Kill the subprocess without asking (it holds nothing that needs saving)."""
        self.process.kill()
        self.process.wait()
        self.conn.close()

    def ask_exit(self) -> None:
        """Ask the subprocess to exit, without waiting for it."""
        try:
            self.conn.send(("exit", ()))
        except (BrokenPipeError, OSError):
            pass

    def await_exit(self, timeout: float = _EXIT_S) -> None:
        """Wait up to ``timeout`` seconds for the exit asked for; kill the subprocess if it has not exited."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.conn.close()


def subprocess_env(spec: BackendSpec, extra: Mapping[str, str]) -> dict[str, str]:
    """A subprocess's environment: this one, then the session's ``extra`` (the compile cache), then the spec's."""
    env = dict(os.environ)
    env.update(extra)
    env.update(spec.env)
    # The subprocess imports exactly what this process imports (the checkout under test, test helpers).
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and Path(p).exists())
    return env


@dataclass
class SubprocessPool:
    """The session's subprocesses, one per backend, started early or on first use; closed at the session's end."""

    log_dir: Path
    telemetry_index: int | None = None  # NVML index of the GPU, or None without one (no telemetry windows)
    subprocesses: dict[str, BackendSubprocess] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)  # backend -> why its subprocess is unusable
    env: Mapping[str, str] = field(default_factory=dict)  # added to every subprocess's environment
    launch: Callable[..., BackendSubprocess] = BackendSubprocess.launch  # replaced by tests

    def start_early(self, spec: BackendSpec) -> None:
        """Start ``spec``'s subprocess and its framework import now, without waiting; a failure waits for ``get``."""
        if spec.name in self.broken or spec.name in self.subprocesses:
            return
        try:
            self.subprocesses[spec.name] = self.launch(spec, self.log_dir, self.env, warm=True)
        except (SubprocessFailed, OSError) as exc:  # reported when a case first needs the subprocess, as ever
            self.broken[spec.name] = str(exc)

    def get(self, spec: BackendSpec) -> BackendSubprocess:
        """The running subprocess for ``spec`` (started now if needed); SubprocessFailed once it failed."""
        if spec.name in self.broken:
            raise SubprocessFailed(self.broken[spec.name])
        proc = self.subprocesses.get(spec.name)
        try:
            if proc is None or (proc.process.poll() is not None and not proc.pending):
                proc = self.subprocesses[spec.name] = self.launch(spec, self.log_dir, self.env)
            proc.settle()
        except (SubprocessFailed, OSError) as exc:
            self.subprocesses.pop(spec.name, None)
            self.broken[spec.name] = str(exc)
            raise SubprocessFailed(str(exc)) from None
        return proc

    def discard(self, names: Iterable[str]) -> None:
        """Stop these subprocesses at once (killed: one started early may still be importing its framework)."""
        for name in names:
            proc = self.subprocesses.pop(name, None)
            if proc is not None:
                proc.kill()

    def close(self) -> None:
        """Stop every subprocess: all are asked at once, then awaited together within one deadline."""
        # Each exit tears down a framework and its GPU context (seconds): one after the other, a worker with four
        # subprocesses kept the run waiting after its last test for their sum.
        procs = list(self.subprocesses.values())
        for proc in procs:
            proc.ask_exit()
        deadline = time.monotonic() + _EXIT_S
        for proc in procs:
            proc.await_exit(max(0.0, deadline - time.monotonic()))
        self.subprocesses.clear()


class RemoteBackend:
    """A backend whose framework lives in a subprocess: the ``Backend`` questions, answered there."""

    def __init__(self, spec: BackendSpec, pool: SubprocessPool) -> None:
        """Bind to the spec and the session's subprocesses; nothing starts until the first question."""
        self.name = spec.name
        self.spec = spec
        self.pool = pool
        self._answers: dict[str, Any] = {}

    def _ask(self, op: str) -> Any:
        """A cached answer of the subprocess (reasons and runtime info do not change within a run)."""
        if op not in self._answers:
            self._answers[op] = self.pool.get(self.spec).call(op)
        return self._answers[op]

    def unavailable_reason(self) -> str | None:
        """The subprocess's reason, or why no subprocess could be started."""
        try:
            reason: str | None = self._ask("unavailable_reason")
        except SubprocessFailed as exc:
            return str(exc)
        return reason

    def gpu_unavailable_reason(self) -> str | None:
        """The subprocess's reason for skipping cuDNN cases, or None."""
        try:
            reason: str | None = self._ask("gpu_unavailable_reason")
        except SubprocessFailed as exc:
            return str(exc)
        return reason

    def runtime_info(self) -> dict[str, str]:
        """The framework fields as the subprocess sees them (its environment included)."""
        info: dict[str, str] = dict(self._ask("runtime_info"))
        for key, value in self.spec.env.items():
            info[f"{self.spec.runtime_prefix}env.{key}"] = value
        return info

    def build(self, case: Case, weights: Any, inputs: CaseInputs, impls: tuple[str, ...] = IMPLS) -> Any:
        """Pairs live in the subprocess and cannot cross the pipe: use ``run_case`` and ``cross_side``."""
        raise SubprocessFailed(f"{self.name} runs in a subprocess; its pairs are built there")

    def run_case(self, case: Case, config: Any, impls: tuple[str, ...],
                 judge: Callable[[CaseRecord, Callable[[], CaseRecord]], CaseRecord] | None) -> CaseRecord:
        """``runner.run_case`` in the subprocess, judged here."""
        sent = replace(config, window_factory=None)
        record: CaseRecord = self.pool.get(self.spec).call("run_case", case, sent, impls, self.pool.telemetry_index,
                                                          judge is not None, judge=judge)
        return record

    def run_model(self, case: ModelCase, payload: bytes, config: Any, impls: tuple[str, ...],
                  judge: Callable[[CaseRecord, Callable[[], CaseRecord]], CaseRecord] | None) -> CaseRecord:
        """``runner.run_model`` in the subprocess on the model ``payload`` builds there (see ``model_payload``), judged here."""
        sent = replace(config, window_factory=None)
        record: CaseRecord = self.pool.get(self.spec).call("run_model", case, payload, sent, impls,
                                                          self.pool.telemetry_index, judge is not None, judge=judge)
        return record

    def cross_side(self, case: Case, weights: Any, inputs: CaseInputs, impl: str) -> SideResult:
        """Build one side of a cross check in the subprocess; its proof and results."""
        side: SideResult = self.pool.get(self.spec).call("cross_side", case, weights, inputs, impl)
        return side


def model_payload(build: Callable[[], Any], inputs: Any, options: ModelOptions, backend: str) -> bytes:
    """``build``, ``inputs`` and ``options`` pickled for a subprocess with Keras on ``backend``; ModelError naming the
    argument that cannot go (functions travel by name, so a lambda or a nested function cannot)."""

    where = f"the Keras-on-{backend} subprocess"
    for what, value in (("build", build), ("inputs", inputs), ("targets", options.targets), ("loss", options.loss),
                        ("optimizer", options.optimizer), ("step", options.step),
                        ("parity_inputs", options.parity_inputs)):
        qualname = str(getattr(value, "__qualname__", ""))
        if callable(value) and ("<lambda>" in qualname or "<locals>" in qualname):
            kind = "a lambda" if "<lambda>" in qualname else "a function defined inside another"
            raise ModelError(f"backend={backend!r}: {what} must be importable in {where}: define it at module level "
                             f"(got {kind}, {qualname})")
        try:
            pickle.dumps(value)
        except Exception as exc:  # noqa: BLE001 - whatever pickling raises, the value cannot be sent
            raise ModelError(f"backend={backend!r}: {what} cannot be sent to {where} ({type(exc).__name__}: "
                             f"{str(exc)[:120]}); pass NumPy arrays and module-level functions") from None
    return pickle.dumps((build, inputs, options))


# ------------------------------------------------------------------------------------------- the subprocess side


def _judge_over(conn: Connection, backend: Any) -> Callable[[CaseRecord, Callable[[], CaseRecord]], CaseRecord]:
    """A judge that sends each record to the parent and times the pair again as often as the parent asks."""

    def judge(record: CaseRecord, again: Callable[[], CaseRecord]) -> CaseRecord:
        """Send the record; time the pair again as often as the parent asks; return its verdict record."""
        conn.send(("judge", record))
        while True:
            kind, payload = conn.recv()
            if kind == "judged":
                final: CaseRecord = payload
                return final
            try:
                conn.send(("record", again()))
            except Exception as exc:  # noqa: BLE001 - the parent re-raises it
                traceback.print_exc()
                conn.send(("raise", _sendable(exc, getattr(backend, "name", ""))))

    return judge


def _with_telemetry(config: Any, telemetry_index: int | None) -> Any:
    """``config`` with telemetry windows on the parent's GPU (windows cannot cross the pipe)."""

    if telemetry_index is None:
        return config
    return replace(config, window_factory=lambda: TelemetryWindow(index=telemetry_index))


def _run_case(backend: Any, conn: Connection, case: Case, config: Any, impls: tuple[str, ...],
              telemetry_index: int | None, judged: bool) -> CaseRecord:
    """Run a case here, handing its record to the parent's judge over ``conn`` while the pair is built."""

    return run_case(case, backend, _with_telemetry(config, telemetry_index), impls=impls,
                    judge=_judge_over(conn, backend) if judged else None)


def _run_model(backend: Any, conn: Connection, case: ModelCase, payload: bytes, config: Any,
               impls: tuple[str, ...], telemetry_index: int | None, judged: bool) -> CaseRecord:
    """Build a team's model here from ``payload`` and run it as ``runner.run_model`` does, judged by the parent."""
    build, inputs, options = _unpacked(backend, payload)
    model = build()
    if model_backend_for(model).name != backend.name:
        raise ModelError(f"build() returned {type(model).__module__}.{type(model).__qualname__}, not a Keras model "
                         f"(backend= runs Keras models in a subprocess)")
    return run_model(case, backend, model, inputs, _with_telemetry(config, telemetry_index), impls=impls,
                     judge=_judge_over(conn, backend) if judged else None, build=build, options=options)


def _unpacked(backend: Any, payload: bytes) -> tuple[Callable[[], Any], Any, ModelOptions]:
    """``build``, ``inputs`` and ``options`` from a ``model_payload``; ModelError where they cannot be imported here."""
    try:
        build, inputs, options = pickle.loads(payload)
    except Exception as exc:  # noqa: BLE001 - the test module (or what it imports) is not importable here
        raise ModelError(f"the {backend.name} subprocess cannot import what rnnperf.model() was given "
                         f"({type(exc).__name__}: {str(exc)[:160]}); define build and inputs at module level of "
                         f"an importable module (pytest's default --import-mode=prepend makes test modules so)") from None
    return build, inputs, options


def _prepare_model(backend: Any, model: AheadModel, seed: int) -> None:
    """A declared model built, proven and checked here untimed, then dropped (a compile-ahead process's work); only
    its generic side where this process sees no GPU for cuDNN."""
    build, inputs, options = _unpacked(backend, model.payload)
    impls = ("generic",) if backend.gpu_unavailable_reason() else IMPLS
    prepare_model(model.case, backend, build(), inputs, RunConfig(seed=seed), impls=impls, build=build, options=options)


def _cross_side(backend: Any, case: Case, weights: Any, inputs: CaseInputs, impl: str) -> SideResult:
    """Build one side, prove its path, take its results, free it."""
    pair = backend.build(case, weights, inputs, impls=(impl,))
    try:
        side = getattr(pair, impl)
        return SideResult(side.prove_path(), side.result())
    finally:
        pair.close()


def _sendable(exc: BaseException, name: str = "") -> BaseException:
    """``exc`` when it pickles (skip reasons keep their type), else a SubprocessFailed carrying its text.

    An unexpected error gets a note saying where its traceback went: the parent only sees the exception.
    """

    if not isinstance(exc, (BackendUnavailable, OutOfDeviceMemory, ModelError)) and hasattr(exc, "add_note"):
        exc.add_note(f"raised in the {name or 'backend'} subprocess; its traceback is in subprocess-{name}.log "
                     "in the report folder")
    try:
        pickle.dumps(exc)
        return exc
    except Exception:  # noqa: BLE001 - any pickling failure
        return SubprocessFailed(f"{type(exc).__name__}: {exc}")


def _warm(backend: Any) -> None:
    """Import the backend's framework (by reading its runtime) while the parent is busy; failures are only logged."""
    try:
        if backend.unavailable_reason() is None:
            backend.runtime_info()
    except Exception:  # noqa: BLE001 - the first real question meets it again and reports it
        traceback.print_exc()


def serve(fd: int) -> None:
    """The subprocess's loop: answer requests from the parent on file descriptor ``fd`` until told to exit."""
    conn = Connection(fd)
    backend: Any = None
    while True:
        try:
            op, args = conn.recv()
        except EOFError:
            return
        if op == "exit":
            return
        try:
            if op == "register":
                register(args[0])
                backend = args[0].load()
                answer: Any = os.getpid()
            elif op == "warm":
                _warm(backend)
                answer = None
            elif op == "run_case":
                answer = _run_case(backend, conn, *args)
            elif op == "run_model":
                answer = _run_model(backend, conn, *args)
            elif op == "cross_side":
                answer = _cross_side(backend, *args)
            elif op == "ahead":
                cases, seed = args
                answer = build_ahead(backend, conn, cases, seed, _prepare_model)
            elif op == "stop":  # ends an "ahead" list early; nothing else to stop
                answer = None
            elif op in ("unavailable_reason", "gpu_unavailable_reason", "runtime_info"):
                answer = getattr(backend, op)()
            else:
                raise SubprocessFailed(f"unknown request {op!r}")
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the parent
            if not isinstance(exc, (BackendUnavailable, OutOfDeviceMemory, ModelError)):
                traceback.print_exc()  # into the subprocess's log: the pickled exception carries no traceback
                sys.stderr.flush()
            conn.send(("raise", _sendable(exc, getattr(backend, "name", ""))))
            continue
        conn.send(("ok", answer))


def serve_then_exit(fd: int) -> None:
    """The subprocess's whole life: ``serve`` on ``fd``, then leave at once, without the interpreter's teardown."""
    serve(fd)
    # Tearing down a framework and its CUDA context at exit took seconds after a worker's last test, holding back its
    # results; every answer has been sent and every cache written by now, and the driver frees the GPU either way.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


__all__ = ["RemoteBackend", "SideResult", "BackendSubprocess", "SubprocessFailed", "SubprocessPool", "model_payload", "serve", "serve_then_exit"]

