"""The report's one row model: a run walked once into rows that every renderer (text, Markdown, JSON, plots, HTML)
draws."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection, Iterable, Mapping, Sequence

from pytest_rnnperf.judge.across import reach
from pytest_rnnperf.judge.gates import FLOOR as FLOOR_GATE
from pytest_rnnperf.judge.gates import gates_hold
from pytest_rnnperf.judge.precision import precision_finding
from pytest_rnnperf.judge.verdicts import HELD_BACK, Verdict
from pytest_rnnperf.measure.device_time import kernel_changes
from pytest_rnnperf.measure.environment import diff_environments, format_diff, unrecorded
from pytest_rnnperf.model.metrics import (BUSY, DEVICE_SPEEDUP, ENERGY_PER_STEP, FLOOR, HOST, KERNEL, METRICS, MS,
                                          PARITY, SPEEDUP, TFLOPS, WALL, WALL_SPEEDUP, named, show)
from pytest_rnnperf.model.records import CARD, FORMAT_VERSION
from pytest_rnnperf.model.stats import speedup_interval
from pytest_rnnperf.report.view import RunView

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.judge.claims import ClaimRow
    from pytest_rnnperf.judge.verdicts import CaseVerdict, Comparison
    from pytest_rnnperf.model.parity import ParityRow
    from pytest_rnnperf.model.records import CaseRecord, CrossRecord
    from pytest_rnnperf.model.results import PathProof
    from pytest_rnnperf.model.stats import Interval
    from pytest_rnnperf.model.timing import KernelStat

UNAVAILABLE = "unavailable"
# The case table's columns that show a metric, by header -> the tags (model.metrics) of what each shows.
CUDNN_TIMES, GENERIC_TIMES = f"cudnn {MS} wall/dev", f"generic {MS} wall/dev"
TFLOPS_COLUMN = f"{METRICS[TFLOPS].name} (of peak)"
CASE_METRIC_COLUMNS: Mapping[str, tuple[str, ...]] = {
    CUDNN_TIMES: (WALL, BUSY), GENERIC_TIMES: (WALL, BUSY),
    f"{METRICS[WALL_SPEEDUP].name} [95% CI]": (WALL_SPEEDUP,), METRICS[DEVICE_SPEEDUP].name: (DEVICE_SPEEDUP,),
    METRICS[FLOOR].name: (FLOOR,), TFLOPS_COLUMN: (TFLOPS,),
    METRICS[ENERGY_PER_STEP].name: (ENERGY_PER_STEP,), METRICS[PARITY].name: (PARITY,),
}
CASE_COLUMNS = ("case", *CASE_METRIC_COLUMNS, "path")
CROSS_HEADER = ("check", "sides (same canonical weights)", f"{METRICS[PARITY].name} (worst)", "path")
# The verdict table's columns that show a metric -> their tags (the time is the one the verdict was judged on).
VERDICT_METRIC_COLUMNS: Mapping[str, tuple[str, ...]] = {
    f"base cuDNN {MS}": (WALL, BUSY), f"now cuDNN {MS}": (WALL, BUSY), f"host overhead {MS}": (HOST,),
    METRICS[SPEEDUP].name: (SPEEDUP,),
}
VERDICT_HEADER = ("case", "basis", *list(VERDICT_METRIC_COLUMNS)[:2], "change [95% CI]",
                  *list(VERDICT_METRIC_COLUMNS)[2:], "verdict")
STATUSES = ("regressions found", "gate failures", "all checks passed")  # worst first
COMPARISON_HEADER = ("metric", "baseline", "now", "ratio [95% CI]", "p", "threshold", "verdict")
ANSWER_HEADER = ("case", "metric", "change [95% CI]", "threshold", "verdict")
# How the session says why a cuDNN case (or a model's cuDNN side) did not run: no GPU visible to its framework.
NEEDS_GPU = "cuDNN case needs a GPU"
ROUND_SPEEDUP = METRICS[SPEEDUP].label  # the judged speedup: each round's generic/cuDNN, their median
# The environment fields that explain most regressions, in the order a reader checks them (the rest follow).
ENV_RANKS = (("driver", r"(^|\.)driver_version$"),
             ("CUDA", r"(^|\.)(cuda_build|cuda_runtime|cuda_driver_version|cudart_library|cuda_plugin)$"
                      r"|^cuda_runtime_wheel$"),
             ("cuDNN", r"(^|\.)(cudnn_version|cudnn_library|cudnn_build|cudnn_runtime)$|^cudnn_wheel$"),
             ("framework", r"^(torch|tensorflow|keras|jax|jaxlib)$|(^|\.)([a-z_]+_)?version$"))


def shown(value: str) -> str:
    """A field for display: values as they are, unavailable ones shortened to their reason in brackets."""
    return f"({value})" if value.startswith(UNAVAILABLE) else value


@dataclass(frozen=True)
class Samples:
    """One side's samples of one run, in ms per step: what a case's page plots."""

    side: str  # "cudnn" or "generic"
    run: str  # "now" or "baseline"
    timer: str  # "wall" or "device" (CUPTI busy time)
    ms: tuple[float, ...]


@dataclass(frozen=True)
class CaseDetail:
    """Everything a case's own panel shows beyond its table row, read once from its records (now and baseline)."""

    facets: Mapping[str, str]  # backend, cell, mode, precision: what the page filters on
    samples: tuple[Samples, ...]
    device_speedup: float | None
    proofs: tuple[PathProof, ...]
    parity: tuple[ParityRow, ...]
    kernels: Mapping[str, tuple[KernelStat, ...]]  # "cudnn", "generic", "cudnn baseline": each side's kernel table
    kernel_moves: tuple[str, ...]  # the cuDNN side's kernels that moved against the baseline's record
    telemetry: tuple[tuple[str, str, str], ...]  # (field, timed window, energy window), display values
    remarks: tuple[str, ...]  # the window's warnings, the case's notes, why device time is off, its cold costs
    env_diff: tuple[str, ...]  # the environment diff against the file that holds this case's baseline record
    baseline_file: str  # that file's name ("" without one)


