"""The run's owner: loads the baseline, measures and judges cases, records a baseline, finishes the reports.

It knows nothing of pytest: the plugin creates one ``RnnperfSession`` per pytest run and its hooks and
fixture delegate here. What pytest must hear comes back as exceptions (``Skipped``, ``UsageProblem``) or
as plain lists of failure texts, which the plugin turns into skips, usage errors and failures.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable

from pytest_rnnperf.judge import noise
from pytest_rnnperf.backends import (
    INJECT_ENVS, Backend, BackendUnavailable, ModelError, ModelOptions, OutOfDeviceMemory, load_backend,
)
from pytest_rnnperf.backends import compile_cache, keras_spec, model_backend_for, spec, unmatched_injections
from pytest_rnnperf.store import accepts
from pytest_rnnperf.store.baselines import (
    KEPT_TAG, gpus_with_baselines, record_problem, root_problem, writable_problem, write_new,
)
from pytest_rnnperf.model.cases import Case, ModelCase
from pytest_rnnperf.judge.claims import ClaimRow
from pytest_rnnperf.measure.gpu import GpuInfo, TelemetryWindow, nvml_index
from pytest_rnnperf.judge.noise import Noise
from pytest_rnnperf.measure.placement import Placement
from pytest_rnnperf.measure.subprocesses import RemoteBackend, SubprocessPool, model_payload
from pytest_rnnperf.model.process import ProcessSummary, summarize
from pytest_rnnperf.model.records import KEPT, BaselineError, CaseRecord, CrossRecord, StoredRun
from pytest_rnnperf.store.runs import load_model, records_problem, run_meta, timed_cases, without_cases
from pytest_rnnperf.store.history import CaseHistory, case_history
from pytest_rnnperf.store.rechecks import Recheck
from pytest_rnnperf.session.budget import Budget
from pytest_rnnperf.session.settings import Settings
from pytest_rnnperf.model.timing import Timer, TimingConfig
from pytest_rnnperf.measure.device_time import DeviceTimer
from pytest_rnnperf.measure.wall import WallTimer
from pytest_rnnperf.judge.verdicts import CaseVerdict, Policy, judge_remeasuring
from pytest_rnnperf.report.rows import NEEDS_GPU, Rows

RECORD_HINT = "record one with: the same pytest command plus --rnnperf-update-baseline"


class Skipped(Exception):
    """The case cannot run here; the message is the one-line skip reason."""


class UsageProblem(Exception):
    """Something the user gave cannot be used; the message is one line naming it (a usage error)."""


@dataclass
class WorkerRun:
    """A pytest-xdist worker as the controller sees it: its GPU and fingerprint, and what it measured there."""

    placement: Placement
    gpu: GpuInfo
    fingerprint: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    baseline: str | None = None  # the newest baseline file it judged against
    runtime: dict[str, dict[str, str]] = field(default_factory=dict)
    results: list[CaseRecord] = field(default_factory=list)
    cross: list[CrossRecord] = field(default_factory=list)
    claims: list[ClaimRow] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    verdicts: dict[str, CaseVerdict] = field(default_factory=dict)
    unjudged: list[str] = field(default_factory=list)
    entries: list[Any] = field(default_factory=list)  # its records' entries in the controller's pytest-benchmark

    @property
    def id(self) -> str:
        """pytest-xdist's name of the worker, e.g. ``gw0``."""
        return self.placement.worker

    def gpu_label(self) -> str:
        """e.g. ``gw0 NVIDIA H200 (GPU-1234abcd)``: the worker, its GPU's model and the start of its UUID."""
        if not self.gpu.available:
            return f"{self.id} no GPU ({self.gpu.reason})"
        uuid = self.gpu.uuid if self.gpu.uuid.startswith("GPU-") else self.placement.pin
        return f"{self.id} {self.gpu.name} ({uuid[:12]})"

    def as_dict(self) -> dict[str, Any]:
        """The worker's part of rnnperf.json: its GPU, fingerprint, baseline and the cases it ran."""
        return {"worker": self.id, "cuda_visible_devices": self.placement.pin, "placement": self.placement.to_dict(),
                "gpu_slug": self.gpu.gpu_slug, "device": self.gpu.as_dict(), "fingerprint": self.fingerprint,
                "environment": self.environment, "baseline": self.baseline,
                "cases": [r.id for r in self.results], "cross": [c.id for c in self.cross],
                "skipped": [c for c, _ in self.skipped]}


