"""The run's page, ``index.html``: the report's rows as one self-contained HTML file, charts drawn by plotly.

The page opens from disk and from a CI artifact with no network: plotly's JavaScript is written into it, and the
charts' data sits in the page as JSON. Without plotly the page is still written, with its tables and a line
saying what to install in place of each chart. The shell (style, sorting, filtering, lazily drawn charts) is
shared with the history site (``history/site.py``).
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from pytest_rnnperf.judge.claims import HEADER, table_rows
from pytest_rnnperf.judge.verdicts import Outcome
from pytest_rnnperf.model.metrics import (DEVICE_SPEEDUP, FLOOR, KERNEL, LAUNCHES, METRICS, MS, PARITY, WALL,
                                          WALL_SPEEDUP, from_ms, metric, show)
from pytest_rnnperf.report.rows import (COMPARISON_HEADER, CROSS_HEADER, ROUND_SPEEDUP, STATUSES, VERDICT_HEADER,
                                        CaseRow, Rows, Samples, VerdictRow, change_text, deciding, not_run)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.judge.verdicts import CaseVerdict, Comparison
    from pytest_rnnperf.model.parity import ParityRow
    from pytest_rnnperf.model.stats import Interval
    from pytest_rnnperf.model.timing import KernelStat

PLOTLY_MISSING = "charts need plotly: pip install 'pytest-rnnperf[html]'"
FACETS = ("backend", "cell", "mode", "precision", "verdict")
NOT_JUDGED = "not judged"
# Sides and runs keep their colours on every chart of both pages.
COLOURS = {"now": "#1f77b4", "baseline": "#7f7f7f", "floor": "#d62728", "slower": "#d62728", "faster": "#2ca02c"}
# A verdict's colour, the same on the page, its charts and speedups.png: a regression is never green.
OUTCOME_COLOURS = {"failed": "#cf222e", "not failed": "#d4660b", "improved": "#1a7f37", "ambiguous": "#9a6700",
                   "other": "#1f77b4"}
ID_CHARS = 50  # a case id longer than this is shortened in the tables, whole in its tooltip

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto; max-width: 1260px;
       padding: 0 18px 40px; color: #1b1f24; }
h1 { font-size: 22px; margin: 18px 0 4px; } h2 { font-size: 18px; margin: 26px 0 8px; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 15px; margin: 14px 0 6px; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
table { border-collapse: collapse; margin: 6px 0 10px; }
th, td { border: 1px solid #d0d7de; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } tbody tr:nth-child(even) { background: #fafbfc; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[aria-sort=ascending]::after { content: " \\25B2"; }
table.sortable th[aria-sort=descending]::after { content: " \\25BC"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.bad td { background: #ffebe9; } span.bad, .regressed { color: #cf222e; font-weight: 600; }
.good, .improved { color: #1a7f37; } .ambiguous { color: #9a6700; }
span.warn { color: #b35300; font-weight: 600; } tr.warn td { background: #fff4e5; }
.status.warn { background: #fff4e5; color: #b35300; }
li, table.wrap td { overflow-wrap: anywhere; } table.cases td:not(:first-child):not(:last-child) { white-space: nowrap; }
table.cases { font-size: 13px; } table.cases td:first-child .mono { font-size: 12px; } th { white-space: normal; }
table.regressions td { font-size: 13px; overflow-wrap: anywhere; }
table.regressions td:is(:nth-child(1), :nth-child(3), :nth-child(4)) { white-space: nowrap; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px; border: 1px solid currentColor; }
.status { padding: 6px 12px; border-radius: 6px; display: inline-block; font-weight: 600; margin: 6px 0; }
.status.ok { background: #dafbe1; color: #1a7f37; } .status.fail { background: #ffebe9; color: #cf222e; }
.filters { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; margin: 6px 0; }
.filters label { font-size: 13px; } .muted { color: #57606a; }
details.case { border: 1px solid #d0d7de; border-radius: 6px; margin: 6px 0; padding: 0 10px; }
details.case[open] { padding-bottom: 10px; } details.case > summary { cursor: pointer; padding: 6px 0; }
.grid { display: flex; flex-wrap: wrap; gap: 18px; } .grid > div { min-width: 280px; }
.chart { width: 100%; min-height: 120px; } .note { color: #57606a; font-style: italic; }
ul.tight { margin: 4px 0; padding-left: 20px; } div.scroll { overflow-x: auto; max-width: 100%; }
"""

