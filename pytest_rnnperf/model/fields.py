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
