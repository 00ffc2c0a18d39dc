"""``history --html DIR``: the history as a site to browse, per GPU model, that opens from disk with no network.

- ``index.html``: the count of change points toward slower that the exit status reads (the terminal's last line,
  word for word), then the GPU models, their runs and change points by series, with links;
- ``<gpu>.html``: every case's series over the runs in device time, wall time and speedup (hover: the run's date,
  file, versions and the cuDNN side's kernel mix), change points and drifts marked, and one chart of all cases;
- ``<gpu>-changes.html``: every change point, newest first, grouped by the runs it lies between, with the
  environment diff of those runs and the kernels of each case that moved;
- ``plotly.min.js``: plotly's JavaScript, once for every page (a site of several pages, each page refers to it).

Built from the same analysis as the table (``changes.analyse``, once per metric) and drawn with the run page's
shell (``report/html.py``). A site is written into a new or empty folder only: nothing there is replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from pytest_rnnperf.history.changes import (METRICS, CaseSeries, ChangePoint, History, ModelHistory, Window, analyse,
                                            count_line)
from pytest_rnnperf.judge.changepoints import DEFAULT_MIN_SHIFT, MIN_RUNS, PENALTY
from pytest_rnnperf.measure.environment import diff_environments, format_diff
from pytest_rnnperf.model.metrics import KERNEL, from_ms, show
from pytest_rnnperf.model.records import CaseRecord, StoredRun
from pytest_rnnperf.report.html import COLOURS, Charts, Raw, anchor, bullet_list, esc, filters, page, table
from pytest_rnnperf.report.rows import record_kernel_lines
from pytest_rnnperf.store.baselines import among_stored_runs, writable_problem

PLOTLY_FILE = "plotly.min.js"
ROWS = ("device", "wall", "speedup")  # the series of each case, top to bottom


def site_problem(folder: Path, inputs: Sequence[Path]) -> str | None:
    """Why ``folder`` cannot take a new site (it holds files, or lies among the stored runs read), or None."""

    if folder.exists() and not folder.is_dir():
        return f"--html {folder}: a file, not a folder"
    if (among := among_stored_runs("--html", folder, inputs)) is not None:
        return among
    if folder.is_dir() and any(folder.iterdir()):
        return f"--html {folder}: the folder holds files, which are never replaced; give a new or empty folder"
    why = writable_problem(folder)
    return None if why is None else f"--html {why}"


def run_label(run: StoredRun) -> str:
    """A run on a chart's axis: its start to the minute, or its file name where it has no date."""
    return run.datetime[:16].replace("T", " ") if run.datetime else run.path.stem


def labels(runs: Sequence[StoredRun]) -> list[str]:
    """Each run's axis label, made unique (two runs in one minute get their file names)."""
    out = [run_label(r) for r in runs]
    return [f"{label} {runs[i].path.stem}" if out.count(label) > 1 else label for i, label in enumerate(out)]


def versions(environment: dict[str, str], framework: str) -> str:
    """The versions a case's number depends on: the driver, the framework's own versions and its cuDNN."""
    keys = ["gpu.driver_version", "cudnn_wheel"] + sorted(
        k for k in environment if k.startswith(f"{framework}.") and (k.endswith("version") or k.endswith("cudnn_runtime")))
    return ", ".join(f"{k}={environment[k]}" for k in keys if k in environment
                     and not environment[k].startswith("unavailable"))


def kernel_mix(record: CaseRecord, rows: int = 3) -> str:
    """The cuDNN side's longest kernels with their ms per step ('no device time' where it was not traced)."""
    dev = record.cudnn_device
    if dev is None:
        return "no device time"
    named = [k for k in dev.kernels if not k.name.startswith("(")][:rows]
    return "<br>".join(f"{show(KERNEL, from_ms(k.ms_per_step), unit=True)} {esc(k.name[:70])}" for k in named)


@dataclass(frozen=True)
class Change:
    """One change point of one case and metric, with the runs it lies between."""

    case: str
    metric: str
    point: ChangePoint
    regressing: bool
    before: StoredRun  # the case's last run at the old level
    after: StoredRun  # the first run at the new level (a drift: the last run of the ramp)
    order: int  # index of ``after`` among the model's runs: the newest change first


def changes(model_runs: Sequence[StoredRun], cases: Sequence[CaseSeries]) -> list[Change]:
    """Every change point of the given series, newest first (then the largest shift first)."""
    out = []
    for case in cases:
        for cp in case.change_points:
            at = case.runs[cp.end if cp.kind == "drift" else cp.start]
            before = case.runs[max(cp.start - 1, 0)]
            out.append(Change(case.case_id, case.metric, cp, case.regressing(cp), model_runs[before], model_runs[at], at))
    return sorted(out, key=lambda c: (-c.order, -abs(c.point.shift)))


