"""The runner's energy window, on a fake clock and a fake telemetry window."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from fake_cupti import FakeCupti
from fake_nvml import FakeClock

from pytest_rnnperf.measure import runner
from pytest_rnnperf.measure.device_time import DeviceTimer
from pytest_rnnperf.measure.host_speed import host_probe_s
from pytest_rnnperf.measure.runner import RunConfig, energy_per_step
from pytest_rnnperf.measure.wall import WallTimer
from pytest_rnnperf.model.cases import Case, Shape
from pytest_rnnperf.model.parity import ParityReport
from pytest_rnnperf.model.records import CaseRecord
from pytest_rnnperf.model.stats import Interval
from pytest_rnnperf.model.timing import TimingConfig


@dataclass
class Summary:
    """What a telemetry window's stop() returns, with a known energy."""

    energy_j: float | None
    energy_note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The fields the runner stores."""
        return {"energy_j": self.energy_j}


@dataclass
class Window:
    """Records start/stop against the fake clock; 300 W over the window."""

    clock: Any
    spans: list[float] = field(default_factory=list)

    def start(self) -> None:
        """Note the start time."""
        self.spans.append(self.clock())

    def stop(self) -> Summary:
        """Energy of the window at 300 W."""
        self.spans.append(self.clock())
        return Summary(300.0 * (self.spans[1] - self.spans[0]))


class Clock:
    """Seconds that only steps advance."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        """The fake time."""
        return self.now


def _window_factory(clock: Clock) -> tuple[list[Window], Any]:
    """The windows opened so far, and the factory the runner opens them with."""
    windows: list[Window] = []

    def factory() -> Window:
        windows.append(Window(clock))
        return windows[-1]

    return windows, factory


def test_window_lasts_past_energy_s_whatever_the_step_time() -> None:
    """Host-bound steps that run faster back to back still fill a window >= energy_s; J/step follows."""
    clock = Clock()
    windows, factory = _window_factory(clock)

    def step() -> None:
        clock.now += 0.003  # 3 ms per step in the window, whatever the timed median said

    energy, note, telemetry = energy_per_step(step, lambda: None, RunConfig(energy_s=1.0, window_factory=factory),
                                              clock=clock)
    (window,) = windows
    duration = window.spans[1] - window.spans[0]
    assert 1.1 <= duration < 1.1 + 0.003 + 1e-9
    steps = round(duration / 0.003)
    assert energy is not None and abs(energy - 300.0 * 0.003) < 1e-9
    assert telemetry == {"energy_j": 300.0 * duration} and note == ""
    assert steps == 367


def test_energy_off_runs_nothing() -> None:
    """energy_s = 0 or no window: no step runs and the note says why."""
    ran: list[int] = []
    assert energy_per_step(lambda: ran.append(1), lambda: None, RunConfig(energy_s=0.0)) == (None, "energy off", None)
    assert ran == []


def test_what_is_left_of_the_case_budget_cuts_the_energy_window() -> None:
    """D14 (issue 23): --rnnperf-energy-s=60 ran a 66 s window per case whatever --rnnperf-max-case-s said."""
    clock = Clock()
    windows, factory = _window_factory(clock)

    def step() -> None:
        clock.now += 0.01

    config = RunConfig(energy_s=60.0, window_factory=factory)
    energy, note, _ = energy_per_step(step, lambda: None, config, clock=clock, budget_s=0.5)
    assert windows[0].spans[1] - windows[0].spans[0] == pytest.approx(0.5, abs=0.011)
    assert energy == pytest.approx(300.0 * 0.01)
    assert note == ("window cut to 0.5 s of 60 s: the case's time budget (60 s, --rnnperf-max-case-s) was spent")
    ran: list[int] = []
    assert energy_per_step(lambda: ran.append(1), lambda: None, config, clock=clock, budget_s=0.0) == (
        None, "not measured: the case's time budget (60 s, --rnnperf-max-case-s) was spent", None)
    assert ran == [] and len(windows) == 1


def test_a_second_look_spends_what_the_first_left_of_the_case_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """D14 (issue 23): a judge's second look timed the case again with a whole budget of its own."""
    clock = Clock()
    budgets: list[float | None] = []

    def timed(*args: Any, budget_s: float | None = None, **kwargs: Any) -> str:
        budgets.append(budget_s)
        clock.now += 40.0  # a look that spends 40 s of the case's 60
        return "record"

    monkeypatch.setattr(runner, "_timed", timed)
    config = RunConfig(clock=clock)
    assert runner._timed_and_judged(None, None, (), None, (), config,  # type: ignore[arg-type]
                                    judge=lambda record, again: again()) == "record"
    assert budgets == [None, 20.0]


