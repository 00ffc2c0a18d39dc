"""The run's owner: wires what the run is (``Run``) to what it measured (``Measured``) for the plugin.

It knows nothing of pytest: the plugin creates one ``RnnperfSession`` per pytest run and its hooks and
fixture delegate here. What pytest must hear comes back as exceptions (``Skipped``, ``UsageProblem``) or
as plain lists of failure texts, which the plugin turns into skips, usage errors and failures. Measuring
lives in ``measuring.py``, baselines in ``baselines.py``, the pytest-xdist merge in ``xdist.py``.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from pytest_rnnperf.backends import BackendSpec, ModelError, compile_cache, spec, unmatched_injections
from pytest_rnnperf.judge.verdicts import CaseVerdict, Policy
from pytest_rnnperf.measure import ahead
from pytest_rnnperf.measure.ahead import Buildable
from pytest_rnnperf.measure.ahead_pool import Ahead
from pytest_rnnperf.measure.device_time import DeviceTimer
from pytest_rnnperf.measure.gpu import GpuInfo, nvml_index
from pytest_rnnperf.measure.loaded import LoadedBackends
from pytest_rnnperf.measure.placement import usable_gpus
from pytest_rnnperf.measure.runner import RunConfig
from pytest_rnnperf.measure.subprocesses import SubprocessPool
from pytest_rnnperf.measure.wall import WallTimer
from pytest_rnnperf.model.records import FORMAT_VERSION, BaselineError, CaseRecord, CrossRecord
from pytest_rnnperf.model.timing import Timer
from pytest_rnnperf.report.files import mark_report_folder, write_reports
from pytest_rnnperf.report.rows import Ending, Rows, build_rows
from pytest_rnnperf.report.text import gate_failures, path_parity_failures, regression_failure
from pytest_rnnperf.session.baselines import Recorder, baseline_status
from pytest_rnnperf.session.budget import ENDING_S, Budget, fixed_of, forecast, span, timed_of
from pytest_rnnperf.session.measuring import Measurer, Skipped
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.settings import Settings
from pytest_rnnperf.session.xdist import (WorkerRun, add_worker_entries, by_model, case_cards, in_order, read_worker,
                                          worker_output)
from pytest_rnnperf.store.measured import Measured
from pytest_rnnperf.store.rechecks import Recheck, checks_line, claims_recheck, put_off, recheck
from pytest_rnnperf.store.runs import run_meta
from pytest_rnnperf.store.stored import Stored, load_stored


class UsageProblem(Exception):
    """Something the user gave cannot be used; the message is one line naming it (a usage error)."""


# A warm night prices a build at the least of this many newest stored ones: one first night among them, compiling
# from scratch, is not what a warm cache costs; and a case's rounds as configured at the most of them, as a budget
# may have cut some.
WARM_BUILDS = 3
# The tests a stored answer may stand for, by kind: how a skip says it was found, and how --rnnperf-recheck-days=0
# gets it every run.
_HELD = {"claims": ("measured", "measures them"), "parity": ("checked", "checks it"),
         "known issue": ("seen failing", "runs it"), "model": ("checked with no cuDNN path", "checks it")}
# How the summary names each kind's line.
_NAMED = {"claims": "claims", "parity": "parity", "known issue": "known issues", "model": "generic-only models"}


@dataclass
class RnnperfSession:
    """One run: what it is (``run``, fixed at configure) and what it measured (``measured``), plus its machinery."""

    run: Run
    measured: Measured = field(default_factory=Measured)
    stored: Stored = field(default_factory=Stored)  # this GPU model's baselines, loaded at configure
    plan: list[WorkerRun] = field(default_factory=list)  # pytest-xdist controller: each worker's GPU, foreseen
    worker_runs: dict[str, WorkerRun] = field(default_factory=dict)  # pytest-xdist controller: what each reported
    timer: Timer = field(default_factory=WallTimer)
    device_timer: DeviceTimer = field(default_factory=DeviceTimer)
    on_verdict: Callable[[CaseVerdict], None] | None = None  # told each verdict as it is made (plugin/hooks.py)
    started: float = field(default_factory=time.monotonic)  # when the run began, for the summary's wall time
    collected: float | None = None  # when collection ended (time.monotonic), for the summary's time table
    frameworks: tuple[str, ...] = ()  # the frameworks of the collected tests, in order of first use
    tests_began: float | None = None  # when the first test started (a worker's too, under pytest-xdist)
    tests_ended: float | None = None  # when the latest test ended
    close_s: float | None = None  # how long this process's backend subprocesses took to exit (``close``)
    handed_over: dict[str, float] = field(default_factory=dict)  # pytest-xdist controller: when each worker's results came
    interrupted: str | None = None  # why the run stopped early (Ctrl-C): pytest may lose it from its exit status
    budget: Budget | None = None  # --rnnperf-budget: how long each case may time (None: no budget)
    checks: Mapping[str, str] = field(default_factory=dict)  # the collected claims and parity tests, by name -> kind
    ahead: Ahead | None = None  # a first night's compile-ahead processes (``compile_ahead``)
    report_rows: Rows | None = None  # the report's rows, built once when the run finishes (report/rows.py)
    _views: list[RnnperfSession] | None = None  # pytest-xdist controller: one session per GPU model of the workers
    backends: LoadedBackends = field(init=False)

    def __post_init__(self) -> None:
        """The backends' runtime fields go to what the run measured (they are part of its environment)."""
        self.backends = LoadedBackends(self._new_pool, self.measured.runtime, record_gpus=self._record_gpus())

    def _record_gpus(self) -> tuple[str, ...]:
        """The GPUs a recording's extra processes take turns on (``--rnnperf-record-gpus=all`` in a run of one
        process): a pytest-xdist worker's other GPUs are its neighbours', timing their own cases."""
        settings = self.run.settings
        if not settings.update_baseline or settings.record_gpus != "all" or self.run.placement is not None \
                or not self.run.gpu.available:
            return ()
        return tuple(usable_gpus(os.environ)[0] or ())

    @property
    def gpu(self) -> GpuInfo:
        """The run's GPU (``Run.gpu``)."""
        return self.run.gpu

    @property
    def software(self) -> Mapping[str, str]:
        """The run's software versions (``Run.software``)."""
        return self.run.software

    @property
    def settings(self) -> Settings:
        """The run's settings (``Run.settings``)."""
        return self.run.settings

    def _new_pool(self) -> SubprocessPool:
        """The run's subprocesses, their logs in the report folder (else a temporary one), the compile cache shared."""
        folder = self.settings.report_dir
        if not folder or folder.lower() == "none":
            folder = tempfile.mkdtemp(prefix="rnnperf-workers-")
        else:  # the logs alone make it a report folder, which the next run may write over
            mark_report_folder(Path(folder))
        if self.run.placement is not None:  # each pytest-xdist worker starts its own: their logs go apart
            folder = str(Path(folder) / self.run.placement.worker)
        # Every process that times reads the compile-ahead processes it must pause from this file (measure/ahead.py).
        pids = Path(folder) / ahead.PIDS_NAME
        ahead.use(pids)
        return SubprocessPool(Path(folder), nvml_index() if self.gpu.available else None,
                              env={**compile_cache.environment(self.run.compile_cache), ahead.PIDS_ENV: str(pids)})

    def environment(self) -> dict[str, str]:
        """Flat environment: ``gpu.*`` static device fields, software versions, framework runtime."""
        return self.run.environment(self.measured.runtime)

    def load(self, frameworks: Sequence[str] = ()) -> None:
        """Read the runtime of ``frameworks`` (none: every collected one) where not read yet, so that the environment
        names them; an unknown or broken backend is left to its own cases to report."""
        for name in frameworks or self.frameworks:
            try:
                self.backends.backend(name)
            except Exception:  # noqa: BLE001 - its cases say why, as a skip or a failure
                continue

    def fingerprint(self) -> str:
        """Stable key of the fields that make timings comparable (see ``environment.key_field_map``)."""
        return self.run.fingerprint(self.measured.runtime)

    # ----------------------------------------------------------------------------------------- the baseline

    def load_baseline(self) -> Path | None:
        """Load this GPU model's baselines (None without a GPU or a baseline); UsageProblem if one is unusable."""
        if not self.gpu.available:
            return None
        try:
            self.stored = load_stored(self.run.root, self.settings.baselines, self.gpu.gpu_slug, self.run.machine_id)
        except BaselineError as exc:
            raise UsageProblem(str(exc)) from None
        self.measured.notes += [note for note in self.stored.notes if note not in self.measured.notes]
        return None if self.stored.baseline is None else self.stored.baseline.path

    def policy(self) -> Policy:
        """The verdict policy of the session's settings, with this GPU's per-case noise thresholds."""
        policy = self.settings.policy()
        return policy if self.stored.noise is None else self.stored.noise.applied_to(policy)

    def baseline_status(self) -> str:
        """One line: which baseline this run was compared with, or why none, and how to record one."""
        return baseline_status(self.run, self.measured, self.stored, self.policy())

    def parallel_reason(self) -> str | None:
        """Why cuDNN cases cannot be timed in this run (pytest-xdist workers would share a GPU), else None."""
        # Each worker's timings would include the others' kernels, so speedups and baselines from such a run
        # would be wrong; with a GPU per worker each times alone (placement.py).
        known = [self.run.placement] + [w.placement for w in (*self.worker_runs.values(), *self.plan)]
        return next((why for p in known if p is not None and (why := p.shared_reason()) is not None), None)

    def recorder(self) -> Recorder:
        """What writes this run as a baseline file or a kept run (``baselines.Recorder``)."""
        return Recorder(self.run, self.measured, self.stored, self.workers(), self.plan, self.parallel_reason(),
                        self.meta, self.incomplete(), tuple(self.backends.extra_cards))

    def record_baseline(self, benchmark_json: Callable[..., dict[str, Any]], benchmarks_on: bool,
                        exit_status: int = 0) -> list[str]:
        """Write this run as the next baseline file of each GPU model it ran on; the summary's lines."""
        self.model_views()  # each model's report loads the baselines its workers judged against, not the new file
        return self.recorder().record_baseline(benchmark_json, benchmarks_on, exit_status)

    def keep_run(self, benchmark_json: Callable[..., dict[str, Any]], benchmarks_on: bool,
                 exit_status: int = 0) -> list[str]:
        """Add this run to its GPU model's history (a kept run); the summary's lines."""
        return self.recorder().keep_run(benchmark_json, benchmarks_on, exit_status)

    def meta(self) -> dict[str, Any]:
        """What goes under ``machine_info["rnnperf"]`` of every pytest-benchmark JSON this run writes."""
        meta = run_meta(self.gpu.gpu_slug, self.environment(), self.fingerprint())
        meta.update(self.measured.claims_meta())  # the claims and parity tests this run passed (store.rechecks)
        if (outside := self.outside_s()) is not None:  # what a later night's forecast adds to the cases' phases
            meta["outside"] = {"seconds": round(outside, 1), "cases": len(self.measured.results)}
        if self.worker_runs:  # a merged pytest-xdist run: each worker's GPU, and the card each case ran on
            meta["workers"] = [w.gpu_label() for w in self.workers()]
            meta["cards"] = case_cards(self.workers())
        if self.backends.extra_cards:  # a recording whose extra processes took turns on the host's GPUs: each case's
            meta["extra_cards"] = list(dict.fromkeys(self.backends.extra_cards))  # own process ran on this card
            meta["cards"] = {r.id: self.gpu.uuid for r in self.measured.results}
        return meta

    def outside_s(self) -> float | None:
        """Seconds of this run so far outside its cases' phases and its claims and parity tests, every process's
        together; None before a case, or where the run is partial."""
        if not self.measured.results or self.tests_began is None or self.incomplete():
            return None
        phases = sum(sum(record.cost_s.values()) for record in self.measured.results)
        checks = sum(self.measured.check_costs.get(test, 0.0) for test in self.checks)
        return max(0.0, (time.monotonic() - self.started) * max(1, len(self.workers())) - phases - checks)

    # ------------------------------------------------------------------------------------------- measuring

    def measurer(self) -> Measurer:
        """What measures a case with this run's settings, baselines, backends and budget (``measuring.Measurer``)."""
        return Measurer(self.run, self.measured, self.stored, self.backends, self.timer, self.device_timer,
                        self.policy, self.parallel_reason, self.budget, self.on_verdict)

    def plan_budget(self, case_ids: Sequence[str], checks: Mapping[str, str] | None = None) -> None:
        """Start the run's time budget (--rnnperf-budget, 0: none) for the collected cuDNN cases ``case_ids``, priced
        from their stored records (``stored_cost``, ``budget.forecast``); ``checks``: the collected claims and parity
        tests, name -> "claims" or "parity"."""
        self.checks = dict(checks or {})
        if self.settings.budget <= 0:
            return
        # A pytest-xdist worker collects every case but times its share, in the same minutes as the others.
        workers = 1 if self.run.placement is None else max(1, self.run.placement.workers)
        self.budget = self.budget_for(case_ids, workers, checks)

    def unanswered(self, checks: Mapping[str, str]) -> list[str]:
        """Those of the claims and parity tests of ``checks`` (name -> kind) that no stored run holds an answer for: no
        budget defers them (``store.rechecks.DEFERRABLE``). None without a GPU, where they are cheap CPU checks."""
        if not self.gpu.available:
            return []
        answered = {test for run in self.stored.runs for test in run.claims}
        # A known issue is a matrix case, which the budget prices as one.
        return [test for test, kind in checks.items() if test not in answered and kind != "known issue"]

    def budget_for(self, case_ids: Sequence[str], workers: int, checks: Mapping[str, str] | None = None) -> Budget:
        """A budget of --rnnperf-budget minutes for ``case_ids`` shared by ``workers``, priced from their stored
        records; a pytest-xdist controller makes one to foresee its workers' (``Budget.ahead``). ``checks``: the
        collected claims and parity tests, name -> "claims" or "parity", for those that will run whatever the budget."""
        checks = checks or {}
        costs = {case_id: self.stored_cost(case_id) for case_id in case_ids}
        # Compiled ahead or not, a first night's builds are priced from scratch: compiling behind the other cases
        # slows their builds and parity instead, by more than the warm builds leave (evidence README, twenty-second).
        scratch_ids = [case_id for case_id in case_ids if self.run.compile_cache_empty
                       and self.stored.scratch_cost(case_id) is not None]
        compiled = len(set(scratch_ids) & self.compiled_ahead())
        total_s = self.settings.budget * 60
        stored_fixed = {case_id: fixed_of(found[1]) for case_id, found in costs.items() if found and found[1]}
        # A known issue (xfail) stores no record: its whole test, as last timed, is what it costs (none of it cut).
        stored_fixed.update({case_id: seconds for case_id in case_ids if case_id not in stored_fixed
                             and (seconds := self.stored.unrecorded_cost(case_id)) is not None})
        frameworks = self._frameworks(case_ids)
        # Collecting, starting and each test's setup cost minutes a night that no case's phases hold.
        outside = (self.stored.outside_each(WARM_BUILDS) or 0.0) * len(case_ids)
        return Budget(total_s, math.ceil(len(case_ids) / workers), started=self.started,
                      forecast=forecast(costs, total_s, workers, len(scratch_ids), self.least_timed(case_ids), frameworks,
                                        compiled, outside, ENDING_S),
                      stored_fixed=stored_fixed, stored_timed=self.full_timed(case_ids), frameworks=frameworks,
                      collected=len(case_ids),
                      # without a GPU no case is timed, so there is nothing to foresee
                      unpriced=len(case_ids) - len(stored_fixed) if self.gpu.available else 0,
                      cache_empty=self.run.compile_cache_empty, unanswered=len(self.unanswered(checks)),
                      owed_s=self.owed_s(checks), ending_s=ENDING_S)

    def compile_ahead(self, cases: Sequence[Buildable]) -> None:
        """On a night whose compile cache started empty, on a GPU, in one process, unless --rnnperf-compile-ahead=off:
        start building the collected ``cases`` (and declared models) of backends that compile, each once ahead of its
        turn, behind the other cases (measure/ahead.py).

        Not under pytest-xdist: the controller hands cases to whichever worker is free, so each would compile them all.
        """
        if (self.settings.compile_ahead == "off" or not self.gpu.available or not self.run.compile_cache_empty
                or self.run.placement is not None or self.plan):
            return
        specs: dict[str, BackendSpec] = {}
        for name in dict.fromkeys(case.framework for case in cases):
            try:
                found = spec(name)
            except Exception:  # noqa: BLE001 - an unknown or broken backend: its own cases say why
                continue
            if found.compiles:
                specs[name] = found
        if specs:
            pool = self.backends.pool()
            self.ahead = Ahead.start(list(dict.fromkeys(cases)), specs, pool.log_dir, pool.env, RunConfig().seed)

    def compiled_ahead(self) -> set[str]:
        """The ids of the cases compiled ahead tonight (none on most nights)."""
        return set() if self.ahead is None else {case_id for p in self.ahead.processes.values() for case_id in p.cases}

    def before_test(self, case_id: str | None) -> None:
        """Before a test: wait for its case's compile ahead; a test that is no such case (None) stops them all."""
        if self.ahead is not None:
            self.ahead.before(case_id)

    def owed_s(self, checks: Mapping[str, str]) -> float:
        """What one claims and one parity test of the collected ``checks`` (name -> kind) took when last stored, the
        cheapest of each: a change makes each night run one of each whatever the budget, the cheapest first
        (``cheapest_first``). A known issue is a matrix case, priced as one."""
        stored: dict[str, list[float]] = {}
        for test, kind in checks.items():
            if kind != "known issue" and (seconds := self.stored.check_cost(test)) is not None:
                stored.setdefault(kind, []).append(seconds)
        return sum(min(costs) for costs in stored.values())

    def cheapest_first(self, tests: Sequence[str]) -> list[str]:
        """``tests`` (of one kind) ordered by what each took when last stored, cheapest first, those never priced
        after them in their order: on a night a change makes run one of a kind whatever the budget, the first
        due is the cheapest."""
        costs = {test: self.stored.check_cost(test) for test in tests}
        return sorted(tests, key=lambda test: (costs[test] is None, costs[test] or 0.0))

    def _frameworks(self, case_ids: Sequence[str]) -> dict[str, str]:
        """Case id -> the framework its newest stored record ran (a model test's id does not name it)."""
        return {case_id: record.case.framework for case_id in case_ids
                if (record := self.stored.stored_record(case_id)) is not None}

    def least_timed(self, case_ids: Sequence[str]) -> dict[str, float]:
        """Case id -> the least seconds of timed rounds among its ``WARM_BUILDS`` newest stored records that timed any
        (cases with none left out): the newest hosts, not the fastest night of the history, price tonight's."""
        return {case_id: min(timed) for case_id in case_ids if (timed := self._newest_timed(case_id))}

    def full_timed(self, case_ids: Sequence[str]) -> dict[str, float]:
        """Case id -> its timed rounds as configured: the most seconds of them among its ``WARM_BUILDS`` newest stored
        records that timed any (a budget may have cut the newest); cases with none left out."""
        return {case_id: max(timed) for case_id in case_ids if (timed := self._newest_timed(case_id))}

    def _newest_timed(self, case_id: str) -> list[float]:
        """The seconds of timed rounds of ``case_id``'s ``WARM_BUILDS`` newest stored records that timed any."""
        return [spent for record in self.stored.newest_records(case_id) if (spent := timed_of(record.cost_s)) > 0][
            :WARM_BUILDS]

    def stored_cost(self, case_id: str) -> tuple[str, Mapping[str, float]] | None:
        """The stored ``cost_s`` the budget prices ``case_id`` at, with its file's name: its newest record's, its
        proof and parity at the median of its newest ones, its build at its costliest stored compile-cache miss where
        tonight's cache started empty, else at the least of its newest stored builds (the newest may be a first
        night's); None: nothing stored."""
        run = self.stored.stored_run(case_id)
        if run is None:
            return None
        # A first night's parity ran beside its compiles, a faster host's cost less: one record is not the case.
        cost = run.records[case_id].cost_s
        newest = {**cost, **{phase: seconds for phase in ("proof", "parity") if (seconds := self.stored.median_phase(
            case_id, phase, WARM_BUILDS)) is not None and (seconds > 0 or phase in cost)}}
        if not self.run.compile_cache_empty:
            warm = self.stored.least_build(case_id, WARM_BUILDS)
            return run.path.name, newest if warm is None else {**newest, "build": warm}
        scratch = self.stored.scratch_cost(case_id)
        if scratch is None or scratch[1]["build"] <= newest.get("build", 0.0):
            return run.path.name, newest
        # Only the build compiles: the other phases as the newest record has them.
        return scratch[0], {**newest, "build": scratch[1]["build"]}

    def problems(self, record: CaseRecord | CrossRecord) -> list[str]:
        """Why a record fails: path proofs, parity, the speedup floor, a regression against the baseline."""
        if isinstance(record, CrossRecord):
            return path_parity_failures(record.id, record.proofs, record.parity)
        problems = gate_failures(record)
        verdict = self.measured.verdicts.get(record.id)
        if verdict is not None and verdict.fails and not self.settings.no_fail_regression:
            problems.append(regression_failure(verdict, self))
        return problems

    def claims_reason(self, test: str, kind: str = "claims", frameworks: Sequence[str] = (),
                      case_id: str | None = None) -> str | None:
        """Why the claims, parity or known-issue (``kind``) test ``test`` of ``frameworks`` (none known: any change
        counts) is not run tonight (its stored answer holds, or a short budget defers it), or None to run it;
        ``case_id``: the cuDNN case the test would time, which the budget then no longer prices as to come."""
        if not self.gpu.available:  # the CPU checks are cheap and nothing stored stands for them
            return None
        # A pytest-xdist worker reads a framework when its first case runs: the fields compared must be there.
        self.load(frameworks)
        found = claims_recheck(list(self.stored.runs), test, self.environment(), datetime.now(timezone.utc),
                               self.settings.recheck_days, recording=self.settings.update_baseline,
                               frameworks=frameworks)
        # Those a change asked for wait once one of their kind gave its answer tonight (a test skipped for a missing
        # framework does not count).
        return self._held(test, kind, found, self.stored.check_cost(test),
                          self.measured.passed_by_kind.get(kind, 0) > 0, case_id)

    def model_reason(self, case_id: str) -> str | None:
        """Why the check of a team's model ``case_id`` is not run tonight, or None to run it: the stored run of its
        last full check found no cuDNN path for it (both copies generic, nothing timed to judge) and passed, in
        tonight's environment within --rnnperf-recheck-days (or a short budget defers it), as a case's full check."""
        record = self.stored.stored_record(case_id)
        if not self.gpu.available or record is None or record.cudnn is not None:
            return None
        framework = record.case.framework
        self.load((framework,))
        runs = list(self.stored.runs)
        found = recheck(runs, case_id, self.environment(), datetime.now(timezone.utc), self.settings.recheck_days,
                        recording=self.settings.update_baseline, framework=framework)
        last = next((run.records[case_id] for run in runs if run.path.name == found.last), None)
        if last is None or last.cudnn is not None or gate_failures(last):  # a failed check is no answer to hold
            return None
        return self._held(case_id, "model", found, sum(record.cost_s.values()),
                          any(r.full for r in self.measured.rechecks.values()), case_id)

    def _held(self, test: str, kind: str, found: Recheck, cost_s: float | None, answered: bool,
              case_id: str | None) -> str | None:
        """The skip reason of ``test`` of ``kind`` where its stored answer holds tonight (``found``), or where a change
        asked for it and the budget is short (spent, owed to the cases still to come, or less than ``cost_s``, what the
        test took when last stored) once another of its kind was ``answered`` tonight; None to run it. The budget no
        longer prices ``case_id`` (a case the test would time) as to come."""
        short = self.budget is not None and (self.budget.short() or not self.budget.fits(cost_s))
        found = put_off(found, short, answered)
        if found.full:
            return None
        self._reused(kind)[test] = found
        if self.budget is not None and case_id is not None:
            self.budget.drop(case_id)
        if found.kind == "deferred":
            return f"{kind} {found.why}; a later night runs it"
        verb, every = _HELD[kind]
        days = f"environment unchanged, within {self.settings.recheck_days:g} days"
        return f"{kind} as {verb} in {found.last}: {days} (--rnnperf-recheck-days=0 {every} every run)"

    def _reused(self, kind: str) -> dict[str, Recheck]:
        """The tests of ``kind`` whose stored answer held tonight, or that a short budget deferred."""
        measured = self.measured
        return {"parity": measured.parity_reused, "known issue": measured.known_reused,
                "model": measured.models_reused}.get(kind, measured.claims_reused)

    # ------------------------------------------------------------------------------------------- finishing

    def close(self) -> None:
        """Stop the subprocesses (the end of the run), timed: a worker's exit holds up the run's end."""
        began = time.monotonic()
        self.backends.close()
        if self.ahead is not None:  # after the processes that may pause them
            self.ahead.close()
            if line := self.ahead.line():
                self.measured.notes.append(line)
        ahead.use(None)
        self.close_s = time.monotonic() - began

    def finish(self, step_summary: str = "") -> None:
        """Write the report files (JSON, Markdown, plot); a file that cannot be written is a note, not a crash."""
        notes, days = self.measured.notes, self.settings.recheck_days
        line = checks_line(self.measured.rechecks, days)
        if line and line not in notes:
            notes.append(line)
        for kind in _HELD:
            reused = self._reused(kind)
            held = [r for r in reused.values() if r.kind != "deferred"]
            if held:
                files = sorted({r.last for r in held})
                notes.append(f"{_NAMED[kind]}: {len(held)} test(s) not run, their answers as stored in "
                             f"{', '.join(files)} hold (environment unchanged, within {days:g} days; "
                             f"--rnnperf-recheck-days=0 runs them every run)")
            if put_off := len(reused) - len(held):
                waiting = [test for test, r in reused.items() if r.kind == "deferred"]
                notes.append(f"{_NAMED[kind]}: {put_off} test(s) deferred to a later night: the environment changed "
                             f"and the run's budget (--rnnperf-budget) had no time for them; each night measures at "
                             f"least one{self._stored_cost_of(waiting)}")
        budget = self.budget
        if budget is None and self.worker_runs and self.settings.budget > 0:  # a controller: its workers' cuts
            budget = Budget(self.settings.budget * 60, 0, started=self.started, cuts=dict(self.measured.budget_cuts))
        if budget is not None:
            notes.append(budget.line(time.monotonic() - self.started))
        notes += unmatched_injections((r.id for r in self.measured.results if r.cudnn is not None), os.environ)
        if self.measured.has_cases():
            now = time.monotonic()
            collection_s = None if self.collected is None else self.collected - self.started
            outside = (None if self.tests_began is None else self.tests_began - self.started,
                       None if self.tests_ended is None else now - self.tests_ended)
            self.report_rows = build_rows(self, wall_s=now - self.started, collection_s=collection_s,
                                          outside_s=outside, ending=self.ending())
            notes += write_reports(self, self.settings.report_dir, self.settings.markdown, step_summary, self.report_rows)

    def _stored_cost_of(self, tests: Sequence[str]) -> str:
        """What the claims or parity ``tests`` took together when last stored, as the clause that ends their
        deferral's line ("" where no stored run timed any of them)."""
        # At one a night a change's tests can take longer to work off than their answers hold: say what would fit.
        costs = [cost for test in tests if (cost := self.stored.check_cost(test)) is not None]
        if not costs:
            return ""
        which = "they" if len(costs) == len(tests) else f"{len(costs)} of them"
        return f" ({which} took {span(sum(costs))} when last stored: a budget that much longer would leave them time)"

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form of the run: environment, fingerprint, results, skips, verdicts and notes."""
        out = {"format": FORMAT_VERSION, "fingerprint": self.fingerprint(), "gpu_slug": self.gpu.gpu_slug,
               "environment": self.environment(),
               "baseline": None if self.stored.baseline is None else str(self.stored.baseline.path),
               **self.measured.to_dict(report=True), "workers": [w.as_dict() for w in self.workers()]}
        if self.worker_runs:  # each worker's verdicts as it judged them (with --dist a case is judged once per worker)
            out["verdicts"] = [v.as_dict() for w in self.workers() for v in w.measured.verdicts.values()]
        return out

    # ------------------------------------------------------------------------------------ pytest-xdist

    def ending(self) -> Ending | None:
        """What the time after the last test held: the subprocesses' exit and, on a pytest-xdist controller, the
        wait for the last worker's results (None before any test ended)."""
        if self.tests_ended is None:
            return None
        if not self.handed_over:
            return Ending(self.close_s)
        last = max(self.handed_over, key=lambda worker: self.handed_over[worker])
        run = self.worker_runs.get(last)
        return Ending(None if run is None else run.close_s, last, max(0.0, self.handed_over[last] - self.tests_ended))

    def worker_output(self) -> str:
        """What a pytest-xdist worker hands the controller: its GPU, fingerprint and everything it measured (JSON)."""
        baseline = None if self.stored.baseline is None else str(self.stored.baseline.path)
        if self.budget is not None:
            self.measured.budget_cuts.update(self.budget.cuts)
        return worker_output(self.run.placement, self.gpu, self.fingerprint(), self.environment(), baseline,
                             self.measured, self.close_s)

    def merge_worker(self, text: str | None, error: Any = None,
                     add_entries: Callable[..., list[Any]] | None = None) -> None:
        """Add a worker's output (``worker_output``) to this controller's session; ``add_entries(source, record[,
        processes])`` puts its timings into pytest-benchmark; ``error``: the worker went down (pytest-xdist reports its
        test as failed, and a worker that handed over nothing is named by ``incomplete``)."""
        if not text:
            return
        worker, benchmarks = read_worker(text, f"worker{len(self.worker_runs)}")
        if worker.id in self.worker_runs:  # pytest-xdist hands a worker stopped by Ctrl-C down twice: merge it once
            return
        self.worker_runs[worker.id] = worker
        self._views = None
        self.measured.merge(worker.measured)
        if add_entries is not None:
            add_worker_entries(worker, benchmarks, self.measured.processes, add_entries)

    def incomplete(self) -> str | None:
        """Why this run's results are partial (planned pytest-xdist workers that handed over none, an interruption),
        else None."""
        silent = [w.id for w in self.plan if w.id not in self.worker_runs]
        if silent:  # their tests ran (the controller heard their reports) but what they measured never came
            who = "they" if len(silent) > 1 else "it"
            return f"{', '.join(silent)} handed over no results (the run was interrupted, or {who} crashed)"
        return self.interrupted

    def planned_models(self) -> list[str]:
        """The GPU models the pytest-xdist workers will pin, as the controller foresees them (empty otherwise)."""
        return list(dict.fromkeys(w.gpu.gpu_slug for w in self.plan if w.placement.pin))

    def workers(self) -> list[WorkerRun]:
        """The pytest-xdist workers that reported, gw0 first (empty outside a controller)."""
        return in_order(self.worker_runs)

    def models(self) -> dict[str, list[WorkerRun]]:
        """The reporting workers by the GPU model they measured on (``gpu_slug``), in worker order."""
        return by_model(self.workers())

    def model_views(self) -> list[RnnperfSession]:
        """One session per GPU model when the workers had several, each judged against its own baselines; else empty.

        A view holds its workers' share of what was measured and loads its model's baseline files, so the
        report's baseline lines, kernel changes and environment diffs compare each model with its own runs.
        """
        models = self.models()
        if len(models) < 2:
            return []
        if self._views is None:
            self._views = [self._view(workers, tuple(models)) for workers in models.values()]
        return self._views

    def _view(self, workers: list[WorkerRun], siblings: tuple[str, ...]) -> RnnperfSession:
        """The session of one GPU model's workers, with that model's baselines loaded."""
        view = RnnperfSession(replace(self.run, gpu=workers[0].gpu, siblings=siblings, extra_environment={}),
                              Measured.merged([w.measured for w in workers], share=True))
        try:
            view.load_baseline()
        except UsageProblem as exc:  # its workers loaded the same files; one that changed since is a note
            view.measured.notes.append(str(exc))
        return view


__all__ = ["ModelError", "RnnperfSession", "Run", "Skipped", "UsageProblem", "WorkerRun"]
