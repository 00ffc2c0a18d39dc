"""Human-facing output: header lines, gate failure tables, the summary table; JSON/Markdown/plot files."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

from pytest_rnnperf.judge.verdicts import Verdict
from pytest_rnnperf.report.view import RunView

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.records import CaseRecord, CrossRecord
    from pytest_rnnperf.judge.verdicts import CaseVerdict, Comparison

UNAVAILABLE = "unavailable"


def _v(value: str) -> str:
    """A field for display: values as they are, unavailable ones shortened to their reason in brackets."""
    return f"({value})" if value.startswith(UNAVAILABLE) else value


def header_lines(run: RunView, scale: str) -> list[str]:
    """The pytest header: GPU fingerprint, software versions, scale (cheap: no framework is imported)."""
    d = run.device
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


def gate_failures(result: "CaseRecord") -> list[str]:
    """Why a case fails its gates (path proof, parity, speedup floor), as small tables; empty if it passes."""
    problems = path_parity_failures(result.id, result.proofs, result.parity)
    if result.speedup is not None and result.cudnn is not None and result.speedup.estimate < result.case.floor:
        s = result.speedup
        problems.append(
            f"{result.id}: cuDNN speedup below its floor:\n"
            f"  {'obtained':>10} {'95% CI':>16} {'floor':>7}  cuDNN ms   generic ms\n"
            f"  {s.estimate:>9.2f}x [{s.low:>5.2f}, {s.high:>5.2f}] {result.case.floor:>6.2f}x  "
            f"{result.cudnn.median * 1e3:>8.3f}   {result.generic.median * 1e3:>10.3f}\n"
            + ("  floors and where they come from: suites/floors.py" if hasattr(result.case, "shape")
               else "  the floor is the one the test passed to rnnperf.model(..., floor=)")
        )
    return problems


def _ms(seconds: float | None) -> str:
    """Milliseconds with 3 significant decimals, or '-'."""
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


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


def _wall_dev(wall: Any, dev: Any) -> str:
    """"1.558/0.268": wall and device ms per step of one side ('-' for what was not measured)."""
    if wall is None:
        return "-"
    return f"{wall.median * 1e3:.3f}/" + ("-" if dev is None else f"{dev.busy.median * 1e3:.3f}")


def result_row(r: "CaseRecord") -> dict[str, str]:
    """Display cells of one result (shared by the terminal table and Markdown)."""
    worst = r.parity.worst()
    parity = "ok" if r.parity.ok else "FAIL"
    if worst is not None:
        parity += f" {worst.error:.1e}/{worst.tolerance:.0e}"
    # TFLOP/s of the cuDNN side only: a generic-only row is a correctness check at a tiny size.
    tf = r.tflops("cudnn") if r.cudnn is not None else None
    peak = r.peak_tflops
    tflops = "-" if tf is None else (f"{tf:.2f}" + (f" ({tf / peak:.1%})" if peak else ""))
    energy = r.energy_per_step_j.get("cudnn" if r.cudnn is not None else "generic")
    s = r.speedup
    dev = r.device_speedup
    return {
        "case": r.id,
        "cudnn ms wall/dev": _wall_dev(r.cudnn, r.cudnn_device),
        "generic ms wall/dev": _wall_dev(r.generic, r.generic_device),
        "speedup wall [95% CI]": "-" if s is None else f"{s.estimate:.2f}x [{s.low:.2f}, {s.high:.2f}]",
        "dev": "-" if dev is None else f"{dev:.2f}x",
        "floor": "-" if s is None else f"{r.case.floor:.1f}x",
        "TFLOP/s (of peak)": tflops,
        "J/step": "-" if energy is None else f"{energy:.3g}",
        "parity err/tol": parity,
        "path": "ok" if r.paths_ok else "WRONG",
    }


def results_table(results: Sequence["CaseRecord"]) -> list[str]:
    """The per-case table: medians, speedup with its interval, floor, TFLOP/s, energy, parity, path."""
    if not results:
        return []
    rows = [result_row(r) for r in results]
    header = list(rows[0])
    return text_table(header, [[row[h] for h in header] for row in rows], right=set(range(1, len(header) - 2)))


CROSS_HEADER = ("check", "sides (same canonical weights)", "parity err/tol (worst)", "path")


def cross_rows(cross: Sequence["CrossRecord"]) -> list[list[str]]:
    """Display cells per cross-framework check (shared by the terminal table and Markdown)."""
    rows = []
    for c in cross:
        worst = c.parity.worst()
        parity = ("ok" if c.parity.ok else "FAIL") + ("" if worst is None else
                                                      f" {worst.error:.1e}/{worst.tolerance:.0e} ({worst.quantity})")
        rows.append([c.id, " vs ".join(c.sides), parity, "ok" if c.paths_ok else "WRONG"])
    return rows


def env_diff_lines(run: RunView, case_id: str | None = None) -> list[str]:
    """What changed between the environment of the baseline (the file holding ``case_id``) and now."""
    from pytest_rnnperf.measure.environment import diff_environments, format_diff

    stored = run.baseline if case_id is None else run.stored_run(case_id)
    if stored is None:
        return []
    # A framework whose first case has not run yet has no runtime fields; diff_environments leaves it out.
    return format_diff(diff_environments(dict(stored.environment), run.environment()))


def kernel_lines(verdict: "CaseVerdict", run: RunView, rows: int = 4) -> list[str]:
    """The kernels of the cuDNN side that grew, shrank, appeared or vanished since the baseline."""
    base = run.stored_record(verdict.case_id)
    now = next((r for r in reversed(run.results) if r.id == verdict.case_id), None)
    return record_kernel_lines(base, now, rows)


def record_kernel_lines(base: "CaseRecord | None", now: "CaseRecord | None", rows: int = 4) -> list[str]:
    """What moved between two records' cuDNN kernel tables (empty where either has no device time)."""
    from pytest_rnnperf.measure.device_time import kernel_changes

    if base is None or now is None or base.cudnn_device is None or now.cudnn_device is None:
        return []
    changes = kernel_changes(base.cudnn_device.kernels, now.cudnn_device.kernels)
    return [c.describe() for c in changes[:rows]] or ["no kernel moved by more than 5% of its time"]