@dataclass(frozen=True)
class ModelSite:
    """One GPU model's series in all three metrics (the same ordered runs in each)."""

    gpu: str
    runs: tuple[StoredRun, ...]
    series: dict[str, dict[str, CaseSeries]]  # metric -> case id -> series
    notes: tuple[str, ...]
    metric: str = "device"  # the series whose change points toward slower set the exit status (--metric)
    counted: int = 0  # those change points, within the window: this model's share of the terminal's count
    min_shift: float = DEFAULT_MIN_SHIFT  # the smallest shift reported: the band drawn on each series

    @property
    def case_ids(self) -> list[str]:
        """Every case with a series in any metric."""
        return sorted({c for by_case in self.series.values() for c in by_case})

    def found(self, case_id: str, metric: str) -> tuple[int, int]:
        """How many change points one series of a case has, and how many of them go toward slower."""
        case = self.series[metric].get(case_id)
        points = case.change_points if case is not None else ()
        return len(points), sum(case.regressing(cp) for cp in points) if case is not None else 0

    def by_series(self) -> str:
        """Every change point counted per series, e.g. "device 2 (1 slower), wall 5 (3 slower), speedup 0"."""
        totals = {m: [sum(n) for n in zip(*(self.found(c, m) for c in self.case_ids))] or [0, 0] for m in ROWS}
        return ", ".join(f"{m} {n}" + (f" ({slower} slower)" if slower else "") for m, (n, slower) in totals.items())

    def all_changes(self) -> list[Change]:
        """Every change point of every case and metric, newest first."""
        found = [c for metric in ROWS for c in changes(self.runs, list(self.series.get(metric, {}).values()))]
        return sorted(found, key=lambda c: (-c.order, -abs(c.point.shift)))


def model_sites(histories: dict[str, History], metric: str = "device", window: Window | None = None) -> list[ModelSite]:
    """Each GPU model's series by metric, from one analysis per metric of the same runs; ``metric`` and
    ``window`` say which change points toward slower count."""
    sites = []
    counted = histories[metric].slower(window)
    for i, model in enumerate(histories[ROWS[0]].models):
        series: dict[str, dict[str, CaseSeries]] = {}
        for row in ROWS:
            other: ModelHistory = histories[row].models[i]
            # --fallback wall puts a case's wall time in the device analysis: the wall row shows it already.
            series[row] = {c.case_id: c for c in other.cases if c.metric == row}
        mine = sum(m.gpu == model.gpu for m, _, _ in counted)
        sites.append(ModelSite(model.gpu, model.runs, series, model.notes, metric, mine, histories[metric].min_shift))
    return sites


# ------------------------------------------------------------------------------------------------ charts


def _hover(site: ModelSite, case_id: str, run_indices: Sequence[int]) -> list[list[str]]:
    """Each point's hover lines: the run, its file and kind, the versions, the cuDNN side's kernel mix."""
    out = []
    for i in run_indices:
        run = site.runs[i]
        record = run.records[case_id]
        out.append([run.datetime or "undated", f"{run.path.name} ({run.kind})",
                    esc(versions(run.environment, record.case.framework)), kernel_mix(record)])
    return out


