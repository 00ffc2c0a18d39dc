"""Does a torch cuDNN case's device time depend on where its buffers landed in GPU memory? An experiment.

An experiment for the GPU runner, not part of the plugin. A case's kernels agree to ~0.1% between the rounds of one
process but spread 0.5-0.8% between stored processes (the H100 evidence README). This probe builds each case several
times in one process, each build behind a pad of another size kept allocated (so its weights, inputs and cuDNN
workspace land on other pages), and traces each build's kernels per step with CUPTI (cupti-python):

- within a build: the spread of its repeats (what one process's rounds see),
- between builds: the spread of the builds' medians in one process (other placements, same process),
- between processes: the spread of each process's first build (what stored processes see).

If between builds is about as large as between processes, the placement carries the noise, and timing each round
on another placement would let one process's median average it out.

    python scripts/placement_probe.py --processes 3 --builds 8 'torch-lstm-infer-fp32-T28-B128-I28-H128-L1'
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

from pytest_rnnperf.backends import load_backend  # noqa: E402
from pytest_rnnperf.measure.device_time import _Recorder, _real_cupti  # noqa: E402
from pytest_rnnperf.model import reference  # noqa: E402
from pytest_rnnperf.model.cases import Case  # noqa: E402
from suites.matrix import paired_cases  # noqa: E402

MB = 1 << 20


def select(patterns: list[str]) -> list[Case]:
    """Nightly torch cases whose id matches any of the globs, in matrix order."""
    chosen = [c for c in paired_cases("torch", "nightly") if any(fnmatch.fnmatch(c.id, p) for p in patterns)]
    if not chosen:
        raise SystemExit(f"placement_probe: no case matches {' '.join(patterns)}")
    return chosen


def kernel_times(step: Any, sync: Any, steps: int, repeats: int) -> list[dict[str, float]]:
    """Each kernel's device seconds per step, in ``repeats`` rounds of ``steps`` steps, traced by CUPTI."""
    cupti = _real_cupti()
    spans = []
    with _Recorder(cupti) as rec:
        for _ in range(repeats):
            sync()
            start = cupti.get_timestamp()
            for _ in range(steps):
                step()
            sync()
            spans.append((start, cupti.get_timestamp()))
    out = []
    for lo, hi in spans:
        times: dict[str, float] = {}
        for begin, end, name in rec.records:
            if lo <= begin < hi:
                times[name] = times.get(name, 0.0) + (end - begin) * 1e-9 / steps
        out.append(times)
    return out


def probe_process(cases: list[Case], builds: int, repeats: int, steps: int, seed: int) -> list[dict[str, Any]]:
    """In this process: each case built ``builds`` times behind pads of random sizes; each build's kernel times."""
    import torch

    rng = np.random.default_rng(seed)
    pads = []
    out = []
    for case in cases:
        s = case.shape
        backend = load_backend(case.framework)
        per_build = []
        for b in range(builds):
            if b:  # the first build lands where the process's history put it, as in a night
                pads.append(torch.empty(int(rng.integers(1, 64)) * MB + int(rng.integers(0, MB // 256)) * 256,
                                        dtype=torch.uint8, device="cuda"))
            weights = reference.init_weights(case.cell, s.input_size, s.hidden_size, s.num_layers,
                                             s.bidirectional, seed=0)
            pair = backend.build(case, weights, reference.make_inputs(case, seed=0), impls=("cudnn",))
            try:
                side = pair.cudnn
                assert side is not None, "built with impls=('cudnn',)"
                for _ in range(3):
                    side.step()
                per_build.append(kernel_times(side.step, pair.sync, steps, repeats))
            finally:
                pair.close()
        out.append({"case": case.id, "builds": per_build})
        print(f"placement_probe: {case.id} done", file=sys.stderr, flush=True)
    return out


def _sd(values: list[float]) -> float:
    """The standard deviation of the logs (a relative spread)."""
    return float(np.std(np.log(values), ddof=1)) if len(values) > 1 else 0.0


def summarize(processes: list[list[dict[str, Any]]]) -> list[str]:
    """Per case and for its largest kernels and their sum: the three spreads (sd of logs)."""
    lines = []
    for i, first in enumerate(processes[0]):
        lines.append(f"{first['case']}")
        names = sorted(first["builds"][0][0], key=lambda n: -first["builds"][0][0][n])[:4]
        for name in [None, *names]:
            def value(rep: dict[str, float]) -> float:
                return sum(rep.values()) if name is None else rep.get(name, 0.0)
            meds = [[float(np.median([value(r) for r in b])) for b in proc[i]["builds"]] for proc in processes]
            within = np.median([_sd([value(r) for r in b]) for proc in processes for b in proc[i]["builds"]])
            between = np.median([_sd(m) for m in meds])
            procs = _sd([m[0] for m in meds])
            pooled = _sd([float(np.median(m)) for m in meds])
            label = "(sum of kernels)" if name is None else name[:56]
            lines.append(f"  {label:56s} {np.median(meds) * 1e6:9.2f} us  within {within:6.2%}  between builds "
                         f"{between:6.2%}  between processes {procs:6.2%}  of build medians {pooled:6.2%}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the probe in fresh child processes and print the spreads per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="globs over torch case ids")
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--builds", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", type=Path, help="also write the raw times here")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cases = select(args.cases)
    import torch

    if not torch.cuda.is_available():
        print("placement_probe: no CUDA GPU visible to torch; run it on the GPU runner")
        return 2
    if args.child is not None:
        print(json.dumps(probe_process(cases, args.builds, args.repeats, args.steps, args.child)))
        return 0
    processes = []
    for p in range(args.processes):
        cmd = [sys.executable, __file__, "--child", str(p), "--builds", str(args.builds), "--repeats",
               str(args.repeats), "--steps", str(args.steps), *args.cases]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
        if done.returncode != 0:
            return 1
        processes.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("\n".join(summarize(processes)))
    if args.json:
        args.json.write_text(json.dumps(processes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