def regression_failure(verdict: "CaseVerdict", run: RunView) -> str:
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


def _comparison_row(c: "Comparison") -> str:
    """One row of a comparison table (times in ms, speedups as x)."""
    speed = c.metric == "speedup"
    fmt = (lambda v: f"{v:.2f}x") if speed else (lambda v: f"{v * 1e3:.4f} ms")
    p = "n/a" if c.p_value is None else f"{c.p_value:.1e}"
    ci = f"{c.ratio.estimate:.3f} [{c.ratio.low:.3f}, {c.ratio.high:.3f}]"
    return f"  {c.metric:<19} {fmt(c.baseline_median):>12} {fmt(c.current_median):>12} {ci:>24} {p:>8}  {c.verdict}"


def _change(c: "Comparison") -> str:
    """A comparison's change with its interval, e.g. "+5.2% [+3.9%, +6.6%]"."""
    return f"{c.ratio.estimate - 1:+.1%} [{c.ratio.low - 1:+.1%}, {c.ratio.high - 1:+.1%}]"


def verdict_lines(run: RunView) -> list[str]:
    """The verdict table against the baseline, the cases it cannot judge, and the environment diff when anything moved."""
    unjudged: list[str] = []
    if run.unjudged and run.baseline is not None:
        # A baseline recorded with -k (one framework, say) silently judging nothing would look like a pass.
        shown = ", ".join(run.unjudged[:3]) + (", ..." if len(run.unjudged) > 3 else "")
        files = run.baseline.path.name + (f" or the {len(run.older)} file(s) before it" if run.older else "")
        unjudged = [f"not judged: {len(run.unjudged)} cuDNN case(s) have no record in {files} "
                    f"(new cases, or recorded without them; --rnnperf-update-baseline adds a file with them): {shown}"]
    if not run.verdicts:
        return [""] + unjudged if unjudged else []
    rows = []
    for v in run.verdicts.values():
        s, h = v.speedup, v.host
        rows.append([
            v.case_id, v.basis + (f" x{v.processes}" if v.processes else ""),
            f"{v.time.baseline_median * 1e3:.4f}", f"{v.time.current_median * 1e3:.4f}", _change(v.time),
            "-" if h is None else f"{h.baseline_median * 1e3:.3f} -> {h.current_median * 1e3:.3f} "
                                  f"({h.ratio.estimate - 1:+.0%}, {h.verdict})",
            "-" if s is None else f"{s.baseline_median:.2f}x -> {s.current_median:.2f}x ({s.verdict})",
            str(v.outcome) + (" (re-measured)" if v.remeasured else "")
            + (f" [window: {v.flagged}]" if v.flagged else "") + (f" [{v.host_bound}]" if v.host_bound else ""),
        ])
    header = ["case", "basis", "base cuDNN ms", "now cuDNN ms", "change [95% CI]", "host overhead ms", "speedup",
              "verdict"]
    lines = ["", "against the history (xN: the median of N stored processes; else the newest stored record) -- cuDNN "
                 "device time decides, wall time where either has none; see docs/judging.md:"]
    lines += text_table(header, rows, right={2, 3, 4})
    lines.append("verdicts: " + verdict_counts(run.verdicts.values()))
    lines += unjudged
    for v in run.verdicts.values():
        if v.host_regressed and not v.fails:
            lines.append(f"host overhead of {v.case_id}: {v.host_line()} (reported, not failed; --rnnperf-fail-host "
                         f"fails on it)")
    for v in run.verdicts.values():
        if v.moved:
            kernels = [k.explain() for k in v.kernels] or kernel_lines(v, run)
            if kernels:
                lines.append(f"kernels of {v.case_id}: " + "; ".join(kernels))
    moved = [v for v in run.verdicts.values() if v.moved]
    diff = env_diff_lines(run)
    if moved or diff:
        lines.append("environment changes since the baseline: " + ("; ".join(diff) if diff else "none"))
    return lines


