"""Known issues and generic-only models: answers of the environment that a stored run stands for, as claims are."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from factories import record
from fake_nvml import FakeClock, FakeNVML

from pytest_rnnperf.measure.gpu import read_gpu_info
from pytest_rnnperf.model.cases import ModelCase
from pytest_rnnperf.model.parity import ParityReport, ParityRow
from pytest_rnnperf.model.records import StoredRun
from pytest_rnnperf.session.budget import Budget
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.settings import Settings
from pytest_rnnperf.session.session import RnnperfSession
from pytest_rnnperf.store.stored import Stored

KNOWN = "torch_compile_rnn-lstm-train-fp32-T28"
KNOWN_TEST = f"test_cudnn_vs_generic[{KNOWN}]"
MODEL = "suites/test_keras_models.py::test_masked_bigru_tagger_trains[torch]"
TAGGER = ModelCase(id=MODEL, framework="keras_torch")


def _session(driver: str | None = None, model: object = None, budget: Budget | None = None) -> RnnperfSession:
    """A GPU session over one stored run that saw ``KNOWN_TEST`` fail as marked and checked ``model`` fully (the
    tagger with no cuDNN path by default), under ``driver`` (None: tonight's)."""
    run = Run(gpu=read_gpu_info(0, FakeNVML()), software={}, settings=replace(Settings.defaults(), budget=5.0))
    session = RnnperfSession(run)
    session.load = lambda frameworks=(): None  # type: ignore[method-assign] # no framework's fields: none imported
    environment = session.environment() if driver is None else {**session.environment(), "gpu.driver_version": driver}
    tagger = model if model is not None else record(case=TAGGER, cudnn_ms=None, checks="full")
    stored = StoredRun(Path("0059_run.json"), "NVIDIA_H100", environment, {MODEL: tagger},
                       datetime=datetime.now(timezone.utc).isoformat(), claims=(KNOWN_TEST,),
                       check_costs={KNOWN_TEST: 10.3})
    session.stored = Stored(runs=(stored,))
    session.budget = budget if budget is not None else Budget(300.0, cases=10, clock=FakeClock())
    return session


def test_a_known_issue_seen_failing_in_tonights_environment_is_not_run_and_not_priced_as_to_come() -> None:
    session = _session()
    reason = session.claims_reason(KNOWN_TEST, kind="known issue", frameworks=("torch_compile_rnn",), case_id=KNOWN)
    assert reason == ("known issue as seen failing in 0059_run.json: environment unchanged, within 7 days "
                      "(--rnnperf-recheck-days=0 runs it every run)")
    assert session.budget is not None and session.budget.cases == 9 and KNOWN in session.budget.dropped
    assert list(session.measured.known_reused) == [KNOWN_TEST]


def test_a_known_issue_runs_again_once_the_environment_changed_and_waits_where_the_budget_is_short() -> None:
    """Another driver: it runs while the budget has time; with none left, once one known issue ran tonight, it waits."""
    assert _session("470.1").claims_reason(KNOWN_TEST, kind="known issue", case_id=KNOWN) is None
    clock = FakeClock()
    short = _session("470.1", budget=Budget(60.0, cases=10, clock=clock))
    clock.advance(61.0)
    assert short.claims_reason(KNOWN_TEST, kind="known issue", case_id=KNOWN) is None  # none of its kind ran yet
    short.measured.passed_tonight("test_cudnn_vs_generic[torch_compile_rnn-gru-train]", "known issue")
    reason = short.claims_reason(KNOWN_TEST, kind="known issue", case_id=KNOWN)
    assert reason is not None and reason.startswith("known issue deferred by --rnnperf-budget: environment changed "
                                                    "since 0059_run.json (gpu.driver_version)")


def test_a_generic_only_model_checked_in_tonights_environment_is_held_and_not_priced_as_to_come() -> None:
    session = _session()
    reason = session.model_reason(MODEL)
    assert reason == ("model as checked with no cuDNN path in 0059_run.json: environment unchanged, within 7 days "
                      "(--rnnperf-recheck-days=0 checks it every run)")
    assert session.budget is not None and MODEL in session.budget.dropped
    session.finish()
    assert any(note.startswith("generic-only models: 1 test(s) not run, their answers as stored in 0059_run.json hold")
               for note in session.measured.notes)


def test_a_model_with_a_cudnn_side_a_failed_check_or_a_changed_environment_is_measured() -> None:
    assert _session(model=record(case=TAGGER, checks="full")).model_reason(MODEL) is None  # timed, judged
    failed = ParityReport("fp32", (ParityRow("generic vs float64", "output", 1e-2, 5e-5),))
    broken = replace(record(case=TAGGER, cudnn_ms=None, checks="full"), parity=failed)
    assert _session(model=broken).model_reason(MODEL) is None
    assert _session("470.1").model_reason(MODEL) is None
    assert _session(model=record(case=TAGGER, cudnn_ms=None, checks="sampled")).model_reason(MODEL) is None


def test_a_case_dropped_from_the_night_leaves_its_share_of_the_budget_to_the_cases_still_to_come() -> None:
    """Ten cases priced at 3 s fixed, 60 s: after one (9 s), 9 to come share 49.8 - 27 s; with one dropped, 8 share
    49.8 - 24 s."""
    clock = FakeClock()
    budget = Budget(60.0, cases=10, clock=clock, stored_fixed={f"c{i}": 3.0 for i in range(10)})
    budget.allowance("c0", steady=False, cap_s=60.0)
    budget.spent({"build": 3.0, "wall": 6.0}, "c0")
    clock.advance(9.0)
    kept = budget._share()
    budget.drop("c9")
    budget.drop("c9")  # once
    assert budget.cases == 9 and abs(kept - 22.8 / 9) < 1e-9 and abs(budget._share() - 25.8 / 8) < 1e-9
