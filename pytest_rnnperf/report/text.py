"""The terminal's text: the header, gate and regression failures as small tables, and the run's summary."""

from __future__ import annotations

import io
import os
import shutil
import sys
import textwrap
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from pytest_rnnperf.backends import problems, specs
from pytest_rnnperf.backends.base import CUDA_LIBRARIES
from pytest_rnnperf.judge.across import at_stored_speed
from pytest_rnnperf.judge.claims import HEADER, table_rows
from pytest_rnnperf.judge.precision import precision_finding
from pytest_rnnperf.judge.verdicts import Outcome, Verdict
from pytest_rnnperf.measure.environment import not_the_wheels
from pytest_rnnperf.measure.gpu import noise_warnings
from pytest_rnnperf.model.metrics import DEVICE_SPEEDUP, ENERGY_PER_STEP, FLOOR, METRICS, MS, WALL, WALL_SPEEDUP, show
from pytest_rnnperf.model.parity import format_failures
from pytest_rnnperf.report.rows import (ANSWER_HEADER, CROSS_HEADER, GENERIC_TIMES, STATUSES, TFLOPS_COLUMN,
                                        UNAVAILABLE, VERDICT_HEADER, CaseRow, PhaseTotals, Rows, TimeSpent, below_floor,
                                        build_rows, comparison_cells, env_diff_lines, kernel_lines, not_run)
from pytest_rnnperf.report.rows import shown as _v
from pytest_rnnperf.report.rows import resolution_line, run_status, time_spent, verdict_counts
from pytest_rnnperf.report.view import RunView

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.judge.verdicts import CaseVerdict, Comparison
    from pytest_rnnperf.model.records import CaseRecord

# The terminal's width is followed within these bounds: below 80 nothing reads well, above 200 lines get hard to
# follow; the report files keep every column at full width.
NARROWEST, WIDEST = 80, 200
# A log has no width of its own (80 is only the fallback): wide enough for a case id and its verdict on one line.
LOG_WIDTH = 120
FREE_TEXT = 24  # a column with longer cells (after the first) holds free text: it wraps before others give way
NARROWEST_COLUMN = 12  # no column is made narrower than this to fit
ENV_SHOWN = 6  # environment changes the summary names before it points to the report files


def terminal_width(columns: int | None = None) -> int:
    """The width to draw for: ``columns`` (pytest's terminal writer), else the terminal's (or $COLUMNS), clamped;
    LOG_WIDTH where the output is no terminal and $COLUMNS is unset (a CI log, a file)."""
    if "COLUMNS" not in os.environ and not _on_terminal():
        return LOG_WIDTH
    return max(NARROWEST, min(WIDEST, shutil.get_terminal_size().columns if columns is None else columns))


def _on_terminal() -> bool:
    """Whether this process writes to a terminal (the real stdout: pytest's capture may stand in for sys.stdout)."""
    stream = sys.__stdout__
    return stream is not None and stream.isatty()


def fit(lines: Iterable[str], width: int, hang: int = 2) -> list[str]:
    """Each line (and each line inside one) wrapped at spaces to ``width``, continued two past its own indent (at
    least ``hang``: under the case of a line that opens with a label)."""

    out: list[str] = []
    for line in (part for text in lines for part in text.split("\n")):
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * max(len(line) - len(line.lstrip(" ")) + 2, hang)
        out += textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False)
    return out