@dataclass(frozen=True)
class CaseRow:
    """One case: its display cells in column order, what the plot draws, its verdict and whether its gates hold."""

    id: str
    paired: bool  # a cuDNN side ran; else a generic-only row checked against the float64 reference
    cells: Mapping[str, str]
    speedup: Interval | None
    baseline_speedup: Interval | None
    floor: float
    verdict: CaseVerdict | None
    gates_ok: bool
    detail: CaseDetail | None = None  # the case's panel (the HTML page); None where a test builds bare rows
    precision: str = ""  # how its kernels break the precision rule ("fp16 ran no tensor-op kernel"), empty if not


@dataclass(frozen=True)
class VerdictRow:
    """One case judged against its history: the table's cells and the kernels that moved."""

    verdict: CaseVerdict
    cells: tuple[str, ...]
    kernels: tuple[str, ...]
    comparisons: tuple[tuple[str, ...], ...] = ()  # each rule's comparison (then each kernel's), COMPARISON_HEADER


@dataclass(frozen=True)
class PhaseTotals:
    """Seconds per case phase (build, proof, parity, wall, ...) summed over some cases: all, or one backend's."""

    name: str  # the backend, or "all"
    cases: int
    phases: tuple[tuple[str, float], ...]  # in the order the phases first appear

    @property
    def total_s(self) -> float:
        """Every phase's seconds together."""
        return sum(seconds for _, seconds in self.phases)

    def as_dict(self) -> dict[str, Any]:
        """JSON: the case count, the total and each phase's seconds."""
        return {"cases": self.cases, "total_s": round(self.total_s, 3),
                "phases_s": {phase: round(seconds, 3) for phase, seconds in self.phases}}


SAID_EXIT_S = 0.5  # the subprocesses' exit in one process: the time line names it from this many seconds


@dataclass(frozen=True)
class Ending:
    """What the run's seconds after its last test held: its backend subprocesses' exit and, under pytest-xdist, the
    wait for the last worker to hand its results over (a worker's end is on the run's path, its exit too)."""

    close_s: float | None = None  # the subprocesses' exit: this process's, or the last worker's to hand over
    worker: str = ""  # the last worker to hand its results over ("" in one process)
    handover_s: float | None = None  # from the last test's end to that worker's results reaching this process

    def as_dict(self) -> dict[str, Any]:
        """JSON: the seconds, rounded to the millisecond, and the worker."""
        return {"close_s": _rounded(self.close_s), "worker": self.worker, "handover_s": _rounded(self.handover_s)}

    def text(self) -> str:
        """e.g. " (7 s of it until gw1 handed over its results, 6.5 s of those its subprocesses' exit)"."""
        close = None if self.close_s is None else f"{self.close_s:.1f} s"
        if self.worker and self.handover_s is not None:
            exits = f", {close} of those its subprocesses' exit" if close else ""
            return f" ({self.handover_s:.0f} s of it until {self.worker} handed over its results{exits})"
        # In one process an exit too short to matter is not worth the words (rnnperf.json keeps it).
        return f" ({close} of it the subprocesses' exit)" if self.close_s and self.close_s >= SAID_EXIT_S else ""


