"""Accepted changes of a GPU model: the points where a team said "this change is deliberate, judge from here on".

``baselines/<gpu>/accepted.json`` lists each acceptance (since when, from which stored run, why, when it was
said). Runs stored before the newest one are left out of judging, so each case's history restarts with the runs
kept after it; they stay on disk and in ``history`` for the page. Pure: no pytest, no framework.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from pytest_rnnperf.model.records import BaselineError, StoredRun

FORMAT = 1
FILE_NAME = "accepted.json"


@dataclass(frozen=True)
class Accepted:
    """One accepted change: runs stored at or after ``since`` (ISO time) are the history; ``reason`` says why."""

    since: str
    reason: str
    accepted_at: str
    from_run: str = ""  # the stored run the history restarts at, or "" for the runs kept from now on

    def to_dict(self) -> dict[str, str]:
        """The stored form."""
        return {"since": self.since, "reason": self.reason, "accepted_at": self.accepted_at, "from": self.from_run}


def instant(stamp: str) -> datetime | None:
    """An ISO time as an aware datetime (naive ones read as UTC), or None when it is not one."""
    try:
        when = datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def load(path: Path) -> tuple[Accepted, ...]:
    """The acceptances in ``path``, oldest first (none when it does not exist); BaselineError naming a bad file."""
    if not path.exists():
        return ()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"{path}: not a readable file of accepted changes ({type(exc).__name__}: {exc})") from None
    entries = data.get("accepted") if isinstance(data, dict) and data.get("format") == FORMAT else None
    if not isinstance(entries, list):
        raise BaselineError(f"{path}: not a file of accepted changes of format {FORMAT} (write it with: "
                            f"python -m pytest_rnnperf accept {path.parent} --reason TEXT)")
    found = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or instant(str(entry.get("since", ""))) is None or not entry.get("reason"):
            raise BaselineError(f"{path}: accepted[{index}] needs an ISO 'since' time and a 'reason'")
        found.append(Accepted(str(entry["since"]), str(entry["reason"]), str(entry.get("accepted_at", "")),
                              str(entry.get("from") or "")))
    return tuple(found)


def newest(accepted: Sequence[Accepted]) -> Accepted | None:
    """The acceptance judging starts from: the latest ``since``."""
    return max(accepted, key=lambda a: instant(a.since) or datetime.min.replace(tzinfo=timezone.utc), default=None)


def after(runs: Sequence[StoredRun], accepted: Accepted | None) -> tuple[tuple[StoredRun, ...], int]:
    """``runs`` stored at or after the acceptance (an undated run counts as before it), and how many were left out."""
    if accepted is None:
        return tuple(runs), 0
    since = instant(accepted.since) or datetime.max.replace(tzinfo=timezone.utc)  # read and made valid: never None
    kept = tuple(run for run in runs if (when := instant(run.datetime)) is not None and when >= since)
    return kept, len(runs) - len(kept)


def note(accepted: Accepted, left_out: int) -> str:
    """One line for the run's notes: where judging restarts and why."""
    start = accepted.from_run or f"the runs kept since {accepted.since}"
    return (f"history restarts at {start}: change accepted {accepted.accepted_at or accepted.since} "
            f"({accepted.reason}); {left_out} older stored run(s) not judged against")


def with_new(path: Path, entry: Accepted) -> dict[str, Any]:
    """The stored form of ``path``'s acceptances plus ``entry`` (what came before is kept)."""
    return {"format": FORMAT, "accepted": [a.to_dict() for a in (*load(path), entry)]}