def header_lines(run: RunView, scale: str) -> list[str]:
    """The pytest header: GPU fingerprint, software versions, scale (cheap: no framework is imported)."""
    d = run.gpu
    if d.available:
        lines = [
            f"rnnperf: GPU {d.name} (sm {_v(d.compute_capability)}, {_v(d.memory_total)}, uuid {_v(d.uuid)})",
            f"rnnperf: driver {_v(d.driver_version)}, CUDA driver {_v(d.cuda_driver_version)}, power limit "
            f"{_v(d.power_limit_enforced_w)} W (default {_v(d.power_limit_default_w)} W), persistence "
            f"{_v(d.persistence_mode)}, ECC {_v(d.ecc_mode)}, MIG {_v(d.mig_mode)}, PCIe {_v(d.pcie_link)}",
            f"rnnperf: clocks SM {_v(d.sm_clock_mhz)}/{_v(d.sm_clock_max_mhz)} MHz, memory {_v(d.mem_clock_mhz)}/"
            f"{_v(d.mem_clock_max_mhz)} MHz, {_v(d.temperature_c)} C; other compute processes: "
            f"{_v(d.compute_processes)}",
        ]
    else:
        lines = [f"rnnperf: no GPU fingerprint: {d.reason} (cuDNN cases will be skipped)"]
    if run.plan:
        lines.append(f"rnnperf: {xdist_line(run)}")

    sw = run.software
    names = ["python", "pytest", "pytest-benchmark", "numpy"]
    names += list(dict.fromkeys(k for spec in specs() for k in spec.distributions)) + ["nvidia-ml-py"]
    lines.append("rnnperf: " + ", ".join(f"{n} {_v(sw.get(n, 'unavailable: not read'))}" for n in names))
    extra = {k: v for k, v in sw.items() if k not in names and k != "python_minor"}
    if extra:
        lines.append("rnnperf: " + ", ".join(f"{k} {_v(v)}" for k, v in sorted(extra.items())))
    lines.append(f"rnnperf: scale {scale}; framework CUDA/cuDNN builds and precision flags are read when a "
                 f"framework's first case runs (see the rnnperf summary)"
                 + ("; the cuDNN, cuBLAS and CUDA runtime each one loaded are named after collection" if d.available
                    else ""))
    if d.available:
        problem = run.device_timer.problem()
        lines.append("rnnperf: device time: CUPTI kernel records (cupti-python)" if problem is None
                     else f"rnnperf: device time off: {problem}")
    warnings = noise_warnings(d, own_pid=os.getpid()) + problems()
    return lines + [f"rnnperf: warning: {w}" for w in warnings]


def library_warnings(run: RunView) -> list[str]:
    """One line per CUDA library a framework loaded that is not the installed wheel's version (a system copy, say)."""

    warnings = []
    for name, fields in sorted(run.measured.runtime.items()):
        short = {k.split(".", 1)[-1]: v for k, v in fields.items()}
        for field, (_, title, wheel) in CUDA_LIBRARIES.items():
            for copy in not_the_wheels(short.get(field, UNAVAILABLE), run.software.get(wheel)):
                warnings.append(f"{name} runs {title} {copy}, not the installed wheel's {run.software[wheel]} "
                                f"(the loader found another copy first: LD_LIBRARY_PATH, ldconfig)")
    return warnings


def library_lines(run: RunView) -> list[str]:
    """Each framework read so far: the cuDNN, cuBLAS and CUDA runtime it loaded, with their paths, then the warnings."""

    lines = []
    for name, fields in sorted(run.measured.runtime.items()):
        short = {k.split(".", 1)[-1]: v for k, v in fields.items()}
        loaded = [f"{title} {_v(short[field])}" for field, (_, title, _) in CUDA_LIBRARIES.items() if field in short]
        if loaded:
            lines.append(f"rnnperf: {name} loaded " + ", ".join(loaded))
    return lines + [f"rnnperf: warning: {w}" for w in library_warnings(run)]


def path_parity_failures(label: str, proofs: Sequence[Any], parity: Any) -> list[str]:
    """Why ``label`` fails its path proofs or parity, as small tables; empty when both hold."""

    problems: list[str] = []
    bad_paths = [p for p in proofs if not p.ok]
    if bad_paths:
        problems.append(f"{label}: the implementation that ran is not the one claimed:")
        for p in bad_paths:
            want = "cuDNN" if p.impl == "cudnn" else "a generic (non-cuDNN) path"
            problems.append(f"  {p.impl:<8} expected {want}; saw: {p.evidence}")
    if not parity.ok:
        problems.append(f"{label}: " + format_failures(parity))
    return problems


