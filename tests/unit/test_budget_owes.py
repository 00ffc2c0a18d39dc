"""What a budget holds back for the work it cannot cut: a known issue's test and the claims and parity a change owes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from factories import record
from fake_nvml import FakeNVML

from pytest_rnnperf.measure.gpu import read_gpu_info
from pytest_rnnperf.model.cases import ModelCase
from pytest_rnnperf.model.records import StoredRun
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.session import RnnperfSession
from pytest_rnnperf.session.settings import Settings
from pytest_rnnperf.store.measured import Measured
from pytest_rnnperf.store.stored import Stored

KNOWN = "torch_compile_rnn-lstm-train-fp32-T28"  # a known issue: its test raises before a record is kept
CASE = "torch-lstm-train-fp32-T28"
COSTS = {f"test_cudnn_vs_generic[{KNOWN}]": 11.8, "test_claims[keras]": 7.6, "test_claims[torch]": 12.4,
         "test_claims[jax]": 3.0, "test_cross[torch-vs-tf-lstm]": 1.5}


def _session() -> RnnperfSession:
    """A session with a 5-minute budget over one kept run that stored ``CASE``'s record and ``COSTS``."""
    case = ModelCase(id=CASE, framework="torch")
    kept = StoredRun(Path("0041_run.json"), "NVIDIA_H100", {},
                     {CASE: record(case=case, cost_s={"build": 2.0, "parity": 1.0, "wall": 3.0})},
                     claims=("test_claims[keras]", "test_cross[torch-vs-tf-lstm]"), check_costs=COSTS)
    session = RnnperfSession(Run(gpu=read_gpu_info(0, FakeNVML()), software={},
                                 settings=replace(Settings.defaults(), budget=5.0)))
    session.stored = Stored(runs=(kept,))
    return session


def test_a_known_issue_with_no_record_is_priced_at_its_whole_test_as_last_stored() -> None:
    """A changed-driver night on a lent H100 priced an xfailed compiled-RNN case (11.8 s) as an average case."""
    session = _session()
    session.plan_budget([CASE, KNOWN, "torch-gru-train-fp32-T28"])
    assert session.budget is not None
    assert session.budget.stored_fixed == {CASE: 3.0, KNOWN: 11.8}
    assert session.budget.unpriced == 1


def test_a_change_owes_one_claims_and_one_parity_test_each_at_the_cheapest_of_its_kinds_stored_seconds() -> None:
    """The cheapest of each kind runs first (``cheapest_first``); a known issue is a matrix case, priced as one."""
    session = _session()
    checks = {"test_claims[keras]": "claims", "test_claims[torch]": "claims", "test_claims[jax]": "claims",
              "test_claims[new]": "claims", "test_cross[torch-vs-tf-lstm]": "parity", "test_cross[other]": "parity",
              f"test_cudnn_vs_generic[{KNOWN}]": "known issue"}
    assert session.owed_s(checks) == 3.0 + 1.5
    session.plan_budget([CASE], checks)
    assert session.budget is not None and session.budget.owed_s == 3.0 + 1.5 and not session.budget.owing
    assert session.owed_s({"test_claims[new]": "claims"}) == 0.0  # nothing stored prices it


def test_a_stored_run_keeps_the_seconds_of_a_test_that_failed_as_marked_beside_its_passed_checks() -> None:
    measured = Measured()
    measured.check_costs.update({f"test_cudnn_vs_generic[{KNOWN}]": 11.84, f"test_cudnn_vs_generic[{CASE}]": 2.0,
                                 "test_claims[keras]": 7.6})
    measured.expected.append(KNOWN)
    assert measured.claims_meta() == {"check_costs": {f"test_cudnn_vs_generic[{KNOWN}]": 11.84}}
    measured.passed_tonight("test_claims[keras]", "claims")
    assert measured.claims_meta() == {"claims": ["test_claims[keras]"],
                                      "check_costs": {"test_claims[keras]": 7.6,
                                                      f"test_cudnn_vs_generic[{KNOWN}]": 11.84}}
    assert Stored(runs=(StoredRun(Path("0042_run.json"), "NVIDIA_H100", {}, {},
                                  check_costs=measured.claims_meta()["check_costs"]),)).unrecorded_cost(KNOWN) == 11.84


def test_the_tests_of_a_kind_run_cheapest_first_and_those_never_priced_after_them_in_their_order() -> None:
    session = _session()
    tests = ["test_claims[new]", "test_claims[torch]", "test_claims[other]", "test_claims[jax]", "test_claims[keras]"]
    assert session.cheapest_first(tests) == ["test_claims[jax]", "test_claims[keras]", "test_claims[torch]",
                                             "test_claims[new]", "test_claims[other]"]
