"""Commands for stored runs, outside pytest.

``python -m pytest_rnnperf compare OLD NEW``: the plugin's verdicts; exit 0 no regression, 1 a case regressed.
``python -m pytest_rnnperf spread RUN RUN [RUN...]``: run-to-run spread per case; exit 0 within target, 1 not.
Both exit 2 on unusable input, with a one-line error on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence


def _parser() -> argparse.ArgumentParser:
    """Command-line interface."""
    parser = argparse.ArgumentParser(prog="python -m pytest_rnnperf",
                                     description="Compare stored pytest-rnnperf runs (pytest-benchmark JSON files).")
    sub = parser.add_subparsers(dest="command", required=True)
    cmp = sub.add_parser("compare", help="verdict per case of NEW against the baseline OLD")
    cmp.add_argument("old", type=Path, help="baseline run (e.g. baselines/NVIDIA_H200/.../0001_baseline.json)")
    cmp.add_argument("new", type=Path, help="run to judge (e.g. the --benchmark-json of tonight's run)")
    cmp.add_argument("--min-effect", type=float, default=0.05, help="smallest change that counts (default 0.05)")
    cmp.add_argument("--host-bound-effect", type=float, default=0.35,
                     help="threshold for cases that kept the GPU busy less than half the time (default 0.35)")
    cmp.add_argument("--allow-other-gpu", action="store_true",
                     help="compare runs from different GPU models (refused by default: their times differ by design)")
    spr = sub.add_parser("spread", help="run-to-run spread (max/min - 1) of each case's speedup and cuDNN time")
    spr.add_argument("runs", type=Path, nargs="+", help="two or more stored runs of the same GPU model")
    spr.add_argument("--target", type=float, default=0.03, help="spread to aim for (default 0.03)")
    spr.add_argument("--min-step-ms", type=float, default=1.0, help="cases with cuDNN steps shorter than this are "
                     "listed but not held to the target (default 1.0)")
    return parser


def spread_files(paths: Sequence[Path], target: float, min_step_ms: float) -> tuple[int, list[str]]:
    """Exit code (0 within target, 1 not) and lines: per case, the speedup and cuDNN-time spread across runs."""
    import numpy as np

    from .baselines import HOST_BOUND_BELOW, BaselineError, load_run
    from .runner import device_busy
    from .stats import spread

    try:
        runs = [load_run(p) for p in paths]
    except BaselineError as exc:
        return 2, [f"error: {exc}"]
    if len(runs) < 2:
        return 2, ["error: spread needs at least two runs"]
    common = [c for c in runs[0].records if all(c in r.records and r.records[c].get("cudnn") for r in runs)]
    lines = [f"{'case':<48} {'speedups':>28} {'spread':>7} {'cuDNN ms':>26} {'spread':>7}"]
    held: list[float] = []
    time_spread: dict[bool, list[float]] = {True: [], False: []}  # host-bound? -> cuDNN-time spreads
    for case_id in common:
        recs = [r.records[case_id] for r in runs]
        speedups = [float(np.median(rec["generic"]["samples_s"]) / np.median(rec["cudnn"]["samples_s"])) for rec in recs]
        times = [float(np.median(rec["cudnn"]["samples_s"])) * 1e3 for rec in recs]
        s_sp, s_t = spread(speedups), spread(times)
        counted = min(times) >= min_step_ms
        if counted:
            held.append(s_sp)
        busy = [b for b in (device_busy(rec) for rec in recs) if b is not None]
        if busy:
            time_spread[min(busy) < HOST_BOUND_BELOW].append(s_t)
        lines.append(f"{case_id:<48} {' '.join(f'{v:.2f}x' for v in speedups):>28} {s_sp:>6.1%}{'' if counted else '*'} "
                     f"{' '.join(f'{v:.3f}' for v in times):>26} {s_t:>6.1%}")
    if not common:
        return 2, ["error: the runs share no cuDNN case"]
    within = sum(v <= target for v in held)
    if held:
        lines.append(f"speedup spread over {len(runs)} runs, cases with cuDNN steps >= {min_step_ms} ms: median "
                     f"{np.median(held):.1%}, max {max(held):.1%}; {within}/{len(held)} within {target:.0%}"
                     + (" (* = shorter steps, not held to the target)" if len(held) < len(common) else ""))
    else:
        lines.append(f"speedup spread over {len(runs)} runs: no case has cuDNN steps >= {min_step_ms} ms, none is "
                     "held to the target (--min-step-ms to lower the bar)")
    # The verdicts' own split (see baselines.HOST_BOUND_BELOW): what min effect each group can bear here.
    for host_bound, label in ((False, f"GPU >= {HOST_BOUND_BELOW:.0%} busy"), (True, "host-bound")):
        values = time_spread[host_bound]
        if values:
            lines.append(f"cuDNN-time spread, {label}: {len(values)} cases, median {np.median(values):.1%}, max "
                         f"{max(values):.1%}; {sum(v <= target for v in values)}/{len(values)} within {target:.0%}")
    return (0 if within == len(held) else 1), lines


def compare_files(old: Path, new: Path, min_effect: float, allow_other_gpu: bool,
                  host_bound_effect: float = 0.35) -> tuple[int, list[str]]:
    """Exit code and the lines to print for ``compare``."""
    from .baselines import BaselineError, compare_runs, load_run
    from .environment import diff_environments, format_diff

    try:
        base, cur = load_run(old), load_run(new)
    except BaselineError as exc:
        return 2, [f"error: {exc}"]
    if base.gpu_slug != cur.gpu_slug and not allow_other_gpu:
        return 2, [f"error: {old} is from {base.gpu_slug or 'an unknown GPU'} and {new} from "
                   f"{cur.gpu_slug or 'an unknown GPU'}: different GPU models are not compared "
                   f"(--allow-other-gpu to force)"]
    verdicts = compare_runs(base, cur, min_effect, host_bound_effect)
    lines = [f"baseline {old} ({base.gpu_slug}) vs {new} ({cur.gpu_slug}); min effect {min_effect:.0%}"]
    for v in verdicts:
        label = "FLAGGED" if v.outcome != v.verdict else v.verdict.upper()  # regressed in an untrusted window
        lines.append(f"{label:<10} {v.case_id}: {v.time.explain()}"
                     + (f"; {v.speedup.explain()}" if v.speedup is not None else "")
                     + (f" [window: {v.flagged}]" if v.flagged else "")
                     + (f" [{v.host_bound}]" if v.host_bound else ""))
    missing = sorted(set(base.records) - set(cur.records))
    if missing:
        lines.append(f"not in {new.name}: {', '.join(missing)}")
    diff = format_diff(diff_environments(base.environment, cur.environment))
    lines.append("environment changes: " + ("; ".join(diff) if diff else "none"))
    regressed = [v for v in verdicts if v.regressed]
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.outcome] = counts.get(v.outcome, 0) + 1
    lines.append(f"{len(verdicts)} case(s) compared: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                                                         or "none in common"))
    return (1 if regressed else 0), lines


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pytest_rnnperf`` and the ``rnnperf`` script."""
    args = _parser().parse_args(argv)
    if args.command == "spread":
        code, lines = spread_files(args.runs, args.target, args.min_step_ms)
    else:
        code, lines = compare_files(args.old, args.new, args.min_effect, args.allow_other_gpu, args.host_bound_effect)
    stream = sys.stderr if code == 2 else sys.stdout
    for line in lines:
        print(line, file=stream)
    return code


if __name__ == "__main__":
    sys.exit(main())