def verdict_counts(verdicts: Any) -> str:
    """e.g. "1 ambiguous, 27 unchanged": outcomes counted, in alphabetical order."""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[str(v.outcome)] = counts.get(str(v.outcome), 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def device_lines(run: RunView) -> list[str]:
    """Why device time is missing where it is, and where the run's time went, phase by phase."""
    lines: list[str] = []
    notes: dict[str, int] = {}
    for r in run.results:
        if r.device_note:
            notes[r.device_note] = notes.get(r.device_note, 0) + 1
    lines += [f"{note} ({n} case(s))" for note, n in notes.items()]
    totals: dict[str, float] = {}
    for r in run.results:
        for phase, seconds in r.cost_s.items():
            totals[phase] = totals.get(phase, 0.0) + seconds
    if totals:
        lines.append(f"where the time went ({len(run.results)} case(s), {sum(totals.values()):.0f} s): "
                     + ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in totals.items()))
    return [""] + lines if lines else []


def xdist_line(run: RunView) -> str:
    """e.g. "pytest-xdist: 2 workers, one GPU each: gw0 NVIDIA H200 (GPU-1234abcd), ..." (empty without workers)."""
    workers = run.workers() or run.plan  # what they reported, else (in the header) what the controller foresees
    if not workers:
        return ""
    n = workers[0].placement.workers
    if not any(w.device.available for w in workers):  # a CPU runner: nothing to time, nothing to say about GPUs
        return f"pytest-xdist: {n} worker{'s' if n != 1 else ''}, no GPU: the reference checks run in parallel"
    shared = run.parallel_reason()
    if shared is not None:
        return f"pytest-xdist: {shared}"
    return f"pytest-xdist: {n} worker{'s' if n != 1 else ''}, one GPU each: " + ", ".join(w.gpu_label() for w in workers)


def _model_title(run: RunView, view: RunView) -> str:
    """e.g. "NVIDIA H200 (gw0, gw2)": one GPU model of a pytest-xdist run and the workers that measured on it."""
    return f"{view.device.name} ({', '.join(w.id for w in run.models().get(view.device.gpu_slug, []))})"