# Ours, small: sort by a column, filter by facets and text, draw a chart when its panel first opens (plotly
# sizes a chart to its container, which a closed panel does not have), and open the panel a link points at.
SCRIPT = """
"use strict";
function rnnperfDraw(root) {
  if (typeof Plotly === "undefined") { return; }
  root.querySelectorAll("div.chart[data-spec]").forEach(function (el) {
    if (el.dataset.drawn || el.offsetParent === null) { return; }
    var spec = JSON.parse(document.getElementById(el.dataset.spec).textContent);
    el.dataset.drawn = "1";
    Plotly.newPlot(el, spec.data, spec.layout, {responsive: true, displaylogo: false});
  });
}
function rnnperfKey(text) {
  var t = text.trim();
  return /^[-+]?[0-9.]/.test(t) ? parseFloat(t) : NaN;
}
function rnnperfSort(th) {
  var table = th.closest("table"), body = table.tBodies[0];
  var col = Array.prototype.indexOf.call(th.parentNode.children, th);
  var up = th.getAttribute("aria-sort") !== "ascending";
  th.parentNode.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
  th.setAttribute("aria-sort", up ? "ascending" : "descending");
  var rows = Array.prototype.slice.call(body.rows);
  rows.sort(function (a, b) {
    var x = a.cells[col].textContent, y = b.cells[col].textContent, nx = rnnperfKey(x), ny = rnnperfKey(y);
    var c = (isNaN(nx) || isNaN(ny)) ? (isNaN(nx) - isNaN(ny)) || x.localeCompare(y) : nx - ny;
    return up ? c : -c;
  });
  rows.forEach(function (r) { body.appendChild(r); });
}
function rnnperfFilter(box) {
  var table = document.getElementById(box.dataset.table), shown = 0, total = 0;
  var wanted = {};
  box.querySelectorAll("[data-facet]").forEach(function (f) {
    if (f.type === "checkbox") { wanted[f.dataset.facet] = f.checked ? "yes" : ""; }
    else { wanted[f.dataset.facet] = f.value.trim().toLowerCase(); }
  });
  Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
    var ok = Object.keys(wanted).every(function (k) {
      var w = wanted[k];
      if (!w) { return true; }
      if (k === "text") { return r.textContent.toLowerCase().indexOf(w) >= 0; }
      return (r.dataset[k] || "").toLowerCase() === w;
    });
    r.hidden = !ok; total += 1; shown += ok ? 1 : 0;
  });
  box.querySelector(".count").textContent = shown + " of " + total;
  var panels = document.getElementById(box.dataset.panels);
  if (panels) {
    var keep = {};
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) { if (!r.hidden) { keep[r.dataset.panel] = 1; } });
    panels.querySelectorAll("details.case").forEach(function (d) { d.hidden = !keep[d.id]; });
  }
}
function rnnperfOpen() {
  var id = decodeURIComponent(location.hash.slice(1)), el = id && document.getElementById(id);
  if (el && el.tagName === "DETAILS") { el.hidden = false; el.open = true; rnnperfDraw(el); el.scrollIntoView(); }
}
document.addEventListener("toggle", function (e) { if (e.target.open) { rnnperfDraw(e.target); } }, true);
document.addEventListener("click", function (e) {
  var th = e.target.closest("table.sortable thead th");
  if (th) { rnnperfSort(th); }
});
document.addEventListener("input", function (e) {
  var box = e.target.closest(".filters");
  if (box) { rnnperfFilter(box); }
});
window.addEventListener("hashchange", rnnperfOpen);
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll(".filters").forEach(rnnperfFilter);
  rnnperfDraw(document);
  rnnperfOpen();
});
"""


class Raw(str):
    """HTML made here (a link, say), put in a table cell as it is."""


def esc(value: Any) -> str:
    """Text as HTML, quotes included (it also goes into attributes); ``Raw`` HTML as it is."""
    return value if isinstance(value, Raw) else html.escape(str(value), quote=True)


def anchor(prefix: str, name: str) -> str:
    """An id for an element: ``prefix`` and ``name`` with every character outside [A-Za-z0-9_-] made '_'."""
    return f"{prefix}-" + re.sub(r"[^A-Za-z0-9_-]", "_", name)


def plotly_missing() -> str | None:
    """The one line that says what to install where plotly cannot be imported, else None."""

    try:
        return None if find_spec("plotly") is not None else PLOTLY_MISSING
    except (ImportError, ValueError):  # a broken install reads like a missing one
        return PLOTLY_MISSING


@dataclass
class Charts:
    """The charts of one page: each figure's JSON kept apart from its div, drawn when its panel is visible.

    ``enabled`` is False without plotly: each chart is then a line saying what to install.
    """

    enabled: bool
    specs: list[str] = field(default_factory=list)

    def add(self, draw: Callable[[], Any], height: int) -> str:
        """The div of the plotly figure ``draw`` makes (called only with plotly), its data kept for the page's end."""
        if not self.enabled:
            return f'<p class="note">{esc(PLOTLY_MISSING)}</p>'
        import plotly.io as pio

        figure = draw()
        common = dict(height=height, margin=dict(l=60, r=20, t=36, b=40), font=dict(size=11),
                      hoverlabel=dict(align="left"))
        if isinstance(figure, dict):  # plotly's JSON as it is, which has no template: plotly.js's own defaults
            figure["layout"].update(common)
        else:
            figure.update_layout(template="none", **common)
        spec_id = f"spec-{len(self.specs)}"
        data = pio.to_json(figure, validate=False)
        self.specs.append(f'<script type="application/json" id="{spec_id}">{script_safe(data)}</script>')
        return f'<div class="chart" data-spec="{spec_id}" style="height:{height}px"></div>'


