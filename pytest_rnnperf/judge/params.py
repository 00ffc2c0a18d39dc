"""A rule's thresholds as data: each declared once, next to the rule that reads it (``rules.py``).

Everything else is generated from these declarations: the ``Policy`` (its values, defaults and checks), the
settings table and so pytest's options and ini keys and docs/options.md, and ``compare``'s flags. One name
serves all of them: ``device_effect`` is ``Policy.device_effect``, ``--rnnperf-device-effect``,
``rnnperf_device_effect`` and ``compare --device-effect``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

FRACTION = "fraction"  # unit of a relative threshold: 0.03 = 3%, typed as 0.03 or "3%"


@dataclass(frozen=True)
class Threshold:
    """One threshold: its name, Python type, default, unit, help, the values it may take, and who may set it."""

    name: str
    type: type
    default: Any
    unit: str  # FRACTION, or what a number counts ("processes", "times the noise"); "" for a switch
    help: str
    low: float | None = None  # the value must be above it (at least it where not ``strict``)
    high: float | None = None  # the value must be below it (at most it where not ``strict``)
    strict: bool = True
    option: bool = True  # users set it (pytest option, ini key, compare flag); else a fixed part of the method

    def problem(self, value: Any) -> str | None:
        """What makes ``value`` meaningless for this threshold (0, negative, inf, nan, out of range), or None."""
        if self.type is bool:
            return None if isinstance(value, bool) else f"{self.name} must be true or false, got {value!r}"
        if self.type is int:
            ok = isinstance(value, int) and not isinstance(value, bool) and self.within(value)
            return None if ok else f"{self.name} must be a whole number >= {self.low:g}, got {value!r}"
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
            and self.within(value)
        if ok:
            return None
        if self.high is not None:
            return f"{self.name} must be between {self.low:g} and {self.high:g}, got {value!r}"
        return f"{self.name} must be a finite number {'>' if self.strict else '>='} {self.low:g}, got {value!r}"

    def within(self, value: float) -> bool:
        """``value`` lies within the bounds."""
        above = self.low is None or (value > self.low if self.strict else value >= self.low)
        below = self.high is None or (value < self.high if self.strict else value <= self.high)
        return above and below


class Thresholds(Protocol):
    """What a rule reads of a policy (``policy.Policy``): each declared threshold by name, and a case's device one."""

    def __getattr__(self, name: str) -> Any:
        """The value of the declared threshold ``name``."""

    def device_threshold(self, case_id: str) -> float:
        """The device-time threshold of one case."""
