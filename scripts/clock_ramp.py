"""How long does the GPU take to reach its speed after idling? An experiment for the GPU runner.

An idle GPU drops its SM clock (345 MHz on an idle H100 against 1980 MHz under load), and the wall timer warms a
case up for ``TimingConfig.warmup_s`` before its first timed block for that reason. This probe idles the GPU for a
while, then runs one kernel back to back and traces each launch's duration with CUPTI (cupti-python): the time from
the first launch until the kernel runs as fast as at the end is how long a warm-up must last.

    python scripts/clock_ramp.py --idle 0.5 2.0 --seconds 0.3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_rnnperf.measure.device_time import _Recorder, _real_cupti  # noqa: E402


def ramp(idle_s: float, seconds: float, size: int) -> tuple[np.ndarray, np.ndarray]:
    """After ``idle_s`` idle, ``size``-square fp32 matmuls for ``seconds``: each launch's start (ms since the first)
    and duration (us), traced by CUPTI."""
    import torch

    a = torch.randn(size, size, device="cuda")
    torch.cuda.synchronize()
    cupti = _real_cupti()
    time.sleep(idle_s)
    with _Recorder(cupti) as rec:
        begun = time.perf_counter()
        while time.perf_counter() - begun < seconds:
            for _ in range(20):
                a @ a
            torch.cuda.synchronize()
    rows = sorted((s, e) for s, e, name in rec.records if not name.startswith("["))
    t0 = rows[0][0]
    return np.array([(s - t0) / 1e6 for s, _ in rows]), np.array([(e - s) / 1e3 for s, e in rows])


def settling(starts_ms: np.ndarray, durations_us: np.ndarray, bin_ms: float, within: float = 0.005,
             tail_ms: float = 50.0) -> tuple[float, float | None, list[tuple[float, float]]]:
    """The steady duration (median of the last ``tail_ms``), the start of the first ``bin_ms`` bin whose median is
    ``within`` of it (None: none is), and each bin's (start, median)."""
    steady = float(np.median(durations_us[starts_ms > starts_ms[-1] - tail_ms]))
    bins, settled = [], None
    for lo in np.arange(0.0, float(starts_ms[-1]), bin_ms):
        sel = (starts_ms >= lo) & (starts_ms < lo + bin_ms)
        if not sel.any():
            continue
        med = float(np.median(durations_us[sel]))
        bins.append((float(lo), med))
        if settled is None and abs(med / steady - 1) < within:
            settled = float(lo)
    return steady, settled, bins


def main(argv: list[str] | None = None) -> int:
    """Print the ramp after each idle time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=float, nargs="+", default=[0.5, 2.0])
    parser.add_argument("--seconds", type=float, default=0.3)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--bin-ms", type=float, default=2.0)
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("clock_ramp: no CUDA GPU visible to torch; run it on the GPU runner")
        return 2
    for idle in args.idle:
        starts, durations = ramp(idle, args.seconds, args.size)
        steady, settled, bins = settling(starts, durations, args.bin_ms)
        print(f"idle {idle:.1f} s: {len(starts)} launches, steady {steady:.2f} us per matmul (the last 50 ms); "
              f"within 0.5% of it from {settled} ms on")
        for lo, med in bins:
            if lo < 40 or lo % 50 == 0:
                print(f"  {lo:6.1f}-{lo + args.bin_ms:6.1f} ms: {med:8.2f} us ({med / steady - 1:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