def plotly_script(mode: str) -> str:
    """plotly's JavaScript for the page's head: written into it ("inline"), or a file beside it (its name)."""
    if mode == "inline":
        from plotly.offline import get_plotlyjs

        return f"<script>{get_plotlyjs()}</script>"
    return f'<script src="{esc(mode)}"></script>'


def page(title: str, body: str, charts: Charts, plotly: str = "inline") -> str:
    """A whole page: head, style, plotly (where the page has charts), the body, the charts' data and our script."""
    head = plotly_script(plotly) if charts.enabled and charts.specs else ""
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<title>{esc(title)}</title>\n'
            f"<style>{STYLE}</style>\n{head}\n</head>\n<body>\n{body}\n" + "\n".join(charts.specs)
            + f"\n<script>{SCRIPT}</script>\n</body>\n</html>\n")


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "", numeric: Iterable[int] = (),
          row_attrs: Sequence[str] | None = None, table_id: str = "") -> str:
    """An HTML table; cells are escaped text, columns in ``numeric`` right-aligned, ``row_attrs`` per row."""
    right = set(numeric)
    ident = f' id="{esc(table_id)}"' if table_id else ""
    # The div scrolls a table wider than the window, instead of the whole page.
    out = [f'<div class="scroll"><table class="{cls}"{ident}><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in header)
           + "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        attrs = row_attrs[i] if row_attrs is not None else ""
        out.append(f"<tr{attrs}>" + "".join(f'<td class="num">{esc(c)}</td>' if j in right else f"<td>{esc(c)}</td>"
                                             for j, c in enumerate(row)) + "</tr>")
    return "\n".join(out) + "</tbody></table></div>"


def bullet_list(lines: Iterable[str]) -> str:
    """A compact list of text lines ('' when there are none)."""
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    return f'<ul class="tight">{items}</ul>' if items else ""


def filters(table_id: str, facet_values: Mapping[str, Iterable[str]], panels: str = "",
            checkbox: tuple[str, str] | None = None) -> str:
    """A filter bar for a table: one select per facet (its distinct values), a text box, an optional checkbox."""
    parts = [f'<div class="filters" data-table="{esc(table_id)}" data-panels="{esc(panels)}">']
    for facet, values in facet_values.items():
        options = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in sorted(set(values)))
        parts.append(f'<label>{esc(facet)} <select data-facet="{esc(facet)}"><option value="">all</option>'
                     f"{options}</select></label>")
    parts.append('<label>text <input type="search" data-facet="text" placeholder="filter rows"></label>')
    if checkbox is not None:
        parts.append(f'<label><input type="checkbox" data-facet="{esc(checkbox[0])}"> {esc(checkbox[1])}</label>')
    parts.append('<span class="count muted"></span></div>')
    return "".join(parts)


def verdict_word(row: CaseRow) -> str:
    """The verdict a case's row filters and reads by: its outcome, or "not judged"."""
    return NOT_JUDGED if row.verdict is None else str(row.verdict.outcome)


def outcome_kind(word: str) -> str:
    """Which colour an outcome word takes: "failed", "not failed" (a regression that did not fail), "improved",
    "ambiguous" or "other"."""
    if "regressed" in word:
        return "not failed" if "(not failed)" in word else "failed"
    if word in (Outcome.SUSPECT, Outcome.AMBIGUOUS_CLOCK):  # a regression held back: confirmed later, or the clock's
        return "not failed"
    return word if word in ("improved", "ambiguous") else "other"


def outcome_colour(word: str) -> str:
    """The colour of an outcome word on every chart: red failed, amber regressed but not failed, green improved."""
    return OUTCOME_COLOURS[outcome_kind(word)]


def verdict_class(word: str) -> str:
    """The CSS class of a verdict word (its colour)."""
    return {"failed": "regressed", "not failed": "warn"}.get(outcome_kind(word), outcome_kind(word).replace("other", ""))


def short_id(case_id: str, limit: int = ID_CHARS) -> Raw:
    """A case id for a narrow column: whole where short, else its start and end, the whole id in a tooltip."""
    if len(case_id) <= limit:
        return Raw(f'<span class="mono">{esc(case_id)}</span>')
    keep = limit - 1
    text = case_id[:keep - keep // 3] + "\u2026" + case_id[-(keep // 3):]
    return Raw(f'<span class="mono" title="{esc(case_id)}">{esc(text)}</span>')


def log_ticks(low: float, high: float) -> tuple[list[float], list[str]]:
    """Ticks of a log axis from ``low`` to ``high`` that read as numbers: 1, 2, 5, 10, 20 ... (powers of ten
    alone over more than three decades), each label the whole value."""

    if not (0 < low <= high):
        return [], []
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1,) if math.log10(high / low) > 3 else (1, 2, 5)
    values = [m * 10.0 ** e for e in range(first, last + 1) for m in steps]
    # One tick beyond each end: plotly pads the range a little and shows what falls in it.
    below = max(v for v in values if v <= low * (1 + 1e-9))
    above = min(v for v in values if v >= high * (1 - 1e-9))
    inside = [v for v in values if below <= v <= above]
    if len(inside) < 3:  # a narrow range: its ends and middle too, to two significant digits
        inside = sorted(set(inside) | {float(f"{v:.2g}") for v in (low, math.sqrt(low * high), high)})
    return inside, [f"{v:g}" for v in inside]


