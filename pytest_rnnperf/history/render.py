"""A history as output: the terminal table, the JSON document, one PNG per GPU model, the site (``site.py``), and the
command's files."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any, Sequence

from pytest_rnnperf.history.changes import (DEFAULT_MIN_SHIFT, METRICS, CaseSeries, ChangePoint, History, ModelHistory,
                                            Window, analyse, count_line)
from pytest_rnnperf.history.runs import load_runs
from pytest_rnnperf.history.site import site_problem, write_site
from pytest_rnnperf.judge.changepoints import MIN_RUNS, MIN_SIZE, PENALTY
from pytest_rnnperf.model.records import BaselineError, StoredRun
from pytest_rnnperf.report.html import plotly_missing
from pytest_rnnperf.report.text import fit, text_table
from pytest_rnnperf.store.baselines import among_stored_runs, output_problem, writable_problem, write_json


def _label(run: StoredRun) -> str:
    """A run as the table names it: its file name without .json, and its start (minutes) where known."""
    when = run.datetime[:16].replace("T", " ")
    return f"{run.path.stem} ({when})" if when else run.path.stem


def _value(series: str, value: float) -> str:
    """A value as its metric's hint shows it, to 4 significant digits."""
    return METRICS[series].show(value, ".4g")


def _where(model: ModelHistory, case: CaseSeries, cp: ChangePoint) -> str:
    """Where a change point is: the run it starts at (a drift: the runs it spans, and how many)."""
    start = _label(model.runs[case.runs[cp.start]])
    if cp.kind == "step":
        return start
    return f"{start} .. {_label(model.runs[case.runs[cp.end]])}, {cp.end - cp.start + 1} runs"


def _slower(model: ModelHistory, case: CaseSeries, cp: ChangePoint, window: Window | None) -> str:
    """How a change point is marked: toward slower (inside the window, or before it), or not at all."""
    if not case.regressing(cp):
        return ""
    return " (slower, before the window)" if window is not None and not window.holds(model, case.at(cp)) else " (slower)"


def table_lines(history: History, window: Window | None = None, width: int | None = None) -> list[str]:
    """The table: per GPU model and case, the series' ends, its noise and its change points (within ``width``;
    None: as wide as its cells), then the one count."""
    m = history.metric
    several = len(history.models) > 1  # one model: named in the first line, not on every row
    header = ["case", "runs", "noise", f"first -> last {m.display.unit}", "total", "change points (run, start)"]
    rows: list[list[str]] = []
    for model in history.models:
        for case in model.cases:
            name = case.case_id + (f" [{case.metric}]" if case.metric != history.series else "")
            first, last = case.values[0], case.values[-1]
            changes = "; ".join(f"{cp.kind}{_slower(model, case, cp, window)} {cp.shift:+.1%} at "
                                f"{_where(model, case, cp)}: {_value(case.metric, cp.before)} -> "
                                f"{_value(case.metric, cp.after)}" for cp in case.change_points)
            rows.append([model.gpu] * several + [
                name, str(len(case.values)), "-" if case.detection is None else f"{case.detection.noise:.2%}",
                f"{_value(case.metric, first)} -> {_value(case.metric, last)}", f"{last / first - 1:+.1%}",
                f"too few runs (< {MIN_RUNS})" if case.detection is None else changes or "none"])
    runs = sum(len(model.runs) for model in history.models)
    models = (f"{len(history.models)} GPU models" if several
              else history.models[0].gpu if history.models else "no GPU model")
    lines = [f"{m.label} over {runs} stored run(s) of {models}, never mixed; change "
             f"points: ruptures PELT (L2 cost on log values), penalty {PENALTY:g}*noise^2*ln(runs); shifts under "
             f"{history.min_shift:.1%} not reported"]
    right = {1, 2, 3, 4}
    lines += text_table(["GPU model"] * several + header, rows, right={i + several for i in right}, width=width)
    for note in history.notes:
        lines.append(f"note: {note}")
    for model in history.models:
        lines += [f"note: {model.gpu}: {note}" for note in model.notes]
    lines.append(count_line(history, window))
    return fit(lines, width) if width else lines


