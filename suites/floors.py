"""Speedup floors: the minimum cuDNN-over-generic speedup each case must show.

Floors are deliberately conservative: they catch a cuDNN path that silently stopped running or collapsed
(the Keras 3.14 kind of regression), not a few percent; the stored baselines catch the few percent.

Where the figures come from (baselines/NVIDIA_H200/evidence/README.md, torch 2.11 /
cuDNN 9.19, TF 2.21 + Keras 3.15): LSTM and GRU training ran 4x-12x faster on cuDNN at batch <= 512 in both
frameworks, so those cases get 2.0x, half of the lowest figure. At batch 4700 torch's cuDNN GRU was barely
faster, so those cases get 0.8x: cuDNN must not fall far behind. At hidden size >= 1024 both sides are bound by
the same matmuls, so those get 1.0x: ~1.15x in IEEE FP32, and in TF32 1.58x of device time on an H100 and an
H200 alike, while the wall speedup (1.8x-2.9x) rides on how fast the host dispatches the generic side's steps.
Cases the measurements do not cover (inference, plain RNNs, half precision, small batches) get 1.0x: cuDNN must
not be slower. On JAX (native and Keras) the generic side is a loop XLA compiles into one program, not a step
dispatched from Python per timestep, and cuDNN can lose: on an H100 (jax 0.11.2, Keras 3.15.1) the wall speedup
was 0.53x-0.96x at T=28 B=128 and in Keras's bidirectional stack, 1.1x-1.9x at the larger shapes, while the cuDNN
kernels were 1.3x-3x faster on the device (jaxlib's cuDNN LSTM copies seq_lengths to the host and waits on
every call). JAX cases get 0.25x, half the lowest figure: a floor for a collapse; the device-time baseline
catches the few percent. Raise a floor only from measured baselines, never from hope.
"""

from __future__ import annotations

from pytest_rnnperf.model.cases import Case

MEASURED_TRAIN_FLOOR = 2.0
XLA_FLOOR = 0.25
HUGE_BATCH_FLOOR = 0.8
DEFAULT_FLOOR = 1.0
HUGE_BATCH = 4096
WIDE_HIDDEN = 1024


# Backends whose generic loop is compiled by XLA.
XLA_GENERIC = ("jax", "keras_jax")


def model_floor(keras_backend: str) -> float:
    """The floor of a Keras model case with no measured figure: XLA's on JAX, else not slower (as above)."""
    return XLA_FLOOR if keras_backend == "jax" else DEFAULT_FLOOR


def floor_for(case: Case) -> float:
    """The floor of a case, by the rules in this module's docstring."""
    if case.framework in XLA_GENERIC:
        return XLA_FLOOR
    if case.cell in ("lstm", "gru") and case.mode == "train" and case.precision in ("fp32", "tf32"):
        if case.shape.batch >= HUGE_BATCH:
            return HUGE_BATCH_FLOOR
        if case.shape.hidden_size >= WIDE_HIDDEN:
            return DEFAULT_FLOOR
        if case.shape.batch >= 64:
            return MEASURED_TRAIN_FLOOR
    return DEFAULT_FLOOR
