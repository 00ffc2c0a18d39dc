"""Dense datasheet peak TFLOP/s per GPU model and precision, to put achieved TFLOP/s in context."""

from __future__ import annotations

# Vendor datasheet figures without sparsity. Order matters: the first substring that matches the
# NVML device name wins, so the more specific names come first.
PEAK_TFLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0}),
    ("H100 NVL", {"fp32": 60.0, "tf32": 417.5, "fp16": 835.0, "bf16": 835.0}),
    ("H100", {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4}),
    ("H200", {"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4}),
    ("A100", {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}),
    ("L40S", {"fp32": 91.6, "tf32": 183.0, "fp16": 366.0, "bf16": 366.0}),
    ("L4", {"fp32": 30.3, "tf32": 60.0, "fp16": 121.0, "bf16": 121.0}),
)


def peak_tflops(gpu_name: str, precision: str) -> float | None:
    """Datasheet dense peak for ``precision`` on ``gpu_name``, or None for an unknown GPU."""
    for key, peaks in PEAK_TFLOPS:
        if key in gpu_name:
            return peaks.get(precision)
    return None