@dataclass(frozen=True)
class TimeSpent:
    """Where the run's time went: its cases' phases, all together and per backend, and the run's wall time."""

    cases: PhaseTotals
    backends: tuple[PhaseTotals, ...]
    wall_s: float | None = None  # from the session's start to its report (None: not known to the caller)
    collection_s: float | None = None  # from the session's start to the end of collection (imports mostly)
    workers: int = 1  # pytest-xdist workers whose cases the phases add up (their seconds overlap in the run's)
    # From the session's start to the first test's, and from the last test's end to the report: what a run spends
    # outside its tests (collection, starting workers; comparing with the history), one process or many.
    before_tests_s: float | None = None
    after_tests_s: float | None = None
    ending: Ending | None = None  # what the seconds after the last test held, where measured

    def as_dict(self) -> dict[str, Any]:
        """JSON: the wall and collection times, the cases' totals and each backend's (phases keyed as ``cost_s``)."""
        return {"wall_s": _rounded(self.wall_s), "collection_s": _rounded(self.collection_s),
                "before_tests_s": _rounded(self.before_tests_s), "after_tests_s": _rounded(self.after_tests_s),
                "ending": None if self.ending is None else self.ending.as_dict(),
                "cases": self.cases.as_dict(), "backends": {b.name: b.as_dict() for b in self.backends}}


def _rounded(seconds: float | None) -> float | None:
    """Seconds to the millisecond, None kept."""
    return None if seconds is None else round(seconds, 3)


def _phase_totals(name: str, records: Sequence[CaseRecord]) -> PhaseTotals:
    """``records``' seconds per phase, summed."""
    totals: dict[str, float] = {}
    for r in records:
        for phase, seconds in r.cost_s.items():
            totals[phase] = totals.get(phase, 0.0) + seconds
    return PhaseTotals(name, len(records), tuple(totals.items()))


def time_spent(results: Sequence[CaseRecord], wall_s: float | None = None,
               collection_s: float | None = None, workers: int = 1,
               outside_s: tuple[float | None, float | None] = (None, None),
               ending: Ending | None = None) -> TimeSpent | None:
    """Where the time went, per backend in the order each first ran; None when no case recorded a phase.

    ``outside_s``: seconds before the first test and after the last (None where not known); ``ending``: what the
    seconds after the last held."""
    if not any(r.cost_s for r in results):
        return None
    by_backend: dict[str, list[CaseRecord]] = {}
    for r in results:
        by_backend.setdefault(r.case.framework, []).append(r)
    return TimeSpent(_phase_totals("all", results),
                     tuple(_phase_totals(name, records) for name, records in by_backend.items()), wall_s, collection_s,
                     workers, *outside_s, ending)


@dataclass(frozen=True)
class Rows:
    """A run as rows, built once: cases, cross-framework checks, claims, verdicts and the environment diff."""

    gpu: str
    cases: tuple[CaseRow, ...]
    cross: tuple[tuple[str, ...], ...]
    cross_ok: bool
    claims: tuple[ClaimRow, ...]
    verdicts: tuple[VerdictRow, ...]
    env_diff: tuple[str, ...]
    unjudged: str | None
    # The run's fingerprint (its short hash, then every field) and the baseline it was judged against, for the page.
    fingerprint: str = ""
    environment: tuple[tuple[str, str], ...] = ()
    baseline: str = ""
    skipped: tuple[tuple[str, int], ...] = ()  # each reason cases were skipped for, and how many
    time: TimeSpent | None = None  # where the time went: each phase, per backend, and the run's wall time
    no_gpu: int = 0  # cuDNN cases (or sides of a model's check) not run for want of a GPU
    answer: tuple[AnswerRow, ...] = ()  # the failed and regressed cases, what the summary leads with
    # Cases of tests that failed as they are marked to (xfail: known framework issues): told apart, never the status.
    expected: tuple[str, ...] = ()
    failed: int = 0  # tests that failed: a failure without a failing case (an error, a lost worker's) is no pass
    incomplete: str = ""  # why the run's results are partial (silent pytest-xdist workers, an interruption)

    @property
    def paired(self) -> tuple[CaseRow, ...]:
        """Cases with both a cuDNN and a generic side."""
        return tuple(r for r in self.cases if r.paired)

    @property
    def alone(self) -> tuple[CaseRow, ...]:
        """Generic-only cases (checked against the float64 reference)."""
        return tuple(r for r in self.cases if not r.paired)

    @property
    def gates_failed(self) -> bool:
        """A case, a cross-framework check or a claims row broke what it promises."""
        return (not all(r.gates_ok or r.id in self.expected for r in self.cases) or not self.cross_ok
                or any(c.failure for c in self.claims))  # a claims row that broke a promise of the product

    @property
    def status(self) -> str:
        """"regressions found", "gate failures", "N test(s) failed", "N cuDNN cases not run: no GPU", why the run is
        incomplete, or "all checks passed"."""
        return status_of([self])

    def as_dict(self) -> dict[str, Any]:
        """The rows as JSON: each table's header and cells, as the terminal and Markdown show them."""
        return {
            "status": self.status,
            "no_gpu": self.no_gpu,
            "cases": [dict(r.cells, verdict="-" if r.verdict is None else str(r.verdict.outcome)) for r in self.cases],
            "cross": [dict(zip(CROSS_HEADER, row)) for row in self.cross],
            "verdicts": [dict(zip(VERDICT_HEADER, v.cells), kernels=list(v.kernels)) for v in self.verdicts],
            "environment_changes": list(self.env_diff),
            "time": None if self.time is None else self.time.as_dict(),
        }


