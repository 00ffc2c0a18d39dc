"""On a real GPU: NVML fingerprint fields read, and a telemetry window sees energy and clocks."""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_rnnperf.measure.gpu import TelemetryWindow, nvml_index, read_gpu_info


@pytest.mark.gpu
def test_fingerprint_reads_the_real_device(cuda_torch: Any) -> None:
    """NVML sees the GPU torch sees; the fields baselines are keyed by are values, not 'unavailable'."""
    info = read_gpu_info(nvml_index())
    print("\n[device] " + "\n[device] ".join(f"{k}: {v}" for k, v in info.as_dict().items()))
    assert info.available, info.reason
    assert cuda_torch.cuda.get_device_name(0).split()[-1] in info.name
    for key in ("name", "driver_version", "cuda_driver_version", "compute_capability", "memory_total"):
        assert not getattr(info, key).startswith("unavailable"), key


@pytest.mark.gpu
def test_telemetry_window_sees_energy_under_load(cuda_torch: Any) -> None:
    """A >= 1 s window of matmuls reports energy, power and SM clocks; telemetry never raises."""
    torch = cuda_torch
    a = torch.randn(8192, 8192, device="cuda")
    with TelemetryWindow(index=nvml_index()) as window:
        import time

        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            for _ in range(10):
                a = (a @ a) / 8192**0.5
            torch.cuda.synchronize()
    s = window.summary
    print(f"\n[telemetry] {s.as_dict()}")
    assert s.duration_s >= 1.4
    assert s.energy_j is not None and s.energy_j > 0, s.unavailable
    assert s.mean_power_w is not None and s.mean_power_w > 50
    assert str(os.getpid()) not in " ".join(s.foreign_processes)