# ------------------------------------------------------------------------------------------------ charts


def hover(tag: str, axis: str, spec: str = "", fine: bool = False) -> str:
    """A plotly hover template's value of metric ``tag`` on ``axis`` as its hint shows it, e.g. "%{x:.2f}x"."""
    h = metric(tag).display  # the plotted values are already in the shown unit (rows' samples are in ms)
    unit = h.suffix or f" {h.unit}"
    return f"%{{{axis}:{spec or (h.fine if fine else h.spec)}}}{unit}<extra></extra>"


def speedup_figure(rows: Sequence[CaseRow]) -> Any:
    """Every paired case's speedup with its 95% interval, the baseline's beside it and the floor (plotly)."""
    import plotly.graph_objects as go

    paired = [r for r in rows if r.speedup is not None]
    ids = [r.id for r in paired]
    fig = go.Figure()
    now = [r.speedup for r in paired if r.speedup is not None]
    fig.add_trace(go.Scatter(x=[s.estimate for s in now], y=ids, mode="markers", name="now (95% CI)",
                             marker=dict(color=[COLOURS["now"] if r.verdict is None else
                                                outcome_colour(str(r.verdict.outcome)) for r in paired], size=8),
                             error_x=_error_bars(now), hovertemplate=f"%{{y}}<br>now {hover(WALL_SPEEDUP, 'x')}"))
    based = [(r.id, r.baseline_speedup) for r in paired if r.baseline_speedup is not None]
    if based:
        fig.add_trace(go.Scatter(x=[s.estimate for _, s in based], y=[i for i, _ in based], mode="markers",
                                 name="baseline (95% CI)", marker=dict(color=COLOURS["baseline"], symbol="square", size=7),
                                 error_x=_error_bars([s for _, s in based]),
                                 hovertemplate=f"%{{y}}<br>baseline {hover(WALL_SPEEDUP, 'x')}"))
    fig.add_trace(go.Scatter(x=[r.floor for r in paired], y=ids, mode="markers", name="floor",
                             marker=dict(color=COLOURS["floor"], symbol="line-ns-open", size=14, line=dict(width=2)),
                             hovertemplate=f"%{{y}}<br>floor {hover(FLOOR, 'x', '.1f')}"))
    fig.update_yaxes(autorange="reversed", automargin=True, tickfont=dict(size=10))
    fig.update_xaxes(title_text="cuDNN speedup over generic, wall time (x): median generic / median cuDNN",
                     rangemode="tozero")
    fig.update_layout(legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0))
    return fig


def time_figure(verdicts: Sequence[VerdictRow]) -> Any:
    """The deciding metric of every judged case: the cuDNN time's change against its baseline with its 95%
    interval, over the band of its threshold, coloured by the verdict (plotly)."""
    import plotly.graph_objects as go

    rows = sorted(verdicts, key=lambda v: -v.verdict.time.ratio.estimate)
    ids = [v.verdict.case_id for v in rows]
    times = [v.verdict.time for v in rows]
    fig = go.Figure()
    # The threshold as a band per case: a change inside it is noise by the rule, whatever its interval.
    fig.add_trace(go.Bar(y=ids, x=[2 * c.min_effect * 100 for c in times], base=[-c.min_effect * 100 for c in times],
                         orientation="h", marker=dict(color="rgba(140,149,159,0.25)"), name="threshold band",
                         hovertemplate="%{y}<br>threshold \u00b1%{customdata:.1f}%<extra></extra>",
                         customdata=[c.min_effect * 100 for c in times]))
    change = [(c.ratio.estimate - 1) * 100 for c in times]
    words = [str(v.verdict.outcome) for v in rows]
    basis = [f"{c.metric}" + (f", baseline: median of {c.processes} processes" if c.processes else "") for c in times]
    fig.add_trace(go.Scatter(
        x=change, y=ids, mode="markers", name="change now (95% CI)",
        marker=dict(color=[outcome_colour(w) for w in words], size=8),
        error_x=dict(type="data", symmetric=False, array=[(c.ratio.high - c.ratio.estimate) * 100 for c in times],
                     arrayminus=[(c.ratio.estimate - c.ratio.low) * 100 for c in times], thickness=1.2, width=3),
        customdata=[[w, b] for w, b in zip(words, basis)],
        hovertemplate="%{y}<br>%{customdata[1]} %{x:+.1f}%<br>%{customdata[0]}<extra></extra>"))
    fig.add_vline(x=0, line=dict(color="#57606a", width=1))
    fig.update_yaxes(autorange="reversed", automargin=True, tickfont=dict(size=10))
    what = "cuDNN device time" if all(v.verdict.basis == "device" for v in rows) else "cuDNN time (device; wall " \
        "where a run has none)"
    fig.update_xaxes(title_text=f"{what} now against the baseline (% change, 95% CI); grey: the threshold",
                     ticksuffix="%", zeroline=False)
    fig.update_layout(legend=dict(orientation="h", y=1.02, yanchor="bottom", x=0), barmode="overlay", bargap=0.45)
    return fig