@dataclass(frozen=True)
class AnswerRow:
    """A failed or regressed case as the summary leads with it: what moved, by how much, against which threshold."""

    case: str
    cells: tuple[str, ...]  # ANSWER_HEADER
    kernels: tuple[str, ...] = ()  # the cuDNN side's kernels that moved


def status_of(parts: Sequence[Rows], failed: int = 0, incomplete: str = "") -> str:
    """The worst status of one run's rows (or of each GPU model's rows of a pytest-xdist run), with ``failed`` and
    ``incomplete`` the run's own where its parts cannot know them."""
    if any(v.verdict.fails and v.verdict.case_id not in rows.expected for rows in parts for v in rows.verdicts):
        return STATUSES[0]
    if any(rows.gates_failed for rows in parts):
        return STATUSES[1]
    if failed := failed + sum(rows.failed for rows in parts):  # e.g. an interrupted pytest-xdist run's, not merged
        return f"{failed} test(s) failed"
    # Skipped cuDNN cases are no pass: a CPU runner checked the generic paths only; nor is a run cut short.
    partial = incomplete or next((rows.incomplete for rows in parts if rows.incomplete), "")
    return not_run(sum(rows.no_gpu for rows in parts)) or partial or STATUSES[2]


def run_status(parts: Sequence[Rows], failed: int, incomplete: str | None) -> str:
    """The status of a run reported in parts (one per GPU model), with the failures and the incompleteness only the
    run knows of: its views never hear a failed report, nor of a worker that handed over nothing."""
    status = status_of(parts, failed, incomplete or "")
    return status + (f"; {incomplete}" if incomplete and status.endswith(" test(s) failed") else "")


def not_run(count: int) -> str:
    """e.g. "12 cuDNN cases not run: no GPU" (empty for none)."""
    return f"{count} cuDNN case{'s' if count != 1 else ''} not run: no GPU" if count else ""


def no_gpu_count(run: RunView) -> int:
    """The cuDNN cases skipped for want of a GPU, and the models checked without their cuDNN side for that reason."""
    skipped = sum(reason.startswith(NEEDS_GPU) for _, reason in run.measured.skipped)
    return skipped + sum(any(n.startswith(f"cuDNN side not run: {NEEDS_GPU}") for n in r.notes) for r in run.measured.results)


def build_rows(run: RunView, wall_s: float | None = None, collection_s: float | None = None,
               outside_s: tuple[float | None, float | None] = (None, None), ending: Ending | None = None) -> Rows:
    """Walk the run once: every renderer draws these rows instead of reading the results itself.

    ``wall_s``: the run's wall time so far, for comparing its cases' phases with the whole run; ``collection_s``:
    how much of it collection took; ``outside_s``: how much came before the first test and after the last;
    ``ending``: what the time after the last held.
    """
    cases = tuple(case_row(r, run) for r in run.measured.results)
    verdicts = tuple(verdict_row(v, run) for v in run.measured.verdicts.values())
    expected = tuple(dict.fromkeys(run.measured.expected))
    return Rows(
        gpu=run.gpu.name if run.gpu.available else "no GPU",
        cases=cases,
        cross=tuple(tuple(row) for row in cross_rows(run.measured.cross)),
        cross_ok=all(c.paths_ok and c.parity.ok for c in run.measured.cross),
        claims=tuple(run.measured.claims),
        verdicts=verdicts,
        env_diff=tuple(env_diff_lines(run)),
        unjudged=unjudged_line(run),
        fingerprint=run.fingerprint(),
        environment=tuple(sorted(run.environment().items())),
        baseline=run.baseline_status(),
        skipped=tuple(_count(reason for _, reason in run.measured.skipped)),
        time=time_spent(run.measured.results, wall_s, collection_s, max(1, len(run.workers())), outside_s,
                        ending),
        no_gpu=no_gpu_count(run),
        answer=answer_rows(cases, verdicts, set(expected)),
        expected=expected,
        failed=run.measured.failed,
        incomplete=run.incomplete() or "",
    )


