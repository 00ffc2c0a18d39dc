"""Does CUPTI device time work here, next to torch's profiler, and how steady is it? An experiment for a GPU runner.

For a few torch cases: prove the path with torch's profiler, trace both sides with the device timer, profile
again, trace again; print device busy time, kernel time, launches per step, the top kernels, the trace's cost,
and what an injected spin adds. Run it in several fresh processes to see the spread between processes:

    for i in 1 2 3; do python scripts/device_time_probe.py --json probe$i.json; done
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_rnnperf import reference  # noqa: E402
from pytest_rnnperf.backends import load_backend  # noqa: E402
from pytest_rnnperf.cases import Case, Shape  # noqa: E402
from pytest_rnnperf.timing import TimingConfig  # noqa: E402
from pytest_rnnperf.timing.device import DeviceTimer, device_time_problem, steps_for  # noqa: E402
from pytest_rnnperf.timing.wall import time_pair  # noqa: E402

CASES = [Case("torch", "lstm", Shape(28, 128, 28, 128)), Case("torch", "gru", Shape(60, 500, 32, 256)),
         Case("torch", "lstm", Shape(50, 512, 512, 1024)), Case("torch", "lstm", Shape(28, 128, 28, 128), "infer")]


def main() -> int:
    """Probe each case; print a line per trace and write the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    problem = device_time_problem()
    if problem:
        print(f"device time off: {problem}")
        return 1
    backend = load_backend("torch")
    out = []
    for case in CASES:
        s = case.shape
        weights = reference.init_weights(case.cell, s.input_size, s.hidden_size, s.num_layers, s.bidirectional)
        pair = backend.build(case, weights, reference.make_inputs(case))
        try:
            wall = time_pair(pair.cudnn.step, pair.generic.step, pair.sync, TimingConfig(rounds=10))
            steps = (steps_for(wall.a.median), steps_for(wall.b.median))
            row: dict[str, object] = {"case": case.id, "wall_ms": [wall.a.median * 1e3, wall.b.median * 1e3],
                                      "steps": steps, "traces": []}
            for attempt in range(2):
                proof = pair.cudnn.prove_path()  # torch's profiler (CUPTI underneath) between our traces
                t0 = time.perf_counter()
                cudnn, generic = DeviceTimer().pair(pair.cudnn.step, pair.generic.step, pair.sync, args.rounds, steps)
                cost = time.perf_counter() - t0
                trace = {"proof_ok": proof.ok, "cost_s": cost,
                         "busy_ms": [cudnn.busy.median * 1e3, generic.busy.median * 1e3],
                         "busy_rel_iqr": [d.busy.iqr / d.busy.median for d in (cudnn, generic)],
                         "kernel_ms": [cudnn.work.median * 1e3, generic.work.median * 1e3],
                         "launches": [cudnn.launches_per_step, generic.launches_per_step],
                         "top": [[k.name, round(k.ms_per_step, 4), k.launches_per_step] for k in cudnn.kernels[:4]],
                         "generic_top": [[k.name, round(k.ms_per_step, 4)] for k in generic.kernels[:3]]}
                row["traces"].append(trace)  # type: ignore[union-attr]
                print(f"{case.id:44s} try {attempt}: proof {proof.ok}, wall {wall.a.median * 1e3:.3f}/"
                      f"{wall.b.median * 1e3:.3f} ms, device {trace['busy_ms'][0]:.4f}/{trace['busy_ms'][1]:.4f} ms "
                      f"(IQR {trace['busy_rel_iqr'][0]:.2%}/{trace['busy_rel_iqr'][1]:.2%}), launches "
                      f"{cudnn.launches_per_step:.0f}/{generic.launches_per_step:.0f}, trace {cost:.2f} s")
            for name, ms, n in row["traces"][0]["top"]:  # type: ignore[index]
                print(f"    {ms:8.4f} ms x{n:g}  {name}")
            spin_us = 0.05 * row["traces"][0]["busy_ms"][0] * 1e3  # type: ignore[index]
            pair.cudnn._inject_cycles = int(spin_us * 1980)  # type: ignore[union-attr]
            slow, _ = DeviceTimer().pair(pair.cudnn.step, pair.generic.step, pair.sync, args.rounds, steps)
            pair.cudnn._inject_cycles = 0  # type: ignore[union-attr]
            row["spin_5pct_busy_ms"] = slow.busy.median * 1e3
            print(f"    +5% spin ({spin_us:.1f} us): device {slow.busy.median * 1e3:.4f} ms "
                  f"({slow.busy.median * 1e3 / row['traces'][0]['busy_ms'][0] - 1:+.2%})")  # type: ignore[index]
            out.append(row)
        finally:
            pair.close()
    if args.json:
        args.json.write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