def _error_bars(intervals: Sequence[Interval]) -> dict[str, Any]:
    """plotly's asymmetric error bars of intervals."""
    return dict(type="data", symmetric=False, array=[s.high - s.estimate for s in intervals],
                arrayminus=[s.estimate - s.low for s in intervals], thickness=1.2, width=3)


def samples_figure(row: CaseRow) -> dict[str, Any]:
    """A case's rounds: wall and device ms per step of both sides, now beside the baseline; its speedup on the right.

    Built as plotly's JSON rather than through its figure objects: one per case, their checks of every property
    cost more than the rest of a night's page."""
    assert row.detail is not None
    samples: Sequence[Samples] = row.detail.samples
    with_speedup = row.speedup is not None
    # Two panels side by side, 72% and 28% of the width left beside a gap of 0.1, each titled above its middle.
    split = 0.72 * (1 - 0.1)
    domains = [(0.0, split), (split + 0.1, 1.0)] if with_speedup else [(0.0, 1.0)]
    titles = [f"{MS} per step, each dot one round (log scale)", "speedup, 95% CI, and floor"]
    annotations: list[dict[str, Any]] = [
        dict(text=title, x=(low + high) / 2, y=1.0, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
             showarrow=False, font=dict(size=16)) for title, (low, high) in zip(titles, domains)]
    legend: set[str] = set()
    data: list[dict[str, Any]] = []
    for s in samples:
        data.append(dict(type="box", x=[f"{s.side} {s.timer}"] * len(s.ms), y=list(s.ms), name=s.run,
                         legendgroup=s.run, offsetgroup=s.run, showlegend=s.run not in legend, boxpoints="all",
                         jitter=0.5, pointpos=0, marker=dict(color=COLOURS[s.run], size=4), line=dict(width=1),
                         hovertemplate=f"{s.run} {s.side} {s.timer}<br>{hover(WALL, 'y', fine=True)}",
                         xaxis="x", yaxis="y"))
        legend.add(s.run)
    values = [v for s in samples for v in s.ms if v > 0]
    ticks, texts = log_ticks(min(values), max(values)) if values else ([], [])
    layout: dict[str, Any] = dict(
        boxmode="group", legend=dict(orientation="h", y=1.12, yanchor="bottom", x=0), annotations=annotations,
        xaxis=dict(anchor="y", domain=domains[0]),
        yaxis=dict(anchor="x", domain=[0.0, 1.0], type="log", title=dict(text=f"{MS} per step"),
                   **(dict(tickvals=ticks, ticktext=texts) if ticks else {})))
    if with_speedup:
        points = [(name, s) for name, s in (("now", row.speedup), ("baseline", row.baseline_speedup)) if s is not None]
        data.append(dict(type="scatter", x=[n for n, _ in points], y=[s.estimate for _, s in points], mode="markers",
                         showlegend=False, marker=dict(color=[COLOURS[n] for n, _ in points], size=9),
                         error_y=_error_bars([s for _, s in points]),
                         hovertemplate=f"%{{x}}: {hover(WALL_SPEEDUP, 'y')}", xaxis="x2", yaxis="y2"))
        layout.update(xaxis2=dict(anchor="y2", domain=domains[1]),
                      yaxis2=dict(anchor="x2", domain=[0.0, 1.0], rangemode="tozero",
                                  title=dict(text=METRICS[WALL_SPEEDUP].display.unit)),
                      shapes=[dict(type="line", xref="x2 domain", x0=0, x1=1, yref="y2", y0=row.floor, y1=row.floor,
                                   line=dict(color=COLOURS["floor"], dash="dash", width=1.5))])
        annotations.append(dict(text=f"floor {show(FLOOR, row.floor, 'g')}", xref="x2 domain", x=1, xanchor="right",
                                yref="y2", y=row.floor, yanchor="top", showarrow=False))
    return dict(data=data, layout=layout)


# ------------------------------------------------------------------------------------------------ sections


def _fmt_interval(s: Interval | None) -> str:
    """e.g. "7.36x [6.09, 8.47]" ('-' for none)."""
    return "-" if s is None else METRICS[WALL_SPEEDUP].interval(s.estimate, s.low, s.high)


