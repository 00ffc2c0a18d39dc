"""The thresholds a case is judged at; the defaults are the ones the command line and the ini file start from."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping


@dataclass(frozen=True)
class Policy:
    """Thresholds of the rule; the defaults are the ones the command line and the ini file start from."""

    min_effect: float = 0.05  # wall time: smallest relative change that counts (0.05 = 5%)
    host_bound_effect: float = 0.35  # wall time of host-bound cases
    host_bound_below: float = 0.5  # GPU-busy fraction under which a case counts as host-bound
    device_min_effect: float = 0.03  # device time
    # Host overhead (wall minus device time): over ten H100 processes of one case it ranged 2-8x, a tail no robust
    # noise estimate of a few processes sees; what a driver or framework does to dispatch doubles it or worse.
    host_effect: float = 1.0
    host_share: float = 0.2  # host overhead is judged where it is at least this share of the wall step
    fail_host: bool = False  # a host overhead regression fails the case (else it is reported by name)
    alpha: float = 0.01  # significance level of the Mann-Whitney test
    confidence: float = 0.95  # of the bootstrap intervals
    # A case's history judges it once it holds this many processes (else its newest stored record does).
    min_processes: int = 3
    # Across processes, a change must exceed this many times the history's own between-process noise.
    history_k: float = 4.0
    # Case id -> device-time threshold measured for that case on this GPU model (see ``noise``); a case
    # without one is judged at device_min_effect, and none is judged below it.
    device_effects: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse thresholds that would make every verdict meaningless (0, negative, inf, nan)."""
        for name in ("min_effect", "host_bound_effect", "device_min_effect", "host_effect"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        for case_id, value in self.device_effects.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"device threshold of {case_id} must be a finite number > 0, got {value!r}")
        if not (isinstance(self.min_processes, int) and self.min_processes >= 2):
            raise ValueError(f"min_processes must be a whole number >= 2, got {self.min_processes!r}")
        if not (isinstance(self.history_k, (int, float)) and math.isfinite(self.history_k) and self.history_k > 0):
            raise ValueError(f"history_k must be a finite number > 0, got {self.history_k!r}")
        for name in ("host_bound_below", "host_share", "alpha", "confidence"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0 < value < 1):
                raise ValueError(f"{name} must be between 0 and 1, got {value!r}")


    def device_effect(self, case_id: str) -> float:
        """The device-time threshold of one case: its measured one where larger than ``device_min_effect``."""
        return max(self.device_min_effect, self.device_effects.get(case_id, 0.0))