def _traced(cudnn_s: float | tuple[float, ...], generic_s: float | tuple[float, ...], budget_s: float,
            speedup_ci: bool = True) -> CaseRecord:
    """The record of a timed pair of fake steps (4 wall rounds, up to 8 traced) under a case budget of ``budget_s``;
    a side given several step times takes them in turn."""
    clock = FakeClock()
    cupti = FakeCupti(clock)

    def step(seconds: float | tuple[float, ...]) -> Any:
        durations = itertools.cycle(seconds if isinstance(seconds, tuple) else (seconds,))

        def run() -> None:
            spent = next(durations)
            cupti.launch("k", spent)
            clock.advance(spent)
        return SimpleNamespace(step=run)

    timing = TimingConfig(rounds=4, min_rounds=4, max_noise=0.005, max_time_s=budget_s, warmup_steps=0,
                          warmup_s=0.0, min_block_s=0.0, max_steps_per_block=1)
    config = RunConfig(timing=timing, timer=WallTimer(clock), clock=clock, device_rounds=8, speedup_ci=speedup_ci,
                       device_timer=DeviceTimer(cupti=cupti, host_clock=lambda: int(clock() * 1e9)))
    pair = SimpleNamespace(cudnn=step(cudnn_s), generic=step(generic_s), sync=lambda: None, device="cuda:0")
    case = Case("torch", "lstm", Shape(4, 2, 3, 5))
    parity = ParityReport(case.precision, ())
    return runner._timed(case, pair, (), parity, ("cudnn", "generic"), config)  # type: ignore[arg-type]


def test_the_traced_rounds_note_names_the_budget_only_where_the_budget_cut_the_cudnn_side() -> None:
    """A steady cuDNN side stops at 4 traced rounds; the slow generic side spending the budget after it is no cut."""
    spent = "device time: 3 of 8 traced rounds: the case's time budget (0.9 s, --rnnperf-max-case-s) was spent"
    assert spent in _traced(0.100, 0.100, budget_s=0.9).notes  # the wall rounds spent it all: 3 traced rounds
    assert not [n for n in _traced(0.001, 0.100, budget_s=1.0).notes if n.startswith("device time")]


def test_a_process_timed_for_a_recordings_summary_gives_the_speedup_estimate_without_its_bootstrap_interval() -> None:
    """speedup_ci=False (the extra processes of a recording): the same estimate, its interval collapsed onto it."""
    full = _traced((0.001, 0.0013, 0.0008), (0.004, 0.0035, 0.0047), budget_s=1.0).speedup
    point = _traced((0.001, 0.0013, 0.0008), (0.004, 0.0035, 0.0047), budget_s=1.0, speedup_ci=False).speedup
    assert full is not None and full.low < full.estimate < full.high
    assert point == Interval(full.estimate, full.estimate, full.estimate, full.confidence)


def test_every_record_carries_the_host_probe_of_the_process_that_measured_it() -> None:
    """The probe is timed once per process: each record of this process holds the same, plausible, time."""
    first, second = _traced(0.001, 0.002, budget_s=1.0), _traced(0.002, 0.004, budget_s=1.0)
    assert first.host_probe_s == second.host_probe_s == host_probe_s()
    assert 1e-5 < host_probe_s() < 1.0
