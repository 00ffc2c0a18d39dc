"""On a real GPU: the paired timer measures device work, not kernel launches (issue: timing correctness).

The workload is a chain of large matmuls whose device duration is measured independently with a bare
CUDA-event loop; the harness must land within 2% of it, and a doubled workload must measure ~2x.
Figures are printed (run with -rP to see them).
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from pytest_rnnperf.model.timing import TimingConfig
from pytest_rnnperf.measure.wall import time_pair


def _chain(torch: Any, n: int, size: int = 2048) -> Callable[[], None]:
    """A step of ``n`` dependent fp32 matmuls (no host copies, nothing returned)."""
    a = torch.randn(size, size, device="cuda") / size**0.5
    b = torch.randn(size, size, device="cuda") / size**0.5

    def step() -> None:
        x = a
        for _ in range(n):
            x = x @ b

    return step


def _event_time(torch: Any, step: Callable[[], None], steps: int = 50, repeats: int = 5) -> float:
    """Median seconds per step from a bare CUDA-event loop: the device's own clock."""
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(steps):
            step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / steps)
    return sorted(times)[len(times) // 2]


def _steps_for(torch: Any, target_s: float) -> int:
    """Matmuls per step so that one step lasts about ``target_s`` on this GPU."""
    one = _event_time(torch, _chain(torch, 1), steps=100)
    return max(1, round(target_s / one))


@pytest.mark.gpu
@pytest.mark.parametrize("target_ms", [1.0, 5.0])
def test_harness_matches_device_time_and_doubles(cuda_torch: Any, target_ms: float) -> None:
    """Harness median within 2% of CUDA-event time; twice the work measures 2x (within 3%)."""
    torch = cuda_torch
    torch.backends.cuda.matmul.allow_tf32 = False
    n = _steps_for(torch, target_ms / 1e3)
    single, double = _chain(torch, n), _chain(torch, 2 * n)
    device_single = _event_time(torch, single)
    paired = time_pair(single, double, torch.cuda.synchronize, TimingConfig(rounds=30, min_block_s=0.02),
                       names=("single", "double"))
    harness_single = paired.a.median
    error = harness_single / device_single - 1
    ratio = paired.b.median / paired.a.median
    print(f"\n[timing] target {target_ms} ms: {n} matmuls/step; CUDA events {device_single * 1e3:.4f} ms/step, "
          f"harness {harness_single * 1e3:.4f} ms/step (IQR {paired.a.iqr * 1e3:.4f}), "
          f"harness overhead {error:+.2%}; doubled work measures {ratio:.4f}x")
    assert abs(error) <= 0.02, f"harness {harness_single:.6f} s vs device {device_single:.6f} s: {error:+.2%}"
    assert abs(ratio - 2.0) <= 0.06, f"doubled work measured {ratio:.3f}x"


@pytest.mark.gpu
def test_unsynchronized_timer_would_be_wrong(cuda_torch: Any) -> None:
    """Control: without the device sync the same loop times kernel launches, far below device time."""
    torch = cuda_torch
    step = _chain(torch, _steps_for(torch, 5e-3))
    device = _event_time(torch, step)
    paired = time_pair(step, step, lambda: None, TimingConfig(rounds=5, min_block_s=0.0, warmup_steps=1,
                                                            warmup_s=0.0))
    torch.cuda.synchronize()
    print(f"\n[timing] without sync: {paired.a.median * 1e3:.4f} ms/step vs device {device * 1e3:.4f} ms/step")
    assert paired.a.median < 0.5 * device