def case_figure(site: ModelSite, case_id: str, axis: list[str]) -> Any:
    """A case's device time, wall time and speedup over the runs, each change point marked where it is."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    present = [m for m in ROWS if case_id in site.series[m]]
    fig = make_subplots(rows=len(present), cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        subplot_titles=[f"{METRICS[m].label} ({METRICS[m].display.unit})" for m in present])
    # Traces, shapes and annotations name their subplot's axes and go in at once: plotly's per-call row/col lookup
    # and validation (add_hrect, add_vline, add_annotation with row=) would be most of a site's build time.
    traces: list[Any] = []
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for row, metric in enumerate(present, start=1):
        x, y = ("x", "y") if row == 1 else (f"x{row}", f"y{row}")
        case = site.series[metric][case_id]
        m, scale = METRICS[metric], METRICS[metric].display.scale
        template = (f"<b>%{{y:.4g}} {m.display.unit}</b><br>%{{customdata[0]}}<br>%{{customdata[1]}}<br>"
                    "%{customdata[2]}<br>"
                    "<b>kernels of the cuDNN side</b><br>%{customdata[3]}<extra></extra>")
        traces.append(go.Scatter(x=[axis[i] for i in case.runs], y=[v * scale for v in case.values],
                                 mode="lines+markers", name=metric, showlegend=False,
                                 line=dict(color=COLOURS["now"], width=1.5), marker=dict(size=6),
                                 customdata=_hover(site, case_id, case.runs), hovertemplate=template,
                                 xaxis=x, yaxis=y))
        # The band a shift must leave to be reported, around the series' newest level.
        level = (case.change_points[-1].after if case.change_points else
                 case.detection.first_level if case.detection is not None else case.values[-1]) * scale
        shapes.append(dict(type="rect", xref=f"{x} domain", x0=0, x1=1, yref=y, y0=level * (1 - site.min_shift),
                           y1=level * (1 + site.min_shift), fillcolor="#8c959f", opacity=0.18, line=dict(width=0)))
        notes.append(dict(x=1, xref=f"{x} domain", y=level * (1 + site.min_shift), yref=y, yanchor="bottom",
                          xanchor="right", showarrow=False,
                          text=f"&plusmn;{site.min_shift:.1%} (--min-shift) of the newest level",
                          font=dict(size=9, color="#57606a")))
        for cp in case.change_points:
            colour = COLOURS["slower" if case.regressing(cp) else "faster"]
            x0, x1 = axis[case.runs[cp.start]], axis[case.runs[cp.end]]
            text = f"{cp.kind} {cp.shift:+.1%}" + (" (slower)" if case.regressing(cp) else "")
            if cp.kind == "drift":
                # a category axis puts each run at its index: the ramp spans the runs from start to end
                shapes.append(dict(type="rect", xref=x, x0=case.runs[cp.start] - 0.5, x1=case.runs[cp.end] + 0.5,
                                   yref=f"{y} domain", y0=0, y1=1, fillcolor=colour, opacity=0.12, line=dict(width=0)))
            start = case.runs[cp.start] - 0.5
            shapes.append(dict(type="line", xref=x, x0=start, x1=start, yref=f"{y} domain", y0=0, y1=1,
                               line=dict(color=colour, dash="dash", width=1.5)))
            notes.append(dict(x=x1 if cp.kind == "drift" else x0, xref=x, y=cp.after * scale, yref=y, text=text,
                              showarrow=True, arrowhead=2, ax=30, ay=-22, font=dict(color=colour, size=11)))
    fig.add_traces(traces)
    fig.update_layout(shapes=shapes, annotations=[*fig.layout.annotations, *notes])
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=axis, tickangle=-30, tickfont=dict(size=9))
    return fig


def overview_figure(site: ModelSite, metric: str, axis: list[str]) -> Any:
    """Every case's series over its first level: grey without a change point, in colour with one."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for case in site.series[metric].values():
        level = case.detection.first_level if case.detection is not None else case.values[0]
        changed = bool(case.change_points)
        fig.add_trace(go.Scatter(
            x=[axis[i] for i in case.runs], y=[v / level for v in case.values], mode="lines+markers" if changed else "lines",
            name=case.case_id, showlegend=changed, opacity=1.0 if changed else 0.45,
            line=dict(width=2 if changed else 1, **({} if changed else {"color": "#b0b7bf"})),
            hovertemplate=f"{esc(case.case_id)}<br>%{{x}}<br>%{{y:.3f}} of its first level<extra></extra>"))
    fig.add_hline(y=1.0, line=dict(color="#57606a", width=1))
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=axis, tickangle=-30, tickfont=dict(size=9))
    fig.update_yaxes(title_text=f"{METRICS[metric].label} / first level")
    fig.update_layout(legend=dict(font=dict(size=10)), hovermode="closest")
    return fig


# ------------------------------------------------------------------------------------------------- pages


def _nav(site: ModelSite | None) -> str:
    """The links at the top of every page."""
    links = ['<a href="index.html">all GPU models</a>']
    if site is not None:
        links += [f'<a href="{esc(model_file(site.gpu))}">{esc(site.gpu)}: series</a>',
                  f'<a href="{esc(changes_file(site.gpu))}">{esc(site.gpu)}: changes</a>']
    return '<p class="muted">' + " | ".join(links) + "</p>"


def model_file(gpu: str) -> str:
    """The page of a GPU model's series."""
    return f"{gpu}.html"


def changes_file(gpu: str) -> str:
    """The page of a GPU model's changes."""
    return f"{gpu}-changes.html"


def _span(site: ModelSite) -> str:
    """e.g. "12 runs, 2026-11-22 .. 2026-11-24"."""
    dated = [r.datetime[:10] for r in site.runs if r.datetime]
    return f"{len(site.runs)} runs" + (f", {min(dated)} .. {max(dated)}" if dated else "")