def gate_failures(result: CaseRecord) -> list[str]:
    """Why a case fails its gates (path proof, parity, precision, speedup floor), as small tables; empty if it passes."""
    problems = path_parity_failures(result.id, result.proofs, result.parity)
    precision = precision_finding(result)
    if not precision.ok:
        problems.append(f"{result.id}: {precision.problem}")
    s, cudnn = result.speedup, result.cudnn
    if below_floor(result) and s is not None and cudnn is not None:
        problems.append(
            f"{result.id}: cuDNN speedup below its floor:\n"
            f"  {'obtained':>10} {'95% CI':>16} {'floor':>7}  cuDNN {MS}   generic {MS}\n"
            f"  {show(WALL_SPEEDUP, s.estimate, '>9.2f')} [{s.low:>5.2f}, {s.high:>5.2f}] "
            f"{show(FLOOR, result.case.floor, '>6.2f')}  "
            f"{show(WALL, cudnn.median, '>8.3f')}   {show(WALL, result.generic.median, '>10.3f')}\n"
            + ("  floors and where they come from: suites/floors.py" if hasattr(result.case, "shape")
               else "  the floor is the one the test passed to rnnperf.model(..., floor=)")
        )
    return problems


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int],
               width: int | None = None) -> list[str]:
    """A plain-text table drawn by rich: a header, a rule, one line per row (columns in ``right`` right-aligned).

    Within ``width`` (None: as wide as its cells) the free-text columns wrap first; where the rest is still too
    wide, the widest column gives way: its cells wrap at their spaces, and a word still too long folds onto the
    next line in the first column (what a row is, a case id) and is cut with an ellipsis in any other.
    """

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    natural = _widths(header, rows)
    if width is None or sum(max(n, len(str(h))) for n, h in zip(natural, header)) + 3 * (len(header) - 1) <= width:
        limits: list[int | None] = [None] * len(header)  # it fits with its headers on one line
    else:
        limits = _column_limits(natural, _widths(header, rows, words=True), width)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1))
    for i, name in enumerate(header):
        free = i == 0 or natural[i] > FREE_TEXT
        table.add_column(Text(name), justify="right" if i in right else "left",
                         overflow="fold" if free else "ellipsis", max_width=limits[i])
    for row in rows:
        table.add_row(*(Text(str(c)) for c in row))  # Text: "[window: ...]" is data, not rich markup
    out = io.StringIO()
    # No colour: the lines go to pytest's terminal writer, CI logs and tests as they are.
    Console(file=out, width=width or 100_000, color_system=None, force_terminal=False, highlight=False).print(table)
    return [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]


def _widths(header: Sequence[str], rows: Sequence[Sequence[str]], words: bool = False) -> list[int]:
    """Each column's width as its cells ask (``words``: the longest word of each, what wrapping cannot go under).

    A header wraps at its spaces ("cudnn ms" over "wall/dev"): only its longest word counts.
    """
    def size(text: str) -> int:
        """The cell's length, or its longest word's."""
        return max((len(w) for w in text.split()), default=0) if words else len(text)

    return [max([len(w) for w in str(name).split()] + [size(str(row[i])) for row in rows])
            for i, name in enumerate(header)]


