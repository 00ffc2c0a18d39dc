"""What one run measured: its records, verdicts, skips and notes, as one value that merges and serializes.

Each collection is declared once, below, with how two pytest-xdist workers' values of it merge and how it is
written to (and read from) JSON; ``merge``, ``to_dict`` and ``from_dict`` go through that declaration alone, so
a collection cannot be added without being merged and carried.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Mapping

from pytest_rnnperf.judge.claims import ClaimRow
from pytest_rnnperf.judge.verdicts import CaseVerdict
from pytest_rnnperf.model.cases import param_id
from pytest_rnnperf.model.process import ProcessSummary
from pytest_rnnperf.model.records import CaseRecord, CrossRecord
from pytest_rnnperf.store.rechecks import Recheck

# How two values of a collection merge: appended, appended where new, keyed (the later wins), keyed (the
# first wins); LOCAL ones stay in the process that made them (bookkeeping of its own tests).
EXTEND, EXTEND_NEW, UPDATE, FIRST, LOCAL = "extend", "extend_new", "update", "first", "local"


@dataclass(frozen=True)
class Collection:
    """How one collection merges, is written to JSON and read back; ``report``: it is part of rnnperf.json;
    ``whole_run``: it belongs to the run, not to one GPU model's share of it (a mixed-model run's views)."""

    merge: str
    dump: Callable[[Any], Any] = list
    load: Callable[[Any], Any] = list
    report: bool = False
    whole_run: bool = False


def _items(cls: Any) -> Collection:
    """A list of records written with ``to_dict`` and read with ``cls.from_dict``."""
    return Collection(EXTEND, lambda v: [x.to_dict() for x in v], lambda d: [cls.from_dict(x) for x in d], report=True)


def _strings(merge: str = EXTEND, report: bool = False, whole_run: bool = False) -> Collection:
    """A list of strings."""
    return Collection(merge, list, lambda d: [str(x) for x in d], report=report, whole_run=whole_run)


def _rechecks() -> Collection:
    """Tests or cases -> why each was (or was not) checked fully tonight: a pytest-xdist controller's summary counts
    its workers' together."""
    return Collection(UPDATE, lambda v: {k: asdict(r) for k, r in v.items()},
                      lambda d: {str(k): Recheck(**r) for k, r in d.items()})


def _local() -> Collection:
    """Kept by the process that made it: neither merged nor written."""
    return Collection(LOCAL)


def _declared(spec: Collection, default: Callable[[], Any]) -> Any:
    """A dataclass field carrying its ``Collection``."""
    return field(default_factory=default, metadata={"collection": spec})


