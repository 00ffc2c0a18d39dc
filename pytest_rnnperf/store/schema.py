"""The stored record's format history: each older format migrated to the next, one step at a time.

Records of an older format are migrated when read, so every baseline ever written stays readable; the file
itself is never rewritten. A new format = ``FORMAT_VERSION`` + 1 in ``model/records.py``, one function here and
its line in ``MIGRATIONS``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeGuard

from pytest_rnnperf.model.fields import RecordError
from pytest_rnnperf.model.records import FORMAT_VERSION, flag_to_dict, flags_from_telemetry


def _v1_to_v2(record: dict[str, Any]) -> dict[str, Any]:
    """Format 1 -> 2: timers named, window flags from the telemetry's counters, the other warnings as notes."""
    out = dict(record)
    for side in ("cudnn", "generic"):
        if isinstance(out.get(side), Mapping):
            out[side] = dict(out[side], timer="wall")  # format 1 had one timer: host clock, device synced
    flags = flags_from_telemetry(out.get("telemetry"))
    messages = {f.message for f in flags}
    out["flags"] = [flag_to_dict(f) for f in flags]
    warnings = out.get("warnings", [])
    out["notes"] = [w for w in warnings if w not in messages] if isinstance(warnings, list) else []
    # Early format-1 files stored the cuDNN-only window's reading here; gpu_busy is derived from telemetry.
    out.pop("device_busy", None)
    return out


def _v2_to_v3(record: dict[str, Any]) -> dict[str, Any]:
    """Format 2 -> 3: no per-round metrics were stored (each kernel's table mean stands for its process)."""
    return dict(record, metrics={})


def _v3_to_v4(record: dict[str, Any]) -> dict[str, Any]:
    """Format 3 -> 4: records are unchanged; a kept run of format 3 left its reported cases out, and reads as
    reporting none (``store.runs.load_run``)."""
    return dict(record)


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}


def migrate_record(record: Mapping[str, Any], version: int) -> dict[str, Any]:
    """A record of format ``version`` brought to FORMAT_VERSION, one step at a time."""
    if version > FORMAT_VERSION or (version < FORMAT_VERSION and version not in MIGRATIONS):
        raise RecordError(f"unknown format {version!r} (this pytest-rnnperf reads formats "
                          f"{', '.join(map(str, sorted(MIGRATIONS)))} and {FORMAT_VERSION})")
    out = dict(record)
    while version < FORMAT_VERSION:
        out = MIGRATIONS[version](out)
        version += 1
    return out


def readable(version: Any) -> TypeGuard[int]:
    """Whether a stored run of format ``version`` can be read (it is current, or migrates)."""
    return isinstance(version, int) and not isinstance(version, bool) and (
        version == FORMAT_VERSION or version in MIGRATIONS)


def formats() -> str:
    """e.g. "1, 2, 3 and 4": the formats this pytest-rnnperf reads."""
    return f"{', '.join(map(str, sorted(MIGRATIONS)))} and {FORMAT_VERSION}"