def kernel_table(kernels: Sequence[KernelStat]) -> str:
    """A side's kernels: name, ms and launches per step, and each one's share of the side's kernel time."""
    total = sum(k.ms_per_step for k in kernels) or 1.0
    return table(("kernel", f"{MS}/step", METRICS[LAUNCHES].name, "share"),
                 [(k.name, show(KERNEL, from_ms(k.ms_per_step), fine=True), show(LAUNCHES, k.launches_per_step, "g"),
                   f"{k.ms_per_step / total:.1%}")
                  for k in kernels], numeric=(1, 2, 3))


def parity_table(rows: Sequence[ParityRow]) -> str:
    """Parity as a grid: one row per quantity, one column per comparison, each cell error / tolerance."""
    comparisons = list(dict.fromkeys(r.comparison for r in rows))
    quantities = list(dict.fromkeys(r.quantity for r in rows))
    cell = {(r.quantity, r.comparison): r for r in rows}
    body, attrs = [], []
    for q in quantities:
        found = [cell.get((q, c)) for c in comparisons]
        notes = "; ".join(dict.fromkeys(r.note for r in found if r is not None and r.note))
        body.append([q] + ["-" if r is None else f"{show(PARITY, r.error, fine=True)} / {show(PARITY, r.tolerance, '.0e')}" + ("" if r.ok else " FAIL")
                           for r in found] + [notes])
        attrs.append("" if all(r is None or r.ok for r in found) else ' class="bad"')
    return table(["quantity", *comparisons, "note"], body, numeric=range(1, len(comparisons) + 1), row_attrs=attrs)


def case_panel(row: CaseRow, verdict: VerdictRow | None, panel_id: str, charts: Charts) -> str:
    """A case's panel: its numbers, rounds, path evidence, parity, verdict, kernels, telemetry and environment diff."""
    d = row.detail
    assert d is not None
    word = verdict_word(row)
    bad = not row.gates_ok or (row.verdict is not None and row.verdict.fails)
    facet_badges = " ".join(f'<span class="badge muted">{esc(v)}</span>' for v in d.facets.values())
    summary = (f'<summary><span class="mono">{esc(row.id)}</span> {facet_badges} '
               f'<span class="badge {verdict_class(word)}">{esc(word)}</span>'
               + (' <span class="bad">gate failed</span>' if not row.gates_ok else "") + "</summary>")
    parts = [summary]
    if row.speedup is not None:
        line = (f"speedup, wall (median generic / median cuDNN) <b>{esc(_fmt_interval(row.speedup))}</b>, "
                f"floor {show(FLOOR, row.floor, 'g')}"
                + (f"; baseline {esc(_fmt_interval(row.baseline_speedup))}" if row.baseline_speedup else "")
                + (f"; speedup, device time {show(DEVICE_SPEEDUP, d.device_speedup)}" if d.device_speedup is not None
                   else "")
                + (f"; the table below judges the {ROUND_SPEEDUP}" if verdict is not None else ""))
        parts.append(f"<p>{line}</p>")
    if d.baseline_file:
        parts.append(f'<p class="muted">baseline record: {esc(d.baseline_file)}</p>')
    parts.append(charts.add(lambda: samples_figure(row), 340) if d.samples else "")
    parts.append("<h3>Path evidence</h3>" + table(("side", "ran what it claims", "evidence"),
                                                  [(p.impl, "yes" if p.ok else "NO", p.evidence) for p in d.proofs]))
    if d.parity:
        parts.append("<h3>Parity (normalized max error / tolerance)</h3>" + parity_table(d.parity))
    if verdict is not None:
        parts.append("<h3>Against the baseline</h3>" + table(COMPARISON_HEADER, verdict.comparisons, numeric=(1, 2, 3, 4, 5)))
        if verdict.verdict.drift:
            parts.append(f"<p>{esc(verdict.verdict.drift)}</p>")
    if d.kernels:
        boxes = "".join(f"<div><h3>Kernels: {esc(side)}</h3>{kernel_table(k)}</div>" for side, k in d.kernels.items())
        parts.append(f'<div class="grid">{boxes}</div>')
    if d.kernel_moves:
        parts.append("<h3>Kernels of the cuDNN side that moved against the baseline</h3>" + bullet_list(d.kernel_moves))
    if d.telemetry:
        parts.append("<h3>Telemetry (NVML)</h3>" + table(("field", "timed window", "energy window"), d.telemetry))
    if d.remarks:
        parts.append("<h3>Warnings and notes</h3>" + bullet_list(d.remarks))
    if d.baseline_file:
        parts.append("<h3>Environment changes since the baseline</h3>"
                     + (bullet_list(d.env_diff) or '<p class="muted">none (same fingerprint)</p>'))
    return f'<details class="case{" bad" if bad else ""}" id="{esc(panel_id)}">' + "\n".join(p for p in parts if p) + "</details>"


def status_line(rows: Rows) -> tuple[str, str]:
    """The page's first line and its class: the run's status, with how many failed, and never "all checks passed"
    where cuDNN cases did not run for want of a GPU."""
    status = rows.status
    if status == STATUSES[0]:
        words = [str(v.verdict.outcome) for v in rows.verdicts if v.verdict.case_id not in rows.expected]
        failed = sum(outcome_kind(w) == "failed" for w in words)
        held = sum(outcome_kind(w) == "not failed" for w in words)
        return f"{status}: {failed} case(s) failed" + (f", {held} regressed without failing" if held else ""), "fail"
    if rows.no_gpu and status == not_run(rows.no_gpu):
        return status, "warn"
    return status, "ok" if status == STATUSES[2] else "fail"