def summary_lines(run: RunView) -> list[str]:
    """Everything the terminal summary prints: environment, the tables, verdicts, skips, warnings, notes."""
    views = run.model_views()
    if views:  # pytest-xdist workers on GPUs of different models: each model's tables against its own baselines
        grouped = [xdist_line(run)]
        for view in views:
            grouped += ["", f"GPU model {_model_title(run, view)}:"] + summary_lines(view)
        return grouped + ([""] + list(run.notes) if run.notes else [])
    lines: list[str] = [xdist_line(run), ""] if run.worker_runs else []
    for name, fields in sorted(run.runtime.items()):
        lines.append(f"{name}: " + ", ".join(f"{k.split('.', 1)[-1]}={_v(v)}" for k, v in fields.items()))
    lines += [f"warning: {w}" for w in library_warnings(run)]
    paired = [r for r in run.results if r.cudnn is not None]
    alone = [r for r in run.results if r.cudnn is None]
    if paired:
        lines += ["", "cuDNN vs generic (medians per step, wall/device ms; speedup = generic/cuDNN):"]
        lines += results_table(paired)
    if alone:
        lines += ["", "generic path vs float64 reference:"] + results_table(alone)
    if run.cross:
        lines += ["", "across frameworks (one checkpoint, converted to each framework's layout):"]
        lines += text_table(CROSS_HEADER, cross_rows(run.cross), right=set())
    if run.claims:
        from pytest_rnnperf.judge.claims import HEADER, table_rows

        lines += ["", "claims (the folklore, measured on this machine):"] + text_table(HEADER, table_rows(run.claims), set())
    if run.skipped:
        reasons: dict[str, int] = {}
        for _, reason in run.skipped:
            reasons[reason] = reasons.get(reason, 0) + 1
        lines += [""] + [f"skipped {n} case(s): {reason}" for reason, n in reasons.items()]
    lines += verdict_lines(run)
    # Window flags are warnings (the measurement may be off); notes are facts about the case (compile time, a side
    # that did not run, an energy window too short to mean much).
    warned = [f"warning: {r.id}: {w}" for r in run.results for w in r.warnings if w not in r.notes]
    noted = [f"note: {r.id}: {n}" for r in run.results for n in r.notes]
    if warned or noted:
        lines += [""] + warned + noted
    lines += device_lines(run)
    lines += ["", run.baseline_status()] + list(run.notes)
    while lines and not lines[0]:
        lines.pop(0)  # sections open with a blank line; the first needs none
    return lines


def _worker_markdown(run: RunView) -> list[str]:
    """One list item per pytest-xdist worker: its GPU, fingerprint and baseline (empty without workers)."""
    items = [f"- {w.id}: {w.device.name if w.device.available else 'no GPU'}, uuid {_v(w.device.uuid)}, "
             f"CUDA_VISIBLE_DEVICES={w.placement.pin or '(as given)'}, fingerprint `{w.fingerprint}`, "
             f"baseline {w.baseline or 'none'}, {len(w.results)} case(s)" for w in run.workers()]
    return [xdist_line(run), ""] + items + [""] if items else []


STATUSES = ("regressions found", "gate failures", "all checks passed")  # worst first


def markdown(run: RunView) -> str:
    """The Markdown summary for CI job pages: verdict counts, the results table, what changed."""
    views = run.model_views()
    if views:  # pytest-xdist workers on GPUs of different models: one section per model
        parts = [markdown(view).splitlines() for view in views]
        worst = min(STATUSES.index(p[0].split(": ", 1)[1]) for p in parts)
        grouped = [f"## pytest-rnnperf: {STATUSES[worst]}", ""] + _worker_markdown(run)
        for view, part in zip(views, parts):
            grouped += [f"## GPU model {_model_title(run, view)}", ""] + part[2:] + [""]
        return "\n".join(grouped) + "\n"
    paired = [r for r in run.results if r.cudnn is not None]
    regressed = [v for v in run.verdicts.values() if v.fails]
    bad: list[Any] = [r for r in run.results if gate_failures(r)] + [c for c in run.cross
                                                                     if path_parity_failures(c.id, c.proofs, c.parity)]
    bad += [c for c in run.claims if c.failure]  # a claims row that broke a promise of the product
    status = "regressions found" if regressed else ("gate failures" if bad else "all checks passed")
    out = [f"## pytest-rnnperf: {status}", ""]
    d = run.device
    out.append(f"GPU: {d.name if d.available else 'none (' + d.reason + ')'}; driver {_v(d.driver_version)}; "
               f"fingerprint `{run.fingerprint()}`")
    out += [run.baseline_status(), ""] + _worker_markdown(run)
    for title, results in (("cuDNN vs generic", paired), ("generic vs float64 reference",
                                                          [r for r in run.results if r.cudnn is None])):
        if not results:
            continue
        rows = [result_row(r) for r in results]
        header = list(rows[0])
        if run.verdicts:
            header.append("verdict")
            for r, row in zip(results, rows):
                v = run.verdicts.get(r.id)
                row["verdict"] = "-" if v is None else (f"**{v.outcome}**" if v.fails else str(v.outcome))
        out += [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(str(row.get(h, "")) for h in header) + " |" for row in rows]
        out.append("")
    if run.cross:
        out += ["### Across frameworks (same canonical weights)", "", "| " + " | ".join(CROSS_HEADER) + " |",
                "|" + "---|" * len(CROSS_HEADER)]
        out += ["| " + " | ".join(row) + " |" for row in cross_rows(run.cross)]
        out.append("")
    if run.claims:
        from pytest_rnnperf.judge.claims import markdown_table

        out += ["### Claims (the folklore, measured on this machine)", ""] + markdown_table(run.claims) + [""]
    diff = env_diff_lines(run)
    if diff:
        out += ["### Environment changes since the baseline", ""] + [f"- {line}" for line in diff] + [""]
    for v in regressed:
        out.append(f"- **{v.case_id}**: {v.time.explain()}" + (f"; {v.host_line()}" if v.host_regressed else ""))
        out += [f"  - {line}" for line in kernel_lines(v, run)]
    out += [f"- {v.case_id}: {v.host_line()} (reported, not failed)" for v in run.verdicts.values()
            if v.host_regressed and not v.fails]
    out += [line for line in device_lines(run) if line]
    if run.skipped:
        out.append(f"\n{len(run.skipped)} case(s) skipped: " + "; ".join(sorted({r for _, r in run.skipped})))
    return "\n".join(out) + "\n"


