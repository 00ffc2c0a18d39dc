"""A warm night's forecast adds what the newest stored nights spent outside their cases' phases, and prices each case
by its newest records, not the fastest night of the history."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from factories import record
from fake_nvml import FakeNVML

from pytest_rnnperf.measure.gpu import read_gpu_info
from pytest_rnnperf.model.cases import ModelCase
from pytest_rnnperf.model.records import StoredRun
from pytest_rnnperf.session.budget import forecast
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.session import RnnperfSession
from pytest_rnnperf.session.settings import Settings
from pytest_rnnperf.store.runs import load_run
from pytest_rnnperf.store.stored import Stored

CASE = "tf-lstm-train-fp32-T28"
ONE = {CASE: ("0053_run.json", {"build": 100.0, "parity": 20.0, "wall": 40.0})}


def _run(name: str, cost_s: dict[str, float], outside: tuple[float, int] | None = None) -> StoredRun:
    """A stored run of ``CASE`` whose record cost ``cost_s``, and its time outside the phases."""
    return StoredRun(Path(name), "NVIDIA_H100", {}, {CASE: record(case=ModelCase(id=CASE, framework="tf"),
                                                                  cost_s=cost_s)}, outside=outside)


def _session(*runs: StoredRun, budget_min: float = 5.0) -> RnnperfSession:
    """A session with a warm compile cache and a budget of ``budget_min`` over ``runs``, newest first."""
    session = RnnperfSession(Run(gpu=read_gpu_info(0, FakeNVML()), software={},
                                 settings=replace(Settings.defaults(), budget=budget_min)))
    session.stored = Stored(runs=runs)
    return session


def test_time_outside_the_phases_and_the_ending_can_make_the_forecast_say_the_budget_cannot_hold() -> None:
    """120 s fixed and 40 s timed fit 180 s, and with 16 s outside them; not with a 5 s ending too (a lent H100's warm night ran
    11% over with nothing said: 58 s of it lay outside the phases)."""
    assert forecast(ONE, 180.0, least_timed={CASE: 40.0}) is None
    assert forecast(ONE, 180.0, least_timed={CASE: 40.0}, outside_s=16.0) is None
    found = forecast(ONE, 180.0, least_timed={CASE: 40.0}, outside_s=16.0, ending_s=5.0)
    assert found is not None
    assert forecast({CASE: None}, 0.001, ending_s=5.0) is None  # nothing stored: an ending alone says nothing
    assert found.text().endswith("and their timed rounds at the least stored 40 s, and 16 s outside them (collecting, "
                                 "starting, each test's setup) as stored")


def test_the_outside_time_is_the_median_per_case_of_the_newest_nights_that_kept_it() -> None:
    stored = Stored(runs=(_run("0054_run.json", {"build": 1.0}), _run("0053_run.json", {"build": 1.0}, (58.0, 100)),
                          _run("0052_run.json", {"build": 1.0}, (20.0, 10)),
                          _run("0051_run.json", {"build": 1.0}, (44.0, 100)),
                          _run("0050_run.json", {"build": 1.0}, (900.0, 100))))
    assert stored.outside_each(3) == 0.58  # 0.58, 2.0 and 0.44 s a case: 0050 is older than the newest three
    assert Stored(runs=(_run("0054_run.json", {"build": 1.0}),)).outside_each(3) is None


def test_a_warm_night_forecasts_the_outside_time_for_each_collected_case() -> None:
    """One case, 5 s fixed and 3 s timed: a 0.25-minute budget (15 s, 10 s after its ending) holds them, and not the 4
    s outside each case the newest night spent as well."""
    cheap = {"build": 4.0, "parity": 1.0, "wall": 3.0}
    for outside, holds in ((None, True), ((4.0, 1), False)):
        session = _session(_run("0053_run.json", cheap, outside), budget_min=0.25)
        session.plan_budget([CASE])
        assert session.budget is not None and (session.budget.forecast is None) is holds


def test_parity_and_proofs_are_priced_at_the_median_of_the_newest_records_and_timed_rounds_at_their_least() -> None:
    """A first night's parity ran beside its compiles (43.7 s against 20.6 s on one lent H100): one record is not the
    case. The least timed rounds come from the newest three records, not from the fastest night ever stored."""
    session = _session(_run("0053_run.json", {"build": 1.0, "proof": 1.0, "parity": 40.0, "wall": 5.0}),
                       _run("0052_run.json", {"build": 9.0, "proof": 2.0, "parity": 10.0, "wall": 4.0}),
                       _run("0051_run.json", {"build": 2.0, "proof": 3.0, "parity": 12.0, "wall": 6.0}),
                       _run("0010_run.json", {"build": 2.0, "proof": 3.0, "parity": 12.0, "wall": 0.5}))
    assert session.stored_cost(CASE) == ("0053_run.json", {"build": 1.0, "proof": 2.0, "parity": 12.0, "wall": 5.0})
    assert session.least_timed([CASE]) == {CASE: 4.0}


def test_a_kept_run_stores_its_time_outside_the_cases_and_their_claims_and_parity_tests(tmp_path: Path) -> None:
    """A run 100 s long whose one case spent 60 s in its phases and whose claims test took 25 s: 15 s outside, which
    reads back from the file as (seconds, cases)."""
    session = _session()
    session.started = time.monotonic() - 100.0
    session.tests_began = session.started + 10.0
    session.plan_budget([CASE], {"test_claims[torch]": "claims"})
    session.measured.results.append(record(case=ModelCase(id=CASE, framework="tf"),
                                           cost_s={"build": 30.0, "parity": 10.0, "wall": 20.0}))
    session.measured.check_costs.update({"test_claims[torch]": 25.0, f"test_cudnn_vs_generic[{CASE}]": 70.0})
    outside = session.meta()["outside"]
    assert outside["cases"] == 1 and 15.0 <= outside["seconds"] < 16.0
    path = tmp_path / "0054_run.json"
    path.write_text(json.dumps({"benchmarks": [], "machine_info": {"rnnperf": session.meta()}}))
    assert load_run(path).outside == (outside["seconds"], 1)


def test_a_run_with_no_case_or_not_begun_stores_no_outside_time() -> None:
    session = _session()
    assert "outside" not in session.meta()
    session.measured.results.append(record(case=ModelCase(id=CASE, framework="tf"), cost_s={"build": 1.0}))
    assert "outside" not in session.meta()  # no test began: nothing to say what lay outside
