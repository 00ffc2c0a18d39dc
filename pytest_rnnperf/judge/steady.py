"""The steady kernels' time of a process, weighted by how quietly each kernel ran across the history. Pure.

``across.steady_kernels`` are the kernels every stored process ran within 1% of each other. Their plain sum lets the
loudest of them set the noise: a kernel at 0.9% beside three at 0.2% spreads the sum past what a 3% slowdown of the
step moves it. Once the history holds ``WEIGHTED_MIN_PROCESSES``, each kernel's log change is weighted by the inverse
of its variance between processes (the least noisy estimate of a slowdown shared by all of them), no kernel above
``WEIGHT_CAP``; the value stays in time per step: the kernels' centers summed, moved by that weighted change. A
uniform slowdown of the step moves it exactly as it moves the plain sum; one kernel's slowdown moves it by that
kernel's weight, not its time, so the rule judges both values and fails on either. The history's own weighted
values are each taken against the mix of the other processes (leave one out): the noise the line is drawn from is
the noise a new process meets, not the smaller one of weights fitted to the same processes. Where that noise is not
below the plain sum's, only the plain sum is judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from pytest_rnnperf.judge import across as xp
from pytest_rnnperf.model.process import ProcessSummary

# Fewer processes give weights that chase their own noise: below this the plain sum is judged, as it always was.
WEIGHTED_MIN_PROCESSES = 10
# No kernel carries more than this share of the weight (where two or more are steady): the value keeps watching
# more of the step than its quietest kernel, whose weight would otherwise reach 0.99 in an H100 GRU case.
WEIGHT_CAP = 0.5
# A kernel's noise is never taken below this (relative) in its weight: identical stored values would weigh infinitely.
NOISE_FLOOR = 1e-4


@dataclass(frozen=True)
class SteadyMix:
    """The steady kernels' centers (median time per step) and weights; no weights: their plain sum."""

    names: tuple[str, ...]
    centers: tuple[float, ...]
    weights: tuple[float, ...] | None

    def time(self, kernels: Mapping[str, float]) -> float:
        """The steady time per step of one process or round (``kernels``: time per step by name, each > 0)."""
        if self.weights is None:
            return float(sum(kernels[n] for n in self.names))
        moved = sum(w * math.log(kernels[n] / c) for n, c, w in zip(self.names, self.centers, self.weights))
        return sum(self.centers) * math.exp(moved)

    @property
    def largest(self) -> float:
        """The largest weight (1.0 for a single kernel; the plain sum's largest time share without weights)."""
        if self.weights is None:
            return max(self.centers) / sum(self.centers)
        return max(self.weights)


def capped(weights: np.ndarray, cap: float) -> np.ndarray:
    """``weights`` normalized to sum 1, none above ``cap`` (raised to 1/len where that is more): what a capped
    weight loses is shared among the rest in proportion."""
    w = weights / weights.sum()
    cap = max(cap, 1.0 / len(w))
    while (over := w > cap + 1e-12).any():
        free = ~over & (w < cap)
        w[over] = cap
        w[free] += (1.0 - w.sum()) * w[free] / w[free].sum()
    return w


def steady_mix(history: Sequence[ProcessSummary], names: Sequence[str], weighted: bool | None = None) -> SteadyMix:
    """The mix of ``names`` (steady kernels every process of ``history`` ran) over ``history``; ``weighted`` by
    default where the history holds ``WEIGHTED_MIN_PROCESSES``."""
    logs = np.log(np.array([[s.kernels[n] for n in names] for s in history], dtype=float))
    mid = np.median(logs, axis=0)
    centers = tuple(float(c) for c in np.exp(mid))
    if weighted is None:
        weighted = len(history) >= WEIGHTED_MIN_PROCESSES
    if not weighted or len(names) < 2:
        return SteadyMix(tuple(names), centers, None)
    noise = np.maximum(1.4826 * np.median(np.abs(logs - mid), axis=0), NOISE_FLOOR)
    return SteadyMix(tuple(names), centers, tuple(float(w) for w in capped(1.0 / noise**2, WEIGHT_CAP)))


def plain_series(history: Sequence[ProcessSummary], names: Sequence[str]) -> tuple[SteadyMix, list[float]]:
    """The plain sum of ``names`` and each stored process's value of it."""
    plain = steady_mix(history, names, weighted=False)
    return plain, [plain.time(s.kernels) for s in history]


def steady_series(history: Sequence[ProcessSummary], names: Sequence[str]) -> list[tuple[SteadyMix, list[float]]]:
    """What the steady rule judges, each with the history's values: the plain sum and, where kept, the weighted mix.

    The weighted mix's values are each stored process against the mix of the others. It is left out where the
    history is too short to weigh, one kernel is steady, or the weighted values spread no less than the plain sums
    (in a short-stepped H100 GRU the quietest kernels drift together: 0.64% against the sum's 0.54%).
    """
    plain = plain_series(history, names)
    mix = steady_mix(history, names)
    if mix.weights is None:
        return [plain]
    total = sum(mix.centers)
    values = []
    for i, summary in enumerate(history):
        others = steady_mix([*history[:i], *history[i + 1:]], names, weighted=True)
        values.append(total * others.time(summary.kernels) / sum(others.centers))
    return [plain, (mix, values)] if _noise(values) < _noise(plain[1]) else [plain]


def _noise(values: Sequence[float]) -> float:
    """The spread ``across.spread`` reads, without its floor."""
    return xp.log_mad(np.log(np.asarray(values, dtype=float)))