def model_page(site: ModelSite, metric: str, plotly: str) -> str:
    """A GPU model's page: all cases at a glance, then each case's three series with their change points."""
    charts = Charts(enabled=True)
    axis = labels(site.runs)
    newest = site.runs[-1]
    body = [f"<h1>{esc(site.gpu)}: each case over its stored runs</h1>", _nav(site),
            f"<p>{_counted(site)}</p>",
            f'<p class="muted">{esc(_span(site))}; {len(site.case_ids)} cases; change points found, by the series '
            f"they were found in: {esc(site.by_series())}. Newest run: {esc(newest.path.name)} "
            f"({esc(newest.datetime or 'undated')}).</p>",
            f"<h2>All cases: {esc(METRICS[metric].label)}</h2>",
            '<p class="muted">each case over its first level; in colour: a case with a change point</p>',
            charts.add(lambda: overview_figure(site, metric, axis), 460) if site.series[metric] else
            f'<p class="muted">no case has a {esc(metric)} series</p>']
    rows, attrs, keys = [], [], []
    for case_id in site.case_ids:
        found = {m: site.found(case_id, m) for m in ROWS}
        first = next(site.series[m][case_id] for m in ROWS if case_id in site.series[m])
        m = METRICS[first.metric]
        rows.append([Raw(f'<a href="#{esc(anchor("h", case_id))}">{esc(case_id)}</a>'), first.metric,
                     str(len(first.values)), m.show(first.values[-1], ".4g", unit=True),
                     f"{first.values[-1] / first.values[0] - 1:+.1%}"]
                    + ["-" if case_id not in site.series[s] else f"{n}" + (f" ({slower} slower)" if slower else "")
                       for s, (n, slower) in found.items()])
        changed = any(n for n, _ in found.values())
        attrs.append(f' data-changed="{"yes" if changed else ""}" data-panel="{esc(anchor("h", case_id))}"'
                     + (' class="bad"' if found[metric][1] else ""))
        keys.append((-found[metric][1], -sum(s for _, s in found.values()), -sum(n for n, _ in found.values())))
    # Cases that moved toward slower in the series that decides first, then in the others, then those that moved
    # at all: what a reader came for.
    order = sorted(range(len(rows)), key=lambda i: (keys[i], i))
    rows, attrs = [rows[i] for i in order], [attrs[i] for i in order]
    header = ("case", "series", "runs", "last", "total change", *(f"{s}: change points" for s in ROWS))
    body.append("<h2>Cases</h2>" + filters("h-cases", {}, panels="h-panels",
                                           checkbox=("changed", "only cases with a change point"))
                + table(header, rows, cls="sortable", numeric=range(2, len(header)), row_attrs=attrs,
                        table_id="h-cases"))
    panels = []
    for case_id in site.case_ids:
        present = [m for m in ROWS if case_id in site.series[m]]
        marks = [f"{m} {cp.kind} {cp.shift:+.1%}" for m in present for cp in site.series[m][case_id].change_points]
        summary = (f'<summary><span class="mono">{esc(case_id)}</span> '
                   + " ".join(f'<span class="badge">{esc(x)}</span>' for x in marks) + "</summary>")
        panels.append(f'<details class="case" id="{esc(anchor("h", case_id))}">{summary}'
                      + charts.add(lambda: case_figure(site, case_id, axis), 230 * len(present) + 80) + "</details>")
    body.append('<h2>Each case</h2><p class="muted">open a case for its series; hover a point for the run, its '
                'versions and the kernels of the cuDNN side</p><div id="h-panels">' + "\n".join(panels) + "</div>")
    if site.notes:
        body.append("<h2>Notes</h2>" + bullet_list(site.notes))
    return page(f"{site.gpu}: history", "\n".join(body), charts, plotly=plotly)


