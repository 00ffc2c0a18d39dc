"""Which nights check a case fully: parity against float64 and an energy window, or the sides against each other only.

What a full check finds (a float64 mismatch, the energy per step) changes with the environment: driver, CUDA,
cuDNN, a framework, a precision flag. A night whose environment matches the case's last full check, within
``max_age_days``, compares the sides with each other on the reference slice and skips the energy window; the
timings, the path proofs and the verdicts are the same either way. Only what can touch the case's own framework
counts: a TensorFlow upgrade re-checks the TensorFlow cases, not the torch ones. A run short of its budget may defer
the full checks that a change asked for to a later night (``deferred``), once it has checked one case fully, so
that nights of a budget that never holds still work through them. Pure: no pytest, no framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Mapping, Sequence

from pytest_rnnperf.backends import specs
from pytest_rnnperf.measure.environment import diff_environments
from pytest_rnnperf.model.records import CARD, StoredRun

# Fields that name the card, a deliberate fault or how many GPUs a framework sees, not what computes the results:
# another H100 of the same model, an injected spin, or a second GPU beside the one measured on (one process on a
# two-GPU host lists both; a pinned pytest-xdist worker, one) gives the same numbers, so none asks for a float64 check.
_NOT_RESULTS = (CARD, "RNNPERF_INJECT_", "jax.devices", "keras_jax.devices", "tf.gpus", "tf.memory_growth")
# The installed CUDA wheels (``cudnn_wheel``...) and what a framework loaded of them (``torch.cudnn_library``...).
_WHEEL, _LIBRARY = "_wheel", "_library"


@dataclass(frozen=True)
class Recheck:
    """Whether a case is checked fully tonight, why, and the stored file of its last full check."""

    full: bool
    # "recording", "always", "first", "changed", "old" (checked fully); "same" or "deferred" (the sides only)
    kind: str
    why: str  # one phrase: "environment changed since 0017_run.json (gpu.driver_version)", ...
    last: str = ""  # the file of the last full check ("" when none is stored)


# How the summary names each kind of full check.
_KINDS = {"recording": "a recorded baseline", "always": "--rnnperf-recheck-days=0", "first": "no full check stored", "changed": "environment changed",
          "old": "last full check too old"}


# The full checks a short budget may put off: those a change or the passing days asked for. A case never checked
# fully, a recorded baseline and --rnnperf-recheck-days=0 are checked whatever the budget.
DEFERRABLE = ("changed", "old")


def _results_fields(environment: Mapping[str, str], framework: str | None = None) -> dict[str, str]:
    """The environment without the fields that cannot change a result (``_NOT_RESULTS``) and, for a case of
    ``framework``, without the other frameworks' own fields (their versions and what they loaded)."""
    versions, foreign, _ = _framework_fields(framework)
    return {k: v for k, v in environment.items()
            if not k.startswith(_NOT_RESULTS) and k not in versions and not k.startswith(foreign)}


def _framework_fields(framework: str | None) -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]:
    """For a case of ``framework``: the other backends' version fields it does not share, the runtime prefixes
    that cannot touch it, and those that can (its own, and those of a backend it runs on entirely: Keras on torch
    and compiled torch read torch's ``torch.`` fields). Nothing is foreign for an unknown or absent framework."""
    every = specs()
    own = next((s for s in every if s.name == framework), None)
    if own is None:
        return frozenset(), (), ()
    mine = set(own.distributions)
    versions = {key for s in every for key in s.distributions if key not in mine}
    shared = [s for s in every if set(s.distributions) <= mine]  # its own spec among them
    return (frozenset(versions), tuple(s.runtime_prefix for s in every if s.runtime_prefix and s not in shared),
            tuple(s.runtime_prefix for s in shared if s.runtime_prefix))


def _loaded_libraries(environment: Mapping[str, str], framework: str | None) -> bool:
    """Whether the environment names the libraries a case of ``framework`` loaded (``<prefix>cudnn_library``...)."""
    mine = _framework_fields(framework)[2]
    return bool(mine) and any(k.startswith(mine) and k.endswith(_LIBRARY) for k in environment)


def _changed(old: Mapping[str, str], new: Mapping[str, str], framework: str | None) -> list[str]:
    """The fields of a case of ``framework`` that differ between ``old`` and ``new``. Where both name the libraries
    the framework loaded, those stand for the installed wheels: a wheel another framework brought (TensorFlow's
    CUDA 12 runtime beside torch's 13) changes nothing torch computes."""
    a, b = _results_fields(old, framework), _results_fields(new, framework)
    if _loaded_libraries(a, framework) and _loaded_libraries(b, framework):
        a, b = ({k: v for k, v in env.items() if not k.endswith(_WHEEL)} for env in (a, b))
    return [key for key, before, after in diff_environments(a, b)
            if not (key.endswith(_LIBRARY) and _same_libraries(before, after))]


