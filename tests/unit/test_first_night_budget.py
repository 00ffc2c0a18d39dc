"""A first night (compile cache empty at the start) is priced at the builds stored from scratch, not the warm ones."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from factories import record
from fake_nvml import FakeNVML

from pytest_rnnperf.measure.ahead_pool import Ahead, AheadProcess
from pytest_rnnperf.measure.gpu import read_gpu_info
from pytest_rnnperf.model.cases import ModelCase
from pytest_rnnperf.model.cold import HIT, MISS, ColdCost
from pytest_rnnperf.model.records import StoredRun
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.session import RnnperfSession
from pytest_rnnperf.session.settings import Settings
from pytest_rnnperf.store.stored import Stored

CASE = "jax-lstm-train-fp32-T28"
# Newest first: a warm night (cache hit), the first night of this runner (miss, 30 s), a warm Inductor-style miss.
NIGHTS = (("0039_run.json", HIT, 0.4, 3.0), ("0038_run.json", MISS, 30.0, 9.0), ("0037_run.json", MISS, 0.5, 2.0))


def _stored(nights: tuple[tuple[str, str, float, float], ...] = NIGHTS) -> Stored:
    """Stored runs of ``CASE``, newest first: its build and timed rounds in each, and whether the compile cache
    served it."""
    case = ModelCase(id=CASE, framework="jax")
    runs = tuple(StoredRun(Path(name), "NVIDIA_H100", {}, {CASE: record(case=case, cost_s={"build": build, "parity": 1.0,
                                                                                          "wall": wall},
                                                                        cold=ColdCost(cache=cache))})
                 for name, cache, build, wall in nights)
    return Stored(runs=runs)


def _session(empty: bool, budget_min: float = 0.5,
             nights: tuple[tuple[str, str, float, float], ...] = NIGHTS) -> RnnperfSession:
    """A session whose compile cache started ``empty`` (or warm), its budget ``budget_min``, over ``nights``."""
    run = Run(gpu=read_gpu_info(0, FakeNVML()), software={}, settings=replace(Settings.defaults(), budget=budget_min),
              compile_cache=Path("/cache"), compile_cache_empty=empty)
    session = RnnperfSession(run)
    session.stored = _stored(nights)
    return session


def test_the_costliest_stored_miss_prices_the_build_not_the_newest_or_a_cheap_warm_miss() -> None:
    assert _stored().scratch_cost(CASE) == ("0038_run.json", {"build": 30.0, "parity": 1.0, "wall": 9.0})
    assert _stored().scratch_cost("torch-gru") is None


def test_an_empty_cache_prices_the_build_from_scratch_and_the_rest_as_the_newest_record() -> None:
    assert _session(empty=True).stored_cost(CASE) == ("0038_run.json", {"build": 30.0, "parity": 1.0, "wall": 3.0})
    assert _session(empty=False).stored_cost(CASE) == ("0039_run.json", {"build": 0.4, "parity": 1.0, "wall": 3.0})


def test_a_first_night_that_cannot_fit_says_so_before_the_run_and_a_warm_one_does_not() -> None:
    """31 s of fixed phases and 2 s of timed rounds at their least exceed 30 s; the warm night's 1.4 s and 2 s do not."""
    cold, warm = _session(empty=True), _session(empty=False)
    for session in (cold, warm):
        session.plan_budget([CASE])
    assert warm.budget is not None and warm.budget.forecast is None
    assert cold.budget is not None and cold.budget.forecast is not None
    assert cold.budget.forecast.line().startswith(
        "rnnperf: --rnnperf-budget=0.5 cannot hold: the compile cache is empty, so 1 case(s) compile from scratch: "
        "the collected cases' fixed costs come to 31 s in 0038_run.json (build 30 s: jax 30 s; parity 1 s: jax 1 s), "
        "and their timed rounds at the least stored 2 s;")


def test_the_warm_night_after_a_first_night_prices_the_build_warm_not_as_the_newest_record_compiled_it() -> None:
    """On a lent H100 the night after a fresh runner's first one said at its start that 5 minutes could not hold the
    builds: it priced them at that first night's, kept as its newest record."""
    after_first = (("0040_run.json", MISS, 30.0, 3.0),) + NIGHTS[:1]
    warm = _session(empty=False, nights=after_first)
    assert warm.stored_cost(CASE) == ("0040_run.json", {"build": 0.4, "parity": 1.0, "wall": 3.0})
    warm.plan_budget([CASE])
    assert warm.budget is not None and warm.budget.forecast is None
    assert _session(empty=True, nights=after_first).stored_cost(CASE) == ("0040_run.json",
                                                                         {"build": 30.0, "parity": 1.0, "wall": 3.0})


def test_a_first_night_that_compiles_a_case_ahead_still_prices_it_from_scratch_and_says_so_before_the_run() -> None:
    """Priced warm, three lent H100 first nights said nothing before the run and ran 61-94 s over five minutes: the
    compiling behind the other cases slowed their builds and parity by about what the warm builds saved."""
    cold = _session(empty=True)
    cold.ahead = Ahead({"jax": AheadProcess("jax", None, (CASE,))})  # type: ignore[arg-type]
    assert cold.stored_cost(CASE) == ("0038_run.json", {"build": 30.0, "parity": 1.0, "wall": 3.0})
    cold.plan_budget([CASE])
    assert cold.budget is not None and cold.budget.forecast is not None
    assert cold.budget.forecast.line().startswith(
        "rnnperf: --rnnperf-budget=0.5 cannot hold: the compile cache is empty, so 1 case(s) compile from scratch (1 of "
        "them ahead, behind the other cases): the collected cases' fixed costs come to 31 s in 0038_run.json")