def answer_rows(cases: Sequence[CaseRow], verdicts: Sequence[VerdictRow],
                expected: Collection[str] = ()) -> tuple[AnswerRow, ...]:
    """The regressed cases (each comparison that regressed, and its kernels), then the cases that broke a gate;
    not the ``expected`` ones (their tests failed as marked: known issues, listed apart)."""

    out = []
    for row in verdicts:
        v = row.verdict
        if v.case_id in expected or not (v.fails or v.outcome in HELD_BACK):
            continue
        regressed = [c for c in (v.time, v.host, v.work, *v.cold) if c is not None and c.verdict is Verdict.REGRESSED]
        # The summed kernel time only where the time itself held: else it repeats the time's regression.
        moved = [c for c in regressed if c is not v.work or len(regressed) == 1] or [deciding(v)]
        out += [AnswerRow(v.case_id, (v.case_id, metric_cell(c.metric), change_text(c), f"{c.min_effect:.1%}",
                                      str(v.outcome)),
                          row.kernels if k == 0 else ()) for k, c in enumerate(moved)]
    for case in cases:
        if case.id in expected:
            continue
        s = case.speedup
        if case.cells.get("path") == "WRONG":
            out.append(AnswerRow(case.id, (case.id, "path", "-", "-", "wrong path ran")))
        if case.cells.get("parity err/tol", "").startswith("FAIL"):
            out.append(AnswerRow(case.id, (case.id, "parity err/tol", case.cells["parity err/tol"][5:], "-", "failed")))
        if case.precision:
            out.append(AnswerRow(case.id, (case.id, "precision", "-", "-", case.precision)))
        if s is not None and s.estimate < case.floor:
            out.append(AnswerRow(case.id, (case.id, METRICS[SPEEDUP].name,
                                           METRICS[WALL_SPEEDUP].interval(s.estimate, s.low, s.high),
                                           f"floor {show(FLOOR, case.floor, '.1f')}", "below its floor")))
    return tuple(out)


def _count(items: Iterable[str]) -> list[tuple[str, int]]:
    """Each distinct item and how often it occurs, in first-seen order."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return list(counts.items())


def _wall_dev(wall: Any, dev: Any) -> str:
    """"1.558/0.268": wall and device ms per step of one side ('-' for what was not measured)."""
    if wall is None:
        return "-"
    return f"{show(WALL, wall.median)}/{show(BUSY, None if dev is None else dev.busy.median)}"


def result_cells(r: CaseRecord) -> dict[str, str]:
    """Display cells of one result, in column order."""
    worst = r.parity.worst()
    parity = "ok" if r.parity.ok else "FAIL"
    if worst is not None:
        parity += f" {show(PARITY, worst.error)}/{show(PARITY, worst.tolerance, '.0e')}"
    # TFLOP/s of the cuDNN side only: a generic-only row is a correctness check at a tiny size.
    tf = r.tflops("cudnn") if r.cudnn is not None else None
    peak = r.peak_tflops
    tflops = show(TFLOPS, tf) + (f" ({tf / peak:.1%})" if tf is not None and peak else "")
    s = r.speedup
    cells = (
        r.id, _wall_dev(r.cudnn, r.cudnn_device), _wall_dev(r.generic, r.generic_device),
        "-" if s is None else METRICS[WALL_SPEEDUP].interval(s.estimate, s.low, s.high),
        show(DEVICE_SPEEDUP, r.device_speedup), "-" if s is None else show(FLOOR, r.case.floor, ".1f"), tflops,
        show(ENERGY_PER_STEP, r.energy_per_step_j.get("cudnn" if r.cudnn is not None else "generic")), parity,
        "ok" if r.paths_ok else "WRONG",
    )
    return dict(zip(CASE_COLUMNS, cells))


def _stored_speedup(r: CaseRecord, run: RunView) -> Interval | None:
    """The speedup of the stored record of ``r``'s case, with its interval (None without one)."""

    rec = run.stored.stored_record(r.id) if run.stored.baseline is not None and r.speedup is not None else None
    if rec is None or rec.cudnn is None:
        return None
    return speedup_interval(rec.cudnn.samples, rec.generic.samples)


def below_floor(r: CaseRecord) -> bool:
    """The case's cuDNN speedup is under the floor it promises."""
    return not FLOOR_GATE.holds(r)


def case_row(r: CaseRecord, run: RunView) -> CaseRow:
    """The row of one measured case."""
    return CaseRow(id=r.id, paired=r.cudnn is not None, cells=result_cells(r), speedup=r.speedup,
                   baseline_speedup=_stored_speedup(r, run), floor=r.case.floor, verdict=run.measured.verdicts.get(r.id),
                   gates_ok=gates_hold(r), detail=case_detail(r, run), precision=precision_finding(r).verdict)


def facets(r: CaseRecord) -> dict[str, str]:
    """What a case is, as the page filters it: backend, cell, mode and precision (a team's model: cell "model")."""
    return {"backend": r.case.framework, "cell": getattr(r.case, "cell", "model"), "mode": r.case.mode,
            "precision": r.case.precision}


def _samples(r: CaseRecord, run: str) -> list[Samples]:
    """Both sides' wall and device samples of one record, in ms per step."""
    out = []
    for side in ("cudnn", "generic"):
        wall, dev = getattr(r, side), r.device_timing(side)
        if wall is not None:
            out.append(Samples(side, run, "wall", _shown(WALL, wall.samples)))
        if dev is not None:
            out.append(Samples(side, run, "device", _shown(BUSY, dev.busy.samples)))
    return out