def _same_libraries(old: str, new: str) -> bool:
    """Whether two values of a ``<prefix><name>_library`` field (``13.0 at /x/libcudart.so.13; 12.5 at ...``) name
    the same libraries for the framework: the field lists what the whole process had loaded when the framework's
    first case ran, so one that lists the other's entries plus more only differs by another framework's (TensorFlow's
    CUDA 12 runtime beside torch's 13) and by which framework ran first."""
    a, b = ({e.strip() for e in value.split(";") if e.strip()} for value in (old, new))
    return bool(a) and bool(b) and (a <= b or b <= a)


def deferred(found: Recheck) -> Recheck:
    """``found``, a full check a change asked for, put off to a later night because the run is short of its budget."""
    return Recheck(False, "deferred", f"deferred by --rnnperf-budget: {found.why}", found.last)


def put_off(found: Recheck, short: bool, checked_one: bool) -> Recheck:
    """``found``, deferred where a change or the passing days asked for it (``DEFERRABLE``), the run is ``short`` of
    its budget and tonight already checked another fully: a budget that never holds still works through them."""
    return deferred(found) if found.kind in DEFERRABLE and short and checked_one else found


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
            max_age_days: float, recording: bool = False, framework: str | None = None) -> Recheck:
    """Whether ``case_id`` (a case of ``framework``) needs a full check tonight, against ``runs`` (newest first, as
    ``find_all`` lists them).

    A run being recorded as a baseline always checks fully: later nights' sampled checks stand on it.
    """
    last = next((run for run in runs if case_id in run.records and run.records[case_id].checks == "full"), None)
    return _since(last, environment, now, max_age_days, recording, (framework,))


def claims_recheck(runs: Sequence[StoredRun], test: str, environment: Mapping[str, str], now: datetime,
                   max_age_days: float, recording: bool = False, frameworks: Sequence[str] = ()) -> Recheck:
    """Whether the claims or parity test ``test`` runs tonight, by the same rule as a case's full check.

    What the claims measure (accuracy after training on each path, the folklore's ratios) and whether one
    checkpoint gives the same results in two frameworks or matches float64 is the software stack's answer:
    it changes with the environment, not from one night to the next. A test of known ``frameworks`` (a
    cross-framework check names two) runs again only where a field that can touch one of them changed, as a
    case's full check does; one of none known, on any change.
    """
    last = next((run for run in runs if test in run.claims), None)
    return _since(last, environment, now, max_age_days, recording, tuple(frameworks) or (None,))


def _since(last: StoredRun | None, environment: Mapping[str, str], now: datetime, max_age_days: float,
           recording: bool, frameworks: Sequence[str | None] = (None,)) -> Recheck:
    """Full where a baseline is recorded, every run, nothing is stored, the environment changed, or it is old."""
    if recording:
        return Recheck(True, "recording", "a recorded baseline checks fully")
    if max_age_days <= 0:
        return Recheck(True, "always", "every run checks fully (--rnnperf-recheck-days=0)")
    if last is None:
        return Recheck(True, "first", "no full check stored")
    name = last.path.name
    changed = list(dict.fromkeys(key for fw in frameworks for key in _changed(last.environment, environment, fw)))
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
    """e.g. "checks: 12 case(s) fully (...) [environment changed: 12], 3 deferred ..., 58 compared cuDNN with generic
    only: ..."."""
    if not rechecks:
        return ""
    put_off = sum(1 for r in rechecks.values() if r.kind == "deferred")
    sampled = sum(1 for r in rechecks.values() if not r.full) - put_off
    full: dict[str, int] = {}
    for r in rechecks.values():
        if r.full:
            full[_KINDS[r.kind]] = full.get(_KINDS[r.kind], 0) + 1
    line = f"checks: {len(rechecks) - sampled - put_off} case(s) fully (parity against float64, energy)"
    if full:
        # Most first, then by name: the same night reads the same under -n as in one process.
        line += " [" + "; ".join(f"{why}: {n}" for why, n in sorted(full.items(), key=lambda kv: (-kv[1], kv[0]))) + "]"
    if put_off:
        line += (f", {put_off} deferred to a later night (--rnnperf-budget): checked cuDNN against generic only, "
                 f"their full check still due")
    if sampled:
        line += (f", {sampled} compared cuDNN with generic only: environment as at their last full check, "
                 f"within {max_age_days:g} days (--rnnperf-recheck-days=0 checks every case fully)")
    return line