def fits(header: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> bool:
    """The table fits ``width`` with its cells wrapped at their spaces at most."""
    return sum(_widths(header, rows, words=True)) + 3 * (len(header) - 1) <= width


def _column_limits(natural: list[int], words: list[int], width: int) -> list[int | None]:
    """Each column's largest width so that the table fits ``width`` (its headers wrapped at their spaces).

    rich would shrink every wrapping column alike; this shares the room out: the first column and the free-text
    columns share what the others leave (the free text at least NARROWEST_COLUMN a column), then the others give
    way, the widest first: a column whose cells wrap at their spaces, then the first column (its ids fold), then
    any other (cut with an ellipsis).
    """
    gaps = 3 * (len(natural) - 1)  # one space of padding either side of the separator
    limits: list[int | None] = list(natural)
    if sum(natural) + gaps <= width:
        return limits
    free = [i for i, n in enumerate(natural) if i > 0 and n > FREE_TEXT]
    widths = {i: n for i, n in enumerate(natural) if i not in free}
    room = width - gaps - sum(widths.values()) + widths[0]  # what the first column and the free text share
    if free and widths[0] + sum(natural[i] for i in free) > room:
        # The first column (what a row is) keeps up to two thirds of it, more where the free text needs less.
        widths[0] = limits[0] = max(min(widths[0], room * 2 // 3), room - sum(natural[i] for i in free))
    share = max(room - widths[0], NARROWEST_COLUMN * len(free))
    for k, i in enumerate(sorted(free, key=natural.__getitem__)):  # the narrowest take their own width first
        limits[i] = limit = min(natural[i], share // (len(free) - k))
        share -= limit
    excess = sum(widths.values()) + sum(limits[i] or 0 for i in free) + gaps - width
    while excess > 0:  # the others alone are too wide: one gives way, a character at a time
        wrapping = [i for i in widths if i > 0 and widths[i] > max(words[i], NARROWEST_COLUMN)]
        first = [0] if widths[0] > NARROWEST_COLUMN else []
        pool = wrapping or first or [i for i in widths if widths[i] > NARROWEST_COLUMN]
        if not pool:
            break  # nothing left to give: rich cuts what still sticks out
        widest = max(pool, key=widths.__getitem__)
        widths[widest] -= 1
        limits[widest] = widths[widest]
        excess -= 1
    return limits


# The case table's columns a narrow terminal leaves out, the first first (summary.md and rnnperf.json keep them).
OPTIONAL_COLUMNS = (METRICS[ENERGY_PER_STEP].name, TFLOPS_COLUMN, METRICS[DEVICE_SPEEDUP].name, GENERIC_TIMES,
                    METRICS[FLOOR].name)


def cases_table(rows: Sequence[CaseRow], width: int | None = None) -> list[str]:
    """The per-case table: medians, speedup with its interval, floor, TFLOP/s, energy, parity, path (within
    ``width``, without the OPTIONAL_COLUMNS it has no room for, named in a line under it)."""
    if not rows:
        return []
    header = list(rows[0].cells)
    left_out: list[str] = []
    for name in OPTIONAL_COLUMNS:
        if width is None or fits(header, [[row.cells[h] for h in header] for row in rows], width):
            break
        if name in header:
            header.remove(name)
            left_out.append(name)
    numbers = [h for h in list(rows[0].cells)[1:-2]]  # the measured columns are right-aligned; parity and path not
    lines = text_table(header, [[row.cells[h] for h in header] for row in rows],
                       right={i for i, h in enumerate(header) if h in numbers}, width=width)
    if left_out:
        lines.append(f"(not shown at this width: {', '.join(left_out)}; all columns in summary.md and rnnperf.json)")
    return lines


def regression_failure(verdict: CaseVerdict, run: RunView) -> str:
    """Failure text for a regressed case: the comparison table, the kernels that moved and what changed."""
    cold = ", ".join(c.metric for c in verdict.cold_regressed)
    what = (f"{cold} regressed (steady time {verdict.time.verdict})" if cold and verdict.verdict is not Verdict.REGRESSED
            else "launch/dispatch overhead regressed" if verdict.verdict is not Verdict.REGRESSED
            else f"cuDNN {verdict.basis} time regressed" if verdict.time.verdict is Verdict.REGRESSED
            else "a cuDNN-side kernel regressed" if verdict.regressed_kernels
            else "cuDNN busy and kernel time together regressed" if verdict.balanced_regressed
            else "cuDNN steady kernels regressed" if verdict.steady_regressed
            else "cuDNN kernels overlapped less than in any stored process" if verdict.overlap_regressed
            else "cuDNN device time drifted")
    processes = verdict.processes or (verdict.cold_regressed[0].processes if cold else 0)  # cold: its own history
    against = (f"its history of {processes} processes on this GPU model" if processes
               else "the baseline of this GPU")
    lines = [
        f"{verdict.case_id}: {what} against {against}"
        + (" (after one re-measure)" if verdict.remeasured else "")
        + (f" [{verdict.host_bound}; threshold {verdict.time.min_effect:.0%}]" if verdict.host_bound else ""),
        f"  {'metric':<19} {'baseline':>12} {'now':>12} {'ratio [95% CI]':>24} {'p':>8}  verdict",
    ]
    judged = [c for c in (verdict.time, verdict.work, verdict.balanced, verdict.steady, verdict.overlap, verdict.host)
              if c is not None]
    lines += [_comparison_row(c) for c in (*judged, *([verdict.speedup] if verdict.speedup is not None else []))]
    if verdict.host_regressed:
        lines.append(f"  {verdict.host_line()}")
    if verdict.processes:
        lines += [f"  {c.explain()}" for c in judged]
    elif verdict.time.why:  # across processes the line above says it
        lines.append(f"  {verdict.time.why}")
    lines += [f"  {c.explain()}" for c in verdict.cold]
    if verdict.drift:
        lines.append(f"  {verdict.drift}")
    if verdict.confirm_nights > 1:
        lines.append(f"  regressed on {verdict.nights} stored nights running (--rnnperf-confirm-nights="
                     f"{verdict.confirm_nights})")
    kernels = [k.explain() for k in verdict.kernels] or kernel_lines(verdict, run)
    if kernels:
        lines.append("  kernels of the cuDNN side: " + "; ".join(kernels))
    elif verdict.basis == "wall":
        lines.append("  judged on wall time: the baseline or this run has no device time")
    diff = env_diff_lines(run, verdict.case_id)
    lines.append("  environment changes since the baseline: " + ("; ".join(diff) if diff else "none (same fingerprint)"))
    stored = run.stored.stored_run(verdict.case_id)
    lines.append(f"  baseline: {stored.path if stored else '-'}")
    lines.append("  if the change is intended, record a new baseline: the same pytest command plus "
                 "--rnnperf-update-baseline")
    return "\n".join(fit(lines, terminal_width()))  # pytest prints it as it is: long lines run off a CI log


def _comparison_row(c: Comparison) -> str:
    """One row of a comparison table (each value as its metric's hint shows it)."""
    _, base, now, ci, p, _, _ = comparison_cells(c)
    return f"  {c.metric:<19} {base:>12} {now:>12} {ci:>24} {p:>8}  {c.verdict}"


def answer_lines(rows: Rows, width: int | None = None) -> list[str]:
    """What the summary leads with: the status, the failed and regressed cases with the kernels that moved, and
    what changed in the environment (driver, CUDA, cuDNN and framework versions first)."""
    lines = [f"rnnperf: {headline(rows)}"]
    if rows.answer:
        lines += text_table(ANSWER_HEADER, [a.cells for a in rows.answer], right={2, 3}, width=width)
        lines += [f"  kernels of {a.case} that moved: " + "; ".join(a.kernels) for a in rows.answer if a.kernels]
    if rows.expected:
        lines.append(f"known issues: {len(rows.expected)} case(s) failed as their tests are marked to (xfail), not "
                     f"counted above: {', '.join(rows.expected)}")
    if rows.answer or any(row.verdict.moved for row in rows.verdicts) or rows.env_diff:
        shown = list(rows.env_diff[:ENV_SHOWN])
        if len(rows.env_diff) > ENV_SHOWN:
            shown.append(f"and {len(rows.env_diff) - ENV_SHOWN} more (rnnperf.json, summary.md)")
        lines.append("environment changes since the baseline: " + ("; ".join(shown) or "none"))
    return lines


def headline(rows: Rows) -> str:
    """The run's status, with the cuDNN cases that did not run where the status does not already say so."""
    missing = not_run(rows.no_gpu)
    suspect = sum(row.verdict.outcome is Outcome.SUSPECT for row in rows.verdicts)
    # A passing night with suspects is not a quiet one: say so where the reader looks first.
    held = f"; {suspect} suspect (they fail if they regress again: --rnnperf-confirm-nights)" if suspect else ""
    partial = f"; {rows.incomplete}" if rows.incomplete and rows.incomplete != rows.status else ""
    return rows.status + (f"; {missing}" if missing and missing != rows.status else "") + partial + held


def verdict_lines(rows: Rows, width: int | None = None) -> list[str]:
    """The verdict table against the baseline, the cases it cannot judge, and the kernels of the other cases that
    moved (the failed and regressed ones lead the summary: ``answer_lines``)."""
    unjudged = [rows.unjudged] if rows.unjudged else []
    if not rows.verdicts:
        return [""] + unjudged if unjudged else []
    lines = ["", "against the history (xN: the median of N stored processes; else the newest stored record) -- cuDNN "
                 "device time decides, wall time where either has none; see docs/judging.md:"]
    lines += text_table(VERDICT_HEADER, [row.cells for row in rows.verdicts], right={2, 3, 4}, width=width)
    lines.append("verdicts: " + verdict_counts(row.verdict for row in rows.verdicts))
    resolution = resolution_line(row.verdict for row in rows.verdicts)
    lines += [resolution] if resolution else []
    lines += unjudged
    for row in rows.verdicts:
        v = row.verdict
        if v.host_regressed and not v.fails:
            lines.append(f"host overhead of {v.case_id}: {v.host_line()} (reported, not failed; --rnnperf-fail-host "
                         f"fails on it)")
        if v.outcome is Outcome.AMBIGUOUS_CLOCK:
            lines.append(f"clock of {v.case_id}: {v.clock} (reported, not failed)")
        if v.suspect:
            lines.append(f"{v.case_id}: {v.suspect} (--rnnperf-confirm-nights)")
        # Beyond its threshold, yet where its history has run before: not failed, and not silently either.
        if (sped := next((c for c in (v.time, v.balanced) if at_stored_speed(c)), None)) is not None:
            lines.append(f"{v.case_id}: {sped.metric} {sped.ratio.estimate - 1:+.1%}, {sped.why} (not failed)")
    answered = {a.case for a in rows.answer}
    lines += [f"kernels of {row.verdict.case_id}: " + "; ".join(row.kernels) for row in rows.verdicts
              if row.kernels and row.verdict.case_id not in answered]
    return lines


def device_lines(run: RunView, spent: TimeSpent | None = None) -> list[str]:
    """Why device time is missing where it is, and where the run's time went, phase by phase and per backend."""
    lines: list[str] = []
    notes: dict[str, int] = {}
    for r in run.measured.results:
        if r.device_note:
            notes[r.device_note] = notes.get(r.device_note, 0) + 1
    lines += [f"{note} ({n} case(s))" for note, n in notes.items()]
    lines += time_lines(spent or time_spent(run.measured.results))
    return [""] + lines if lines else []


def _phases(totals: PhaseTotals, digits: int) -> str:
    """e.g. "build 37 s, parity 34 s": each phase's seconds."""
    return ", ".join(f"{phase} {seconds:.{digits}f} s" for phase, seconds in totals.phases)


def time_lines(spent: TimeSpent | None) -> list[str]:
    """"where the time went": the cases' phases, the run's wall time beside them, then one line per backend."""
    if spent is None:
        return []
    cases = spent.cases
    # The gap between the two is what no case's phases hold: imports, collection, subprocess starts, cross checks.
    run = "" if spent.wall_s is None else f" of a {spent.wall_s:.0f} s run"
    if spent.wall_s is not None and spent.collection_s is not None:
        run += f", {spent.collection_s:.0f} s of it collecting"
    if spent.wall_s is not None and spent.before_tests_s is not None and spent.after_tests_s is not None:
        run += f", {spent.before_tests_s:.0f} s before the first test, {spent.after_tests_s:.0f} s after the last"
        run += "" if spent.ending is None else spent.ending.text()
    over = f" over {spent.workers} workers" if spent.workers > 1 else ""  # their seconds add up past the run's
    lines = [f"where the time went ({cases.cases} case(s), {cases.total_s:.0f} s{over}{run}): {_phases(cases, 1)}"]
    lines += [f"  {b.name}: {b.cases} case(s) {b.total_s:.0f} s: {_phases(b, 0)}" for b in spent.backends]
    return lines


def xdist_line(run: RunView) -> str:
    """e.g. "pytest-xdist: 2 workers, one GPU each: gw0 NVIDIA H200 (GPU-1234abcd) on CPUs 0-15, ..." (empty without
    workers)."""
    workers = run.workers() or run.plan  # what they reported, else (in the header) what the controller foresees
    if not workers:
        return ""
    n = workers[0].placement.workers
    if not any(w.gpu.available for w in workers):  # a CPU runner: nothing to time, nothing to say about GPUs
        return f"pytest-xdist: {n} worker{'s' if n != 1 else ''}, no GPU: the reference checks run in parallel"
    shared = run.parallel_reason()
    if shared is not None:
        return f"pytest-xdist: {shared}"
    # A worker pinned to its own CPUs says which (once it reported): another worker's threads could not delay it.
    labels = (w.gpu_label() + (f" on CPUs {w.placement.cpus}" if w.placement.cpus else "") for w in workers)
    return f"pytest-xdist: {n} worker{'s' if n != 1 else ''}, one GPU each: " + ", ".join(labels)


def model_title(run: RunView, view: RunView) -> str:
    """e.g. "NVIDIA H200 (gw0, gw2)": one GPU model of a pytest-xdist run and the workers that measured on it."""
    return f"{view.gpu.name} ({', '.join(w.id for w in run.models().get(view.gpu.gpu_slug, []))})"


def summary_lines(run: RunView, rows: Rows | None = None, width: int | None = None) -> list[str]:
    """Everything the terminal summary prints, within ``width``: first the answer (status, what failed or regressed,
    what changed), then the environment, the tables, verdicts, skips, warnings and notes."""
    views = run.model_views()
    if views:  # pytest-xdist workers on GPUs of different models: each model's tables against its own baselines
        # The run's own status first: each model's block judges its share, blind to failures heard outside them.
        view_rows = [build_rows(view) for view in views]
        grouped = [f"rnnperf: {run_status(view_rows, run.measured.failed, run.incomplete())}", xdist_line(run)]
        for view, rows_of_view in zip(views, view_rows):
            grouped += ["", f"GPU model {model_title(run, view)}:"] + summary_lines(view, rows_of_view, width=width)
        grouped += [""] + list(run.measured.notes) if run.measured.notes else []
        return fit(grouped, width) if width else grouped
    rows = rows or build_rows(run)
    lines: list[str] = answer_lines(rows, width) + [""]
    lines += [xdist_line(run), ""] if run.worker_runs else []
    for name, fields in sorted(run.measured.runtime.items()):
        lines.append(f"{name}: " + ", ".join(f"{k.split('.', 1)[-1]}={_v(v)}" for k, v in fields.items()))
    lines += [f"warning: {w}" for w in library_warnings(run)]
    if rows.paired:
        lines += ["", f"cuDNN vs generic (medians per step, wall/device {MS}; speedup = generic/cuDNN):"]
        lines += cases_table(rows.paired, width)
    if rows.alone:
        lines += ["", "generic path vs float64 reference:"] + cases_table(rows.alone, width)
    if rows.cross:
        lines += ["", "across frameworks (one checkpoint, converted to each framework's layout):"]
        lines += text_table(CROSS_HEADER, rows.cross, right=set(), width=width)
    if rows.claims:

        lines += ["", "claims (the folklore, measured on this machine):"]
        lines += text_table(HEADER, table_rows(rows.claims), set(), width=width)
    if run.measured.skipped:
        lines += [""] + [f"skipped {n} case(s): {reason}" for reason, n in rows.skipped]
    lines += verdict_lines(rows, width)
    # Window flags are warnings (the measurement may be off); notes are facts about the case (compile time, a side
    # that did not run, an energy window too short to mean much).
    warned = [f"warning: {r.id}: {w}" for r in run.measured.results for w in r.warnings if w not in r.notes]
    noted = [f"note: {r.id}: {n}" for r in run.measured.results for n in r.notes]
    if warned or noted:
        lines += [""] + warned + noted
    lines += device_lines(run, rows.time)
    lines += ["", run.baseline_status()] + list(run.measured.notes)
    if rows.status != STATUSES[2]:  # the block's last line repeats the answer for a reader at the bottom
        lines += ["", f"rnnperf: {headline(rows)}"]
    while lines and not lines[0]:
        lines.pop(0)  # sections open with a blank line; the first needs none
    return fit(lines, width) if width else lines
