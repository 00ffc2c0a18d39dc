"""The steady kernels' time weighed by each kernel's quiet (judge.steady), and the rule that judges it."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pytest
from factories import record

from pytest_rnnperf.judge import steady
from pytest_rnnperf.judge.policy import Policy
from pytest_rnnperf.judge.sensitivity import sensitivity
from pytest_rnnperf.judge.steady import capped, plain_series, steady_mix, steady_series
from pytest_rnnperf.judge.verdicts import Verdict, judge
from pytest_rnnperf.model.process import ProcessSummary, summarize
from pytest_rnnperf.model.records import CaseRecord
from pytest_rnnperf.model.timing import DeviceTiming, KernelStat, Measurement

# A loud steady kernel (9 ms, its processes 1.2% apart at most) beside two quiet ones (0.5 ms each, 0.1% apart):
# the plain sum spreads 0.8% between processes, past what a 3% slowdown of the step moves it.
LOUD = (-0.012, -0.006, 0.0, 0.006, 0.012)
QUIET = (-0.001, 0.0, 0.001)


def _kernels(seed: int, ms: Mapping[str, float], n: int = 8, sigma: float = 0.002) -> CaseRecord:
    """A record whose step runs ``ms``'s kernels one after the other (busy = their sum), each round ``sigma`` apart,
    with the kernels' own rounds kept."""
    rng = np.random.default_rng(seed + 700)
    rounds = {name: tuple(t / 1e3 * rng.lognormal(0, sigma, n)) for name, t in ms.items()}
    step = tuple(float(sum(r)) for r in zip(*rounds.values()))
    dev = DeviceTiming(busy=Measurement("cudnn", step, 4, timer="device"),
                       work=Measurement("cudnn", step, 4, timer="device-work"), launches_per_step=float(len(ms)),
                       kernels=tuple(KernelStat(name, t, 1.0) for name, t in ms.items()), kernel_rounds=rounds)
    return record("a", 12.0, seed=seed, cudnn_device=dev)


def _step(i: int, slower: float = 1.0) -> dict[str, float]:
    """Process ``i``'s kernels: the loud one and two quiet ones at their offsets, all ``slower``."""
    return {"loud": 9.0 * (1 + LOUD[i % 5]) * slower, "cell": 0.5 * (1 + QUIET[i % 3]) * slower,
            "bp": 0.5 * (1 + QUIET[(i + 1) % 3]) * slower}


def _history(n: int = 20) -> list[ProcessSummary]:
    """``n`` stored processes of the loud-and-quiet case, one per stored run."""
    return [summarize(_kernels(i, _step(i)), f"{i:04d}_run.json") for i in range(n)]


def _summary(ms: Mapping[str, float], source: str = "p") -> ProcessSummary:
    """A stored process with only its kernels' times per step (seconds)."""
    return ProcessSummary("a", source, {f"kernel/{name}": t for name, t in ms.items()})


