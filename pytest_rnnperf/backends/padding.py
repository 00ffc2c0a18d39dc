"""Running a smaller batch through a step compiled for the timing batch, instead of compiling another.

Graph frameworks (TensorFlow's tf.function, XLA) compile a step per input shape, and a compile costs seconds
on a GPU. The parity check's batch slice is padded with zero sequences up to the timing batch and run through
the step already compiled; its first sequences are the slice's own results. Pure NumPy.

Where the padding happens matters for the largest batches: a float64 copy of the timing batch is 0.65 GB at
B4700 (per side). TensorFlow pads on the device, an eager op; the JAX backends pad on the host into float32
(``padded_f32``), since a pad on the device would be an XLA compile of its own.
"""

from __future__ import annotations

import numpy as np

from pytest_rnnperf.model.reference import CaseInputs


def padding_for(inputs: CaseInputs, like: CaseInputs) -> int | None:
    """Zero sequences that bring ``inputs`` up to ``like``'s batch (0: the same shapes), or None when more differs.

    Sequences of a batch never interact in an RNN and a zero upstream gradient contributes zero to every
    gradient, so the first sequences of the padded result are the result of ``inputs`` alone.
    """
    if (inputs.d_c_n is None) != (like.d_c_n is None):
        return None
    fields = [(inputs.x, like.x), (inputs.d_output, like.d_output), (inputs.d_h_n, like.d_h_n)]
    if inputs.d_c_n is not None and like.d_c_n is not None:
        fields.append((inputs.d_c_n, like.d_c_n))
    # Every field is (steps or states, batch, features): only axis 1 may differ, by the same count everywhere.
    if any(m.ndim != 3 or t.ndim != 3 or m.shape[::2] != t.shape[::2] or m.shape[1] < 1 for m, t in fields):
        return None
    extra = {t.shape[1] - m.shape[1] for m, t in fields}
    return extra.pop() if len(extra) == 1 and min(extra) >= 0 else None


def padded_f32(a: np.ndarray, pad: int = 0, axis: int = 0) -> np.ndarray:
    """``a`` as a contiguous float32 array with ``pad`` zero entries appended along ``axis``, in one pass."""
    shape = list(a.shape)
    shape[axis] += pad
    out = np.zeros(shape, np.float32)
    out[tuple(slice(0, n) for n in a.shape)] = a
    return out
