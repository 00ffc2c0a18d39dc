"""The parent's side of compiling ahead (``ahead``): one subprocess per backend whose cases compile, and what each built."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from pytest_rnnperf.measure.ahead import PIDS_NAME, AheadModel, Buildable, process_start
from pytest_rnnperf.measure.subprocesses import BackendSubprocess, SubprocessFailed

if TYPE_CHECKING:
    from pytest_rnnperf.backends import BackendSpec


@dataclass(frozen=True)
class Built:
    """One case compiled ahead: how long its build took there, and why it failed (empty: it did not)."""

    seconds: float
    error: str = ""


# A compile-ahead process that says nothing for this long while a case waits is taken as stuck: it is killed, and the
# cases it had not built build at their turn, as on a night without it (no night hangs on it).
QUIET_LIMIT_S = 600.0


@dataclass
class AheadProcess:
    """One backend's compile-ahead subprocess and what it has told of its cases so far."""

    name: str
    proc: BackendSubprocess
    cases: tuple[str, ...]  # case ids, in the run's order
    built: dict[str, Built] = field(default_factory=dict)
    finished: bool = False  # it answered: its list is done, it was stopped, or it failed
    failed: str = ""  # why it is gone, where it died
    waited_s: float = 0.0  # how long the run's cases waited for their compile here
    quiet_limit_s: float = QUIET_LIMIT_S

    def _read(self) -> None:
        """Read one message: a case built, or the answer that ends the list; one silent too long is killed."""
        if not self.proc.heard(self.quiet_limit_s):
            self.proc.kill_group()
            self.finished = True
            self.failed = (f"it said nothing for {self.quiet_limit_s:.0f} s and was killed; the cases it had not built "
                           f"built at their turn")
            return
        try:
            self.proc.settle()  # its registration's answer comes first
            kind, payload = self.proc.receive()
        except Exception as exc:  # noqa: BLE001 - gone, or its backend failed to register: its cases build as ever
            self.finished, self.failed = True, str(exc)
            return
        if kind == "built":
            case_id, seconds, error = payload
            self.built[case_id] = Built(seconds, error)
        else:  # "ok" or "raise": the list is over
            self.finished = True
            if kind == "raise":
                self.failed = str(payload)

    def wait_for(self, case_id: str) -> None:
        """Block until ``case_id`` has been compiled here (or this process is done with its list)."""
        if case_id not in self.cases:
            return
        began = time.monotonic()
        while case_id not in self.built and not self.finished:
            self._read()
        self.waited_s += time.monotonic() - began

    def stop(self) -> None:
        """Have it stop after the case in hand and read what it built; it then idles until ``close``."""
        if self.finished:
            return
        began = time.monotonic()
        try:
            self.proc.send("stop", ())
        except SubprocessFailed:  # gone already: _read says so
            pass
        while not self.finished:
            self._read()
        self.waited_s += time.monotonic() - began


@dataclass
class Ahead:
    """The run's compile-ahead processes, one per backend whose cases compile."""

    processes: dict[str, AheadProcess] = field(default_factory=dict)
    path: Path | None = None  # the pids file the run's timing processes read

    @classmethod
    def start(cls, cases: Sequence[Buildable], specs: Mapping[str, BackendSpec], log_dir: Path, env: Mapping[str, str],
              seed: int) -> Ahead:
        """Start a compile-ahead process per framework of ``cases`` that ``specs`` holds (in their order), and one more
        for its declared models, logging in ``log_dir``, and name them in its pids file (``ahead.PIDS_NAME``) for the
        processes that time."""
        # The models come after a framework's cases in the run, and would wait behind their compiles in one process.
        by_process: dict[str, tuple[str, list[Buildable]]] = {}
        for case in cases:
            if case.framework in specs:
                name = case.framework + (" models" if isinstance(case, AheadModel) else "")
                by_process.setdefault(name, (case.framework, []))[1].append(case)
        path = log_dir / PIDS_NAME
        ahead = cls(path=path)
        lines = []
        for name, (framework, own) in by_process.items():
            try:
                log_name = f"ahead-{name.replace(' ', '-')}"
                proc = BackendSubprocess.launch(specs[framework], log_dir, env, log_name=log_name, group=True)
                proc.send("ahead", (tuple(own), seed))
            except (SubprocessFailed, OSError):
                continue  # its cases compile at their own build, as without it
            ahead.processes[name] = AheadProcess(name, proc, tuple(case.id for case in own))
            if (start := process_start(proc.process.pid)) is not None:
                lines.append(f"{proc.process.pid} {start}\n")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(lines))
        return ahead

    def before(self, case_id: str | None) -> None:
        """Before a test: its case's compile ahead is waited for; a test that is not such a case stops them all (None)."""
        for process in self.processes.values():
            if case_id is None:
                process.stop()
            else:
                process.wait_for(case_id)

    def close(self) -> None:
        """Stop them all and let them exit; their pids leave the file first, so no one signals them after."""
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        for process in self.processes.values():
            process.proc.ask_exit()
        for process in self.processes.values():
            process.proc.await_exit()

    def line(self) -> str | None:
        """e.g. "compiled ahead: 15 of 15 case(s) (keras_jax 6, jax 6, torch_compile_rnn 3) in 151 s behind the other
        cases, paused while any case was timed; cases waited 12 s for theirs"; None when nothing was started."""
        if not self.processes:
            return None
        built = {p.name: sum(1 for b in p.built.values() if not b.error) for p in self.processes.values()}
        total = sum(len(p.cases) for p in self.processes.values())
        seconds = sum(b.seconds for p in self.processes.values() for b in p.built.values())
        waited = sum(p.waited_s for p in self.processes.values())
        per = ", ".join(f"{name} {n}" for name, n in built.items())
        failed = [f"{p.name}: {p.failed}" for p in self.processes.values() if p.failed]
        return (f"compiled ahead: {sum(built.values())} of {total} case(s) ({per}) in {seconds:.0f} s behind the other "
                f"cases, paused while any case was timed; cases waited {waited:.0f} s for theirs"
                + (f"; stopped early: {'; '.join(failed)}" if failed else ""))


__all__ = ["QUIET_LIMIT_S", "Ahead", "AheadProcess", "Built"]