def _shown(tag: str, values: Sequence[float]) -> tuple[float, ...]:
    """Values of a metric in the unit its hint shows them in (ms for times per step), for a plot's axis."""
    scale = METRICS[tag].display.scale
    return tuple(v * scale for v in values)


def _telemetry_value(value: Any, skip_zero: bool = False) -> str:
    """One telemetry reading for display: numbers rounded, lists joined, nested readings as key=value (without
    their zeros where ``skip_zero``: seconds throttled, by reason)."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        shown_items = [f"{k}={_telemetry_value(v)}" for k, v in value.items() if not (skip_zero and v == 0)]
        return ", ".join(shown_items) or "none"
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) or "none"
    return shown(str(value))


def telemetry_rows(timed: Mapping[str, Any] | None, energy: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    """NVML's readings of the timed window (both sides interleaved) and the energy window, field by field."""
    fields = list(dict.fromkeys([*(timed or {}), *(energy or {})]))
    return [(name, _telemetry_value((timed or {}).get(name), name == "throttle_s") if timed else "-",
             _telemetry_value((energy or {}).get(name), name == "throttle_s") if energy else "-") for name in fields]


def case_detail(r: CaseRecord, run: RunView) -> CaseDetail:
    """A case's panel: samples of both sides now and in the baseline, proofs, parity, kernels, telemetry, diff."""
    base = run.stored.stored_record(r.id) if run.stored.baseline is not None else None
    stored = run.stored.stored_run(r.id) if base is not None else None
    kernels = {side: dev.kernels for side in ("cudnn", "generic") if (dev := r.device_timing(side)) is not None}
    if base is not None and base.cudnn_device is not None:
        kernels["cudnn baseline"] = base.cudnn_device.kernels
    moves = record_kernel_lines(base, r, rows=8) if base is not None else []
    remarks = [*r.warnings, *([r.device_note] if r.device_note else []), *([r.cold.describe()] if r.cold else [])]
    return CaseDetail(
        facets=facets(r), samples=tuple(_samples(r, "now") + (_samples(base, "baseline") if base is not None else [])),
        device_speedup=r.device_speedup, proofs=tuple(r.proofs), parity=tuple(r.parity.rows), kernels=kernels,
        kernel_moves=tuple(moves), telemetry=tuple(telemetry_rows(r.telemetry, r.side_telemetry)),
        remarks=tuple(dict.fromkeys(remarks)), env_diff=tuple(env_diff_lines(run, r.id)) if base is not None else (),
        baseline_file=stored.path.name if stored is not None else "",
    )


def cross_rows(cross: Sequence[CrossRecord]) -> list[list[str]]:
    """Display cells per cross-framework check (shared by the terminal table and Markdown)."""
    rows = []
    for c in cross:
        worst = c.parity.worst()
        parity = ("ok" if c.parity.ok else "FAIL") + ("" if worst is None else
                                                      f" {worst.error:.1e}/{worst.tolerance:.0e} ({worst.quantity})")
        rows.append([c.id, " vs ".join(c.sides), parity, "ok" if c.paths_ok else "WRONG"])
    return rows


def deciding(v: CaseVerdict) -> Comparison:
    """The comparison behind a verdict: the cuDNN time, else the kernel that regressed, else busy and kernel time
    together (``balanced_time``), else the steady kernels (``steady_time``), else the kernels' overlap, else the host
    overhead, else the step metric left ambiguous."""

    if v.time.verdict is not Verdict.REGRESSED and v.regressed_kernels:
        return v.regressed_kernels[0]
    if v.time.verdict is not Verdict.REGRESSED and v.balanced_regressed and v.balanced is not None:
        return v.balanced
    if v.time.verdict is not Verdict.REGRESSED and v.steady_regressed and v.steady is not None:
        return v.steady
    if v.time.verdict is not Verdict.REGRESSED and v.overlap_regressed and v.overlap is not None:
        return v.overlap
    if v.time.verdict is not Verdict.REGRESSED and v.host_regressed and v.host is not None:
        return v.host
    if v.time.verdict is not Verdict.AMBIGUOUS and v.verdict is Verdict.AMBIGUOUS:  # ambiguous on another step metric
        return next(c for c in (v.balanced, v.steady) if c is not None and c.verdict is Verdict.AMBIGUOUS)
    return v.time


