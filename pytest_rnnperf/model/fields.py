"""Readers of stored JSON fields: each returns the value typed, or raises RecordError naming the field."""

from __future__ import annotations

import math
from typing import Any, Mapping


class RecordError(ValueError):
    """A stored record or run cannot be read: the message names the field and what is wrong with it."""


def as_mapping(value: Any, what: str) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else RecordError."""
    if not isinstance(value, Mapping):
        raise RecordError(f"{what} is {json_kind(value)}, not an object")
    return value


def as_optional_mapping(value: Any, what: str) -> Mapping[str, Any] | None:
    """A JSON object or null."""
    return None if value is None else as_mapping(value, what)


def as_list(value: Any, what: str) -> list[Any]:
    """``value`` if it is a JSON array, else RecordError."""
    if not isinstance(value, list):
        raise RecordError(f"{what} is {json_kind(value)}, not a list")
    return value


def as_text(value: Any, what: str) -> str:
    """``value`` if it is a string, else RecordError."""
    if not isinstance(value, str):
        raise RecordError(f"{what} is {json_kind(value)}, not text")
    return value


def as_number(value: Any, what: str, finite: bool = True) -> float:
    """``value`` as a float if it is a (finite) number, else RecordError (JSON's Infinity and NaN included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError(f"{what} holds {json_kind(value)}, not a number")
    if finite and not math.isfinite(value):
        raise RecordError(f"{what} holds {value!r}, not a finite number")
    return float(value)


# Plausible seconds for a stored time. A step is at least one kernel launch (microseconds) and CUPTI counts whole
# nanoseconds, so a step under 1 ns was never measured; one over 1e5 s (28 hours) outlasts any run. A part of a step
# (one kernel's share, the host overhead: differences and averages over many steps) may be 0 or far smaller, down
# to 1e-15 s (a 1 ns kernel once in a million steps). Anything outside is a hand edit or corruption, and the
# log-scale statistics of a history overflow on it (exp of a 1e300 s step's log noise), so the reader refuses it.
MIN_STEP_S, MIN_PART_S, MAX_TIME_S = 1e-9, 1e-15, 1e5
MAX_RATIO = MAX_TIME_S / MIN_STEP_S  # a ratio of two plausible step times (a speedup) lies within 1/MAX_RATIO..MAX_RATIO


def as_time(value: Any, what: str, part: bool = False, unit: str = "s") -> float:
    """``value`` (in ``unit``, "s" or "ms") if it is a plausible step time (``part``: a share of one, 0 allowed), else
    RecordError naming the field."""
    number, scale = as_number(value, what), 1e3 if unit == "ms" else 1.0
    low = (MIN_PART_S if part else MIN_STEP_S) * scale
    if not (low <= number <= MAX_TIME_S * scale or (part and number == 0)):
        raise RecordError(f"{what} holds {value!r}: not a plausible time ({'0 or ' if part else ''}{low:g} {unit} to "
                          f"{MAX_TIME_S * scale:g} {unit}{'' if part else ' per step'})")
    return number


def as_ratio(value: Any, what: str) -> float:
    """``value`` if it is a plausible ratio of two step times (a speedup), else RecordError."""
    ratio = as_number(value, what)
    if not 1 / MAX_RATIO <= ratio <= MAX_RATIO:
        raise RecordError(f"{what} holds {value!r}: not a plausible ratio of two step times "
                          f"({1 / MAX_RATIO:g} to {MAX_RATIO:g})")
    return ratio


def as_optional_number(value: Any, what: str) -> float | None:
    """A finite number or null."""
    return None if value is None else as_number(value, what)


def as_whole(value: Any, what: str) -> int:
    """``value`` if it is a whole number, else RecordError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{what} holds {json_kind(value)}, not a whole number")
    return value


def json_kind(value: Any) -> str:
    """How a JSON value reads in an error message: its JSON type and a short form of it."""
    names = {dict: "an object", list: "a list", str: "text", bool: "a boolean", type(None): "null"}
    kind = names.get(type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)
    shown = repr(value)
    return f"{kind} ({shown[:40]}{'...' if len(shown) > 40 else ''})"