def to_dict(history: History, window: Window | None = None) -> dict[str, Any]:
    """The machine-readable result (values in seconds, or ratios for the speedup)."""
    m = history.metric

    def point(model: ModelHistory, case: CaseSeries, index: int) -> dict[str, Any]:
        """A run of a series: its index among the model's runs, file and start."""
        run = model.runs[case.runs[index]]
        return {"run": case.runs[index], "path": str(run.path), "datetime": run.datetime}

    return {
        "format": 1,
        "metric": history.series, "label": m.label, "unit": "s" if m.unit == "s" else "ratio",
        "method": {"library": "ruptures", "algorithm": "Pelt", "cost": "l2 on log values", "penalty": PENALTY,
                   "penalty_rule": "PENALTY * noise**2 * ln(runs)", "min_size": MIN_SIZE, "min_runs": MIN_RUNS,
                   "min_shift": history.min_shift},
        "notes": list(history.notes),
        "regressions": len(history.regressions),
        "window": "" if window is None else str(window),
        "counted": len(history.slower(window)),
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
                                   "shift": cp.shift, "regressing": case.regressing(cp),
                                   "in_window": window is None or window.holds(model, case.at(cp))}
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
        path = folder / f"history-{model.gpu}-{history.series}.png"
        fig.savefig(path, dpi=110)
        written.append(path)
    return written


def history_files(paths: Sequence[Path], metric: str = "device", fallback: str = "skip",
                  min_shift: float = DEFAULT_MIN_SHIFT, plot_dir: Path | None = None,
                  json_path: Path | None = None, html_dir: Path | None = None,
                  since: Window | None = None, width: int | None = None) -> tuple[int, list[str]]:
    """Exit code (0 no change toward slower within ``since``, 1 one, 2 bad input) and the lines to print for
    ``history`` (the table within ``width``)."""


    if find_spec("ruptures") is None:  # an install problem, not a bug: say so instead of a traceback
        return 2, ["error: history needs ruptures: pip install 'ruptures>=1.1'"]
    if json_path is not None and (problem := output_problem("--json", json_path, "history.json", paths)):
        return 2, [f"error: {problem}"]  # before reading: a stored run (its own input, too) is never replaced
    if plot_dir is not None and (problem := among_stored_runs("--plot", plot_dir, paths)):
        return 2, [f"error: {problem}"]
    if plot_dir is not None and (problem := writable_problem(plot_dir)):
        return 2, [f"error: --plot {problem}"]  # a file named as the folder: said now, not "File exists" at the end
    if html_dir is not None:
        if (missing := plotly_missing()) is not None:
            return 2, [f"error: history --html: {missing}"]
        if (problem := site_problem(html_dir, paths)) is not None:
            return 2, [f"error: {problem}"]
    try:
        loaded = load_runs(paths)
    except BaselineError as exc:
        return 2, [f"error: {exc}"]
    if len(loaded.runs) < 2:
        return 2, [f"error: history needs at least two stored runs, found {len(loaded.runs)} in "
                   f"{', '.join(map(str, paths))}"] + [f"note: {n}" for n in loaded.notes]
    history = analyse(loaded.runs, metric, fallback, min_shift, loaded.notes)
    lines = table_lines(history, since, width)
    code = 1 if history.slower(since) else 0
    if plot_dir is not None:
        try:
            lines += [f"written: {p}" for p in plot(history, plot_dir)]
        except OSError as exc:
            return 2, [f"error: cannot write plots to {plot_dir}: {exc.strerror or exc}"]
    if html_dir is not None:

        try:
            pages = write_site(loaded.runs, html_dir, metric, fallback, min_shift, loaded.notes, since)
        except FileExistsError as exc:
            return 2, [f"error: --html {html_dir}: {exc.filename} appeared meanwhile and is not replaced"]
        except OSError as exc:
            return 2, [f"error: cannot write the site to {html_dir}: {exc.strerror or exc}"]
        lines.append(f"written: {html_dir / 'index.html'} ({len(pages) - 1} pages and plotly's script; open it "
                     f"in a browser, no network needed)")
    if json_path is not None:
        try:
            write_json(json_path, dict(to_dict(history, since), exit=code))  # never over a file that appeared meanwhile
        except OSError as exc:
            return 2, [f"error: cannot write {json_path}: {exc.strerror or exc}"]
        lines.append(f"written: {json_path}")
    return code, lines
