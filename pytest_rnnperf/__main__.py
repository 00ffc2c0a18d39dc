"""``python -m pytest_rnnperf compare OLD NEW``: the plugin's verdicts for two stored runs, outside pytest.

Exit codes: 0 no regression, 1 at least one case regressed, 2 unusable input (a one-line error on stderr).
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
    cmp.add_argument("--allow-other-gpu", action="store_true",
                     help="compare runs from different GPU models (refused by default: their times differ by design)")
    return parser


def compare_files(old: Path, new: Path, min_effect: float, allow_other_gpu: bool) -> tuple[int, list[str]]:
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
    verdicts = compare_runs(base, cur, min_effect)
    lines = [f"baseline {old} ({base.gpu_slug}) vs {new} ({cur.gpu_slug}); min effect {min_effect:.0%}"]
    for v in verdicts:
        lines.append(f"{v.verdict.upper():<10} {v.case_id}: {v.time.explain()}"
                     + (f"; {v.speedup.explain()}" if v.speedup is not None else "")
                     + (f" [window: {v.flagged}]" if v.flagged else ""))
    missing = sorted(set(base.records) - set(cur.records))
    if missing:
        lines.append(f"not in {new.name}: {', '.join(missing)}")
    diff = format_diff(diff_environments(base.environment, cur.environment))
    lines.append("environment changes: " + ("; ".join(diff) if diff else "none"))
    regressed = [v for v in verdicts if v.regressed]
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    lines.append(f"{len(verdicts)} case(s) compared: " + (", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
                                                         or "none in common"))
    return (1 if regressed else 0), lines


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pytest_rnnperf`` and the ``rnnperf`` script."""
    args = _parser().parse_args(argv)
    code, lines = compare_files(args.old, args.new, args.min_effect, args.allow_other_gpu)
    stream = sys.stderr if code == 2 else sys.stdout
    for line in lines:
        print(line, file=stream)
    return code


if __name__ == "__main__":
    sys.exit(main())