@dataclass
class RnnperfSession:
    """Device and software fingerprint plus every result of one run, in the order they came."""

    gpu: GpuInfo
    software: dict[str, str]
    settings: Settings = field(default_factory=Settings.defaults)
    root: Path = Path("baselines")  # the baselines folder
    machine_id: str = ""  # pytest-benchmark's machine id, the subfolder a recorded baseline goes to
    placement: Placement | None = None  # a pytest-xdist worker's GPU (None outside a worker)
    plan: list[WorkerRun] = field(default_factory=list)  # pytest-xdist controller: each worker's GPU, foreseen
    worker_runs: dict[str, WorkerRun] = field(default_factory=dict)  # pytest-xdist controller: what each reported
    timer: Timer = field(default_factory=WallTimer)
    device_timer: DeviceTimer = field(default_factory=DeviceTimer)
    runtime: dict[str, dict[str, str]] = field(default_factory=dict)
    results: list[CaseRecord] = field(default_factory=list)
    cross: list[CrossRecord] = field(default_factory=list)  # cross-framework checks of the same weights
    claims: list[ClaimRow] = field(default_factory=list)  # the claims suite's rows (judge/claims.py)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    baseline: StoredRun | None = None  # this GPU model's newest baseline file
    older: list[StoredRun] = field(default_factory=list)  # the earlier ones, newest first
    verdicts: dict[str, CaseVerdict] = field(default_factory=dict)
    unjudged: list[str] = field(default_factory=list)  # cuDNN cases the baseline has no record of
    noise: Noise | None = None  # this GPU model's per-case device-time noise (baselines/<gpu>/noise.json)
    # Case id -> the extra processes' summaries of a recording with --rnnperf-record-processes (stored beside it).
    processes: dict[str, list[ProcessSummary]] = field(default_factory=dict)
    _extra_pools: list[SubprocessPool] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one-line facts the summary prints last
    rechecks: dict[str, Recheck] = field(default_factory=dict)  # case id -> full or sampled checks tonight, why
    failed: int = 0  # tests that failed (a baseline is only recorded from a clean run)
    expected: list[str] = field(default_factory=list)  # cases of tests that failed as marked (xfail): known issues
    unrecorded: bool = False  # a baseline or kept run was asked for and not written (the run must not exit 0)
    # pytest-xdist worker: records and the pytest-benchmark entries they make, which the controller adds
    bench_sources: list[tuple[dict[str, Any], CaseRecord]] = field(default_factory=list)
    _backends: dict[str, Backend] = field(default_factory=dict)
    # rnnperf.model()'s backends: in this process for a model built here, else in a worker with that Keras backend
    _model_backends: dict[tuple[str, bool], Backend] = field(default_factory=dict)
    _views: list[RnnperfSession] | None = None  # pytest-xdist controller: one session per GPU model of the workers
    siblings: tuple[str, ...] = ()  # one GPU model's view: the run's other models (its baselines are theirs to name)
    _pool: SubprocessPool | None = None  # subprocesses of backends that need their own environment
    report_rows: Rows | None = None  # the report's rows, built once when the run finishes (report/rows.py)
    extra_environment: dict[str, str] = field(default_factory=dict)  # fields a conftest adds (plugin/hooks.py)
    on_verdict: Callable[[CaseVerdict], None] | None = None  # told each verdict as it is made (plugin/hooks.py)
    compile_cache: Path | None = None  # the compile cache kept between runs (None: off); subprocesses get it too
    started: float = field(default_factory=time.monotonic)  # when the run began, for the summary's wall time
    collected: float | None = None  # when collection ended (time.monotonic), for the summary's time table
    budget: Budget | None = None  # --rnnperf-budget: how long each case may time (None: no budget)
    # Tests whose answer tonight's environment alone decides (claims, cross-framework and reference parity), measured
    # and passed tonight (stored with a run), and those whose stored answer held tonight, by kind ("claims", "parity").
    claim_tests: list[str] = field(default_factory=list)
    claims_reused: dict[str, Recheck] = field(default_factory=dict)
    parity_reused: dict[str, Recheck] = field(default_factory=dict)

    # ------------------------------------------------------------------------------------ the fingerprint

    def subprocess_pool(self) -> SubprocessPool:
        """The session's subprocesses (one per backend that needs an environment this process lacks)."""
        if self._pool is None:
            folder = self.settings.report_dir
            if not folder or folder.lower() == "none":  # no report folder: the logs go to a temporary one
                folder = tempfile.mkdtemp(prefix="rnnperf-workers-")
            else:  # the logs alone make it a report folder, which the next run may write over
                from pytest_rnnperf.report.files import mark_report_folder

                mark_report_folder(Path(folder))
            if self.placement is not None:  # each pytest-xdist worker starts its own: their logs go apart
                folder = str(Path(folder) / self.placement.worker)
            self._pool = SubprocessPool(Path(folder), nvml_index() if self.gpu.available else None,
                                        env=compile_cache.environment(self.compile_cache))
        return self._pool

    def start_subprocesses(self, frameworks: Iterable[str]) -> list[str]:
        """Start the subprocesses these frameworks run in, without waiting, so their imports overlap this
        process's work; the backends started. An unknown backend is left to its cases to report."""
        started = []
        for name in dict.fromkeys(frameworks):
            try:
                backend_spec = spec(name)
            except Exception:  # noqa: BLE001 - an unknown or broken backend: its own cases say why
                continue
            if name not in self._backends and not backend_spec.in_process(os.environ):
                self.subprocess_pool().start_early(backend_spec)
                started.append(name)
        return started

    def stop_subprocesses(self, keep: Iterable[str]) -> None:
        """Stop the subprocesses started early for backends other than ``keep`` (their cases were deselected)."""
        if self._pool is not None:
            self._pool.discard(set(self._pool.subprocesses) - set(keep) - set(self._backends))

    def backend(self, name: str) -> Backend:
        """The backend for ``name``, loaded once (in a worker when it needs its own environment); runtime info on first use."""
        if name not in self._backends:
            backend_spec = spec(name)
            backend = (load_backend(name) if backend_spec.in_process(os.environ)
                       else RemoteBackend(backend_spec, self.subprocess_pool()))
            self._backends[name] = backend
            if backend.unavailable_reason() is None:
                self.runtime[name] = backend.runtime_info()
        return self._backends[name]

    def environment(self) -> dict[str, str]:
        """Flat environment: ``gpu.*`` static device fields, software versions, framework runtime."""
        env = {f"gpu.{k}": v for k, v in self.gpu.static_dict().items()}
        env.update(self.software)
        for fields in self.runtime.values():
            env.update(fields)
        env.update(self.extra_environment)
        for name in INJECT_ENVS:
            if os.environ.get(name):
                # A deliberately injected slowdown is part of the environment, so a diff names it as a cause.
                env[name] = os.environ[name]
        return env

    def fingerprint(self) -> str:
        """Stable key of the fields that make timings comparable (see ``environment.key_field_map``)."""
        from pytest_rnnperf.measure.environment import fingerprint_key, key_fields

        return fingerprint_key(key_fields(self.gpu.static_dict(), self.environment()))

    # ----------------------------------------------------------------------------------------- the baseline

    def load_baseline(self) -> Path | None:
        """Load this GPU model's baselines (None without a GPU or a baseline); UsageProblem if one is unusable.

        Each case is judged against its newest stored record: a run recorded with -k (one framework, one shard
        of a sharded job) updates its cases and leaves the others to the files before it.
        """
        if not self.gpu.available:
            return None
        wrong_root = root_problem(self.root, self.settings.baselines, self.gpu.gpu_slug)
        if wrong_root:  # baselines/<gpu> given as the root: <gpu>/<gpu>/ would be read and recorded into
            raise UsageProblem(f"--rnnperf-baselines / rnnperf_baselines: {wrong_root}")
        try:
            loaded = load_model(self.root, self.gpu.gpu_slug, self.machine_id)
        except BaselineError as exc:
            raise UsageProblem(str(exc)) from None
        if not loaded.runs:
            return None
        for run in loaded.runs:
            path = run.path
            if not run.gpu_slug:
                raise UsageProblem(f"{path}: machine_info.rnnperf names no GPU (no gpu_slug), so it cannot be told "
                                   f"apart from another model's run; move it out of {self.root}")
            if run.gpu_slug != self.gpu.gpu_slug:
                raise UsageProblem(f"{path}: recorded on {run.gpu_slug} but stored in the folder of "
                                   f"{self.gpu.gpu_slug}; move it to {self.root / run.gpu_slug / path.parent.name}/")
        self.notes += [note for note in loaded.notes if note not in self.notes]
        self.baseline, self.older = loaded.runs[0], list(loaded.runs[1:])
        noise_file = self.root / self.gpu.gpu_slug / noise.FILE_NAME
        if noise_file.exists():
            try:
                self.noise = noise.load(noise_file)
            except BaselineError as exc:
                raise UsageProblem(str(exc)) from None
        return self.baseline.path

    def record_problems(self) -> list[str]:
        """Why --rnnperf-update-baseline or --rnnperf-keep-run could not write its file(s), found before the run."""
        flag = "--rnnperf-update-baseline" if self.settings.update_baseline else "--rnnperf-keep-run"
        # Each of these would run the whole suite and then write nothing: say so before the first test.
        if not self.gpu.available and not any(w.gpu.available for w in self.plan):
            return [f"{flag}: no GPU here ({self.gpu.reason}); runs are stored per GPU model, on a machine with one"]
        if (parallel := self.parallel_reason()) is not None:
            return [f"{flag}: {parallel}; nothing would be timed to store"]
        if self.settings.keep_run and self.plan:
            return ["--rnnperf-keep-run: pytest-xdist runs are not kept yet; run without -n to keep the run"]
        slugs = self.planned_models() or [self.gpu.gpu_slug]
        problems = (record_problem(self.root / slug / self.machine_id) for slug in slugs)
        where = "cannot record into" if self.settings.update_baseline else "cannot keep the run in"
        return [f"{flag}: {where} {why}" for why in problems if why]

    def stored_run(self, case_id: str) -> StoredRun | None:
        """The newest baseline file that holds ``case_id``, or None."""
        runs = [] if self.baseline is None else [self.baseline, *self.older]
        return next((run for run in runs if case_id in run.records), None)

    def history(self, case_id: str) -> CaseHistory:
        """The stored processes ``case_id`` is judged against: its newest recorded baseline's, then the kept runs'."""
        return case_history([] if self.baseline is None else [self.baseline, *self.older], case_id)

    def sensitivity_line(self) -> str:
        """e.g. "; history: 28 case(s) judged across 3-6 processes, 26 resolve 3%, 2 limited by their noise"."""
        from pytest_rnnperf.judge.sensitivity import drift_check_available, sensitivity

        policy = self.policy()
        cases = [c for c in dict.fromkeys(r.id for r in self.results if r.cudnn is not None)]
        found = [sensitivity(c, self.history(c).processes, policy) for c in cases]
        judged = [s for s in found if s.smallest is not None]
        if not found:
            return ""
        if not judged:
            return f"; history: none of {len(found)} case(s) has {policy.min_processes} stored processes yet"
        counts = sorted({s.processes for s in judged})
        span = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        fine = sum(1 for s in judged if s.smallest is not None and s.smallest <= s.floor)
        limited = [f"{s.case_id} {s.smallest:.1%}" for s in judged if s.smallest is not None and s.smallest > s.floor]
        line = f"; history: {len(judged)} case(s) judged across {span} processes, {fine} resolve their floor"
        if limited:
            line += f", {len(limited)} limited by their own noise ({', '.join(limited[:4])}{', ...' if len(limited) > 4 else ''})"
        if len(judged) < len(found):
            line += f", {len(found) - len(judged)} against one record"
        # Said either way: a gate that is off must not look like one that found nothing.
        line += "; drift check on" if drift_check_available() else "; drift check off (pip install ruptures)"
        return line + " (python -m pytest_rnnperf sensitivity)"

    def stored_record(self, case_id: str) -> CaseRecord | None:
        """The newest stored record of ``case_id``, or None."""
        run = self.stored_run(case_id)
        return None if run is None else run.records[case_id]

    def policy(self) -> Policy:
        """The verdict policy of the session's settings, with this GPU's per-case noise thresholds."""
        policy = self.settings.policy()
        return policy if self.noise is None else self.noise.applied_to(policy)

    def baseline_status(self) -> str:
        """One line: which baseline this run was compared with, or why none, and how to record one."""
        if not self.gpu.available:
            return "baselines: none compared (no GPU)"
        if self.baseline is not None:
            line = f"baseline: {shown_path(self.baseline.path)} ({self.baseline.datetime or 'undated'})"
            # Only the cases this run judged: a -k selection must not list the files of cases it left out.
            ran = {r.id for r in self.results} or None
            earlier = {r.path.name: sum(1 for c in r.records if c not in self.baseline.records and self.stored_run(c) is r
                                        and (ran is None or c in ran))
                       for r in self.older}
            earlier = {name: n for name, n in earlier.items() if n}
            if earlier:
                line += " + the newest record of cases it lacks: " + ", ".join(f"{n} from {name}" for name, n in earlier.items())
            line += self.sensitivity_line()
            pairwise = not self.verdicts or any(not v.processes for v in self.verdicts.values())
            if self.noise is not None and pairwise:  # noise.json serves only cases judged against one record
                floor = self.settings.device_effect
                line += (f"; device-time noise of {len(self.noise.spread)} case(s) from {self.noise.runs} stored runs "
                         f"({noise.FILE_NAME}): {self.noise.raised(floor)} judged above {floor:.0%}")
            return line
        if (accepted := accepts.restarted(self.root / self.gpu.gpu_slug)) is not None:
            return (f"baseline: none since the change accepted {accepted.accepted_at} ({accepted.reason}); the next run "
                    f"kept with --rnnperf-keep-run starts the history")
        others = [g for g in gpus_with_baselines(self.root) if g != self.gpu.gpu_slug and g not in self.siblings]
        where = f"; baselines exist for {', '.join(others)} but are never compared with another model" if others else ""
        return f"baseline: none for {self.gpu.gpu_slug} yet{where}; {RECORD_HINT}"

    def parallel_reason(self) -> str | None:
        """Why cuDNN cases cannot be timed in this run (pytest-xdist workers would share a GPU), else None."""
        # Each worker's timings would include the others' kernels, so speedups and baselines from such a run
        # would be wrong; with a GPU per worker each times alone (placement.py).
        known = [self.placement] + [w.placement for w in (*self.worker_runs.values(), *self.plan)]
        return next((why for p in known if p is not None and (why := p.shared_reason()) is not None), None)

    # ------------------------------------------------------------------------------------------- measuring

    def run_config(self, settings: Settings, disabled: bool = False) -> Any:
        """Timing and telemetry settings for one test; --benchmark-disable: one round, no energy window."""
        from pytest_rnnperf.measure.runner import RunConfig

        # With a noise target, 4 rounds may do: the rounds stop once both medians are that steady.
        timing = TimingConfig(rounds=1 if disabled else settings.rounds,
                              min_rounds=1 if disabled else (4 if settings.max_noise > 0 else 5),
                              warmup_s=0.0 if disabled else TimingConfig.warmup_s,
                              min_block_s=settings.min_block_ms / 1e3, max_time_s=settings.max_case_s,
                              max_noise=settings.max_noise)
        index = nvml_index()
        on_gpu = self.gpu.available
        return RunConfig(timing=timing, timer=self.timer, energy_s=0.0 if disabled else settings.energy_s,
                         device_rounds=0 if disabled else settings.device_rounds, device_timer=self.device_timer,
                         gpu_name=self.gpu.name if on_gpu else "",
                         window_factory=(lambda: TelemetryWindow(index=index)) if on_gpu else None)

    def _skip(self, case_id: str, reason: str) -> Skipped:
        """Note a skipped case and return the exception that says so."""
        self.skipped.append((case_id, reason))
        return Skipped(reason)

    def _reason(self, framework: str, cudnn: bool) -> str | None:
        """Why a case of ``framework`` cannot run here (cuDNN side included when ``cudnn``), else None."""
        try:
            backend = self.backend(framework)
        except BackendUnavailable as exc:
            return str(exc)
        reason = backend.unavailable_reason()
        if reason is None and cudnn:
            gpu = backend.gpu_unavailable_reason()
            reason = f"{NEEDS_GPU}: {gpu}" if gpu else self.parallel_reason()
        return reason

    def _judged(self, case_id: str, record: CaseRecord, remeasure: Callable[[], CaseRecord]) -> CaseRecord:
        """Judge a record against the baseline (timing an ambiguous case once more); keep the verdict."""
        stored = self.stored_record(case_id)
        if stored is None:
            if self.baseline is not None:
                self.unjudged.append(case_id)
            return record
        record, verdict = judge_remeasuring(stored, record, remeasure, self.policy(), self.history(case_id).processes)
        if verdict is not None:
            self.verdicts[case_id] = verdict
            if self.on_verdict is not None:
                self.on_verdict(verdict)
        return record

    def measure(self, case: Case, impls: tuple[str, ...], settings: Settings, disabled: bool = False) -> CaseRecord:
        """Run a matrix case (both sides, or generic alone) and judge it; Skipped with the reason if it cannot run."""
        from pytest_rnnperf.measure.runner import run_case

        reason = self._reason(case.framework, "cudnn" in impls)
        if reason is not None:
            raise self._skip(case.id, reason)
        config = self.run_config(settings, disabled)
        backend = self.backend(case.framework)
        if "cudnn" in impls and not disabled:
            config = self._budgeted(case.id, self._checks_for(case.id, config, settings))
        try:
            judge = None if "cudnn" not in impls or disabled else partial(self._judged, case.id)
            if isinstance(backend, RemoteBackend):
                record = backend.run_case(case, config, impls, judge)
            else:
                record = run_case(case, backend, config, impls=impls, judge=judge)
        except (BackendUnavailable, OutOfDeviceMemory) as exc:
            raise self._skip(case.id, str(exc)) from None
        self._count_spent(record)
        self.results.append(record)
        if record.cudnn is not None and not disabled and self.settings.update_baseline:
            self._more_processes(case, impls, config, record)
        return record

    def _checks_for(self, case_id: str, config: Any, settings: Settings) -> Any:
        """``config`` with parity against float64 and energy off where tonight matches the case's last full check."""
        from pytest_rnnperf.store.rechecks import recheck

        runs = [] if self.baseline is None else [self.baseline, *self.older]
        found = recheck(runs, case_id, self.environment(), datetime.now(timezone.utc), settings.recheck_days,
                        recording=self.settings.update_baseline)
        self.rechecks[case_id] = found
        return config if found.full else replace(config, parity_reference=False, energy_s=0.0)

    def plan_budget(self, cases: int) -> None:
        """Start the run's time budget (--rnnperf-budget, 0: none) for ``cases`` collected cuDNN cases."""
        if self.settings.budget > 0:
            self.budget = Budget(self.settings.budget * 60, cases, started=self.started)

    def _budgeted(self, case_id: str, config: Any) -> Any:
        """``config`` with the case's timed rounds cut where the run would not fit its budget (steadiest first)."""
        from pytest_rnnperf.judge.sensitivity import sensitivity

        if self.budget is None:
            return config
        found = sensitivity(case_id, self.history(case_id).processes, self.policy())
        steady = found.smallest is not None and found.smallest <= found.floor
        cap = config.timing.max_time_s
        given = self.budget.allowance(case_id, steady, cap)
        if given >= cap:
            return config
        return replace(config, timing=replace(config.timing, max_time_s=max(given, 1e-9)),
                       budget_by="--rnnperf-budget")

    def _count_spent(self, record: CaseRecord) -> None:
        """Tell the budget what a timed case cost."""
        if self.budget is not None and record.cudnn is not None:
            self.budget.spent(record.cost_s)

    def _more_processes(self, case: Case, impls: tuple[str, ...], config: Any, record: CaseRecord) -> None:
        """Measure a case being recorded in ``record_processes - 1`` more fresh processes; keep their summaries.

        The first night then already has a between-process estimate. Each extra process is a worker started
        for this recording and kept for its whole run, so every case meets each process once. It times the case
        only: parity and energy were measured here, and skipping them makes a 3-process recording ~2x, not 3x.
        """
        backend_spec = spec(case.framework)
        for i in range(self.settings.record_processes - 1):
            while len(self._extra_pools) <= i:
                base = self.subprocess_pool()
                self._extra_pools.append(SubprocessPool(base.log_dir / f"process{len(self._extra_pools) + 2}",
                                                    base.telemetry_index, env=base.env))
            timing_only = replace(config, energy_s=0.0, parity=False)
            again = RemoteBackend(backend_spec, self._extra_pools[i]).run_case(case, timing_only, impls, None)
            self.processes.setdefault(case.id, []).append(summarize(again, f"process {i + 2}"))

    def _model_backend(self, name: str, remote_keras: str | None = None) -> Backend:
        """The backend that checks a team's model: loaded here (the model was built here), or for ``remote_keras``
        in a worker started with KERAS_BACKEND=<it>; its runtime info joins the environment on first use."""
        key = (name, remote_keras is not None)
        if key not in self._model_backends:
            backend_spec = spec(name)
            if remote_keras is None:
                backend: Backend = (self._backends[name] if not isinstance(self._backends.get(name), RemoteBackend)
                                    and name in self._backends else load_backend(name))
            else:
                env = {**backend_spec.env, "KERAS_BACKEND": remote_keras}
                backend = RemoteBackend(backend_spec if dict(backend_spec.env) == env else replace(backend_spec, env=env),
                                        self.subprocess_pool())
            self._model_backends[key] = backend
            if backend.unavailable_reason() is None:
                self.runtime.setdefault(name, backend.runtime_info())
        return self._model_backends[key]

    def _reasons(self, backend: Backend) -> tuple[str | None, str | None]:
        """Why ``backend`` cannot run here at all, and why not its cuDNN side (None where it can)."""
        base = backend.unavailable_reason()
        if base is not None:
            return base, base
        gpu = backend.gpu_unavailable_reason()
        return None, f"{NEEDS_GPU}: {gpu}" if gpu else self.parallel_reason()

    def measure_model(self, case: ModelCase, build: Callable[[], Any], inputs: Any, settings: Settings,
                      disabled: bool = False, options: ModelOptions | None = None,
                      backend: str | None = None) -> CaseRecord:
        """Run a team's model: both sides on a GPU, the generic side against float64 without one.

        ``build()`` makes the model here; with ``backend`` (a Keras backend other than this process's) it runs in
        that backend's subprocess, where ``build`` and ``inputs`` must be importable. ModelError (the model or
        its inputs cannot be checked) goes to the caller, which fails the test.
        """
        from pytest_rnnperf.backends.keras_layers import keras_backend_setting
        from pytest_rnnperf.measure.runner import run_model

        options = options or ModelOptions()
        wanted = None if backend is None else keras_spec(backend)
        here = keras_backend_setting() or "tensorflow"
        remote = wanted is not None and backend != here
        model = None
        if wanted is None or not remote:
            model = build()
            backend_spec = model_backend_for(model)
            if wanted is not None and backend_spec.name != wanted.name:
                raise ModelError(f"backend={backend!r}: build() returned {type(model).__module__}."
                                 f"{type(model).__qualname__}, not a Keras model on {backend}")
        else:
            backend_spec = wanted
            payload = model_payload(build, inputs, options, str(backend))
        case = replace(case, framework=backend_spec.name)
        runner: Any = self._model_backend(case.framework, str(backend) if remote else None)
        base, cudnn_reason = self._reasons(runner)
        if base is not None:
            raise self._skip(case.id, base)
        impls: tuple[str, ...] = ("generic",) if cudnn_reason else ("cudnn", "generic")
        config = self.run_config(settings, disabled)
        if "cudnn" in impls and not disabled:  # a model on the generic path alone is all parity: checked fully
            config = self._budgeted(case.id, self._checks_for(case.id, config, settings))
        try:
            judge = None if "cudnn" not in impls or disabled else partial(self._judged, case.id)
            if remote:
                record = runner.run_model(case, payload, config, impls, judge)
            else:
                record = run_model(case, runner, model, inputs, config, impls=impls, judge=judge, build=build,
                                   options=options)
        except (BackendUnavailable, OutOfDeviceMemory) as exc:
            raise self._skip(case.id, str(exc)) from None
        if cudnn_reason:
            record = replace(record, notes=record.notes + (f"cuDNN side not run: {cudnn_reason}",))
        self._count_spent(record)
        self.results.append(record)
        return record

    def measure_cross(self, case: Case, other: str) -> CrossRecord:
        """The case's canonical weights in ``case.framework`` and ``other``: cuDNN sides where a GPU is seen."""
        from pytest_rnnperf.model.cases import cross_id
        from pytest_rnnperf.measure.runner import RunConfig, run_cross

        sides: list[tuple[str, Backend, str]] = []
        for framework in (case.framework, other):
            reason = self._reason(framework, cudnn=False)
            if reason is not None:
                raise self._skip(cross_id(case, other), reason)
            backend = self.backend(framework)
            on_gpu = backend.gpu_unavailable_reason() is None and case.cell in spec(framework).cudnn_cells
            sides.append((framework, backend, "cudnn" if on_gpu else "generic"))
        try:
            record = run_cross(case, (sides[0], sides[1]), RunConfig())
        except (BackendUnavailable, OutOfDeviceMemory) as exc:
            raise self._skip(cross_id(case, other), str(exc)) from None
        self.cross.append(record)
        return record

    def problems(self, record: CaseRecord | CrossRecord) -> list[str]:
        """Why a record fails: path proofs, parity, the speedup floor, a regression against the baseline."""
        from pytest_rnnperf.report.text import gate_failures, path_parity_failures, regression_failure

        if isinstance(record, CrossRecord):
            return path_parity_failures(record.id, record.proofs, record.parity)
        problems = gate_failures(record)
        verdict = self.verdicts.get(record.id)
        if verdict is not None and verdict.fails and not self.settings.no_fail_regression:
            problems.append(regression_failure(verdict, self))
        return problems

    # ------------------------------------------------------------------------------------------- finishing

    def record_baseline(self, benchmark_json: Callable[..., dict[str, Any]], benchmarks_on: bool,
                        exit_status: int = 0) -> list[str]:
        """Write this run as the next baseline file of its GPU model; returns the lines the summary prints.

        ``benchmark_json(entries, meta)`` is the pytest-benchmark JSON of the run (of those entries, with that
        ``machine_info["rnnperf"]``, where given). A pytest-xdist controller writes one file per GPU model of its
        workers, each from that model's workers alone. ``exit_status`` is pytest's: only a run that ended OK
        (0) is recorded.
        """
        if exit_status != 0 and not self.failed:  # interrupted (Ctrl-C), stopped, or an internal error
            why = "the run was interrupted" if exit_status == 2 else "the run did not end OK"
            return [f"baseline not recorded: {why} (exit status {exit_status})"]
        if self.failed:
            return [f"baseline not recorded: {self.failed} test(s) failed; a baseline must come from a clean run"]
        # Asked for and not written although every test passed: the run must not exit 0.
        self.unrecorded = True
        if not self.worker_runs and not self.gpu.available:
            return [f"baseline not recorded: no GPU ({self.gpu.reason})"]
        parallel = self.parallel_reason()
        if parallel is not None:
            return [f"baseline not recorded: {parallel}"]
        if not benchmarks_on or not any(r.cudnn is not None for r in self.results):
            return ["baseline not recorded: no cuDNN case was timed in this run (each was skipped or deselected)"]
        self.unrecorded = False
        if not self.worker_runs:
            return [self._write_baseline(self.gpu.gpu_slug, benchmark_json())]
        self.model_views()  # each model's report loads the baselines its workers judged against, not the new file
        return [self._record_model(slug, workers, benchmark_json) for slug, workers in self.models().items()]

    def keep_run(self, benchmark_json: Callable[..., dict[str, Any]], benchmarks_on: bool,
                 exit_status: int = 0) -> list[str]:
        """Add this run to its GPU model's history (``NNNN_run.json`` beside the baselines); the summary's lines.

        Only a run where nothing failed is kept, and without its cases that regressed (reported, not failed): those
        would teach the history their own slowdown, while leaving the whole night out would leave a runner with one
        steady finding (a host-bound case, say) without any kept run. An interrupted run holds only some cases.
        """
        if exit_status != 0 and not self.failed:
            return [f"run not kept: the run did not end OK (exit status {exit_status})"]
        if not self.gpu.available or self.worker_runs:
            why = f"no GPU ({self.gpu.reason})" if not self.gpu.available else "pytest-xdist runs are not kept yet"
            return [f"run not kept: {why}"]
        if not benchmarks_on or not any(r.cudnn is not None for r in self.results):
            return ["run not kept: no cuDNN case was timed in this run"]
        regressed = sorted(v.case_id for v in self.verdicts.values()
                           if v.verdict.value == "regressed" or v.host_regressed)
        if self.failed:
            return [f"run not kept: {self.failed} test(s) failed, {len(regressed)} case(s) regressed; the history "
                    f"keeps clean runs only"]
        if self.baseline is None and accepts.restarted(self.root / self.gpu.gpu_slug) is None:
            return [f"run not kept: no baseline of {self.gpu.gpu_slug} to add it to; {RECORD_HINT}"]
        meta = {**self.meta(), "kind": KEPT}  # no pytest-xdist workers here: the run's own meta, marked kept
        folder = self.root / self.gpu.gpu_slug / self.machine_id
        data = without_cases(benchmark_json(None, meta), regressed)
        if not timed_cases(data):
            return [f"run not kept: each of its {len(regressed)} timed case(s) regressed (reported, not failed); the "
                    f"history keeps clean cases only"]
        if unreadable := records_problem(data):  # the reader would refuse the file: the history stays readable
            return [f"run not kept: it would not read back: {unreadable}"]
        try:
            path = write_new(folder, KEPT_TAG, data)
        except OSError as exc:
            self.unrecorded = True  # a clean run that was to join the history and did not: the run must not exit 0
            return [f"run not kept: cannot write to {writable_problem(folder) or f'{folder}: {exc.strerror or exc}'}"]
        except BaselineError as exc:
            self.unrecorded = True
            return [f"run not kept: {exc}"]
        if not regressed:
            return [f"run kept for the history: {shown_path(path)}"]
        shown = ", ".join(regressed[:3]) + (", ..." if len(regressed) > 3 else "")
        return [f"run kept for the history: {shown_path(path)}, without the {len(regressed)} case(s) that regressed "
                f"(reported, not failed), so that their history does not learn the change: {shown}"]

    def _write_baseline(self, gpu_slug: str, data: dict[str, Any]) -> str:
        """Write ``data`` as the next baseline file of ``gpu_slug``; the summary's line."""
        folder = self.root / gpu_slug / self.machine_id
        unreadable = records_problem(data)
        if unreadable:  # e.g. two tests measured one case: the reader would refuse the file, so it is not written
            self.unrecorded = True
            return f"baseline not recorded: it would not read back: {unreadable}"
        try:
            path = write_new(folder, self.settings.baseline_tag, data)
        except OSError as exc:
            self.unrecorded = True
            why = writable_problem(folder) or f"{folder}: {exc.strerror or exc}"  # a file in the way is named as such
            return f"baseline not recorded: cannot write to {why}"
        except BaselineError as exc:
            self.unrecorded = True
            return f"baseline not recorded: {exc}"
        return f"baseline recorded: {shown_path(path)}"

    def _record_model(self, gpu_slug: str, workers: list[WorkerRun], benchmark_json: Callable[..., dict[str, Any]]) -> str:
        """The baseline file of one GPU model from its pytest-xdist workers; refused where they measured differently."""
        from pytest_rnnperf.measure.environment import fingerprint_key, key_fields

        names = ", ".join(w.id for w in workers)
        why = None
        if not workers[0].gpu.available:
            why = f"baseline not recorded for {names}: no GPU ({workers[0].gpu.reason})"
        elif conflicts := fingerprint_conflicts(workers):
            why = (f"baseline of {gpu_slug} not recorded: its workers disagree on the fingerprint ({'; '.join(conflicts)}); "
                   f"a baseline must come from one setup")
        elif not any(r.cudnn is not None for w in workers for r in w.results):
            why = f"baseline of {gpu_slug} not recorded: no cuDNN case was timed on it ({names})"
        if why is not None:
            self.unrecorded = True  # asked for and not written: the run must not exit 0
            return why
        environment: dict[str, str] = {}
        for w in workers:  # each worker ran some frameworks: together they hold every framework's fields
            environment.update({k: v for k, v in w.environment.items() if k not in environment})
        meta = run_meta(gpu_slug, environment, fingerprint_key(key_fields(workers[0].gpu.static_dict(), environment)))
        meta["workers"] = [w.gpu_label() for w in workers]
        return self._write_baseline(gpu_slug, benchmark_json([e for w in workers for e in w.entries], meta))

    def meta(self) -> dict[str, Any]:
        """What goes under ``machine_info["rnnperf"]`` of every pytest-benchmark JSON this run writes."""
        meta = {**run_meta(self.gpu.gpu_slug, self.environment(), self.fingerprint()), **self._claims_meta()}
        if self.worker_runs:  # a merged pytest-xdist run: which GPU measured what is in each worker's line
            meta["workers"] = [w.gpu_label() for w in self.workers()]
        return meta

    def _claims_meta(self) -> dict[str, Any]:
        """The claims and parity tests this run measured and passed, for the stored run (``store.rechecks``)."""
        return {"claims": sorted(set(self.claim_tests))} if self.claim_tests else {}

    def claims_reason(self, test: str, kind: str = "claims") -> str | None:
        """Why the claims (or parity) test ``test`` is not run tonight (its stored answer holds), or None to run it."""
        from pytest_rnnperf.store.rechecks import claims_recheck

        if not self.gpu.available:  # the CPU checks are cheap and nothing stored stands for them
            return None
        runs = [] if self.baseline is None else [self.baseline, *self.older]
        found = claims_recheck(runs, test, self.environment(), datetime.now(timezone.utc), self.settings.recheck_days,
                               recording=self.settings.update_baseline)
        if found.full:
            return None
        days = f"environment unchanged, within {self.settings.recheck_days:g} days"
        if kind == "parity":
            self.parity_reused[test] = found
            return f"parity as checked in {found.last}: {days} (--rnnperf-recheck-days=0 checks it every run)"
        self.claims_reused[test] = found
        return f"claims as measured in {found.last}: {days} (--rnnperf-recheck-days=0 measures them every run)"

    def close(self) -> None:
        """Stop the subprocesses (the end of the run)."""
        if self._pool is not None:
            self._pool.close()
        for pool in self._extra_pools:
            pool.close()

    def finish(self, step_summary: str = "") -> None:
        """Write the report files (JSON, Markdown, plot); a file that cannot be written is a note, not a crash."""
        from pytest_rnnperf.report.files import write_reports
        from pytest_rnnperf.report.rows import build_rows
        from pytest_rnnperf.store.rechecks import checks_line

        line = checks_line(self.rechecks, self.settings.recheck_days)
        if line and line not in self.notes:
            self.notes.append(line)
        for kind, reused in (("claims", self.claims_reused), ("parity", self.parity_reused)):
            if reused:
                files = sorted({r.last for r in reused.values()})
                self.notes.append(f"{kind}: {len(reused)} test(s) not run, their answers as stored in "
                                  f"{', '.join(files)} hold (environment unchanged, within "
                                  f"{self.settings.recheck_days:g} days; --rnnperf-recheck-days=0 runs them every run)")
        if self.budget is not None:
            self.notes.append(self.budget.line(time.monotonic() - self.started))
        self.notes += unmatched_injections((r.id for r in self.results if r.cudnn is not None), os.environ)
        if self.results or self.cross or self.skipped or self.claims:
            collection_s = None if self.collected is None else self.collected - self.started
            self.report_rows = build_rows(self, wall_s=time.monotonic() - self.started, collection_s=collection_s)
            self.notes += write_reports(self, self.settings.report_dir, self.settings.markdown, step_summary,
                                        self.report_rows)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form of the run: environment, fingerprint, results, skips, verdicts and notes."""
        from pytest_rnnperf.model.records import FORMAT_VERSION

        return {
            "format": FORMAT_VERSION,
            "fingerprint": self.fingerprint(),
            "gpu_slug": self.gpu.gpu_slug,
            "environment": self.environment(),
            "results": [r.to_dict() for r in self.results],
            "cross": [c.to_dict() for c in self.cross],
            "claims": [c.to_dict() for c in self.claims],
            "skipped": [{"case": c, "reason": r} for c, r in self.skipped],
            "baseline": None if self.baseline is None else str(self.baseline.path),
            # Workers' verdicts as each judged them (with --dist each a case is judged once per worker).
            "verdicts": [v.as_dict() for v in (self.verdicts.values() if not self.worker_runs else
                                               [v for w in self.workers() for v in w.verdicts.values()])],
            "unjudged": list(self.unjudged),
            "workers": [w.as_dict() for w in self.workers()],
            "notes": list(self.notes),
        }

    # ------------------------------------------------------------------------------------ pytest-xdist

    def carry_entries(self, source: dict[str, Any], record: CaseRecord) -> None:
        """Keep a record's pytest-benchmark entries for the controller (pytest-benchmark is off in a worker)."""
        self.bench_sources.append((source, record))

    def worker_output(self) -> str:
        """What a pytest-xdist worker hands the controller: its GPU, fingerprint and everything it measured (JSON)."""
        from pytest_rnnperf.report.files import as_json_safe

        position = {id(r): i for i, r in enumerate(self.results)}
        return json.dumps(as_json_safe({
            "placement": None if self.placement is None else self.placement.to_dict(),
            "device": self.gpu.to_dict(), "fingerprint": self.fingerprint(), "environment": self.environment(),
            "baseline": None if self.baseline is None else str(self.baseline.path),
            "results": [r.to_dict() for r in self.results],
            "cross": [c.to_dict() for c in self.cross],
            "claims": [c.to_dict() for c in self.claims],
            "skipped": self.skipped, "runtime": self.runtime, "notes": self.notes,
            "verdicts": [v.as_dict() for v in self.verdicts.values()], "unjudged": self.unjudged,
            "failed": self.failed,
            "expected": list(self.expected),
            "processes": {c: [p.to_dict() for p in ps] for c, ps in self.processes.items()},
            "benchmarks": [{"source": s, "result": position[id(r)]} for s, r in self.bench_sources if id(r) in position],
        }))

    def merge_worker(self, text: str | None, error: Any = None,
                     add_entries: Callable[..., list[Any]] | None = None) -> None:
        """Add a worker's output to this (controller's) session; ``add_entries`` puts its timings into pytest-benchmark."""
        if error is not None:
            self.failed += 1  # a worker that went down took its tests' outcomes with it: no baseline from this run
        if not text:
            return
        data = json.loads(text)
        results = [CaseRecord.from_dict(r) for r in data.get("results", [])]
        worker = WorkerRun(
            placement=Placement.from_dict(data.get("placement") or {"worker": f"worker{len(self.worker_runs)}"}),
            gpu=GpuInfo.from_dict(data.get("device", {})), fingerprint=str(data.get("fingerprint", "")),
            environment={str(k): str(v) for k, v in data.get("environment", {}).items()},
            baseline=data.get("baseline"), results=results,
            runtime={name: {str(k): str(v) for k, v in fields.items()} for name, fields in data.get("runtime", {}).items()},
            cross=[CrossRecord.from_dict(c) for c in data.get("cross", [])],
            claims=[ClaimRow.from_dict(c) for c in data.get("claims", [])],
            skipped=[(str(c), str(r)) for c, r in data.get("skipped", [])],
            verdicts={v.case_id: v for v in map(CaseVerdict.from_dict, data.get("verdicts", []))},
            unjudged=[str(c) for c in data.get("unjudged", [])])
        self.worker_runs[worker.id] = worker
        self._views = None
        self.results += worker.results
        self.cross += worker.cross
        self.claims += worker.claims
        self.skipped += worker.skipped
        self.verdicts.update(worker.verdicts)
        self.unjudged += worker.unjudged
        for name, fields in worker.runtime.items():
            self.runtime.setdefault(name, fields)
        self.notes += [n for n in data.get("notes", []) if n not in self.notes]
        self.failed += int(data.get("failed", 0))
        self.expected += [str(c) for c in data.get("expected", [])]
        for case_id, rows in data.get("processes", {}).items():
            self.processes[case_id] = [ProcessSummary.from_dict(row, "worker") for row in rows]
        if add_entries is not None:
            for entry in data.get("benchmarks", []):
                record = results[entry["result"]]
                more = self.processes.get(record.id)
                worker.entries += (add_entries(entry["source"], record, more) if more
                                   else add_entries(entry["source"], record))

    def planned_models(self) -> list[str]:
        """The GPU models the pytest-xdist workers will pin, as the controller foresees them (empty otherwise)."""
        return list(dict.fromkeys(w.gpu.gpu_slug for w in self.plan if w.placement.pin))

    def workers(self) -> list[WorkerRun]:
        """The pytest-xdist workers that reported, gw0 first (empty outside a controller)."""
        from pytest_rnnperf.measure.placement import worker_number

        return sorted(self.worker_runs.values(), key=lambda w: (worker_number(w.id), w.id))

    def models(self) -> dict[str, list[WorkerRun]]:
        """The reporting workers by the GPU model they measured on (``gpu_slug``), in worker order."""
        out: dict[str, list[WorkerRun]] = {}
        for w in self.workers():
            out.setdefault(w.gpu.gpu_slug, []).append(w)
        return out

    def model_views(self) -> list[RnnperfSession]:
        """One session per GPU model when the workers had several, each judged against its own baselines; else empty.

        A view holds its workers' results and verdicts and loads its model's baseline files, so the report's
        baseline lines, kernel changes and environment diffs compare each model with its own runs.
        """
        models = self.models()
        if len(models) < 2:
            return []
        if self._views is None:
            self._views = [self._view(workers) for workers in models.values()]
        return self._views

    def _view(self, workers: list[WorkerRun]) -> RnnperfSession:
        """The session of one GPU model's workers, with that model's baselines loaded."""
        runtime: dict[str, dict[str, str]] = {}
        for w in workers:
            for name, fields in w.runtime.items():
                runtime.setdefault(name, fields)
        view = RnnperfSession(gpu=workers[0].gpu, software=self.software, settings=self.settings, root=self.root,
                              machine_id=self.machine_id, runtime=runtime,
                              results=[r for w in workers for r in w.results], cross=[c for w in workers for c in w.cross],
                              claims=[c for w in workers for c in w.claims],
                              skipped=[s for w in workers for s in w.skipped],
                              verdicts={k: v for w in workers for k, v in w.verdicts.items()},
                              unjudged=[c for w in workers for c in w.unjudged], siblings=tuple(self.models()))
        try:
            view.load_baseline()
        except UsageProblem as exc:  # its workers loaded the same files; one that changed since is a note
            view.notes.append(str(exc))
        return view


def fingerprint_conflicts(workers: list[WorkerRun]) -> list[str]:
    """Fingerprint fields on which workers differ, e.g. ``driver 580.95.05 (gw0) vs 590.1 (gw1)``.

    A field only one worker has is no conflict: a worker reads a framework's fields when its first case of that
    framework runs, and pytest-xdist may send all of a framework's cases to one worker.
    """
    from pytest_rnnperf.measure.environment import key_fields

    fields = [(w.id, key_fields(w.gpu.static_dict(), w.environment)) for w in workers]
    out = []
    for key in dict.fromkeys(k for _, f in fields for k in f):
        values = {wid: f[key] for wid, f in fields if key in f}
        if len(set(values.values())) > 1:
            out.append(f"{key} " + " vs ".join(f"{v} ({wid})" for wid, v in values.items()))
    return out


__all__ = ["ModelError", "RnnperfSession", "Skipped", "UsageProblem", "WorkerRun"]


def shown_path(path: Path) -> str:
    """A path as the summary names it: relative to the current folder where it lies inside it (a CI log's lines
    stay short), else as it is."""
    try:
        return str(path.relative_to(Path.cwd())) if path.is_absolute() else str(path)
    except ValueError:
        return str(path)