def metric_cell(metric: str, limit: int = 40) -> str:
    """A metric as the answer table names it: a kernel by its bare function name ("kernel spin_kernel"), cut at
    ``limit``, so a 100-character kernel name does not wrap the table; the line under it names each in full."""
    if not metric.startswith(KERNEL):
        return metric
    name = metric[len(KERNEL):]
    for _ in range(8):  # nested template and argument lists go from the inside out
        name, n = re.subn(r"\([^()]*\)|<[^<>]*>", "", name)
        if not n:
            break
    name = re.split(r"[<(]", name, maxsplit=1)[0]  # a name cut at 100 characters leaves a list open
    words = name.rstrip(".").split("::")[-1].split()
    bare = words[-1] if words else metric[len(KERNEL):]
    return f"kernel {bare if len(bare) <= limit else bare[:limit - 1] + '…'}"


def change_text(c: Comparison) -> str:
    """A comparison's change with its interval, e.g. "+5.2% [+3.9%, +6.6%]"."""
    return f"{c.ratio.estimate - 1:+.1%} [{c.ratio.low - 1:+.1%}, {c.ratio.high - 1:+.1%}]"


def verdict_row(v: CaseVerdict, run: RunView) -> VerdictRow:
    """The verdict table's row of one case, and (when it moved) its kernels that moved."""
    s, h, time = v.speedup, v.host, named(v.time.metric)
    cells = (
        v.case_id, v.basis + (f" x{v.processes}" if v.processes else ""),
        time.show(v.time.baseline_median, fine=True), time.show(v.time.current_median, fine=True), change_text(v.time),
        "-" if h is None else f"{show(HOST, h.baseline_median)} -> {show(HOST, h.current_median)} "
                              f"({h.ratio.estimate - 1:+.0%}, {h.verdict})",
        "-" if s is None else f"{show(SPEEDUP, s.baseline_median)} -> {show(SPEEDUP, s.current_median)} ({s.verdict})",
        str(v.outcome) + (" (re-measured)" if v.remeasured else "")
        + (f" [window: {v.flagged}]" if v.flagged else "") + (f" [{v.host_bound}]" if v.host_bound else ""),
    )
    return VerdictRow(verdict=v, cells=cells, kernels=shown_kernels(v, run),
                      comparisons=tuple(comparison_cells(c) for c in (*v.comparisons.values(), *v.kernels)))


def shown_kernels(v: CaseVerdict, run: RunView) -> tuple[str, ...]:
    """The kernel lines of a case's verdict: all that moved where it regressed, only the faster ones where it improved.

    A quiet night reports nothing: an improved or unchanged case's kernels that grew without reaching its step
    (ambiguous) are the bimodal GEMMs of its history, not news, and are left to ``sensitivity --case``.
    """
    if not v.moved:
        return ()
    if v.verdict is Verdict.REGRESSED or v.host_regressed or v.cold_regressed:
        return tuple(k.explain() for k in v.kernels) or tuple(kernel_lines(v, run))
    return tuple(k.explain() for k in v.kernels if k.verdict is Verdict.IMPROVED)


def comparison_cells(c: Comparison) -> tuple[str, ...]:
    """One comparison as display cells (times in ms, speedups as x), in COMPARISON_HEADER's order."""
    m = named(c.metric)
    p = "n/a" if c.p_value is None else f"{c.p_value:.1e}"
    r = c.ratio
    return (m.label if m.tag == SPEEDUP else c.metric, m.show(c.baseline_median, unit=True, fine=True),
            m.show(c.current_median, unit=True, fine=True),
            f"{r.estimate:.3f} [{r.low:.3f}, {r.high:.3f}]", p, f"{c.min_effect:.1%}", str(c.verdict))


def unjudged_line(run: RunView) -> str | None:
    """The cuDNN cases the baseline cannot judge, in one line (None when it judges them all)."""
    if not run.measured.unjudged or run.stored.baseline is None:
        return None
    # A baseline recorded with -k (one framework, say) silently judging nothing would look like a pass.
    listed = ", ".join(run.measured.unjudged[:3]) + (", ..." if len(run.measured.unjudged) > 3 else "")
    files = run.stored.baseline.path.name + (f" or the {len(run.stored.older)} file(s) before it" if run.stored.older else "")
    return (f"not judged: {len(run.measured.unjudged)} cuDNN case(s) have no record in {files} "
            f"(new cases, or recorded without them; --rnnperf-update-baseline adds a file with them): {listed}")


def env_diff_lines(run: RunView, case_id: str | None = None) -> list[str]:
    """What changed between the environment of the baseline (the file holding ``case_id``) and now."""
    stored = run.stored.baseline if case_id is None else run.stored.stored_run(case_id)
    if stored is None:
        return []
    # A framework whose first case has not run yet has no runtime fields; diff_environments leaves it out.
    now = run.environment()
    old = dict(stored.environment)
    card = now.get(CARD, "")
    # A file of several cards (pytest-xdist workers) names the first in its environment: the case's own is compared.
    if case_id is not None and (own := stored.card_of(case_id)) is not None:
        old[CARD] = own
    elif case_id is not None and len(stored.all_cards) > 1:  # an older such file: which card ran the case is unsaid
        old[CARD] = card if stored.ran_on(card) else " or ".join(c[:12] for c in stored.all_cards)
    changes = environment_changes(old, now, stored.path.name if stored.format < FORMAT_VERSION else "")
    if card and not any(r.ran_on(card) for r in run.stored.runs):
        # A card's own speed shifts a case or two: say it is new here.
        changes = [f"{c} (a card none of the {len(run.stored.runs)} stored runs ran on)" if c.startswith(f"{CARD}:")
                   else c for c in changes]
    return changes


