"""History of stored runs: each case's series over many runs of one GPU model, and where it changed.

``python -m pytest_rnnperf history PATH [PATH...]`` reads stored runs: files, or folders searched recursively
for ``*.json`` (``baselines/``, a folder of nightly ``--benchmark-json`` artifacts, a fleet's collected runs).
It orders them by their pytest-benchmark ``datetime`` (by file name where a run has none) and splits them by
GPU model: runs of different models are never one series. Per model and case it takes one value per run
(``--metric``):

- ``device`` (default): the cuDNN side's device time per step (CUPTI busy time, median of the rounds);
- ``wall``: the cuDNN side's wall time per step (median of the rounds);
- ``speedup``: generic over cuDNN wall time per step (the run's stored estimate).

A run without device time for a case is left out of that case's device series (``--fallback skip``, the
default), or the case's whole series is its wall time (``--fallback wall``): a series never mixes the two,
and no value is made up. The same run stored twice (a recorded baseline and its ``--benchmark-json``) counts
once; in a folder, a JSON file that is not a pytest-rnnperf run (``noise.json``) is skipped with a note.

Change points: ruptures' PELT on the log of the series (a shift is a ratio, whatever the case's scale) with
the least-squares (L2) cost, penalty ``PENALTY * sigma**2 * ln(n)`` for n runs, sigma the series' own noise
(``noise_sigma``). Consecutive change points in one direction are steps, or one drift when a single
flat-ramp-flat line explains their stretch at least as well as the staircase does (each change point and
each of the ramp's two kinks paying one penalty). Shifts smaller than ``--min-shift`` (1%) are not reported.
The smallest step found mid-series is about ``sigma * sqrt(4 * PENALTY * ln(n) / n)``: 1.65 sigma for 30
runs (0.8% at 0.5% noise), about twice that within the last two runs.

Exit status: 0 when no case has a change point toward slower; 1 when one does (a longer device or wall time,
a lower speedup), however long ago and even if it came back later; 2 on unusable input (a file, an option);
3 on an internal error. Pure: no pytest, no framework; ruptures, rich and matplotlib are imported where used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from pytest_rnnperf.judge.changepoints import (  # noqa: F401  (re-exported: history's detection lives in judge/)
    DEFAULT_MIN_SHIFT, MIN_RUNS, MIN_SIZE, PENALTY, SIGMA_FLOOR, ChangePoint, Detection, detect, noise_sigma,
)
from pytest_rnnperf.model.records import BaselineError, CaseRecord, StoredRun, load_run
from pytest_rnnperf.report.text import text_table
from pytest_rnnperf.store.baselines import output_problem, write_json

FALLBACKS = ("skip", "wall")


@dataclass(frozen=True)
class Metric:
    """What a series holds: its name, how it reads, its unit and scale, and which direction is worse."""

    name: str
    label: str
    unit: str  # as printed
    scale: float  # stored value (seconds, or a ratio) -> printed unit
    higher_is_worse: bool


METRICS: dict[str, Metric] = {
    "device": Metric("device", "cuDNN device time per step", "ms", 1e3, True),
    "wall": Metric("wall", "cuDNN wall time per step", "ms", 1e3, True),
    "speedup": Metric("speedup", "speedup (generic / cuDNN wall time)", "x", 1.0, False),
}


def metric_value(record: CaseRecord, metric: str) -> float | None:
    """One run's value of a case (seconds, or a ratio); None where that run did not measure it."""
    if record.cudnn is None:
        return None
    if metric == "device":
        return None if record.cudnn_device is None else record.cudnn_device.busy.median
    if metric == "wall":
        return record.cudnn.median
    if metric == "speedup":
        return record.speedup.estimate if record.speedup is not None else record.generic.median / record.cudnn.median
    raise ValueError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")


# ------------------------------------------------------------------------------------------------ loading


@dataclass(frozen=True)
class Loaded:
    """The stored runs found, and one-line notes on what was skipped or counted once."""

    runs: tuple[StoredRun, ...]
    notes: tuple[str, ...]


