"""The terminal's text: the header, gate and regression failures as small tables, and the run's summary."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

from pytest_rnnperf.judge.verdicts import Verdict
from pytest_rnnperf.report.rows import (CROSS_HEADER, UNAVAILABLE, VERDICT_HEADER, CaseRow, PhaseTotals, Rows,
                                        TimeSpent, build_rows, env_diff_lines, kernel_lines, below_floor,
                                        shown as _v, time_spent, verdict_counts)
from pytest_rnnperf.report.view import RunView

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.judge.verdicts import CaseVerdict, Comparison
    from pytest_rnnperf.model.records import CaseRecord

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
    from pytest_rnnperf.backends import problems, specs
    from pytest_rnnperf.measure.gpu import noise_warnings

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
    from pytest_rnnperf.backends.base import CUDA_LIBRARIES
    from pytest_rnnperf.measure.environment import not_the_wheels

    warnings = []
    for name, fields in sorted(run.runtime.items()):
        short = {k.split(".", 1)[-1]: v for k, v in fields.items()}
        for field, (_, title, wheel) in CUDA_LIBRARIES.items():
            for copy in not_the_wheels(short.get(field, UNAVAILABLE), run.software.get(wheel)):
                warnings.append(f"{name} runs {title} {copy}, not the installed wheel's {run.software[wheel]} "
                                f"(the loader found another copy first: LD_LIBRARY_PATH, ldconfig)")
    return warnings


def library_lines(run: RunView) -> list[str]:
    """Each framework read so far: the cuDNN, cuBLAS and CUDA runtime it loaded, with their paths, then the warnings."""
    from pytest_rnnperf.backends.base import CUDA_LIBRARIES

    lines = []
    for name, fields in sorted(run.runtime.items()):
        short = {k.split(".", 1)[-1]: v for k, v in fields.items()}
        loaded = [f"{title} {_v(short[field])}" for field, (_, title, _) in CUDA_LIBRARIES.items() if field in short]
        if loaded:
            lines.append(f"rnnperf: {name} loaded " + ", ".join(loaded))
    return lines + [f"rnnperf: warning: {w}" for w in library_warnings(run)]


def path_parity_failures(label: str, proofs: Sequence[Any], parity: Any) -> list[str]:
    """Why ``label`` fails its path proofs or parity, as small tables; empty when both hold."""
    from pytest_rnnperf.model.parity import format_failures

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
    """Why a case fails its gates (path proof, parity, speedup floor), as small tables; empty if it passes."""
    problems = path_parity_failures(result.id, result.proofs, result.parity)
    s, cudnn = result.speedup, result.cudnn
    if below_floor(result) and s is not None and cudnn is not None:
        problems.append(
            f"{result.id}: cuDNN speedup below its floor:\n"
            f"  {'obtained':>10} {'95% CI':>16} {'floor':>7}  cuDNN ms   generic ms\n"
            f"  {s.estimate:>9.2f}x [{s.low:>5.2f}, {s.high:>5.2f}] {result.case.floor:>6.2f}x  "
            f"{cudnn.median * 1e3:>8.3f}   {result.generic.median * 1e3:>10.3f}\n"
            + ("  floors and where they come from: suites/floors.py" if hasattr(result.case, "shape")
               else "  the floor is the one the test passed to rnnperf.model(..., floor=)")
        )
    return problems


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    """A plain-text table drawn by rich: a header, a rule, one line per row (columns in ``right`` right-aligned)."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1))
    for i, name in enumerate(header):
        table.add_column(Text(name), justify="right" if i in right else "left", no_wrap=True)
    for row in rows:
        table.add_row(*(Text(str(c)) for c in row))  # Text: "[window: ...]" is data, not rich markup
    out = io.StringIO()
    # No colour, no wrapping: the lines go to pytest's terminal writer, CI logs and tests as they are.
    Console(file=out, width=100_000, color_system=None, force_terminal=False, highlight=False).print(table)
    return [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]


def cases_table(rows: Sequence[CaseRow]) -> list[str]:
    """The per-case table: medians, speedup with its interval, floor, TFLOP/s, energy, parity, path."""
    if not rows:
        return []
    header = list(rows[0].cells)
    return text_table(header, [[row.cells[h] for h in header] for row in rows], right=set(range(1, len(header) - 2)))