UNRECORDED_SHOWN = 3  # of the fields an older stored run did not record, those named on the line


def environment_changes(old: Mapping[str, str], new: Mapping[str, str], older: str = "") -> list[str]:
    """What changed from ``old`` to ``new``, driver, CUDA, cuDNN and framework versions first (ENV_RANKS).

    ``older``: the name of ``old``'s file where it was written in an older format: the fields its recorder did not
    write yet are named last, together, not as changes of the stack (``environment.unrecorded``).
    """


    def rank(change: tuple[str, str, str]) -> int:
        """The change's place in ENV_RANKS (after them all where it is none of them)."""
        return next((i for i, (_, pattern) in enumerate(ENV_RANKS) if re.search(pattern, change[0])), len(ENV_RANKS))

    diff = diff_environments(dict(old), dict(new))
    diff, missing = unrecorded(diff, old) if older else (diff, [])
    lines = format_diff(sorted(diff, key=rank))  # stable: fingerprint order kept
    if missing:
        more = f" and {len(missing) - UNRECORDED_SHOWN} more" if len(missing) > UNRECORDED_SHOWN else ""
        lines.append(f"not recorded by {older}, an older format: {', '.join(missing[:UNRECORDED_SHOWN])}{more}")
    return lines


def kernel_lines(verdict: CaseVerdict, run: RunView, rows: int = 4) -> list[str]:
    """The kernels of the cuDNN side that grew, shrank, appeared or vanished since the baseline."""
    base = run.stored.stored_record(verdict.case_id)
    now = next((r for r in reversed(run.measured.results) if r.id == verdict.case_id), None)
    return record_kernel_lines(base, now, rows)


def record_kernel_lines(base: CaseRecord | None, now: CaseRecord | None, rows: int = 4) -> list[str]:
    """What moved between two records' cuDNN kernel tables (empty where either has no device time)."""

    if base is None or now is None or base.cudnn_device is None or now.cudnn_device is None:
        return []
    changes = kernel_changes(base.cudnn_device.kernels, now.cudnn_device.kernels)
    return [c.describe() for c in changes[:rows]] or ["no kernel moved by more than 5% of its time"]


def finest_threshold(v: CaseVerdict) -> tuple[float, bool] | None:
    """The smallest change a case judged across processes on device time fails for 19 times in 20 (busy, balanced or
    steady time, whichever tells the smallest: ``across.reach``), and whether its steady kernels tell it; None for any
    other case."""
    if not v.processes or v.basis != "device":
        return None
    judged = [(reach(c), c is v.steady) for c in (v.time, v.balanced, v.steady) if c is not None]
    # Rounded as printed, so a steady line whose reach is the floor itself ties with it.
    return min(judged, key=lambda found: round(found[0], 4))  # the first of equals: steady only where it tells less


def resolution_line(verdicts: Iterable[CaseVerdict]) -> str:
    """e.g. "sensitivity: 30 of 42 case(s) judged across processes catch 3.0% (30 of them on their steady kernels);
    the rest 3.1-5.3% ...", empty where no case was judged across processes on device time."""
    found = [f for v in verdicts if (f := finest_threshold(v)) is not None]
    if not found:
        return ""
    finest = min(t for t, _ in found)
    seen = [steady for t, steady in found if t <= finest + 1e-9]
    rest = sorted(t for t, _ in found if t > finest + 1e-9)
    line = (f"sensitivity: {len(seen)} of {len(found)} case(s) judged across processes catch {finest:.1%} 19 times "
            f"in 20 ({sum(seen)} of them on their steady kernels)")
    if not rest:
        return line
    # A reach just past the finest one (3.04% after 3.0%) gets a second decimal, so the rest never reads as the same.
    low = f"{rest[0]:.2%}" if f"{rest[0]:.1%}" == f"{finest:.1%}" else f"{rest[0]:.1%}"
    span = low if f"{rest[0]:.1%}" == f"{rest[-1]:.1%}" else f"{low}-{rest[-1]:.1%}"
    return line + f"; the rest {span} (python -m pytest_rnnperf sensitivity says why)"


def verdict_counts(verdicts: Any) -> str:
    """e.g. "1 ambiguous, 27 unchanged": outcomes counted, in alphabetical order."""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[str(v.outcome)] = counts.get(str(v.outcome), 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