@dataclass
class Measured:
    """Every result of one run (or of one pytest-xdist worker), in the order they came."""

    results: list[CaseRecord] = _declared(_items(CaseRecord), list)
    cross: list[CrossRecord] = _declared(_items(CrossRecord), list)  # cross-framework checks of the same weights
    claims: list[ClaimRow] = _declared(_items(ClaimRow), list)  # the claims suite's rows (judge/claims.py)
    skipped: list[tuple[str, str]] = _declared(Collection(
        EXTEND, lambda v: [{"case": c, "reason": r} for c, r in v],
        lambda d: [(str(x["case"]), str(x["reason"])) for x in d], report=True), list)
    verdicts: dict[str, CaseVerdict] = _declared(Collection(
        UPDATE, lambda v: [x.as_dict() for x in v.values()],
        lambda d: {v.case_id: v for v in map(CaseVerdict.from_dict, d)}, report=True), dict)
    unjudged: list[str] = _declared(_strings(report=True), list)  # cuDNN cases the baseline has no record of
    notes: list[str] = _declared(_strings(EXTEND_NEW, report=True, whole_run=True), list)  # one-line facts the summary prints last
    # framework -> its runtime fields (versions, device), read when its first case runs
    runtime: dict[str, dict[str, str]] = _declared(Collection(
        FIRST, dict, lambda d: {n: {str(k): str(v) for k, v in f.items()} for n, f in d.items()}), dict)
    expected: list[str] = _declared(_strings(whole_run=True), list)  # cases of tests that failed as marked (xfail): known issues
    # Failed test reports this process heard of (a baseline needs a clean run): a pytest-xdist controller hears each
    # of its workers' as it comes (plugin/live.py), so a worker's own count would count them twice.
    failed: int = _declared(_local(), int)
    # case id -> the extra processes' summaries of a recording with --rnnperf-record-processes (stored beside it)
    processes: dict[str, list[ProcessSummary]] = _declared(Collection(
        UPDATE, lambda v: {c: [p.to_dict() for p in ps] for c, ps in v.items()},
        lambda d: {c: [ProcessSummary.from_dict(p, "worker") for p in ps] for c, ps in d.items()}, whole_run=True), dict)
    rechecks: dict[str, Recheck] = _declared(_rechecks(), dict)  # case id -> full or sampled checks tonight, why
    # Tests whose answer tonight's environment alone decides (claims, cross-framework and reference parity), measured
    # and passed tonight (stored with a run), and those whose stored answer held tonight, by kind.
    claim_tests: list[str] = _declared(_strings(EXTEND_NEW), list)
    claims_reused: dict[str, Recheck] = _declared(_rechecks(), dict)
    parity_reused: dict[str, Recheck] = _declared(_rechecks(), dict)
    # Known issues (tests marked xfail(strict=True)) and checks of generic-only models whose stored answer held tonight
    known_reused: dict[str, Recheck] = _declared(_rechecks(), dict)
    models_reused: dict[str, Recheck] = _declared(_rechecks(), dict)
    # "claims", "parity" or "known issue" -> tests of it that gave their answer tonight
    passed_by_kind: dict[str, int] = _declared(_local(), dict)
    # test name -> every rnnperf test's seconds tonight (setup, call and teardown); a stored run keeps those of the
    # claims and parity tests that passed (``claims_meta``), which a later night's budget prices them by
    check_costs: dict[str, float] = _declared(Collection(
        UPDATE, dict, lambda d: {str(k): float(v) for k, v in d.items()}), dict)
    # case id -> what the budget left it instead of its rounds (session.budget), each worker's for the controller
    budget_cuts: dict[str, str] = _declared(Collection(UPDATE, dict, lambda d: {str(k): str(v) for k, v in d.items()}),
                                            dict)
    # records and the pytest-benchmark entries they make, which a pytest-xdist controller adds (session/xdist.py)
    bench_sources: list[tuple[dict[str, Any], CaseRecord]] = _declared(_local(), list)
    unrecorded: bool = _declared(_local(), bool)  # a baseline or kept run was asked for and not written

    def passed_tonight(self, test: str, kind: str) -> None:
        """A claims or parity test (``kind``) measured and passed tonight: a stored run may stand for it later, and
        a spent budget may defer the rest of its kind."""
        self.claim_tests.append(test)
        self.passed_by_kind[kind] = self.passed_by_kind.get(kind, 0) + 1

    def claims_meta(self) -> dict[str, Any]:
        """What a stored run keeps of the claims and parity tests passed tonight: their names (``claims``), and the
        seconds of those that were timed and of the tests that failed as marked (xfail), which store no record to
        price them by (``check_costs``); empty where there are none."""
        passed = sorted(set(self.claim_tests))
        # A matrix test is named by its case (``test_x[case-id]``); a known issue's seconds are its whole test's.
        expected = set(self.expected)
        known = {test for test in self.check_costs if param_id(test) in expected}
        costs = {test: round(self.check_costs[test], 3) for test in sorted(set(passed) | known)
                 if test in self.check_costs}
        return {**({"claims": passed} if passed else {}), **({"check_costs": costs} if costs else {})}

    def has_cases(self) -> bool:
        """Whether any case was measured, checked or skipped (the run has a report to write)."""
        return bool(self.results or self.cross or self.skipped or self.claims)

    def merge(self, other: Measured, share: bool = False) -> None:
        """Add ``other`` (a pytest-xdist worker's) to this one, collection by collection as each is declared;
        ``share``: only what belongs to one GPU model's share of the run."""
        for name, spec in collections().items():
            if share and spec.whole_run:
                continue
            mine, theirs = getattr(self, name), getattr(other, name)
            if spec.merge == EXTEND:
                mine += theirs
            elif spec.merge == EXTEND_NEW:
                mine += [x for x in theirs if x not in mine]
            elif spec.merge == UPDATE:
                mine.update(theirs)
            elif spec.merge == FIRST:
                for key, value in theirs.items():
                    mine.setdefault(key, value)

    @classmethod
    def merged(cls, parts: list[Measured], share: bool = False) -> Measured:
        """One value holding each of ``parts`` in turn (``share``: as ``merge``)."""
        out = cls()
        for part in parts:
            out.merge(part, share)
        return out

    def to_dict(self, report: bool = False) -> dict[str, Any]:
        """JSON-safe form of the merged collections (with ``report``, those rnnperf.json holds)."""
        return {name: spec.dump(getattr(self, name)) for name, spec in collections().items()
                if spec.merge != LOCAL and (spec.report or not report)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measured:
        """Inverse of ``to_dict``; a collection the data lacks is empty."""
        return cls(**{name: spec.load(data[name]) for name, spec in collections().items()
                      if spec.merge != LOCAL and name in data})


def collections() -> dict[str, Collection]:
    """Every collection of ``Measured`` by name, as declared (the one list of them)."""
    return {f.name: f.metadata["collection"] for f in fields(Measured)}