def changes_page(site: ModelSite) -> str:
    """A GPU model's change points, newest first, grouped by the runs they lie between, with what changed there."""

    found = site.all_changes()
    body = [f"<h1>{esc(site.gpu)}: changes, newest first</h1>", _nav(site), f"<p>{_counted(site)}</p>",
            f"<p>{len(found)} change point(s) in all series ({esc(site.by_series())}) over {esc(_span(site))}: "
            f"ruptures PELT on each series' log values, "
            f"penalty {PENALTY:g}&times;noise&sup2;&times;ln(runs), at least {MIN_RUNS} runs per series.</p>"]
    if not found:
        body.append('<p class="muted">no change point in any series</p>')
    groups: dict[tuple[str, str], list[Change]] = {}
    for change in found:
        groups.setdefault((str(change.before.path), str(change.after.path)), []).append(change)
    for group in groups.values():
        first = group[0]
        diff = format_diff(diff_environments(dict(first.before.environment), dict(first.after.environment)))
        rows, attrs = [], []
        for c in group:
            m = METRICS[c.metric]
            kernels = record_kernel_lines(c.before.records.get(c.case), c.after.records.get(c.case), rows=4)
            span = "" if c.point.kind == "step" else f" over {c.point.end - c.point.start + 1} runs"
            rows.append([Raw(f'<a href="{esc(model_file(site.gpu))}#{esc(anchor("h", c.case))}">{esc(c.case)}</a>'),
                         c.metric, c.point.kind + span,
                         f"{m.show(c.point.before, '.4g')} -> {m.show(c.point.after, '.4g', unit=True)}", f"{c.point.shift:+.1%}", "slower" if c.regressing else "faster",
                         "; ".join(kernels) or "-"])
            attrs.append(' class="bad"' if c.regressing else "")
        body.append(f"<h2>{esc(run_label(first.after))}: {esc(first.after.path.name)}</h2>"
                    f'<p class="muted">against {esc(first.before.path.name)} '
                    f"({esc(first.before.datetime or 'undated')}), the run before</p>"
                    "<h3>Environment changes between them</h3>"
                    + (bullet_list(diff) or '<p class="muted">none (same fingerprint)</p>')
                    + "<h3>Change points</h3>"
                    + table(("case", "series", "kind", "level", "shift", "direction", "kernels of the cuDNN side that moved"),
                            rows, cls="sortable", numeric=(4,), row_attrs=attrs))
    return page(f"{site.gpu}: changes", "\n".join(body), Charts(enabled=False))


def _counted(site: ModelSite) -> str:
    """A model's share of the count the exit status reads, as HTML: bold, in the decided series' name."""
    return (f"<b>{site.counted} change point(s) toward slower in the {esc(site.metric)} series</b> "
            "(the count the terminal and the exit status read; the other series' change points are listed, "
            "labelled, not counted)")


def index_page(sites: Sequence[ModelSite], notes: Sequence[str], min_shift: float, counted: str = "") -> str:
    """The site's first page: the terminal's count line, then each GPU model with its runs and change points."""
    rows = []
    metric = sites[0].metric if sites else "device"
    for site in sites:
        rows.append([Raw(f'<a href="{esc(model_file(site.gpu))}">{esc(site.gpu)}</a>'), _span(site),
                     str(len(site.case_ids)), str(site.counted), site.by_series(),
                     Raw(f'<a href="{esc(changes_file(site.gpu))}">changes</a>')])
    body = ["<h1>pytest-rnnperf history</h1>",
            f'<div class="status {"fail" if any(s.counted for s in sites) else "ok"}" id="h-count">{esc(counted)}</div>',
            "<p>Each case's cuDNN device time, wall time and speedup over the stored runs of each GPU model (runs of "
            f"different models are never mixed), and its change points: steps and drifts of at least "
            f"{min_shift:.1%}.</p>",
            table(("GPU model", "runs", "cases", f"toward slower ({metric}, counted)", "change points by series", ""),
                  rows, numeric=(2, 3))]
    if notes:
        body.append("<h2>Notes</h2>" + bullet_list(notes))
    return page("pytest-rnnperf history", "\n".join(body), Charts(enabled=False))


def write_site(runs: Sequence[StoredRun], folder: Path, metric: str = "device", fallback: str = "skip",
               min_shift: float = DEFAULT_MIN_SHIFT, notes: Sequence[str] = (), window: Window | None = None) -> list[Path]:
    """Write the site into ``folder`` (new or empty): the index, each GPU model's two pages, plotly's script."""
    from plotly.offline import get_plotlyjs

    histories = {m: analyse(runs, m, fallback, min_shift, notes) for m in ROWS}
    sites = model_sites(histories, metric, window)
    folder.mkdir(parents=True, exist_ok=True)
    pages = {"index.html": index_page(sites, notes, min_shift, count_line(histories[metric], window))}
    for site in sites:
        pages[model_file(site.gpu)] = model_page(site, metric, plotly=PLOTLY_FILE)
        pages[changes_file(site.gpu)] = changes_page(site)
    written = []
    for name, text in [(PLOTLY_FILE, get_plotlyjs()), *pages.items()]:
        path = folder / name
        with open(path, "x", encoding="utf-8") as fh:  # "x": a file that appeared meanwhile is not replaced
            fh.write(text)
        written.append(path)
    return written
