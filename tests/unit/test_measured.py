"""What a run measured: every collection ``Measured`` declares is merged across pytest-xdist workers and serialized."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import pytest
from factories import record
from fake_nvml import FakeNVML

from pytest_rnnperf.judge.claims import ClaimRow
from pytest_rnnperf.judge.verdicts import Policy, judge
from pytest_rnnperf.measure.gpu import read_gpu_info
from pytest_rnnperf.measure.placement import place
from pytest_rnnperf.model.cases import Case, Shape
from pytest_rnnperf.model.parity import ParityReport, ParityRow
from pytest_rnnperf.model.process import ProcessSummary
from pytest_rnnperf.model.records import CrossRecord
from pytest_rnnperf.model.results import PathProof
from pytest_rnnperf.report.files import as_json_safe
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.session import RnnperfSession
from pytest_rnnperf.session.settings import Settings
from pytest_rnnperf.store.measured import LOCAL, Measured, collections
from pytest_rnnperf.store.rechecks import Recheck

# Collections a process keeps to itself (its own tests' bookkeeping): adding one here is a decision, not a default.
KEPT_LOCAL = {"passed_by_kind", "bench_sources", "unrecorded", "failed"}


def _cross(k: int) -> CrossRecord:
    """A cross-framework check of a case of hidden size ``k + 5``."""
    return CrossRecord(Case("torch", "gru", Shape(4, 2, 3, 5 + k)), ("torch", "tf"), ("torch cudnn", "tf cudnn"),
                       (PathProof("cudnn", True, "x"),) * 2,
                       ParityReport("fp32", (ParityRow("torch cudnn vs tf cudnn", "output", 1e-6, 5e-5),)))


def _verdicts(k: int) -> dict[str, Any]:
    """One verdict of case ``case{k}``."""
    verdict = judge(record(case_id=f"case{k}", seed=1), record(case_id=f"case{k}", cudnn_ms=1.2, seed=2), Policy())
    assert verdict is not None
    return {verdict.case_id: verdict}


# One value per collection, distinct for each worker k: a collection without one here fails every test below.
SAMPLES: dict[str, Callable[[int], Any]] = {
    "results": lambda k: [record(case_id=f"case{k}", seed=k)],
    "cross": lambda k: [_cross(k)],
    "claims": lambda k: [ClaimRow(("train-speed", "predict-speed")[k % 2], "torch", f"{k} ms", "holds", {"k": k})],
    "skipped": lambda k: [(f"skipped{k}", f"reason {k}")],
    "verdicts": _verdicts,
    "unjudged": lambda k: [f"unjudged{k}"],
    "notes": lambda k: [f"note {k}"],
    "runtime": lambda k: {f"fw{k}": {f"fw{k}.version": str(k)}},
    "expected": lambda k: [f"known{k}"],
    "failed": lambda k: k + 1,
    "processes": lambda k: {f"case{k}": [ProcessSummary(f"case{k}", "worker", {"cudnn.device": 0.001 * (k + 1)})]},
    "rechecks": lambda k: {f"case{k}": Recheck(True, "first", "first run")},
    "claim_tests": lambda k: [f"test_claims{k}"],
    "claims_reused": lambda k: {f"test_claims{k}": Recheck(False, "same", "unchanged", "0001_run.json")},
    "parity_reused": lambda k: {f"test_parity{k}": Recheck(False, "same", "unchanged", "0001_run.json")},
    "known_reused": lambda k: {f"test_known{k}": Recheck(False, "same", "unchanged", "0001_run.json")},
    "models_reused": lambda k: {f"test_model{k}": Recheck(False, "same", "unchanged", "0001_run.json")},
    "passed_by_kind": lambda k: {"claims": k + 1},
    "check_costs": lambda k: {f"test_claims{k}": 1.5 + k},
    "budget_cuts": lambda k: {f"case{k}": "minimum rounds"},
    "bench_sources": lambda k: [],  # entries of records by their position: covered by the session's own round trip
    "unrecorded": lambda k: True,
}


def _measured(k: int) -> Measured:
    """A value with worker ``k``'s sample in every collection."""
    return Measured(**{name: SAMPLES[name](k) for name in collections()})


def _carried() -> list[str]:
    """The collections that travel from a worker to the controller."""
    return [name for name, spec in collections().items() if spec.merge != LOCAL]


def test_every_declared_collection_has_a_sample_and_only_the_known_ones_stay_local() -> None:
    assert set(collections()) == set(SAMPLES), "give each collection of Measured a sample above"
    assert {name for name, spec in collections().items() if spec.merge == LOCAL} == KEPT_LOCAL


@pytest.mark.parametrize("name", _carried())
def test_two_workers_values_of_each_collection_are_both_in_the_merge(name: str) -> None:
    a, b = _measured(0), _measured(1)
    merged = getattr(Measured.merged([a, b]), name)
    mine, theirs = getattr(a, name), getattr(b, name)
    if isinstance(merged, int):
        assert merged == mine + theirs
    else:
        assert all(x in merged for x in mine) and all(x in merged for x in theirs) and mine and theirs


@pytest.mark.parametrize("name", _carried())
def test_each_collection_survives_the_round_trip_through_json(name: str) -> None:
    before = _measured(3)
    after = Measured.from_dict(json.loads(json.dumps(as_json_safe(before.to_dict()))))
    assert getattr(after, name) == getattr(before, name)


def test_what_a_process_keeps_to_itself_is_neither_written_nor_merged() -> None:
    merged = Measured.merged([_measured(0), _measured(1)])
    assert all(getattr(merged, name) == getattr(Measured(), name) for name in KEPT_LOCAL)
    assert not set(_measured(0).to_dict()) & KEPT_LOCAL


def test_a_controller_holds_every_carried_collection_of_both_workers(tmp_path: Path) -> None:
    """The session's own path: worker_output -> merge_worker, for two workers on two GPUs."""
    nvml = FakeNVML().devices("NVIDIA H200", "NVIDIA H200")
    controller = RnnperfSession(Run(gpu=read_gpu_info(0, FakeNVML()), software={}, root=tmp_path))
    for k in (0, 1):
        worker = RnnperfSession(Run(gpu=read_gpu_info(k, nvml), software={}, placement=place(f"gw{k}", 2, {}, nvml)),
                                _measured(k))
        controller.merge_worker(worker.worker_output())
    assert [w.id for w in controller.workers()] == ["gw0", "gw1"]
    want = Measured.merged([_measured(0), _measured(1)])
    for name in _carried():
        assert getattr(controller.measured, name) == getattr(want, name), name


def test_a_workers_budget_prices_its_share_of_the_collected_cases(tmp_path: Path) -> None:
    """Each pytest-xdist worker collects all ten cases but times about half of them in the same minutes."""
    nvml = FakeNVML().devices("NVIDIA H200", "NVIDIA H200")
    settings = replace(Settings.defaults(), budget=3.0)
    alone = RnnperfSession(Run(gpu=read_gpu_info(0, nvml), software={}, root=tmp_path, settings=settings))
    worker = RnnperfSession(Run(gpu=read_gpu_info(0, nvml), software={}, root=tmp_path, settings=settings,
                                placement=place("gw0", 2, {}, nvml)))
    for session in (alone, worker):
        session.plan_budget([f"torch-lstm-{k}" for k in range(10)])
    assert alone.budget is not None and alone.budget.cases == 10
    assert worker.budget is not None and worker.budget.cases == 5
