"""Inputs the Keras model checks share: module-level, so a Keras backend's subprocess imports them by name."""

from __future__ import annotations

from typing import Callable

import numpy as np


def padded_tokens(vocab: int, batch: int, steps: int, seed: int = 0, shortest: int | None = None,
                  empty: bool = False) -> np.ndarray:
    """Token ids of varied lengths (``shortest`` to ``steps``, default half of it), right-padded with 0 (what
    Embedding(mask_zero=True) masks); with ``empty`` the first sequence is all padding."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, (batch, steps))
    lengths = rng.integers(steps // 2 if shortest is None else shortest, steps + 1, batch)
    if empty:
        lengths[0] = 0
    ids[np.arange(steps)[None, :] >= lengths[:, None]] = 0
    return ids


def batches(make: Callable[..., np.ndarray], seeds: tuple[int, ...]) -> list[np.ndarray]:
    """One batch of ``make`` per seed: a check's parity_inputs=."""
    return [make(seed=seed) for seed in seeds]
