"""The run's baselines: the line that says what it was judged against, and recording it as a baseline or kept run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from pytest_rnnperf.judge import noise
from pytest_rnnperf.judge.sensitivity import drift_check_available, sensitivity
from pytest_rnnperf.judge.verdicts import Policy
from pytest_rnnperf.measure.environment import fingerprint_key, key_fields
from pytest_rnnperf.model.process import summarize
from pytest_rnnperf.model.records import KEPT, BaselineError
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.xdist import WorkerRun, by_model, case_cards, fingerprint_conflicts
from pytest_rnnperf.store.baselines import KEPT_TAG, gpus_with_baselines, record_problem, writable_problem, write_new
from pytest_rnnperf.store.measured import Measured
from pytest_rnnperf.store.runs import records_problem, run_meta, without_cases
from pytest_rnnperf.store.stored import Stored

RECORD_HINT = "record one with: the same pytest command plus --rnnperf-update-baseline"
BenchmarkJson = Callable[..., dict[str, Any]]  # (entries, meta) -> the run's pytest-benchmark JSON


def shown_path(path: Path) -> str:
    """A path as the summary names it: relative to the current folder where it lies inside it (a CI log's lines
    stay short), else as it is."""
    try:
        return str(path.relative_to(Path.cwd())) if path.is_absolute() else str(path)
    except ValueError:
        return str(path)


def sensitivity_line(measured: Measured, stored: Stored, policy: Policy) -> str:
    """e.g. "; history: 28 case(s) judged across 3-6 processes, 26 resolve their floor, 2 catch only more (...)"."""
    cases = [c for c in dict.fromkeys(r.id for r in measured.results if r.cudnn is not None)]
    found = [sensitivity(c, stored.history(c).processes, policy) for c in cases]
    judged = [s for s in found if s.smallest is not None]
    if not found:
        return ""
    if not judged:
        return f"; history: none of {len(found)} case(s) has {policy.min_processes} stored processes yet"
    counts = sorted({s.processes for s in judged})
    span = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    fine = sum(1 for s in judged if s.resolves)
    limited = [f"{s.case_id} {s.shown}" for s in judged if s.smallest is not None and not s.resolves]
    line = f"; history: {len(judged)} case(s) judged across {span} processes, {fine} resolve their floor"
    if limited:
        line += f", {len(limited)} catch only more ({', '.join(limited[:4])}{', ...' if len(limited) > 4 else ''})"
    if len(judged) < len(found):
        line += f", {len(found) - len(judged)} against one record"
    # Said either way: a gate that is off must not look like one that found nothing.
    line += "; drift check on" if drift_check_available() else "; drift check off (pip install ruptures)"
    return line + " (python -m pytest_rnnperf sensitivity)"


def baseline_status(run: Run, measured: Measured, stored: Stored, policy: Policy) -> str:
    """One line: which baseline this run was compared with, or why none, and how to record one."""
    if not run.gpu.available:
        return "baselines: none compared (no GPU)"
    baseline = stored.baseline
    if baseline is not None:
        line = f"baseline: {shown_path(baseline.path)} ({baseline.datetime or 'undated'})"
        # Only the cases this run judged: a -k selection must not list the files of cases it left out.
        ran = {r.id for r in measured.results} or None
        earlier = {r.path.name: sum(1 for c in r.records if c not in baseline.records and stored.stored_run(c) is r
                                    and (ran is None or c in ran))
                   for r in stored.older}
        earlier = {name: n for name, n in earlier.items() if n}
        if earlier:
            line += " + the newest record of cases it lacks: " + ", ".join(f"{n} from {name}" for name, n in earlier.items())
        line += sensitivity_line(measured, stored, policy)
        pairwise = not measured.verdicts or any(not v.processes for v in measured.verdicts.values())
        if stored.noise is not None and pairwise:  # noise.json serves only cases judged against one record
            floor = run.settings.device_effect
            line += (f"; device-time noise of {len(stored.noise.spread)} case(s) from {stored.noise.runs} stored runs "
                     f"({noise.FILE_NAME}): {stored.noise.raised(floor)} judged above {floor:.0%}")
        return line
    if (accepted := stored.accepted) is not None:
        return (f"baseline: none since the change accepted {accepted.accepted_at} ({accepted.reason}); the next run "
                f"kept with --rnnperf-keep-run starts the history")
    others = [g for g in gpus_with_baselines(run.root) if g != run.gpu.gpu_slug and g not in run.siblings]
    where = f"; baselines exist for {', '.join(others)} but are never compared with another model" if others else ""
    return f"baseline: none for {run.gpu.gpu_slug} yet{where}; {RECORD_HINT}"


def many_models(slugs: Sequence[str]) -> str:
    """Why a pytest-xdist run over GPUs of several models is not kept, e.g. "its workers' GPUs are of 2 models ..."."""
    return (f"its workers' GPUs are of {len(slugs)} models ({', '.join(slugs)}), and a history holds one model's runs: "
            f"keep a run per model (CUDA_VISIBLE_DEVICES)")


@dataclass(frozen=True)
class Recorder:
    """Writes a finished run as its GPU model's next baseline file, or adds it to the history (a kept run)."""

    run: Run
    measured: Measured
    stored: Stored
    workers: Sequence[WorkerRun]  # a pytest-xdist controller's workers that reported (empty otherwise)
    plan: Sequence[WorkerRun]  # the workers a pytest-xdist controller foresees, one per GPU
    parallel_reason: str | None  # why cuDNN cases could not be timed in this layout, else None
    meta: Callable[[], dict[str, Any]]  # what goes under machine_info["rnnperf"] of this run's own file
    incomplete: str | None = None  # why the run's results are partial (silent workers, an interruption), else None
    extra_cards: Sequence[str] = ()  # the GPU each extra process of a recording was pinned to (--rnnperf-record-gpus)

    def problems(self) -> list[str]:
        """Why --rnnperf-update-baseline or --rnnperf-keep-run could not write its file(s), found before the run."""
        settings = self.run.settings
        flag = "--rnnperf-update-baseline" if settings.update_baseline else "--rnnperf-keep-run"
        # Each of these would run the whole suite and then write nothing: say so before the first test.
        if not self.run.gpu.available and not any(w.gpu.available for w in self.plan):
            return [f"{flag}: no GPU here ({self.run.gpu.reason}); runs are stored per GPU model, on a machine with one"]
        if self.parallel_reason is not None:
            return [f"{flag}: {self.parallel_reason}; nothing would be timed to store"]
        slugs = list(dict.fromkeys(w.gpu.gpu_slug for w in self.plan if w.placement.pin)) or [self.run.gpu.gpu_slug]
        if settings.keep_run and len(slugs) > 1:  # the run would end with "run not kept"
            return [f"--rnnperf-keep-run: {many_models(slugs)}"]
        problems = (record_problem(self.run.root / slug / self.run.machine_id) for slug in slugs)
        where = "cannot record into" if settings.update_baseline else "cannot keep the run in"
        return [f"{flag}: {where} {why}" for why in problems if why]

    def _timed(self, benchmarks_on: bool) -> bool:
        """Whether any cuDNN case was timed (with pytest-benchmark on)."""
        return benchmarks_on and any(r.cudnn is not None for r in self.measured.results)

    def record_baseline(self, benchmark_json: BenchmarkJson, benchmarks_on: bool, exit_status: int = 0) -> list[str]:
        """Write this run as the next baseline file of its GPU model; returns the lines the summary prints.

        ``benchmark_json(entries, meta)`` is the pytest-benchmark JSON of the run (of those entries, with that
        ``machine_info["rnnperf"]``, where given). A pytest-xdist controller writes one file per GPU model of its
        workers, each from that model's workers alone. ``exit_status`` is pytest's: only a run that ended OK
        (0) is recorded.
        """
        failed = self.measured.failed
        if exit_status != 0 and not failed:  # interrupted (Ctrl-C), stopped, or an internal error
            why = "the run was interrupted" if exit_status == 2 else "the run did not end OK"
            return [f"baseline not recorded: {why} (exit status {exit_status})"]
        if self.incomplete is not None:  # pytest may say exit status 0 (its own Ctrl-C handler raised again)
            self.measured.unrecorded = True  # asked for and not written: the run must not exit 0
            return [f"baseline not recorded: {self.incomplete}; a baseline must come from a complete run"]
        if failed:
            return [f"baseline not recorded: {failed} test(s) failed; a baseline must come from a clean run"
                    + self._accept_hint(failed)]
        # Asked for and not written although every test passed: the run must not exit 0.
        self.measured.unrecorded = True
        if not self.workers and not self.run.gpu.available:
            return [f"baseline not recorded: no GPU ({self.run.gpu.reason})"]
        if self.parallel_reason is not None:
            return [f"baseline not recorded: {self.parallel_reason}"]
        if not self._timed(benchmarks_on):
            return ["baseline not recorded: no cuDNN case was timed in this run (each was skipped or deselected)"]
        self.measured.unrecorded = False
        if not self.workers:
            line = self._write(self.run.gpu.gpu_slug, benchmark_json())
            return [line + self._cards_note() if line.startswith("baseline recorded") else line]
        return [self._record_model(slug, workers, benchmark_json) for slug, workers in by_model(list(self.workers)).items()]

    def _cards_note(self) -> str:
        """Where a recording's extra processes took turns on the host's GPUs (``--rnnperf-record-gpus=all``), which."""
        if not self.extra_cards:
            return ""
        cards = list(dict.fromkeys((self.run.gpu.uuid, *self.extra_cards)))
        return f" (its processes by turns on {len(cards)} GPUs: {', '.join(cards)})"

    def _accept_hint(self, failed: int) -> str:
        """Where every failure was a regression against the stored history, how to record the change as the new
        baseline (a team recording over an old history met this after a cuDNN update)."""
        regressed = sum(v.fails for v in self.measured.verdicts.values())
        return ("" if regressed != failed else f" (all {failed} regressed against the stored history: if that is "
                "intended, add --rnnperf-no-fail-regression to record it)")

    def keep_run(self, benchmark_json: BenchmarkJson, benchmarks_on: bool, exit_status: int = 0) -> list[str]:
        """Add this run to its GPU model's history (``NNNN_run.json`` beside the baselines); the summary's lines.

        Only a run where nothing failed is kept. Its cases that regressed (reported, not failed) are kept as reports:
        their summaries without their records, so their history never judges against their times as a clean night's,
        yet learns a kernel mix that made the case report night after night (``judge.across.nearest_mode``). An
        interrupted run holds only some cases. With ``confirm_nights`` > 1 the cases that would have failed (suspect,
        or reported under --rnnperf-no-fail-regression) are also named in ``machine_info["rnnperf"]["suspects"]`` with
        the nights running they regressed on, for the next night.
        """
        gpu, failed = self.run.gpu, self.measured.failed
        if exit_status != 0 and not failed:
            return [f"run not kept: the run did not end OK (exit status {exit_status})"]
        if self.incomplete is not None:  # a partial night would read as one whose missing cases were never run
            self.measured.unrecorded = True  # and pytest may say exit status 0 for it: the run must not exit 0
            return [f"run not kept: {self.incomplete}; the history keeps complete runs only"]
        if not gpu.available and not self.workers:
            return [f"run not kept: no GPU ({gpu.reason})"]
        if not self._timed(benchmarks_on):
            return ["run not kept: no cuDNN case was timed in this run"]
        regressed = sorted(v.case_id for v in self.measured.verdicts.values()
                           if v.verdict.value == "regressed" or v.host_regressed or v.cold_regressed)
        if failed:
            return [f"run not kept: {failed} test(s) failed, {len(regressed)} case(s) regressed; the history "
                    f"keeps clean runs only"]
        if self.workers:  # one file of the workers' GPU model, as a baseline is recorded from them
            found = self._workers_meta("run not kept")
            if isinstance(found, str):
                return [found]
            (slug, meta), entries = found, [e for w in self.workers for e in w.entries]
        else:
            slug, meta, entries = gpu.gpu_slug, self.meta(), None
        meta = {**meta, "kind": KEPT}
        if self.stored.baseline is None and self.stored.accepted is None:
            return [f"run not kept: no baseline of {slug} to add it to; {RECORD_HINT}"]
        nights = self.run.settings.confirm_nights
        suspects = {v.case_id: v.nights for v in self.measured.verdicts.values() if v.violates and v.nights} \
            if nights > 1 else {}
        if suspects:
            meta["suspects"] = dict(sorted(suspects.items()))
        records = {r.id: r for r in self.measured.results}
        if reports := [summarize(records[c], "").to_dict() for c in regressed if c in records]:
            meta["reported"] = reports
        data = without_cases(benchmark_json(entries, meta), regressed)
        if unreadable := records_problem(data):  # the reader would refuse the file: the history stays readable
            return [f"run not kept: it would not read back: {unreadable}"]
        written = self._written(slug, KEPT_TAG, data, "run not kept")
        if isinstance(written, str):  # a clean run that was to join the history and did not: the run must not exit 0
            return [written]
        if not regressed:
            return [f"run kept for the history: {shown_path(written)}"]
        shown = ", ".join(regressed[:3]) + (", ..." if len(regressed) > 3 else "")
        lines = [f"run kept for the history: {shown_path(written)}, the {len(regressed)} case(s) that regressed "
                 f"(reported, not failed) as reports, which teach their history only a kernel mix that "
                 f"{self.run.settings.min_processes} stored processes share: {shown}"]
        if suspects:
            lines.append(f"suspect: {len(suspects)} case(s) named in {written.name} for the nights after it: each "
                         f"fails once it regressed on {nights} nights running (--rnnperf-confirm-nights)")
        return lines

    def _written(self, gpu_slug: str, tag: str, data: dict[str, Any], refused: str) -> Path | str:
        """Write ``data`` as the next ``tag`` file of ``gpu_slug``: its path, or the summary's line why not."""
        folder = self.run.root / gpu_slug / self.run.machine_id
        try:
            return write_new(folder, tag, data)
        except OSError as exc:
            self.measured.unrecorded = True
            why = writable_problem(folder) or f"{folder}: {exc.strerror or exc}"  # a file in the way is named as such
            return f"{refused}: cannot write to {why}"
        except BaselineError as exc:
            self.measured.unrecorded = True
            return f"{refused}: {exc}"

    def _write(self, gpu_slug: str, data: dict[str, Any]) -> str:
        """Write ``data`` as the next baseline file of ``gpu_slug``; the summary's line."""
        unreadable = records_problem(data)
        if unreadable:  # e.g. two tests measured one case: the reader would refuse the file, so it is not written
            self.measured.unrecorded = True
            return f"baseline not recorded: it would not read back: {unreadable}"
        written = self._written(gpu_slug, self.run.settings.baseline_tag, data, "baseline not recorded")
        return written if isinstance(written, str) else f"baseline recorded: {shown_path(written)}"

    def _record_model(self, gpu_slug: str, workers: list[WorkerRun], benchmark_json: BenchmarkJson) -> str:
        """The baseline file of one GPU model from its pytest-xdist workers; refused where they measured differently."""
        names = ", ".join(w.id for w in workers)
        why = None
        if not workers[0].gpu.available:
            why = f"baseline not recorded for {names}: no GPU ({workers[0].gpu.reason})"
        elif conflicts := fingerprint_conflicts(workers):
            why = (f"baseline of {gpu_slug} not recorded: its workers disagree on the fingerprint ({'; '.join(conflicts)}); "
                   f"a baseline must come from one setup")
        elif not any(r.cudnn is not None for w in workers for r in w.measured.results):
            why = f"baseline of {gpu_slug} not recorded: no cuDNN case was timed on it ({names})"
        if why is not None:
            self.measured.unrecorded = True  # asked for and not written: the run must not exit 0
            return why
        return self._write(gpu_slug, benchmark_json([e for w in workers for e in w.entries],
                                                    self._model_meta(gpu_slug, workers)))

    def _model_meta(self, gpu_slug: str, workers: list[WorkerRun]) -> dict[str, Any]:
        """``machine_info["rnnperf"]`` of one GPU model's file from its workers: their environments together, each
        worker's GPU, and the claims and parity tests the run passed."""
        environment: dict[str, str] = {}
        for w in workers:  # each worker ran some frameworks: together they hold every framework's fields
            environment.update({k: v for k, v in w.environment.items() if k not in environment})
        meta = run_meta(gpu_slug, environment, fingerprint_key(key_fields(workers[0].gpu.static_dict(), environment)))
        meta["workers"] = [w.gpu_label() for w in workers]
        meta["cards"] = case_cards(workers)
        meta.update(self.measured.claims_meta())  # what a later night may skip as stored (store.rechecks)
        return meta

    def _workers_meta(self, refused: str) -> tuple[str, dict[str, Any]] | str:
        """The GPU model a pytest-xdist run is kept for and its file's meta, or the summary's line why not: a kept
        run joins one model's history, from workers that measured on one setup."""
        models = by_model(list(self.workers))
        if len(models) > 1:
            return f"{refused}: {many_models(list(models))}"
        [(slug, workers)] = models.items()
        if not workers[0].gpu.available:
            return f"{refused}: no GPU ({workers[0].gpu.reason})"
        if conflicts := fingerprint_conflicts(workers):
            return f"{refused}: its workers disagree on the fingerprint ({'; '.join(conflicts)})"
        return slug, self._model_meta(slug, workers)
