"""Which nights check a case fully: parity against float64 and an energy window, or the sides against each other only.

What a full check finds (a float64 mismatch, the energy per step) changes with the environment: driver, CUDA,
cuDNN, a framework, a precision flag. A night whose environment matches the case's last full check, within
``max_age_days``, compares the sides with each other on the reference slice and skips the energy window; the
timings, the path proofs and the verdicts are the same either way. Pure: no pytest, no framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Mapping, Sequence

from pytest_rnnperf.measure.environment import diff_environments
from pytest_rnnperf.model.records import StoredRun

# Fields that name the card or a deliberate fault, not what computes the results: another H100 of the same
# model, or an injected spin, gives the same numbers, so neither asks for a float64 check.
_NOT_RESULTS = ("gpu.uuid", "RNNPERF_INJECT_")


@dataclass(frozen=True)
class Recheck:
    """Whether a case is checked fully tonight, why, and the stored file of its last full check."""

    full: bool
    kind: str  # "recording", "always", "first", "changed", "old" (checked fully), or "same" (the sides only)
    why: str  # one phrase: "environment changed since 0017_run.json (gpu.driver_version)", ...
    last: str = ""  # the file of the last full check ("" when none is stored)


# How the summary names each kind of full check.
_KINDS = {"recording": "a recorded baseline", "always": "--rnnperf-recheck-days=0", "first": "no full check stored", "changed": "environment changed",
          "old": "last full check too old"}


def _results_fields(environment: Mapping[str, str]) -> dict[str, str]:
    """The environment without the fields that cannot change a result (``_NOT_RESULTS``)."""
    return {k: v for k, v in environment.items() if not k.startswith(_NOT_RESULTS)}


def _age_days(stamp: str, now: datetime) -> float | None:
    """Days from an ISO time stamp to ``now`` (None when the stamp does not parse)."""
    try:
        then = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=timezone.utc)
    return (now - then).total_seconds() / 86400


def recheck(runs: Sequence[StoredRun], case_id: str, environment: Mapping[str, str], now: datetime,
            max_age_days: float, recording: bool = False) -> Recheck:
    """Whether ``case_id`` needs a full check tonight, against ``runs`` (newest first, as ``find_all`` lists them).

    A run being recorded as a baseline always checks fully: later nights' sampled checks stand on it.
    """
    last = next((run for run in runs if case_id in run.records and run.records[case_id].checks == "full"), None)
    return _since(last, environment, now, max_age_days, recording)


def claims_recheck(runs: Sequence[StoredRun], test: str, environment: Mapping[str, str], now: datetime,
                   max_age_days: float, recording: bool = False) -> Recheck:
    """Whether the claims or parity test ``test`` runs tonight, by the same rule as a case's full check.

    What the claims measure (accuracy after training on each path, the folklore's ratios) and whether one
    checkpoint gives the same results in two frameworks or matches float64 is the software stack's answer:
    it changes with the environment, not from one night to the next.
    """
    return _since(next((run for run in runs if test in run.claims), None), environment, now, max_age_days, recording)


def _since(last: StoredRun | None, environment: Mapping[str, str], now: datetime, max_age_days: float,
           recording: bool) -> Recheck:
    """Full where a baseline is recorded, every run, nothing is stored, the environment changed, or it is old."""
    if recording:
        return Recheck(True, "recording", "a recorded baseline checks fully")
    if max_age_days <= 0:
        return Recheck(True, "always", "every run checks fully (--rnnperf-recheck-days=0)")
    if last is None:
        return Recheck(True, "first", "no full check stored")
    name = last.path.name
    changed = [key for key, _, _ in diff_environments(_results_fields(last.environment), _results_fields(environment))]
    if changed:
        shown = ", ".join(changed[:3]) + (", ..." if len(changed) > 3 else "")
        return Recheck(True, "changed", f"environment changed since {name} ({shown})", name)
    age = _age_days(last.datetime, now)
    if age is None:
        return Recheck(True, "old", f"{name} has no usable date", name)
    if age > max_age_days:
        return Recheck(True, "old", f"last full check {name} is {age:.0f} days old", name)
    return Recheck(False, "same", f"environment as at {name}", name)


def checks_line(rechecks: Mapping[str, Recheck], max_age_days: float) -> str:
    """e.g. "checks: 12 case(s) fully (...) [environment changed: 12], 58 compared cuDNN with generic only: ..."."""
    if not rechecks:
        return ""
    sampled = sum(1 for r in rechecks.values() if not r.full)
    full: dict[str, int] = {}
    for r in rechecks.values():
        if r.full:
            full[_KINDS[r.kind]] = full.get(_KINDS[r.kind], 0) + 1
    line = f"checks: {len(rechecks) - sampled} case(s) fully (parity against float64, energy)"
    if full:
        line += " [" + "; ".join(f"{why}: {n}" for why, n in full.items()) + "]"
    if sampled:
        line += (f", {sampled} compared cuDNN with generic only: environment as at their last full check, "
                 f"within {max_age_days:g} days (--rnnperf-recheck-days=0 checks every case fully)")
    return line
