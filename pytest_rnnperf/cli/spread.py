"""``spread RUN RUN [RUN...]``: run-to-run spread per case; exit 0 within target, 1 not."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from pytest_rnnperf.cli.args import fraction, load, number, path_given
from pytest_rnnperf.judge.verdicts import Policy
from pytest_rnnperf.model.metrics import MS, WALL, WALL_SPEEDUP, from_ms, show
from pytest_rnnperf.session.settings import at_least


def add_parser(subparsers: Any) -> None:
    """The ``spread`` subcommand and its options."""
    spr = subparsers.add_parser("spread", help="run-to-run spread (max/min - 1) of each case's speedup and cuDNN time")
    spr.add_argument("runs", type=path_given, nargs="+", help="two or more stored runs of the same GPU model")
    spr.add_argument("--target", type=fraction(), default=0.03, help="spread to aim for (default 0.03 = 3%%)")
    spr.add_argument("--min-step-ms", type=number(at_least(0)), default=1.0, help="cases with cuDNN steps "
                     "shorter than this are listed but not held to the target (default 1.0)")
    spr.add_argument("--allow-other-gpu", action="store_true", help="spread over runs of different GPU models")


def run(args: argparse.Namespace) -> tuple[int, list[str]]:
    """Exit code and lines of ``spread`` for parsed arguments."""
    from pytest_rnnperf.report.text import terminal_width

    return spread_files(args.runs, args.target, args.min_step_ms, args.allow_other_gpu, terminal_width())


def spread_files(paths: Sequence[Path], target: float, min_step_ms: float,
                 allow_other_gpu: bool = False, width: int | None = None) -> tuple[int, list[str]]:
    """Exit code (0 within target, 1 not) and lines: per case, the speedup and cuDNN-time spread across runs (the
    table within ``width``; None: as wide as its cells)."""
    import numpy as np

    from pytest_rnnperf.model.records import BaselineError
    from pytest_rnnperf.model.stats import spread
    from pytest_rnnperf.report.text import fit, text_table

    if len(paths) < 2:
        return 2, ["error: spread needs at least two runs"]
    try:
        runs = load(paths, allow_other_gpu, distinct=True)
    except (BaselineError, ValueError) as exc:
        return 2, [f"error: {exc}"]
    common = [c for c in runs[0].records if all(c in r.records and r.records[c].cudnn is not None for r in runs)]
    if not common:
        return 2, ["error: the runs share no cuDNN case"]
    below = Policy().host_bound_below
    rows: list[list[str]] = []
    held: list[float] = []
    time_spread: dict[bool, list[float]] = {True: [], False: []}  # host-bound? -> cuDNN-time spreads
    for case_id in common:
        recs = [r.records[case_id] for r in runs]
        speedups = [float(rec.generic.median / rec.cudnn.median) for rec in recs]  # type: ignore[union-attr]
        times = [float(rec.cudnn.median) for rec in recs]  # type: ignore[union-attr]
        s_sp, s_t = spread(speedups), spread(times)
        counted = min(times) >= from_ms(min_step_ms)
        if counted:
            held.append(s_sp)
        busy = [b for b in (rec.gpu_busy for rec in recs) if b is not None]
        if busy:
            time_spread[min(busy) < below].append(s_t)
        rows.append([case_id, " ".join(show(WALL_SPEEDUP, v) for v in speedups), f"{s_sp:.1%}" + ("" if counted else "*"),
                     " ".join(show(WALL, v) for v in times), f"{s_t:.1%}"])
    lines = text_table(["case", "speedups", "spread", f"cuDNN {MS}", "spread"], rows, right={1, 2, 3, 4}, width=width)
    within = sum(v <= target for v in held)
    if held:
        lines.append(f"speedup spread over {len(runs)} runs, cases with cuDNN steps >= {min_step_ms} {MS}: median "
                     f"{np.median(held):.1%}, max {max(held):.1%}; {within}/{len(held)} within {target:.0%}"
                     + (" (* = shorter steps, not held to the target)" if len(held) < len(common) else ""))
    else:
        lines.append(f"speedup spread over {len(runs)} runs: no case has cuDNN steps >= {min_step_ms} {MS}, none is "
                     "held to the target (--min-step-ms to lower the bar)")
    # The verdicts' own split (Policy.host_bound_below): what min effect each group can bear here.
    for host_bound, label in ((False, f"GPU >= {below:.0%} busy"), (True, "host-bound")):
        values = time_spread[host_bound]
        if values:
            lines.append(f"cuDNN-time spread, {label}: {len(values)} cases, median {np.median(values):.1%}, max "
                         f"{max(values):.1%}; {sum(v <= target for v in values)}/{len(values)} within {target:.0%}")
    return (0 if within == len(held) else 1), fit(lines, width) if width else lines
