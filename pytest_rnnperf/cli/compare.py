"""``compare OLD NEW``: the plugin's verdicts of NEW against the baseline OLD; exit 0 no regression, 1 a case regressed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pytest_rnnperf.cli.args import DEFAULT, load, positive
from pytest_rnnperf.judge.verdicts import Policy


def add_parser(subparsers: Any) -> None:
    """The ``compare`` subcommand and its options."""
    cmp = subparsers.add_parser("compare", help="verdict per case of NEW against the baseline OLD")
    cmp.add_argument("old", type=Path, help="baseline run (e.g. baselines/NVIDIA_H200/.../0001_baseline.json)")
    cmp.add_argument("new", type=Path, help="run to judge (e.g. the --benchmark-json of tonight's run)")
    cmp.add_argument("--min-effect", type=positive(), default=DEFAULT.min_effect,
                     help=f"smallest change that counts (default {DEFAULT.min_effect})")
    cmp.add_argument("--host-bound-effect", type=positive(), default=DEFAULT.host_bound_effect,
                     help=f"threshold for cases that kept the GPU busy less than half the time "
                          f"(default {DEFAULT.host_bound_effect})")
    cmp.add_argument("--device-effect", type=positive(), default=DEFAULT.device_min_effect,
                     help=f"smallest change of the cuDNN device time that counts (default {DEFAULT.device_min_effect})")
    cmp.add_argument("--host-effect", type=positive(), default=DEFAULT.host_effect,
                     help=f"smallest change of the host overhead that counts (default {DEFAULT.host_effect})")
    cmp.add_argument("--fail-host", action="store_true", help="exit 1 on a host overhead regression too")
    cmp.add_argument("--allow-other-gpu", action="store_true",
                     help="compare runs from different GPU models (refused by default: their times differ by design)")
    cmp.add_argument("--noise", type=Path, default=None,
                     help="per-case device-time thresholds of this GPU model (baselines/<gpu>/noise.json)")


def run(args: argparse.Namespace) -> tuple[int, list[str]]:
    """Exit code and lines of ``compare`` for parsed arguments."""
    policy = Policy(min_effect=args.min_effect, host_bound_effect=args.host_bound_effect,
                    device_min_effect=args.device_effect, host_effect=args.host_effect, fail_host=args.fail_host)
    return compare_files(args.old, args.new, policy, args.allow_other_gpu, args.noise)


def compare_files(old: Path, new: Path, policy: Policy = Policy(), allow_other_gpu: bool = False,
                  noise_file: Path | None = None) -> tuple[int, list[str]]:
    """Exit code and the lines to print for ``compare`` (per-case device thresholds from ``noise_file``)."""
    from pytest_rnnperf.measure.environment import diff_environments, format_diff
    from pytest_rnnperf.judge.noise import load as load_noise
    from pytest_rnnperf.model.records import BaselineError
    from pytest_rnnperf.report.render import record_kernel_lines, verdict_counts
    from pytest_rnnperf.judge.verdicts import Outcome, Verdict, compare_runs

    try:
        base, cur = load([old, new], allow_other_gpu)
        if noise_file is not None:
            policy = load_noise(noise_file).applied_to(policy)
    except (BaselineError, ValueError) as exc:
        return 2, [f"error: {exc}"]
    verdicts = compare_runs(base, cur, policy)
    lines = [f"baseline {old} ({base.gpu_slug}) vs {new} ({cur.gpu_slug}); min effect {policy.min_effect:.0%} (wall), "
             f"{policy.device_min_effect:.0%} (device), {policy.host_effect:.0%} (host overhead)"]
    for v in verdicts:
        label = "FLAGGED" if v.outcome is Outcome.REGRESSED_NOT_FAILED else str(v.verdict).upper()
        if v.host_regressed and v.verdict is not Verdict.REGRESSED:
            label = "HOST" if v.fails else "HOST-FLAG"
        lines.append(f"{label:<10} {v.case_id}: {v.time.explain()}"
                     + (f"; {v.host.explain()}" if v.host is not None else "")
                     + (f"; {v.speedup.explain()}" if v.speedup is not None else "")
                     + (f" [window: {v.flagged}]" if v.flagged else "")
                     + (f" [{v.host_bound}]" if v.host_bound else ""))
        if v.moved:
            kernels = record_kernel_lines(base.records.get(v.case_id), cur.records.get(v.case_id))
            if kernels:
                lines.append(f"{'':<10} kernels: " + "; ".join(kernels))
    missing = sorted(set(base.records) - set(cur.records))
    if missing:
        lines.append(f"not in {new.name}: {', '.join(missing)}")
    diff = format_diff(diff_environments(base.environment, cur.environment))
    lines.append("environment changes: " + ("; ".join(diff) if diff else "none"))
    lines.append(f"{len(verdicts)} case(s) compared: " + (verdict_counts(verdicts) or "none in common"))
    return (1 if any(v.fails for v in verdicts) else 0), lines
