"""The report's files: rnnperf.json, summary.md, index.html, the speedup plots and the CI step summary."""

from __future__ import annotations

import fnmatch
import json
import math
from pathlib import Path
from typing import Any

from pytest_rnnperf.report.html import write_run_page
from pytest_rnnperf.report.markdown import markdown
from pytest_rnnperf.report.plot import plot_speedups
from pytest_rnnperf.report.rows import Rows, build_rows
from pytest_rnnperf.report.text import model_title
from pytest_rnnperf.report.view import RunView

# Dropped in every folder a run writes its report (or its subprocesses' logs) to: a later run may replace its files.
MARKER = ".rnnperf-report"
WRITTEN = ("rnnperf.json", "summary.md", "index.html", "speedups*.png")  # what a report replaces, as globs


def mark_report_folder(folder: Path) -> None:
    """Make ``folder`` and mark it as a report folder, which later runs may write over."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / MARKER
    if not marker.exists():
        marker.write_text("pytest-rnnperf writes its report here; each run replaces rnnperf.json, summary.md, "
                          "index.html and the plots\n", encoding="utf-8")


def foreign_files(folder: Path) -> list[str]:
    """The files of ``folder`` that no rnnperf report wrote, those a report would replace first.

    None for a missing or empty folder, or one that holds an earlier report: marked, or (written before reports
    were marked) holding an rnnperf.json of a report. Hidden files (.gitkeep) are never replaced and do not count.
    """

    if not folder.is_dir() or (folder / MARKER).exists() or _is_report_json(folder / "rnnperf.json"):
        return []
    names = (p.name for p in folder.iterdir() if not p.name.startswith("."))
    return sorted(names, key=lambda name: (not any(fnmatch.fnmatch(name, glob) for glob in WRITTEN), name))


def _is_report_json(path: Path) -> bool:
    """``path`` is the rnnperf.json of a report: a JSON object holding the run's fingerprint, results and table."""

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"format", "fingerprint", "results", "table"} <= data.keys()


def write_reports(run: RunView, report_dir: str, markdown_path: str = "", step_summary: str = "",
                  rows: Rows | None = None) -> list[str]:
    """Write rnnperf.json, summary.md, index.html and speedups.png (and the Markdown to the CI summary); returns notes.

    Output paths are checked before the run; a write that still fails (a full disk, say) becomes a note,
    so the summary and the other files are not lost with it.
    """


    notes: list[str] = []
    rows = rows or build_rows(run)
    md = markdown(run, rows)
    if report_dir and report_dir.lower() != "none":
        folder = Path(report_dir)
        written = []
        try:
            mark_report_folder(folder)
            data = dict(run.as_dict(), table=rows.as_dict())  # the rows as the summary shows them, for other tools
            (folder / "rnnperf.json").write_text(json.dumps(as_json_safe(data), indent=2), encoding="utf-8")
            written.append("rnnperf.json")
            (folder / "summary.md").write_text(md, encoding="utf-8")
            written.append("summary.md")
            notes += _write_page(run, rows, folder, written)
            # Workers on GPUs of different models: one plot per model, beside that model's baseline.
            plots = ([(build_rows(v), f"speedups-{v.gpu.gpu_slug}.png") for v in run.model_views()]
                     or [(rows, "speedups.png")])
            for subject, name in plots:
                if plot_speedups(subject, folder / name):
                    written.append(name)
        except ImportError:
            notes.append("plot skipped: matplotlib is not installed")
        except OSError as exc:
            notes.append(f"report not written to {folder}: {exc.strerror or exc}")
        if written:
            notes.append(f"reports written to {folder}/: {', '.join(written)}")
    for target in (markdown_path, step_summary):
        if target:
            try:
                with open(target, "a", encoding="utf-8") as fh:  # GitHub appends step summaries; so do we
                    fh.write(md)
                notes.append(f"Markdown summary appended to {target}")
            except OSError as exc:
                notes.append(f"Markdown summary not written to {target}: {exc.strerror or exc}")
    return notes


def _write_page(run: RunView, rows: Rows, folder: Any, written: list[str]) -> list[str]:
    """Write index.html (one section per GPU model of a mixed-model run); a note where it lacks its charts or failed."""

    views = run.model_views()
    sections = [(model_title(run, v), build_rows(v)) for v in views] if views else [("", rows)]
    try:
        missing = write_run_page(folder / "index.html", sections, notes=run.measured.notes)
    except ImportError as exc:  # plotly found but broken: the other files are worth more than the page
        return [f"index.html not written: {exc}"]
    written.append("index.html")
    return [f"index.html has no charts: {missing}"] if missing else []


def as_json_safe(obj: Any) -> Any:
    """Replace non-finite floats by strings so the JSON stays strict."""

    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: as_json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [as_json_safe(v) for v in obj]
    return obj