def _not_a_run(path: Path) -> str | None:
    """Why a JSON file found in a folder is clearly no pytest-rnnperf run, or None when it may be a broken one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None  # a truncated nightly run reads the same as any broken file: an error, never skipped
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        return "not a pytest-benchmark run"
    info = data.get("machine_info")
    if not isinstance(info, dict) or not isinstance(info.get("rnnperf"), dict):
        return "a pytest-benchmark run not written by pytest-rnnperf"
    return None


def _identity(run: StoredRun) -> tuple[Any, ...] | None:
    """What makes two files the same run: its GPU model and every raw sample (None for a run without records)."""
    if not run.records:
        return None
    return (run.gpu_slug, tuple(sorted((case_id, r.generic.samples, r.cudnn.samples if r.cudnn else ())
                                       for case_id, r in run.records.items())))


def load_runs(paths: Sequence[Path]) -> Loaded:
    """Every stored run under ``paths`` (files, or folders searched for *.json); BaselineError for a bad one."""
    runs: list[StoredRun] = []
    notes: list[str] = []
    seen: set[Path] = set()
    for given in map(Path, paths):
        if given.is_dir():
            files = sorted(p for p in given.rglob("*.json") if p.is_file())
            if not files:
                notes.append(f"{given}: no *.json file")
        elif given.is_file():
            files = [given]
        else:
            raise BaselineError(f"{given}: no such file or folder")
        for path in files:
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                runs.append(load_run(path))
            except BaselineError:
                reason = _not_a_run(path) if given.is_dir() else None
                if reason is None:  # named on the command line, or a pytest-rnnperf run that cannot be read
                    raise
                notes.append(f"skipped {path}: {reason}")
    unique: list[StoredRun] = []
    first: dict[tuple[Any, ...], StoredRun] = {}
    for run in runs:
        key = _identity(run)
        if key is not None and key in first:
            notes.append(f"{run.path} holds the same run as {first[key].path}: counted once")
            continue
        if key is not None:
            first[key] = run
        unique.append(run)
    return Loaded(tuple(unique), tuple(notes))


def _when(run: StoredRun) -> datetime | None:
    """When the run started (pytest-benchmark's ``datetime``, UTC where it names no zone), None if unreadable."""
    text = run.datetime.strip()
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def order_runs(runs: Sequence[StoredRun]) -> tuple[list[StoredRun], str | None]:
    """Runs by start time; by file name (and a note saying so) when any of them has no readable datetime."""
    whens = [_when(r) for r in runs]
    if all(w is not None for w in whens):
        order = sorted(range(len(runs)), key=lambda i: (whens[i], runs[i].path.name, str(runs[i].path)))
        return [runs[i] for i in order], None
    undated = sum(w is None for w in whens)
    return (sorted(runs, key=lambda r: (r.path.name, str(r.path))),
            f"{undated} run(s) without a readable datetime: runs ordered by file name")


# -------------------------------------------------------------------------------------------- detection


# ------------------------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class CaseHistory:
    """One case's series on one GPU model: which runs, their values, and what ``detect`` found."""

    case_id: str
    metric: str  # the metric the series holds ("wall" where --fallback wall stood in for device time)
    runs: tuple[int, ...]  # index into the model's ordered runs of each value
    values: tuple[float, ...]
    left_out: int  # runs that have the case but not this metric (device time off), left out
    detection: Detection | None  # None with fewer than MIN_RUNS values

    def regressing(self, cp: ChangePoint) -> bool:
        """A change toward slower: a longer time, or a lower speedup."""
        return cp.shift > 0 if METRICS[self.metric].higher_is_worse else cp.shift < 0

    @property
    def change_points(self) -> tuple[ChangePoint, ...]:
        """The change points found (none where the series was too short)."""
        return self.detection.change_points if self.detection is not None else ()


@dataclass(frozen=True)
class ModelHistory:
    """The ordered runs of one GPU model and each case's series over them."""

    gpu: str
    runs: tuple[StoredRun, ...]
    cases: tuple[CaseHistory, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class History:
    """The series of every GPU model and case, for one metric."""

    metric: Metric
    min_shift: float
    models: tuple[ModelHistory, ...]
    notes: tuple[str, ...] = ()

    @property
    def regressions(self) -> list[tuple[ModelHistory, CaseHistory, ChangePoint]]:
        """Every change point toward slower."""
        return [(m, c, cp) for m in self.models for c in m.cases for cp in c.change_points if c.regressing(cp)]


def _case_history(runs: Sequence[StoredRun], case_id: str, metric: str, fallback: str,
                  min_shift: float) -> CaseHistory | None:
    """One case's series over the ordered runs (None where no run has it with a cuDNN side)."""
    records = [(i, r.records[case_id]) for i, r in enumerate(runs)
               if case_id in r.records and r.records[case_id].cudnn is not None]
    if not records:
        return None
    points = [(i, metric_value(rec, metric)) for i, rec in records]
    used = metric
    if metric == "device" and fallback == "wall" and any(v is None for _, v in points):
        used = "wall"  # the whole series, so that one series never mixes wall and device time
        points = [(i, metric_value(rec, "wall")) for i, rec in records]
    kept = [(i, float(v)) for i, v in points if v is not None and v > 0]
    if not kept:
        return CaseHistory(case_id, used, (), (), len(records), None)
    values = tuple(v for _, v in kept)
    detection = detect(values, min_shift) if len(values) >= MIN_RUNS else None
    return CaseHistory(case_id, used, tuple(i for i, _ in kept), values, len(records) - len(kept), detection)


def analyse(runs: Sequence[StoredRun], metric: str = "device", fallback: str = "skip",
            min_shift: float = DEFAULT_MIN_SHIFT, notes: Sequence[str] = ()) -> History:
    """Each GPU model's runs in order and each case's series and change points."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")
    if fallback not in FALLBACKS:
        raise ValueError(f"unknown fallback {fallback!r} (one of {', '.join(FALLBACKS)})")
    by_model: dict[str, list[StoredRun]] = {}
    for run in runs:
        by_model.setdefault(run.gpu_slug or "unknown-gpu", []).append(run)
    models = []
    for gpu in sorted(by_model):
        ordered, order_note = order_runs(by_model[gpu])
        model_notes = [order_note] if order_note else []
        cases: list[CaseHistory] = []
        unmeasured = no_cudnn = 0
        for case_id in sorted({c for r in ordered for c in r.records}):
            case = _case_history(ordered, case_id, metric, fallback, min_shift)
            if case is None:
                no_cudnn += 1
            elif not case.values:
                unmeasured += 1
            else:
                cases.append(case)
        left_out = [c for c in cases if c.left_out]
        if left_out:
            model_notes.append(f"{len(left_out)} case(s) miss device time in some runs (up to "
                               f"{max(c.left_out for c in left_out)}): those runs are left out of their series "
                               f"(--fallback wall follows such a case in wall time instead)")
        if unmeasured:
            model_notes.append(f"{unmeasured} case(s) have no {metric} value in any run: no series"
                               + (" (--fallback wall follows them in wall time)" if metric == "device" else ""))
        if no_cudnn:
            model_notes.append(f"{no_cudnn} case(s) without a cuDNN side: no series")
        short = sum(c.detection is None for c in cases)
        if short:
            model_notes.append(f"{short} case(s) with fewer than {MIN_RUNS} runs: no change points looked for")
        models.append(ModelHistory(gpu, tuple(ordered), tuple(cases), tuple(model_notes)))
    return History(METRICS[metric], min_shift, tuple(models), tuple(notes))


# --------------------------------------------------------------------------------------------- output


def _label(run: StoredRun) -> str:
    """A run as the table names it: its file name without .json, and its start (minutes) where known."""
    when = run.datetime[:16].replace("T", " ")
    return f"{run.path.stem} ({when})" if when else run.path.stem


def _value(metric: str, value: float) -> str:
    """A value in the metric's printed unit."""
    m = METRICS[metric]
    return f"{value * m.scale:.4g}" + ("x" if m.unit == "x" else "")


def _where(model: ModelHistory, case: CaseHistory, cp: ChangePoint) -> str:
    """Where a change point is: the run it starts at (a drift: the runs it spans, and how many)."""
    start = _label(model.runs[case.runs[cp.start]])
    if cp.kind == "step":
        return start
    return f"{start} .. {_label(model.runs[case.runs[cp.end]])}, {cp.end - cp.start + 1} runs"


def table_lines(history: History) -> list[str]:
    """The table: per GPU model and case, the series' ends, its noise and each change point on a line."""
    m = history.metric
    header = ["GPU model", "case", "runs", "noise", f"first {m.unit}", f"last {m.unit}", "total", "kind",
              "change point (run, start)", "before", "after", "shift"]
    rows: list[list[str]] = []
    for model in history.models:
        for case in model.cases:
            name = case.case_id + (f" [{case.metric}]" if case.metric != m.name else "")
            first, last = case.values[0], case.values[-1]
            head = [model.gpu, name, str(len(case.values)),
                    "-" if case.detection is None else f"{case.detection.noise:.2%}",
                    _value(case.metric, first), _value(case.metric, last), f"{last / first - 1:+.1%}"]
            if case.detection is None:
                rows.append(head + ["-", f"too few runs (< {MIN_RUNS})", "", "", ""])
            elif not case.change_points:
                rows.append(head + ["-", "none", "", "", ""])
            for k, cp in enumerate(case.change_points):
                kind = cp.kind + (" (slower)" if case.regressing(cp) else "")
                rows.append((head if k == 0 else [""] * len(head))
                            + [kind, _where(model, case, cp), _value(case.metric, cp.before),
                               _value(case.metric, cp.after), f"{cp.shift:+.1%}"])
    runs = sum(len(model.runs) for model in history.models)
    lines = [f"{m.label} over {runs} stored run(s) of {len(history.models)} GPU model(s), never mixed; change "
             f"points: ruptures PELT (L2 cost on log values), penalty {PENALTY:g}*noise^2*ln(runs); shifts under "
             f"{history.min_shift:.1%} not reported"]
    lines += text_table(header, rows, right={2, 3, 4, 5, 6, 9, 10, 11})
    for note in history.notes:
        lines.append(f"note: {note}")
    for model in history.models:
        lines += [f"note: {model.gpu}: {note}" for note in model.notes]
    cases = sum(len(model.cases) for model in history.models)
    regressions = history.regressions
    worse = "a longer time" if m.higher_is_worse else "a lower speedup"
    if regressions:
        hit = sorted({f"{mh.gpu} {c.case_id}" for mh, c, _ in regressions})
        lines.append(f"{cases} case(s): {len(regressions)} change point(s) toward slower ({worse}) in {len(hit)} "
                     f"case(s): {', '.join(hit)}")
    else:
        lines.append(f"{cases} case(s): no change point toward slower ({worse})")
    return lines


def to_dict(history: History) -> dict[str, Any]:
    """The machine-readable result (values in seconds, or ratios for the speedup)."""
    m = history.metric

    def point(model: ModelHistory, case: CaseHistory, index: int) -> dict[str, Any]:
        """A run of a series: its index among the model's runs, file and start."""
        run = model.runs[case.runs[index]]
        return {"run": case.runs[index], "path": str(run.path), "datetime": run.datetime}

    return {
        "format": 1,
        "metric": m.name, "label": m.label, "unit": "s" if m.unit == "ms" else "ratio",
        "method": {"library": "ruptures", "algorithm": "Pelt", "cost": "l2 on log values", "penalty": PENALTY,
                   "penalty_rule": "PENALTY * noise**2 * ln(runs)", "min_size": MIN_SIZE, "min_runs": MIN_RUNS,
                   "min_shift": history.min_shift},
        "notes": list(history.notes),
        "regressions": len(history.regressions),
        "models": [{
            "gpu": model.gpu,
            "runs": [{"path": str(r.path), "datetime": r.datetime} for r in model.runs],
            "notes": list(model.notes),
            "cases": [{
                "case": case.case_id, "metric": case.metric, "runs": list(case.runs), "values": list(case.values),
                "left_out": case.left_out, "total_change": case.values[-1] / case.values[0] - 1,
                "noise": None if case.detection is None else case.detection.noise,
                "smallest_shift": None if case.detection is None else case.detection.smallest_shift,
                "change_points": [{"kind": cp.kind, "start": point(model, case, cp.start),
                                   "end": point(model, case, cp.end), "before": cp.before, "after": cp.after,
                                   "shift": cp.shift, "regressing": case.regressing(cp)}
                                  for cp in case.change_points],
            } for case in model.cases],
        } for model in history.models],
    }


def plot(history: History, folder: Path) -> list[Path]:
    """One PNG per GPU model: each case's series over its first level, change points marked; the paths."""
    from matplotlib.figure import Figure  # no pyplot: no global backend, no display (Agg draws the PNG)

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    m = history.metric
    for model in history.models:
        fig = Figure(figsize=(11, 5.5), layout="constrained")
        ax = fig.add_subplot()
        for case in model.cases:
            level = case.detection.first_level if case.detection is not None else case.values[0]
            y = [v / level for v in case.values]
            if not case.change_points:
                ax.plot(case.runs, y, color="0.75", linewidth=0.8, zorder=1)
                continue
            (line,) = ax.plot(case.runs, y, marker=".", linewidth=1.4, label=case.case_id, zorder=3)
            for cp in case.change_points:
                x0, x1 = case.runs[cp.start], case.runs[cp.end]
                style = "-" if case.regressing(cp) else ":"
                if cp.kind == "drift":
                    ax.axvspan(x0, x1, color=line.get_color(), alpha=0.12, zorder=0)
                ax.axvline(x0, color=line.get_color(), linestyle=style, linewidth=1.0, zorder=2)
                ax.annotate(f"{cp.kind} {cp.shift:+.1%}", (x1, cp.after / level), textcoords="offset points",
                            xytext=(4, 4), fontsize=7, color=line.get_color())
        ax.axhline(1.0, color="0.4", linewidth=0.6)
        step = max(1, len(model.runs) // 12)
        ticks = list(range(0, len(model.runs), step))
        dates = [model.runs[i].datetime[:10] for i in ticks]
        # Nightly runs: the date says which; several a day: month, day and time.
        labels = [model.runs[i].datetime[5:16].replace("T", " ") if len(set(dates)) < len(dates) else dates[k]
                  for k, i in enumerate(ticks)]
        ax.set_xticks(ticks, [label or model.runs[i].path.stem for label, i in zip(labels, ticks)],
                      rotation=30, ha="right", fontsize=7)
        ax.set_xlabel("stored run (ordered by start)")
        ax.set_ylabel(f"{m.label} / first level")
        ax.set_title(f"{model.gpu}: {m.label}, {len(model.cases)} case(s) (grey: no change point; "
                     f"line: toward slower, dotted: toward faster; shaded: drift)", fontsize=9)
        if any(c.change_points for c in model.cases):
            ax.legend(fontsize=7, loc="best")
        path = folder / f"history-{model.gpu}-{m.name}.png"
        fig.savefig(path, dpi=110)
        written.append(path)
    return written


def history_files(paths: Sequence[Path], metric: str = "device", fallback: str = "skip",
                  min_shift: float = DEFAULT_MIN_SHIFT, plot_dir: Path | None = None,
                  json_path: Path | None = None) -> tuple[int, list[str]]:
    """Exit code (0 no change toward slower, 1 one, 2 bad input) and the lines to print for ``history``."""
    from importlib.util import find_spec

    if find_spec("ruptures") is None:  # an install problem, not a bug: say so instead of a traceback
        return 2, ["error: history needs ruptures: pip install 'ruptures>=1.1'"]
    if json_path is not None and (problem := output_problem("--json", json_path, "history.json")):
        return 2, [f"error: {problem}"]  # before reading: a stored run (its own input, too) is never replaced
    try:
        loaded = load_runs(paths)
    except BaselineError as exc:
        return 2, [f"error: {exc}"]
    if len(loaded.runs) < 2:
        return 2, [f"error: history needs at least two stored runs, found {len(loaded.runs)} in "
                   f"{', '.join(map(str, paths))}"] + [f"note: {n}" for n in loaded.notes]
    history = analyse(loaded.runs, metric, fallback, min_shift, loaded.notes)
    lines = table_lines(history)
    code = 1 if history.regressions else 0
    if plot_dir is not None:
        try:
            lines += [f"written: {p}" for p in plot(history, plot_dir)]
        except OSError as exc:
            return 2, [f"error: cannot write plots to {plot_dir}: {exc.strerror or exc}"]
    if json_path is not None:
        try:
            write_json(json_path, dict(to_dict(history), exit=code))  # never over a file that appeared meanwhile
        except OSError as exc:
            return 2, [f"error: cannot write {json_path}: {exc.strerror or exc}"]
        lines.append(f"written: {json_path}")
    return code, lines
