"""Where does run-to-run noise come from? Time the same cases at three nested levels and compare.

An experiment for the GPU runner, not part of the plugin. Back-to-back suite runs can move a case's cuDNN
time by more than each run's own interval allows for: part of the noise lives between runs, where one run's
samples cannot see it. This probe separates

- within a build: the spread of one build's timed blocks (what a single run's interval sees),
- between builds: the same case rebuilt in the same process (fresh module, weights, inputs and device
  buffers), which changes allocations and any per-build choices of the framework,
- between processes: the same case in fresh Python processes (what back-to-back suite runs see).

If between-build spread is about as large as between-process spread, timing several builds per case in
one run would make a run's interval honest about that noise; if not, the noise is per process (e.g. CPU
placement) and needs another remedy.

What it found is in baselines/NVIDIA_H100_80GB_HBM3/evidence/README.md.

    python scripts/noise_probe.py --processes 3 --builds 4 'torch-gru-train-fp32-T100-B64-I64-H512-L2'

Cases are globs over the nightly matrix ids (and the reference cases); ``--impl generic`` times the
generic side instead of cuDNN (it also runs without a GPU, which is how this script is checked on CPU).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_rnnperf.model import reference  # noqa: E402
from pytest_rnnperf.backends import load_backend, specs  # noqa: E402
from pytest_rnnperf.model.cases import Case  # noqa: E402
from pytest_rnnperf.model import stats  # noqa: E402
from pytest_rnnperf.model.timing import TimingConfig  # noqa: E402
from pytest_rnnperf.measure.wall import time_single  # noqa: E402
from suites.matrix import paired_cases, reference_cases  # noqa: E402


def select(patterns: list[str]) -> list[Case]:
    """Nightly and reference cases whose id matches any of the globs, in matrix order."""
    pool = [c for fw in (s.name for s in specs()) for c in paired_cases(fw, "nightly") + reference_cases(fw, "nightly")]
    chosen = [c for c in dict.fromkeys(pool) if any(fnmatch.fnmatch(c.id, p) for p in patterns)]
    if not chosen:
        raise SystemExit(f"noise_probe: no case matches {' '.join(patterns)}")
    return chosen


def probe_process(cases: list[Case], builds: int, impl: str, config: TimingConfig) -> list[dict[str, Any]]:
    """In this process: each case built ``builds`` times, each build timed; per-build samples in seconds."""
    out = []
    for case in cases:
        backend = load_backend(case.framework)
        reason = backend.unavailable_reason() or (backend.gpu_unavailable_reason() if impl == "cudnn" else None)
        if reason:
            out.append({"case": case.id, "skipped": reason})
            continue
        s = case.shape
        per_build = []
        for _ in range(builds):
            # Same seed every build: identical weights and inputs, only the allocations are new.
            weights = reference.init_weights(case.cell, s.input_size, s.hidden_size, s.num_layers,
                                             s.bidirectional, seed=0)
            inputs = reference.make_inputs(case, seed=0)
            pair = backend.build(case, weights, inputs, impls=(impl,))
            try:
                m = time_single(getattr(pair, impl).step, pair.sync, config)
            finally:
                pair.close()
            per_build.append(list(m.samples))
        out.append({"case": case.id, "builds": per_build})
    return out


def summarize(processes: list[list[dict[str, Any]]]) -> list[str]:
    """One line per case: within-build, between-build and between-process spreads of the median."""
    lines = [f"{'case':50s} {'median ms':>9s} {'within build':>12s} {'between builds':>14s} {'between procs':>13s}",
             "  (within build: median of the builds' IQR/median; between builds: median over processes of "
             "max/min-1 of build medians; between procs: max/min-1 of process medians)"]
    for i, first in enumerate(processes[0]):
        if "skipped" in first:
            lines.append(f"{first['case']:50s} skipped: {first['skipped']}")
            continue
        build_medians = [[float(np.median(b)) for b in proc[i]["builds"]] for proc in processes]
        within = [stats.describe(b).rel_iqr for proc in processes for b in proc[i]["builds"]]
        between_builds = [stats.spread(meds) for meds in build_medians if len(meds) > 1]
        proc_medians = [float(np.median(meds)) for meds in build_medians]
        lines.append(
            f"{first['case']:50s} {np.median(proc_medians) * 1e3:9.3f} {np.median(within):12.1%} "
            + (f"{np.median(between_builds):14.1%}" if between_builds else f"{'-':>14s}")
            + (f" {stats.spread(proc_medians):13.1%}" if len(proc_medians) > 1 else f" {'-':>13s}"))
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the probe in fresh child processes and print the three spreads per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="globs over case ids")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--builds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--impl", choices=("cudnn", "generic"), default="cudnn")
    parser.add_argument("--json", type=Path, help="also write the raw samples here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cases = select(args.cases)
    config = TimingConfig(rounds=args.rounds, min_rounds=args.rounds)
    if args.child:
        print(json.dumps(probe_process(cases, args.builds, args.impl, config)))
        return 0
    processes = []
    for _ in range(args.processes):
        cmd = [sys.executable, __file__, "--child", "--builds", str(args.builds), "--rounds", str(args.rounds),
               "--impl", args.impl, *args.cases]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            return 1
        processes.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("\n".join(summarize(processes)))
    if args.json:
        args.json.write_text(json.dumps({"impl": args.impl, "processes": processes}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