def regression_failure(verdict: CaseVerdict, run: RunView) -> str:
    """Failure text for a regressed case: the comparison table, the kernels that moved and what changed."""
    what = ("launch/dispatch overhead regressed" if verdict.verdict is not Verdict.REGRESSED
            else f"cuDNN {verdict.basis} time regressed" if verdict.time.verdict is Verdict.REGRESSED
            else "a cuDNN-side kernel regressed" if verdict.regressed_kernels
            else "cuDNN device time drifted")
    against = (f"its history of {verdict.processes} processes on this GPU model" if verdict.processes
               else "the baseline of this GPU")
    lines = [
        f"{verdict.case_id}: {what} against {against}"
        + (" (after one re-measure)" if verdict.remeasured else "")
        + (f" [{verdict.host_bound}; threshold {verdict.time.min_effect:.0%}]" if verdict.host_bound else ""),
        f"  {'metric':<19} {'baseline':>12} {'now':>12} {'ratio [95% CI]':>24} {'p':>8}  verdict",
    ]
    lines += [_comparison_row(c) for c in (verdict.time, verdict.work, verdict.host, verdict.speedup) if c is not None]
    if verdict.host_regressed:
        lines.append(f"  {verdict.host_line()}")
    if verdict.processes:
        lines += [f"  {c.explain()}" for c in (verdict.time, verdict.work, verdict.host) if c is not None]
    if verdict.drift:
        lines.append(f"  {verdict.drift}")
    kernels = [k.explain() for k in verdict.kernels] or kernel_lines(verdict, run)
    if kernels:
        lines.append("  kernels of the cuDNN side: " + "; ".join(kernels))
    elif verdict.basis == "wall":
        lines.append("  judged on wall time: the baseline or this run has no device time")
    diff = env_diff_lines(run, verdict.case_id)
    lines.append("  environment changes since the baseline: " + ("; ".join(diff) if diff else "none (same fingerprint)"))
    stored = run.stored_run(verdict.case_id)
    lines.append(f"  baseline: {stored.path if stored else '-'}")
    lines.append("  if the change is intended, record a new baseline: pytest suites/ --rnnperf-update-baseline")
    return "\n".join(lines)


def _comparison_row(c: Comparison) -> str:
    """One row of a comparison table (times in ms, speedups as x)."""
    speed = c.metric == "speedup"
    fmt = (lambda v: f"{v:.2f}x") if speed else (lambda v: f"{v * 1e3:.4f} ms")
    p = "n/a" if c.p_value is None else f"{c.p_value:.1e}"
    ci = f"{c.ratio.estimate:.3f} [{c.ratio.low:.3f}, {c.ratio.high:.3f}]"
    return f"  {c.metric:<19} {fmt(c.baseline_median):>12} {fmt(c.current_median):>12} {ci:>24} {p:>8}  {c.verdict}"


def verdict_lines(rows: Rows) -> list[str]:
    """The verdict table against the baseline, the cases it cannot judge, and the environment diff when anything moved."""
    unjudged = [rows.unjudged] if rows.unjudged else []
    if not rows.verdicts:
        return [""] + unjudged if unjudged else []
    lines = ["", "against the history (xN: the median of N stored processes; else the newest stored record) -- cuDNN "
                 "device time decides, wall time where either has none; see docs/judging.md:"]
    lines += text_table(VERDICT_HEADER, [row.cells for row in rows.verdicts], right={2, 3, 4})
    lines.append("verdicts: " + verdict_counts(row.verdict for row in rows.verdicts))
    lines += unjudged
    for row in rows.verdicts:
        v = row.verdict
        if v.host_regressed and not v.fails:
            lines.append(f"host overhead of {v.case_id}: {v.host_line()} (reported, not failed; --rnnperf-fail-host "
                         f"fails on it)")
    lines += [f"kernels of {row.verdict.case_id}: " + "; ".join(row.kernels) for row in rows.verdicts if row.kernels]
    if any(row.verdict.moved for row in rows.verdicts) or rows.env_diff:
        lines.append("environment changes since the baseline: " + ("; ".join(rows.env_diff) or "none"))
    return lines


