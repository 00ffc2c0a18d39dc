"""The Markdown summary for CI job pages, drawn from the report's rows."""

from __future__ import annotations

from typing import Sequence

from pytest_rnnperf.judge.claims import markdown_table
from pytest_rnnperf.report.rows import CROSS_HEADER, CaseRow, Rows, build_rows
from pytest_rnnperf.report.rows import shown as _v
from pytest_rnnperf.report.rows import run_status
from pytest_rnnperf.report.text import device_lines, model_title, xdist_line
from pytest_rnnperf.report.view import RunView


def _worker_markdown(run: RunView) -> list[str]:
    """One list item per pytest-xdist worker: its GPU, fingerprint and baseline (empty without workers)."""
    items = [f"- {w.id}: {w.gpu.name if w.gpu.available else 'no GPU'}, uuid {_v(w.gpu.uuid)}, "
             f"CUDA_VISIBLE_DEVICES={w.placement.pin or '(as given)'}, fingerprint `{w.fingerprint}`, "
             f"baseline {w.baseline or 'none'}, {len(w.measured.results)} case(s)" for w in run.workers()]
    return [xdist_line(run), ""] + items + [""] if items else []


def _table(header: list[str], cells: list[list[str]]) -> list[str]:
    """A Markdown table."""
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(row) + " |" for row in cells])


def _cases(rows: Sequence[CaseRow], with_verdict: bool) -> list[str]:
    """The case table; with a verdict column when the run was judged (a failing verdict in bold)."""
    header = list(rows[0].cells) + (["verdict"] if with_verdict else [])
    cells = []
    for row in rows:
        v = row.verdict
        verdict = "-" if v is None else (f"**{v.outcome}**" if v.fails else str(v.outcome))
        cells.append([row.cells[h] for h in rows[0].cells] + ([verdict] if with_verdict else []))
    return _table(header, cells)


def markdown(run: RunView, rows: Rows | None = None) -> str:
    """The Markdown summary for CI job pages: verdict counts, the results table, what changed."""
    views = run.model_views()
    if views:  # pytest-xdist workers on GPUs of different models: one section per model
        view_rows = [build_rows(view) for view in views]
        parts = [markdown(view, r).splitlines() for view, r in zip(views, view_rows)]
        grouped = [f"## pytest-rnnperf: {run_status(view_rows, run.measured.failed, run.incomplete())}", ""] \
            + _worker_markdown(run)
        for view, part in zip(views, parts):
            grouped += [f"## GPU model {model_title(run, view)}", ""] + part[2:] + [""]
        return "\n".join(grouped) + "\n"
    rows = rows or build_rows(run)
    out = [f"## pytest-rnnperf: {rows.status}", ""]
    d = run.gpu
    out.append(f"GPU: {d.name if d.available else 'none (' + d.reason + ')'}; driver {_v(d.driver_version)}; "
               f"fingerprint `{run.fingerprint()}`")
    out += [run.baseline_status(), ""] + _worker_markdown(run)
    for title, cases in (("cuDNN vs generic", rows.paired), ("generic vs float64 reference", rows.alone)):
        if cases:
            out += [f"### {title}", ""] + _cases(cases, with_verdict=bool(rows.verdicts)) + [""]
    if rows.cross:
        out += ["### Across frameworks (same canonical weights)", ""]
        out += _table(list(CROSS_HEADER), [list(row) for row in rows.cross]) + [""]
    if rows.claims:

        out += ["### Claims (the folklore, measured on this machine)", ""] + markdown_table(rows.claims) + [""]
    if rows.env_diff:
        out += ["### Environment changes since the baseline", ""] + [f"- {line}" for line in rows.env_diff] + [""]
    for row in rows.verdicts:
        v = row.verdict
        if v.fails:
            out.append(f"- **{v.case_id}**: {v.time.explain()}" + (f"; {v.host_line()}" if v.host_regressed else ""))
            out += [f"  - {line}" for line in row.kernels]
    out += [f"- {row.verdict.case_id}: {row.verdict.host_line()} (reported, not failed)" for row in rows.verdicts
            if row.verdict.host_regressed and not row.verdict.fails]
    # Each backend's line (indented in the terminal) becomes a list item, so Markdown keeps it on its own line.
    out += [f"- {line.strip()}" if line.startswith("  ") else line for line in device_lines(run, rows.time) if line]
    if run.measured.skipped:
        out.append(f"\n{len(run.measured.skipped)} case(s) skipped: " + "; ".join(sorted({r for _, r in run.measured.skipped})))
    return "\n".join(out) + "\n"
