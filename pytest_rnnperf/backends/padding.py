"""Running a smaller batch through a step compiled for the timing batch, instead of compiling another.

Graph frameworks (TensorFlow's tf.function, XLA) compile a step per input shape, and a compile costs seconds
on a GPU. The parity check's batch slice is padded with zero sequences up to the timing batch and run through
the step already compiled; its first sequences are the slice's own results. Pure NumPy.
"""

from __future__ import annotations

import numpy as np

from pytest_rnnperf.model.reference import CaseInputs


def padded_to(inputs: CaseInputs, like: CaseInputs) -> CaseInputs | None:
    """``inputs`` with zero sequences appended up to ``like``'s batch, or None when only the batch is not what differs.

    Sequences of a batch never interact in an RNN and a zero upstream gradient contributes zero to every
    gradient, so the first sequences of the padded result are the result of ``inputs`` alone.
    """
    fields = [(inputs.x, like.x), (inputs.d_output, like.d_output), (inputs.d_h_n, like.d_h_n)]
    if (inputs.d_c_n is None) != (like.d_c_n is None):
        return None
    if inputs.d_c_n is not None and like.d_c_n is not None:
        fields.append((inputs.d_c_n, like.d_c_n))
    for mine, theirs in fields:
        if mine.ndim != 3 or mine.shape[0] != theirs.shape[0] or mine.shape[2] != theirs.shape[2]:
            return None
        if not 0 < mine.shape[1] < theirs.shape[1]:
            return None

    def pad(a: np.ndarray, like_a: np.ndarray) -> np.ndarray:
        """``a`` with zeros along axis 1 up to ``like_a``'s length there."""
        return np.concatenate([a, np.zeros((a.shape[0], like_a.shape[1] - a.shape[1], a.shape[2]), a.dtype)], axis=1)

    return CaseInputs(x=pad(inputs.x, like.x), d_output=pad(inputs.d_output, like.d_output),
                      d_h_n=pad(inputs.d_h_n, like.d_h_n),
                      d_c_n=None if inputs.d_c_n is None or like.d_c_n is None else pad(inputs.d_c_n, like.d_c_n))
