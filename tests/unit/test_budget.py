"""The run's time budget: cases time as configured while the run is on time, the steadiest are cut first."""

from __future__ import annotations

from pytest_rnnperf.session.budget import Budget

COST = {"build": 2.0, "proof": 0.5, "parity": 0.5, "wall": 4.0, "device": 2.0}  # 3 s fixed, 6 s timed


class Clock:
    """A fake monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _after_one_case(total_s: float, cases: int, elapsed_s: float) -> Budget:
    """A budget of ``total_s`` for ``cases`` cases, ``elapsed_s`` after its first case (costing ``COST``) ended."""
    clock = Clock()
    budget = Budget(total_s, cases=cases, clock=clock)
    budget.spent(COST)
    clock.now += elapsed_s
    return budget


def test_the_first_case_times_as_configured_having_nothing_to_price_the_rest_by() -> None:
    budget = Budget(60.0, cases=10, clock=Clock())
    assert budget.allowance("a", steady=True, cap_s=60.0) == 60.0 and not budget.cuts


def test_cases_time_as_configured_while_the_rest_fits() -> None:
    budget = _after_one_case(100.0, cases=10, elapsed_s=9.0)
    # 91 s left for 9 cases at 9 s each: on time.
    assert budget.allowance("b", steady=True, cap_s=60.0) == 60.0 and not budget.cuts


def test_behind_time_the_steady_cases_run_their_minimum_rounds_and_the_rest_share_what_is_left() -> None:
    budget = _after_one_case(60.0, cases=10, elapsed_s=9.0)
    # 51 s left for 9 cases: 27 s of fixed phases, 24 s to share, 2.7 s each instead of 6.
    assert budget.allowance("steady", steady=True, cap_s=60.0) == 0.0
    assert abs(budget.allowance("noisy", steady=False, cap_s=60.0) - 24 / 9) < 1e-9
    assert budget.cuts == {"steady": "minimum rounds", "noisy": "2.7 s of rounds"}


def test_once_nothing_is_left_every_case_runs_its_minimum_rounds() -> None:
    budget = _after_one_case(10.0, cases=3, elapsed_s=20.0)
    assert budget.allowance("late", steady=False, cap_s=60.0) == 0.0 and budget.cuts == {"late": "minimum rounds"}


def test_the_summary_line_says_what_was_cut_and_by_how_much_the_run_went_over() -> None:
    budget = Budget(360.0, cases=3, clock=Clock())
    budget.cuts.update({"a": "minimum rounds", "b": "minimum rounds", "c": "1.5 s of rounds"})
    assert budget.line(370.4) == ("budget 6 min: 2 case(s) cut to their minimum rounds, 1 to fewer rounds (steadiest "
                                  "first); run 6:10, over by 10 s: building, proving and checking the cases and the "
                                  "claims cost more than it leaves")
    assert Budget(360.0, cases=3, clock=Clock()).line(300.0) == "budget 6 min: no case cut; run 5:00"
