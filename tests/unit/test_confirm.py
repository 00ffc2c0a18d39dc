"""Confirming a regression before failing: in clock cycles (the SM clock NVML saw), and over nights running."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from factories import record

from pytest_rnnperf.judge.verdicts import CaseVerdict, Outcome, Policy, Verdict, confirmed, judge
from pytest_rnnperf.model.process import ProcessSummary, summarize
from pytest_rnnperf.model.records import KEPT, CaseRecord, StoredRun
from pytest_rnnperf.report.html import outcome_kind
from pytest_rnnperf.store.history import violating_nights


def clocked(r: CaseRecord, mhz: float | None) -> CaseRecord:
    """``r`` with a telemetry window whose mean SM clock was ``mhz`` (None: the clock was not read)."""
    clock = "unavailable: no clock samples" if mhz is None else mhz
    return replace(r, telemetry={"duration_s": 2.0, "mean_sm_clock_mhz": clock})


def device(ms: float, seed: int, mhz: float | None) -> CaseRecord:
    """A case whose cuDNN side ran ``ms`` of device time per step at ``mhz``."""
    return clocked(record("a", 1.0, seed=seed, cudnn_dev_ms=ms, generic_dev_ms=2.0), mhz)


BASE = device(0.5, 1, 1980.0)


def test_five_percent_slower_at_a_five_percent_lower_clock_is_ambiguous_clock_not_failed() -> None:
    """+5% device time while the SM clock ran 5% lower is the same work in clock cycles: put down to the clock."""
    v = judge(BASE, device(0.525, 2, 1881.0))
    assert v is not None and v.verdict is Verdict.REGRESSED
    assert v.outcome is Outcome.AMBIGUOUS_CLOCK and not v.fails
    assert v.clock.startswith("SM clock 1881 MHz now against 1980 MHz: device time +5.")
    assert "in clock cycles (unchanged)" in v.clock
    assert CaseVerdict.from_dict(v.as_dict()).outcome is Outcome.AMBIGUOUS_CLOCK


def test_five_percent_slower_at_the_same_clock_stays_regressed() -> None:
    """The same slowdown at the baseline's clock is slower work: it fails."""
    v = judge(BASE, device(0.525, 2, 1980.0))
    assert v is not None and v.outcome is Outcome.REGRESSED and v.fails and not v.clock


def test_a_real_regression_with_a_small_clock_dip_stays_regressed() -> None:
    """+20% at a 2% lower clock is still +17.6% in clock cycles: the dip explains little of it."""
    v = judge(BASE, device(0.6, 2, 1940.0))
    assert v is not None and v.outcome is Outcome.REGRESSED and v.fails and not v.clock


@pytest.mark.parametrize("before, now", [(None, 1881.0), (1980.0, None)])
def test_where_either_clock_is_unknown_device_time_alone_decides(before: float | None, now: float | None) -> None:
    """No clock to scale by (an older record, NVML without samples): the regression fails as it did before."""
    v = judge(clocked(BASE, before), device(0.525, 2, now))
    assert v is not None and v.outcome is Outcome.REGRESSED and v.fails


def test_across_processes_the_historys_clock_is_the_median_of_its_processes() -> None:
    """Judged against four stored processes at ~1980 MHz: +5% at 1881 MHz is the clock's, at 1980 MHz it fails."""
    history = [summarize(device(0.5, i, 1975.0 + 5 * i), f"process {i}") for i in range(4)]
    assert [s.sm_clock_mhz for s in history] == [1975.0, 1980.0, 1985.0, 1990.0]
    dipped = judge(BASE, device(0.525, 9, 1881.0), history=history)
    assert dipped is not None and dipped.processes == 4 and dipped.outcome is Outcome.AMBIGUOUS_CLOCK
    assert "against 1982 MHz" in dipped.clock
    same = judge(BASE, device(0.525, 9, 1982.5), history=history)
    assert same is not None and same.processes == 4 and same.fails


def test_a_process_summary_keeps_its_clock_and_refuses_a_malformed_one() -> None:
    """The clock travels with a stored process; one stored without it reads as unknown."""
    s = summarize(device(0.5, 1, 1980.0), "x")
    assert ProcessSummary.from_dict(s.to_dict(), "x") == s
    assert ProcessSummary.from_dict({**s.to_dict(), "sm_clock_mhz": None}, "x").sm_clock_mhz is None
    with pytest.raises(ValueError, match="'sm_clock_mhz' must be a finite number > 0"):
        ProcessSummary.from_dict({**s.to_dict(), "sm_clock_mhz": "fast"}, "x")


def test_with_two_confirm_nights_the_first_violation_is_suspect_and_the_second_fails() -> None:
    """confirm_nights=2: night one is suspect (not failed), night two after a violating night fails."""
    v = judge(BASE, device(0.6, 2, 1980.0))
    assert v is not None and v.fails
    first = confirmed(v, 0, 2)
    assert first.outcome is Outcome.SUSPECT and not first.fails and first.violates
    assert first.suspect == "suspect: night 1 of 2 it must regress on running to fail"
    second = confirmed(v, 1, 2)
    assert second.outcome is Outcome.REGRESSED and second.fails and second.nights == 2
    assert confirmed(v, 0, 1).fails  # one night: tonight decides, as without the option
    held = judge(BASE, device(0.5, 2, 1980.0))
    assert held is not None and confirmed(held, 1, 2) == held  # a clean night counts nothing
    assert Policy().confirm_nights == 1


def _stored(name: str, records: tuple[str, ...] = (), suspects: dict[str, int] | None = None) -> StoredRun:
    """A stored run holding records of ``records`` and naming ``suspects``."""
    return StoredRun(Path(name), "NVIDIA_H200", {}, {c: record(c) for c in records}, kind=KEPT,
                     suspects=suspects or {})


def test_the_newest_stored_run_that_names_a_case_says_how_many_nights_it_regressed_on() -> None:
    """A suspect night counts on; a night that kept the case's record ends its streak; no run: none."""
    runs = [_stored("0004_run.json", ("b",), {"a": 2}), _stored("0003_run.json", ("a",), {"b": 1}),
            _stored("0002_run.json", (), {"c": 1}), _stored("0001_baseline.json", ("a", "b", "c", "d"))]
    assert violating_nights(runs) == {"a": 2, "c": 1}


def test_a_held_back_regression_is_drawn_as_not_failed_on_the_page() -> None:
    """Suspect and ambiguous (clock) take the amber of a regression that did not fail."""
    assert outcome_kind(str(Outcome.SUSPECT)) == outcome_kind(str(Outcome.AMBIGUOUS_CLOCK)) == "not failed"
