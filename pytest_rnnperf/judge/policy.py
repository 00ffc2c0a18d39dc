"""The thresholds a case is judged at: one value per threshold the rules declare (``rules.thresholds``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from pytest_rnnperf.judge.rules import thresholds


@dataclass(frozen=True, init=False)
class Policy:
    """A value for every declared threshold (its default unless given), read as ``policy.<name>``."""

    values: Mapping[str, Any]
    # Case id -> device-time threshold measured for that case on this GPU model (see ``noise``); a case
    # without one is judged at device_effect, and none is judged below it.
    device_effects: Mapping[str, float]

    def __init__(self, device_effects: Mapping[str, float] | None = None, **given: Any) -> None:
        """Every declared threshold at ``given`` or its default; ValueError names one that would make every verdict
        meaningless (0, negative, inf, nan), TypeError one that no rule declares."""
        declared = {t.name: t for t in thresholds()}
        unknown = sorted(set(given) - set(declared))
        if unknown:
            raise TypeError(f"no rule declares a threshold {unknown[0]!r}")
        values = {name: given.get(name, t.default) for name, t in declared.items()}
        for name, t in declared.items():
            if (problem := t.problem(values[name])) is not None:
                raise ValueError(problem)
        for case_id, value in (device_effects or {}).items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"device threshold of {case_id} must be a finite number > 0, got {value!r}")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "device_effects", dict(device_effects or {}))

    def __getattr__(self, name: str) -> Any:
        """The value of the threshold ``name``."""
        values = self.__dict__.get("values", {})
        if name not in values:
            raise AttributeError(f"{type(self).__name__} has no threshold {name!r}")
        return values[name]

    def with_device_effects(self, device_effects: Mapping[str, float]) -> Policy:
        """This policy with per-case device-time thresholds (``noise``)."""
        return Policy(device_effects, **self.values)

    def device_threshold(self, case_id: str) -> float:
        """The device-time threshold of one case: its measured one where larger than ``device_effect``."""
        return max(self.device_effect, self.device_effects.get(case_id, 0.0))