def device_lines(run: RunView, spent: TimeSpent | None = None) -> list[str]:
    """Why device time is missing where it is, and where the run's time went, phase by phase and per backend."""
    lines: list[str] = []
    notes: dict[str, int] = {}
    for r in run.results:
        if r.device_note:
            notes[r.device_note] = notes.get(r.device_note, 0) + 1
    lines += [f"{note} ({n} case(s))" for note, n in notes.items()]
    lines += time_lines(spent or time_spent(run.results))
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
    lines = [f"where the time went ({cases.cases} case(s), {cases.total_s:.0f} s{run}): {_phases(cases, 1)}"]
    lines += [f"  {b.name}: {b.cases} case(s) {b.total_s:.0f} s: {_phases(b, 0)}" for b in spent.backends]
    return lines


def xdist_line(run: RunView) -> str:
    """e.g. "pytest-xdist: 2 workers, one GPU each: gw0 NVIDIA H200 (GPU-1234abcd), ..." (empty without workers)."""
    workers = run.workers() or run.plan  # what they reported, else (in the header) what the controller foresees
    if not workers:
        return ""
    n = workers[0].placement.workers
    if not any(w.gpu.available for w in workers):  # a CPU runner: nothing to time, nothing to say about GPUs
        return f"pytest-xdist: {n} worker{'s' if n != 1 else ''}, no GPU: the reference checks run in parallel"
    shared = run.parallel_reason()
    if shared is not None:
        return f"pytest-xdist: {shared}"
    return f"pytest-xdist: {n} worker{'s' if n != 1 else ''}, one GPU each: " + ", ".join(w.gpu_label() for w in workers)


def model_title(run: RunView, view: RunView) -> str:
    """e.g. "NVIDIA H200 (gw0, gw2)": one GPU model of a pytest-xdist run and the workers that measured on it."""
    return f"{view.gpu.name} ({', '.join(w.id for w in run.models().get(view.gpu.gpu_slug, []))})"


def summary_lines(run: RunView, rows: Rows | None = None) -> list[str]:
    """Everything the terminal summary prints: environment, the tables, verdicts, skips, warnings, notes."""
    views = run.model_views()
    if views:  # pytest-xdist workers on GPUs of different models: each model's tables against its own baselines
        grouped = [xdist_line(run)]
        for view in views:
            grouped += ["", f"GPU model {model_title(run, view)}:"] + summary_lines(view)
        return grouped + ([""] + list(run.notes) if run.notes else [])
    lines: list[str] = [xdist_line(run), ""] if run.worker_runs else []
    for name, fields in sorted(run.runtime.items()):
        lines.append(f"{name}: " + ", ".join(f"{k.split('.', 1)[-1]}={_v(v)}" for k, v in fields.items()))
    lines += [f"warning: {w}" for w in library_warnings(run)]
    rows = rows or build_rows(run)
    if rows.paired:
        lines += ["", "cuDNN vs generic (medians per step, wall/device ms; speedup = generic/cuDNN):"]
        lines += cases_table(rows.paired)
    if rows.alone:
        lines += ["", "generic path vs float64 reference:"] + cases_table(rows.alone)
    if rows.cross:
        lines += ["", "across frameworks (one checkpoint, converted to each framework's layout):"]
        lines += text_table(CROSS_HEADER, rows.cross, right=set())
    if rows.claims:
        from pytest_rnnperf.judge.claims import HEADER, table_rows

        lines += ["", "claims (the folklore, measured on this machine):"] + text_table(HEADER, table_rows(rows.claims), set())
    if run.skipped:
        reasons: dict[str, int] = {}
        for _, reason in run.skipped:
            reasons[reason] = reasons.get(reason, 0) + 1
        lines += [""] + [f"skipped {n} case(s): {reason}" for reason, n in reasons.items()]
    lines += verdict_lines(rows)
    # Window flags are warnings (the measurement may be off); notes are facts about the case (compile time, a side
    # that did not run, an energy window too short to mean much).
    warned = [f"warning: {r.id}: {w}" for r in run.results for w in r.warnings if w not in r.notes]
    noted = [f"note: {r.id}: {n}" for r in run.results for n in r.notes]
    if warned or noted:
        lines += [""] + warned + noted
    lines += device_lines(run, rows.time)
    lines += ["", run.baseline_status()] + list(run.notes)
    while lines and not lines[0]:
        lines.pop(0)  # sections open with a blank line; the first needs none
    return lines