def test_a_uniform_slowdown_a_loud_kernel_hides_in_the_plain_sum_fails_on_the_kernels_weighed_by_their_quiet(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kernel 3% slower: the plain sum's line lies past 3% (its loud kernel), the weighted time's at 2.2%, so
    the case fails on its steady kernels and says they were weighed. Without the weights the same night passes."""
    history = _history()
    night = judge(_kernels(1, _step(2)), _kernels(90, _step(2, 1.03)), history=history)
    assert night is not None and night.steady is not None and night.steady.verdict is Verdict.REGRESSED
    assert night.fails and "weighed by their quiet (at most 50% on one)" in night.steady.why
    assert night.steady.min_effect == pytest.approx(0.03 - 1.645 * 0.005)
    monkeypatch.setattr(steady, "WEIGHTED_MIN_PROCESSES", 1000)
    plain = judge(_kernels(1, _step(2)), _kernels(90, _step(2, 1.03)), history=history)
    assert plain is not None and plain.steady is not None and plain.steady.verdict is not Verdict.REGRESSED
    assert plain.steady.min_effect > 0.03 and "weighed" not in plain.steady.why


def test_the_loud_kernel_alone_slower_by_a_tenth_fails_on_the_plain_sum_the_weights_all_but_ignore() -> None:
    """The rule fails on either value: the loud kernel 10% slower moves the plain sum 9%, the weighted time hardly,
    and the case fails on the plain sum."""
    slower = dict(_step(2), loud=_step(2)["loud"] * 1.10)
    night = judge(_kernels(1, _step(2)), _kernels(91, slower), history=_history())
    assert night is not None and night.steady is not None and night.steady.verdict is Verdict.REGRESSED
    assert "weighed" not in night.steady.why and night.steady.ratio.estimate == pytest.approx(1.09, abs=0.005)


def test_a_history_of_fewer_than_ten_processes_is_judged_on_the_plain_sum_alone() -> None:
    """Nine processes: their weights would chase their own noise, so the plain sum alone is judged."""
    history = _history(9)
    names = ["loud", "cell", "bp"]
    assert len(steady_series(history, names)) == 1 and steady_mix(history, names).weights is None
    night = judge(_kernels(1, _step(2)), _kernels(92, _step(2)), history=history)
    assert night is not None and night.steady is not None and "weighed" not in night.steady.why


def test_a_uniform_slowdown_moves_the_weighted_time_as_it_moves_the_plain_sum() -> None:
    """Weighted or not, every kernel 3% slower reads 3% slower, and the weighted value is in time per step."""
    history = _history()
    mix = steady_mix(history, ["loud", "cell", "bp"])
    now = _step(2)
    assert mix.weights is not None
    assert mix.time({k: 1.03 * v for k, v in now.items()}) / mix.time(now) == pytest.approx(1.03)
    assert mix.time(now) == pytest.approx(sum(now.values()), rel=0.02)


def test_no_weight_passes_the_cap_and_what_a_capped_weight_loses_goes_to_the_rest_in_proportion() -> None:
    """Weights 8:1:1 capped at one half: 0.5, 0.25, 0.25; two kernels under a cap of 0.3 get one half each."""
    assert capped(np.array([8.0, 1.0, 1.0]), 0.5) == pytest.approx([0.5, 0.25, 0.25])
    assert capped(np.array([9.0, 1.0]), 0.3) == pytest.approx([0.5, 0.5])
    assert capped(np.array([1.0, 3.0]), 0.9) == pytest.approx([0.25, 0.75])


def test_the_weights_are_dropped_where_the_kernels_they_favour_spread_the_history_more_than_the_plain_sum() -> None:
    """A big kernel 0.2% apart and two small ones moving four times as far the other way: the plain sum holds still,
    the weighted time does not, so only the plain sum is judged."""
    offsets = [(-0.002 + 0.001 * (i % 5)) for i in range(20)]
    history = [_summary({"big": 8e-3 * (1 + d), "s1": 1e-3 * (1 - 4 * d), "s2": 1e-3 * (1 - 4 * d)}, f"{i}")
               for i, d in enumerate(offsets)]
    names = ["big", "s1", "s2"]
    _, sums = plain_series(history, names)
    assert max(sums) / min(sums) - 1 < 1e-9
    assert len(steady_series(history, names)) == 1


def test_the_history_s_weighted_values_are_each_taken_against_the_others_alone() -> None:
    """Each stored process's weighted value is its time against the mix of the other processes (leave one out)."""
    history = _history()
    names = ["loud", "cell", "bp"]
    found = steady_series(history, names)
    assert len(found) == 2
    mix, values = found[1]
    others = steady_mix(history[1:], names)
    assert values[0] == pytest.approx(sum(mix.centers) * others.time(history[0].kernels) / sum(others.centers))
    assert values[0] != pytest.approx(mix.time(history[0].kernels), rel=1e-9)


def test_the_sensitivity_reads_the_quieter_of_the_two_values() -> None:
    """The loud-and-quiet history resolves 3% on its steady kernels through their weights; nine processes of it
    (the plain sum alone) do not."""
    assert sensitivity("a", _history(), Policy()).resolves
    assert not sensitivity("a", _history(9), Policy()).resolves
