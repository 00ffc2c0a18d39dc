"""A changed environment's parity and claims tests wait for a later night once the budget is short, not only spent."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from fake_nvml import FakeClock, FakeNVML

from pytest_rnnperf.measure.gpu import read_gpu_info
from pytest_rnnperf.model.records import StoredRun
from pytest_rnnperf.session.budget import Budget, forecast
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.session import RnnperfSession
from pytest_rnnperf.session.settings import Settings
from pytest_rnnperf.store.stored import Stored

TESTS = ("test_generic_vs_reference[tf-lstm]", "test_generic_vs_reference[tf-gru]")


def _session(budget: Budget) -> RnnperfSession:
    """A GPU session whose one stored run checked ``TESTS`` under another driver, one parity test passed tonight."""
    run = Run(gpu=read_gpu_info(0, FakeNVML()), software={}, settings=replace(Settings.defaults(), budget=1.0))
    session = RnnperfSession(run)
    stored = StoredRun(Path("0039_run.json"), "NVIDIA_H100", {**session.environment(), "gpu.driver_version": "470.1"},
                       {}, datetime=datetime.now(timezone.utc).isoformat(), claims=TESTS)
    session.stored = Stored(runs=(stored,))
    session.budget = budget
    session.measured.passed_tonight("test_generic_vs_reference[torch-lstm]", "parity")
    return session


def test_a_parity_test_a_change_asked_for_runs_while_the_budget_has_time_for_the_cases_to_come() -> None:
    assert _session(Budget(60.0, cases=10, clock=FakeClock())).claims_reason(TESTS[0], kind="parity") is None


def test_a_parity_test_a_change_asked_for_waits_where_the_forecast_owes_the_time_to_the_cases() -> None:
    """Before any case has run, 90 s of stored builds against a 60 s budget: the time left is already owed."""
    known = forecast({"tf-lstm-a": ("0039_run.json", {"build": 90.0})}, 60.0)
    reason = _session(Budget(60.0, cases=10, clock=FakeClock(), forecast=known)).claims_reason(TESTS[0], kind="parity")
    assert reason is not None and reason.startswith("parity deferred by --rnnperf-budget: environment changed since "
                                                    "0039_run.json (gpu.driver_version);")


def test_a_case_whose_full_check_a_change_asked_for_makes_the_budget_owe_the_claims_and_parity_tests() -> None:
    """The case's stored full check ran under another driver: the claims and parity tests are due too, and the cases
    leave them their stored seconds; a case never checked fully asks for no such thing."""
    from factories import record

    from pytest_rnnperf.model.cases import ModelCase

    budget = Budget(60.0, cases=10, clock=FakeClock(), owed_s=9.0)
    session = _session(budget)
    changed, first = ModelCase(id="torch-lstm-a", framework="torch"), ModelCase(id="torch-lstm-b", framework="torch")
    [stored] = session.stored.runs
    session.stored = Stored(runs=(replace(stored, records={changed.id: record(case=changed, checks="full")}),))
    measurer, settings = session.measurer(), session.settings
    measurer._checks_for(first, measurer.run_config(settings), settings)
    assert not budget.owing
    measurer._checks_for(changed, measurer.run_config(settings), settings)
    assert budget.owing and session.measured.rechecks[changed.id].kind == "changed"