def regressions_table(rows: Rows, prefix: str) -> str:
    """What regressed, first: per case the metric that decided, its change and interval, the threshold, the kernel
    that moved and what changed in the environment; failures first, then the largest change."""
    moved = [v for v in rows.verdicts if outcome_kind(str(v.verdict.outcome)) in ("failed", "not failed")
             and v.verdict.case_id not in rows.expected]  # a known issue (xfail) is not tonight's finding
    if not moved:
        return ""
    env = {r.id: r.detail.env_diff for r in rows.cases if r.detail is not None}
    moved.sort(key=lambda v: (not v.verdict.fails, -deciding(v.verdict).ratio.estimate))
    cells, attrs = [], []
    for v in moved:
        c, word = deciding(v.verdict), str(v.verdict.outcome)
        link = Raw(f'<a href="#{esc(anchor(prefix, v.verdict.case_id))}">{short_id(v.verdict.case_id)}</a>')
        changed = env.get(v.verdict.case_id, rows.env_diff)
        # The run's own diff stands above the table; a case judged against another file has its own.
        fields = ("none" if not changed else "as above" if tuple(changed) == tuple(rows.env_diff) else
                  ", ".join(line.split(":", 1)[0] for line in changed))
        kernels = [_KERNEL_SCOPE.sub("", k) for k in v.kernels]
        cells.append([link, c.metric, change_text(c), f"{c.min_effect:.0%}", _tip(v.kernels, 48, "; ".join(kernels)),
                      _tip(changed, 48, fields),
                      Raw(f'<span class="{verdict_class(word)}" title="{esc(v.verdict.flagged)}">{esc(word)}</span>')])
        attrs.append(f' class="{"bad" if v.verdict.fails else "warn"}"')
    return (f"<h2>Regressions ({len(moved)})</h2>"
            + table(("case", "metric", "change [95% CI]", "threshold", "kernel that moved", "environment diff",
                     "verdict"), cells, cls="regressions wrap", numeric=(2, 3), row_attrs=attrs, table_id=f"{prefix}-regressions"))


# A kernel's namespaces ("at::cuda::<unnamed>::"): left out in a narrow cell, whole in its tooltip.
_KERNEL_SCOPE = re.compile(r"(?:[A-Za-z_]\w*|<unnamed>|\(anonymous namespace\))::")


def _tip(lines: Sequence[str], limit: int, text: str = "") -> Raw:
    """Lines in a narrow cell: ``text`` (else the first line) shortened to ``limit`` characters, all in a tooltip."""
    shown_text = text or (lines[0] if lines else "-")
    more = "" if text or len(lines) < 2 else f" (+{len(lines) - 1})"
    if len(shown_text) > limit:
        shown_text = shown_text[:limit - 1] + "\u2026"
    return Raw(f'<span title="{esc(chr(10).join(lines))}">{esc(shown_text + more)}</span>')


def _change_cell(row: CaseRow) -> Raw | str:
    """A case's change of its cuDNN time against the baseline, its interval in a tooltip ('-' where not judged)."""
    if row.verdict is None:
        return "-"
    c = row.verdict.time
    return Raw(f'<span title="{esc(c.metric)} {esc(change_text(c))}">{c.ratio.estimate - 1:+.1%}</span>')