def plot_speedups(run: RunView, path: Any) -> bool:
    """Speedup per case with its 95% interval, next to the baseline's where one exists (PNG)."""
    import numpy as np

    paired = [r for r in run.results if r.speedup is not None]
    speedups = [r.speedup for r in paired if r.speedup is not None]  # the same list, typed as intervals
    if not paired:
        return False
    import matplotlib

    matplotlib.use("Agg")  # headless: CI runners have no display
    import matplotlib.pyplot as plt

    from pytest_rnnperf.model.stats import speedup_interval

    fig, ax = plt.subplots(figsize=(9, 0.35 * len(paired) + 1.5))
    y = np.arange(len(paired))
    est = [s.estimate for s in speedups]
    err = [[s.estimate - s.low for s in speedups], [s.high - s.estimate for s in speedups]]
    ax.errorbar(est, y, xerr=err, fmt="o", color="tab:blue", label="now (95% CI)", capsize=3)
    if run.baseline is not None:
        by: list[float] = []
        bx: list[float] = []
        berr: list[list[float]] = [[], []]
        for i, r in enumerate(paired):
            rec = run.stored_record(r.id)
            if rec is not None and rec.cudnn is not None:
                iv = speedup_interval(rec.cudnn.samples, rec.generic.samples)
                by.append(i + 0.25)
                bx.append(iv.estimate)
                berr[0].append(iv.estimate - iv.low)
                berr[1].append(iv.high - iv.estimate)
        if bx:
            ax.errorbar(bx, by, xerr=berr, fmt="s", color="tab:gray", label="baseline (95% CI)", capsize=3)
    ax.scatter([r.case.floor for r in paired], y, marker="|", s=200, color="tab:red", label="floor")
    for i, r in enumerate(paired):
        v = run.verdicts.get(r.id)
        if v is not None and v.moved:
            ax.annotate(str(v.verdict), (speedups[i].high, i), xytext=(6, -3), textcoords="offset points",
                        color="tab:red" if v.fails else "tab:green", fontsize=8)
    ax.set_yticks(y, [r.id for r in paired], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("cuDNN speedup over generic (x)")
    ax.set_title(f"pytest-rnnperf on {run.device.name if run.device.available else 'no GPU'}")
    ax.axvline(1.0, color="black", lw=0.5)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_reports(run: RunView, report_dir: str, markdown_path: str = "", step_summary: str = "") -> list[str]:
    """Write rnnperf.json, summary.md and speedups.png (and the Markdown to the CI summary); returns notes.

    Output paths are checked before the run; a write that still fails (a full disk, say) becomes a note,
    so the summary and the other files are not lost with it.
    """
    import json
    from pathlib import Path

    notes: list[str] = []
    md = markdown(run)
    if report_dir and report_dir.lower() != "none":
        folder = Path(report_dir)
        written = []
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "rnnperf.json").write_text(json.dumps(as_json_safe(run.as_dict()), indent=2), encoding="utf-8")
            written.append("rnnperf.json")
            (folder / "summary.md").write_text(md, encoding="utf-8")
            written.append("summary.md")
            # Workers on GPUs of different models: one plot per model, beside that model's baseline.
            plots = [(v, f"speedups-{v.device.gpu_slug}.png") for v in run.model_views()] or [(run, "speedups.png")]
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


def as_json_safe(obj: Any) -> Any:
    """Replace non-finite floats by strings so the JSON stays strict."""
    import math

    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: as_json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [as_json_safe(v) for v in obj]
    return obj
