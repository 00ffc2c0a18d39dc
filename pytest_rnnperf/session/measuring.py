"""Measuring one case, model or cross-framework check: the run's settings applied, its baselines judged against."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import partial
from typing import Any, Callable

from pytest_rnnperf.backends import (Backend, BackendUnavailable, ModelError, ModelOptions, OutOfDeviceMemory,
                                     keras_spec, model_backend_for, spec)
from pytest_rnnperf.backends.keras_layers import keras_backend_setting
from pytest_rnnperf.judge.sensitivity import sensitivity
from pytest_rnnperf.judge.verdicts import CaseVerdict, Policy, confirmed, judge_remeasuring
from pytest_rnnperf.measure.device_time import DeviceTimer
from pytest_rnnperf.measure.gpu import TelemetryWindow, nvml_index
from pytest_rnnperf.measure.loaded import LoadedBackends
from pytest_rnnperf.measure.runner import RunConfig, run_case, run_cross, run_model
from pytest_rnnperf.measure.subprocesses import RemoteBackend, model_payload
from pytest_rnnperf.model.cases import Case, ModelCase, cross_id
from pytest_rnnperf.model.process import summarize
from pytest_rnnperf.model.records import CaseRecord, CrossRecord
from pytest_rnnperf.model.timing import Timer, TimingConfig
from pytest_rnnperf.report.rows import NEEDS_GPU
from pytest_rnnperf.session.budget import Budget
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.settings import Settings
from pytest_rnnperf.store.measured import Measured
from pytest_rnnperf.store.rechecks import DEFERRABLE, put_off, recheck
from pytest_rnnperf.store.stored import Stored


class Skipped(Exception):
    """The case cannot run here; the message is the one-line skip reason."""


@dataclass(frozen=True)
class Measurer:
    """What measuring a case needs of the run: its facts, where results go, its baselines, backends and clocks."""

    run: Run
    measured: Measured
    stored: Stored
    backends: LoadedBackends
    timer: Timer
    device_timer: DeviceTimer
    policy: Callable[[], Policy]
    parallel_reason: Callable[[], str | None]  # why cuDNN cases cannot be timed here (GPU shared), else None
    budget: Budget | None = None
    on_verdict: Callable[[CaseVerdict], None] | None = None

    def run_config(self, settings: Settings, disabled: bool = False) -> RunConfig:
        """Timing and telemetry settings for one test; --benchmark-disable: one round, no energy window."""
        # With a noise target, 4 rounds may do: the rounds stop once both medians are that steady.
        timing = TimingConfig(rounds=1 if disabled else settings.rounds,
                              min_rounds=1 if disabled else (4 if settings.max_noise > 0 else 5),
                              warmup_s=0.0 if disabled else TimingConfig.warmup_s,
                              min_block_s=settings.min_block_ms / 1e3, max_time_s=settings.max_case_s,
                              max_noise=settings.max_noise)
        index = nvml_index()
        gpu = self.run.gpu
        return RunConfig(timing=timing, timer=self.timer, energy_s=0.0 if disabled else settings.energy_s,
                         device_rounds=0 if disabled else settings.device_rounds, device_timer=self.device_timer,
                         gpu_name=gpu.name if gpu.available else "",
                         window_factory=(lambda: TelemetryWindow(index=index)) if gpu.available else None)

    def _skip(self, case_id: str, reason: str) -> Skipped:
        """Note a skipped case and return the exception that says so."""
        self.measured.skipped.append((case_id, reason))
        return Skipped(reason)

    def _reason(self, framework: str, cudnn: bool) -> str | None:
        """Why a case of ``framework`` cannot run here (cuDNN side included when ``cudnn``), else None."""
        try:
            backend = self.backends.backend(framework)
        except BackendUnavailable as exc:
            return str(exc)
        base, cudnn_reason = self._reasons(backend)
        return cudnn_reason if base is None and cudnn else base

    def _reasons(self, backend: Backend) -> tuple[str | None, str | None]:
        """Why ``backend`` cannot run here at all, and why not its cuDNN side (None where it can)."""
        base = backend.unavailable_reason()
        if base is not None:
            return base, base
        gpu = backend.gpu_unavailable_reason()
        return None, f"{NEEDS_GPU}: {gpu}" if gpu else self.parallel_reason()

    def _judged(self, case_id: str, record: CaseRecord, remeasure: Callable[[], CaseRecord]) -> CaseRecord:
        """Judge a record against the baseline (timing an ambiguous case once more); keep the verdict."""
        stored = self.stored.stored_record(case_id)
        if stored is None:
            if self.stored.baseline is not None:
                self.measured.unjudged.append(case_id)
            return record
        policy = self.policy()
        record, verdict = judge_remeasuring(stored, record, remeasure, policy, self.stored.history(case_id).judged)
        if verdict is not None:
            verdict = confirmed(verdict, self.stored.suspects.get(case_id, 0), policy.confirm_nights)
            self.measured.verdicts[case_id] = verdict
            if self.on_verdict is not None:
                self.on_verdict(verdict)
        return record

    def _timed_config(self, case: Case | ModelCase, settings: Settings, disabled: bool, cudnn: bool) -> RunConfig:
        """The case's config: checks as its last full check allows, rounds as the budget allows (cuDNN side timed)."""
        config = self.run_config(settings, disabled)
        return self._budgeted(case.id, self._checks_for(case, config, settings)) if cudnn and not disabled else config

    def _checks_for(self, case: Case | ModelCase, config: RunConfig, settings: Settings) -> RunConfig:
        """``config`` with parity against float64 and energy off where tonight matches the case's last full check,
        or where a change asked for one, the run is short of its budget and it checked another case fully already
        (deferred to a later night)."""
        found = recheck(list(self.stored.runs), case.id, self.run.environment(self.measured.runtime),
                        datetime.now(timezone.utc), settings.recheck_days, recording=self.run.settings.update_baseline,
                        framework=case.framework)
        if self.budget is not None and found.kind in DEFERRABLE:  # the claims and parity tests are due as well
            self.budget.owe()
        found = put_off(found, self.budget is not None and self.budget.short(),
                        any(r.full for r in self.measured.rechecks.values()))
        self.measured.rechecks[case.id] = found
        return config if found.full else replace(config, parity_reference=False, energy_s=0.0)

    def _budgeted(self, case_id: str, config: RunConfig) -> RunConfig:
        """``config`` with the case's timed rounds cut where the run would not fit its budget (steadiest first)."""
        if self.budget is None:
            return config
        found = sensitivity(case_id, self.stored.history(case_id).processes, self.policy())
        steady = found.resolves
        cap = config.timing.max_time_s
        given = self.budget.allowance(case_id, steady, cap)
        if given >= cap:
            return config
        return replace(config, timing=replace(config.timing, max_time_s=max(given, 1e-9)),
                       budget_by="--rnnperf-budget")

    def _done(self, record: CaseRecord) -> CaseRecord:
        """Keep a measured record; tell the budget what a timed case cost."""
        if self.budget is not None and record.cudnn is not None:
            self.budget.spent(record.cost_s, record.id)
        self.measured.results.append(record)
        return record

    def measure(self, case: Case, impls: tuple[str, ...], settings: Settings, disabled: bool = False) -> CaseRecord:
        """Run a matrix case (both sides, or generic alone) and judge it; Skipped with the reason if it cannot run."""
        reason = self._reason(case.framework, "cudnn" in impls)
        if reason is not None:
            raise self._skip(case.id, reason)
        backend = self.backends.backend(case.framework)
        config = self._timed_config(case, settings, disabled, "cudnn" in impls)
        try:
            judge = None if "cudnn" not in impls or disabled else partial(self._judged, case.id)
            if isinstance(backend, RemoteBackend):
                record = backend.run_case(case, config, impls, judge)
            else:
                record = run_case(case, backend, config, impls=impls, judge=judge)
        except (BackendUnavailable, OutOfDeviceMemory) as exc:
            raise self._skip(case.id, str(exc)) from None
        self._done(record)
        if record.cudnn is not None and not disabled and self.run.settings.update_baseline:
            self._more_processes(case, impls, config)
        return record

    def _more_processes(self, case: Case, impls: tuple[str, ...], config: RunConfig) -> None:
        """Measure a case being recorded in ``record_processes - 1`` more fresh processes; keep their summaries.

        The first night then already has a between-process estimate. Each extra process is a worker started
        for this recording and kept for its whole run, so every case meets each process once. It times the case
        only: parity and energy were measured here, and skipping them makes a 3-process recording ~2x, not 3x. Its
        summary keeps medians only, so its speedup is the estimate without the bootstrap interval.
        """
        backend_spec = spec(case.framework)
        for i in range(self.run.settings.record_processes - 1):
            timing_only = replace(config, energy_s=0.0, parity=False, speedup_ci=False)
            again = RemoteBackend(backend_spec, self.backends.extra_pool(i)).run_case(case, timing_only, impls, None)
            self.measured.processes.setdefault(case.id, []).append(summarize(again, f"process {i + 2}"))

    def measure_model(self, case: ModelCase, build: Callable[[], Any], inputs: Any, settings: Settings,
                      disabled: bool = False, options: ModelOptions | None = None,
                      backend: str | None = None) -> CaseRecord:
        """Run a team's model: both sides on a GPU, the generic side against float64 without one.

        ``build()`` makes the model here; with ``backend`` (a Keras backend other than this process's) it runs in
        that backend's subprocess, where ``build`` and ``inputs`` must be importable. ModelError (the model or
        its inputs cannot be checked) goes to the caller, which fails the test.
        """

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
        runner: Any = self.backends.model_backend(case.framework, str(backend) if remote else None)
        base, cudnn_reason = self._reasons(runner)
        if base is not None:
            raise self._skip(case.id, base)
        impls: tuple[str, ...] = ("generic",) if cudnn_reason else ("cudnn", "generic")
        # a model on the generic path alone is all parity: checked fully
        config = self._timed_config(case, settings, disabled, "cudnn" in impls)
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
        return self._done(record)

    def measure_cross(self, case: Case, other: str) -> CrossRecord:
        """The case's canonical weights in ``case.framework`` and ``other``: cuDNN sides where a GPU is seen."""
        sides: list[tuple[str, Backend, str]] = []
        for framework in (case.framework, other):
            reason = self._reason(framework, cudnn=False)
            if reason is not None:
                raise self._skip(cross_id(case, other), reason)
            backend = self.backends.backend(framework)
            on_gpu = backend.gpu_unavailable_reason() is None and case.cell in spec(framework).cudnn_cells
            sides.append((framework, backend, "cudnn" if on_gpu else "generic"))
        try:
            record = run_cross(case, (sides[0], sides[1]), RunConfig())
        except (BackendUnavailable, OutOfDeviceMemory) as exc:
            raise self._skip(cross_id(case, other), str(exc)) from None
        self.measured.cross.append(record)
        return record