def run_section(rows: Rows, charts: Charts, prefix: str = "c") -> str:
    """One GPU model's part of the run's page: the status and what regressed first, then the diff, the deciding
    metric's chart, the speedups, the table, and every case's panel."""
    out = []
    status, cls = status_line(rows)
    out.append(f'<div class="status {cls}" id="{prefix}-status">{esc(status)}</div>')
    out.append(f'<p>GPU <b>{esc(rows.gpu)}</b>; fingerprint <code>{esc(rows.fingerprint)}</code><br>'
               f'<span class="muted">{esc(rows.baseline)}</span></p>')
    if rows.unjudged:
        out.append(f'<p class="ambiguous">{esc(rows.unjudged)}</p>')
    if rows.env_diff:
        out.append("<h2>Environment changes since the baseline</h2>" + bullet_list(rows.env_diff))
    out.append(regressions_table(rows, prefix))
    if rows.verdicts:
        out.append("<h2>cuDNN time against the baseline</h2>"
                   '<p class="muted">each judged case\'s change with its 95% interval, over the band of its threshold: '
                   '<span class="regressed">red</span> failed, <span class="warn">orange</span> regressed without '
                   'failing (an untrusted window), <span class="improved">green</span> improved</p>'
                   + charts.add(lambda: time_figure(rows.verdicts), 22 * len(rows.verdicts) + 140))
    paired = [r for r in rows.cases if r.speedup is not None]
    if paired:
        out.append("<h2>Speedups</h2>" + charts.add(lambda: speedup_figure(paired), 24 * len(paired) + 130))
    verdicts = {v.verdict.case_id: v for v in rows.verdicts}
    if rows.cases:
        table_id, panels_id = f"{prefix}-cases", f"{prefix}-panels"
        judged = bool(rows.verdicts)
        header = list(rows.cases[0].cells) + (["cuDNN change"] if judged else []) + ["verdict"]
        cells, attrs = [], []
        for row in rows.cases:
            word = verdict_word(row)
            facet = dict(row.detail.facets if row.detail else {}, verdict=word)
            data = "".join(f' data-{k}="{esc(v)}"' for k, v in facet.items())
            bad = not row.gates_ok or (row.verdict is not None and row.verdict.fails)
            mark = "bad" if bad else "warn" if outcome_kind(word) == "not failed" else ""
            attrs.append(f'{data} data-panel="{esc(anchor(prefix, row.id))}"' + (f' class="{mark}"' if mark else ""))
            link = Raw(f'<a href="#{esc(anchor(prefix, row.id))}">{short_id(row.id)}</a>')  # the case's panel
            cells.append([link] + [row.cells[h] for h in rows.cases[0].cells if h != "case"]
                         + ([_change_cell(row)] if judged else [])
                         + [Raw(f'<span class="{verdict_class(word)}">{esc(word)}</span>')])
        body = table(header, cells, cls="sortable cases", numeric=[*range(1, len(rows.cases[0].cells) - 2)]
                     + ([len(header) - 2] if judged else []), row_attrs=attrs, table_id=table_id)
        facet_values = {k: [(r.detail.facets.get(k, "") if r.detail else "") if k != "verdict" else verdict_word(r)
                            for r in rows.cases] for k in FACETS}
        out.append("<h2>Cases</h2>" + filters(table_id, facet_values, panels=panels_id) + body)
        panels = [case_panel(r, verdicts.get(r.id), anchor(prefix, r.id), charts) for r in rows.cases if r.detail]
        out.append(f'<h2>Each case</h2><p class="muted">open a case for its rounds, path evidence, parity, '
                   f'kernels, telemetry and environment diff</p><div id="{panels_id}">' + "\n".join(panels) + "</div>")
    if rows.verdicts:
        verdict_header = tuple(ROUND_SPEEDUP if h == "speedup" else h for h in VERDICT_HEADER)
        out.append("<h2>Against the history</h2>"
                   + table(verdict_header, [v.cells for v in rows.verdicts], cls="sortable", numeric=(2, 3, 4))
                   + "".join(f"<p><b>{esc(v.verdict.case_id)}</b>: kernels: {esc('; '.join(v.kernels))}</p>"
                             for v in rows.verdicts if v.kernels))
    if rows.cross:
        out.append("<h2>Across frameworks (same canonical weights)</h2>" + table(CROSS_HEADER, rows.cross, cls="sortable"))
    if rows.claims:

        out.append("<h2>Claims (the folklore, measured on this machine)</h2>"
                   + table(HEADER, table_rows(rows.claims), cls="sortable"))
    if rows.skipped:
        out.append("<h2>Skipped</h2>" + table(("reason", "cases"), [(r, n) for r, n in rows.skipped], numeric=(1,)))
    if rows.environment:
        out.append(f"<details><summary><b>Fingerprint and environment</b> ({len(rows.environment)} fields)</summary>"
                   + table(("field", "value"), rows.environment, cls="sortable wrap") + "</details>")
    return "\n".join(out)


def run_page(sections: Sequence[tuple[str, Rows]], generated: str = "", notes: Sequence[str] = (),
             plotly: bool = True) -> str:
    """The run's page from its rows: one section per GPU model (one without a title for a single model)."""
    charts = Charts(enabled=plotly)
    body = ["<h1>pytest-rnnperf report</h1>"]
    if generated:
        body.append(f'<p class="muted">written {esc(generated)}</p>')
    if not plotly:
        body.append(f'<p class="note">{esc(PLOTLY_MISSING)}</p>')
    for i, (title, rows) in enumerate(sections):
        if title:
            body.append(f"<h2>GPU model {esc(title)}</h2>")
        body.append(run_section(rows, charts, prefix=f"s{i}"))
    if notes:
        body.append("<h2>Notes</h2>" + bullet_list(notes))
    return page("pytest-rnnperf report", "\n".join(body), charts)


def write_run_page(path: Any, sections: Sequence[tuple[str, Rows]], notes: Sequence[str] = ()) -> str | None:
    """Write the run's page to ``path``; the line saying charts are missing (plotly not installed), else None."""

    missing = plotly_missing()
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = run_page(sections, generated, notes, plotly=missing is None)
    Path(path).write_text(text, encoding="utf-8")
    return missing


def script_safe(text: str) -> str:
    """JSON text that can sit in a script element: "</" would end it, and "<\\/" is the same JSON string."""
    return text.replace("</", "<\\/")
