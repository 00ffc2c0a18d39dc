"""Cold costs (each side's first call after build, the compile): stored, timed, and judged across processes."""

from __future__ import annotations

import pytest

from factories import record

from pytest_rnnperf.backends import parse_injection
from pytest_rnnperf.backends.cold import first_calls, first_of_process, once_per_process
from pytest_rnnperf.judge.compare import Verdict
from pytest_rnnperf.judge.policy import Policy
from pytest_rnnperf.judge.verdicts import Outcome, judge
from pytest_rnnperf.model.cold import HIT, MISS, ColdCost, cache_state
from pytest_rnnperf.model.fields import RecordError
from pytest_rnnperf.model.metrics import NOT_MEASURED, RECORD_FIELDS, named, numeric_paths
from pytest_rnnperf.model.process import ProcessSummary, summarize
from pytest_rnnperf.model.records import CaseRecord


def _cold(cudnn_s: float = 0.4, generic_s: float = 0.05, compile_s: float | None = None, cache: str = "",
          first: bool = False) -> ColdCost:
    """A cold cost of both sides, and a compile where given."""
    return ColdCost({"cudnn": cudnn_s, "generic": generic_s}, compile_s, cache, first)


def _history(colds: list[ColdCost | None]) -> list[ProcessSummary]:
    """One stored process per cold cost, steady times alike (seeded apart)."""
    return [summarize(record("a", 1.0, seed=i, cold=c), f"process {i}") for i, c in enumerate(colds)]


def _judged(history: list[ColdCost | None], now: ColdCost, **policy: float) -> dict[str, Verdict]:
    """Each comparison's verdict of a process with ``now`` against stored processes with ``history``."""
    v = judge(record("a", 1.0, seed=1), record("a", 1.0, seed=9, cold=now), Policy(**policy), history=_history(history))
    assert v is not None
    return {name: c.verdict for name, c in v.comparisons.items()}


# ------------------------------------------------------------------------------------------- the record


def test_a_cold_cost_survives_the_stored_record_and_an_old_record_reads_as_none() -> None:
    """to_dict/from_dict keep it, the first case of its process too; a record written before cold costs were
    measured has none."""
    assert CaseRecord.from_dict(record("a", 1.0, cold=_cold(first=True)).to_dict()).cold == _cold(first=True)
    cold = _cold(compile_s=12.5, cache=MISS)
    stored = record("a", 1.0, cold=cold).to_dict()
    assert "first_in_process" not in stored["cold"]
    assert CaseRecord.from_dict(stored).cold == cold
    del stored["cold"]
    assert CaseRecord.from_dict(stored).cold is None


def test_every_number_of_a_cold_cost_has_its_entry_in_the_metric_table() -> None:
    paths = numeric_paths(record("a", cold=_cold(compile_s=3.0, cache=MISS)).to_dict())
    assert {"cold.first_call_s.<side>", "cold.compile_s"} <= paths
    assert all(p in RECORD_FIELDS or p in NOT_MEASURED for p in paths)


@pytest.mark.parametrize("bad, message", [
    ({"first_call_s": {"tensor": 0.1}}, "names 'tensor'"),
    ({"first_call_s": {"cudnn": -1.0}}, "cold.first_call_s.cudnn holds -1.0"),
    ({"compile_s": 1e9}, "cold.compile_s holds 1000000000.0"),
    ({"compile_cache": "warm"}, "cold.compile_cache is 'warm'"),
    ({"first_in_process": "yes"}, "cold.first_in_process is 'yes'"),
])
def test_a_hand_edited_cold_cost_is_refused_naming_the_field(bad: dict[str, object], message: str) -> None:
    with pytest.raises(RecordError, match=message.replace("(", r"\(")):
        ColdCost.from_dict(bad)


def test_a_cache_hit_keys_its_metrics_apart_from_misses() -> None:
    """The summary a history keeps: a hit's first calls and compile under the "_cached" tags, named as hits."""
    assert summarize(record("a", cold=_cold(compile_s=30.0, cache=MISS)), "x").metrics.keys() >= {
        "cudnn/first_call", "generic/first_call", "compile"}
    hit = summarize(record("a", cold=_cold(compile_s=2.0, cache=HIT)), "x").metrics
    assert {"cudnn/first_call_cached", "generic/first_call_cached", "compile_cached"} <= hit.keys()
    assert not {"cudnn/first_call", "compile"} & hit.keys()
    assert named("compile time (cache hit)").tag == "compile_cached"
    assert (cache_state(3, 0), cache_state(3, 1), cache_state(0, 0)) == (HIT, MISS, "")


# --------------------------------------------------------------------------------------------- the rule


def test_a_first_call_that_grew_past_the_cold_threshold_fails_while_the_steady_verdict_holds() -> None:
    """+1.6 s of plan finalization on a 0.4 s first call: regressed, the case fails, its device time unchanged."""
    history = [_cold(0.40), _cold(0.44), _cold(0.37)]
    got = _judged(history, _cold(2.0))
    assert got["first_call"] is Verdict.REGRESSED and got["generic_first_call"] is Verdict.UNCHANGED
    assert got["cudnn_time"] is Verdict.UNCHANGED
    v = judge(record("a", 1.0, seed=1), record("a", 1.0, seed=9, cold=_cold(2.0)), history=_history(history))
    assert v is not None and v.verdict is Verdict.UNCHANGED and v.outcome is Outcome.COLD_REGRESSED and v.fails
    assert [c.metric for c in v.cold_regressed] == ["cudnn first call"]


def test_a_first_call_within_the_generous_threshold_is_unchanged() -> None:
    """Cold costs are noisy: +60% on a 100% threshold is no regression; with cold_effect 0.5 it is."""
    history = [_cold(1.00), _cold(1.10), _cold(0.93)]
    assert _judged(history, _cold(1.60))["first_call"] is Verdict.UNCHANGED
    assert _judged(history, _cold(1.60), cold_effect=0.5)["first_call"] is Verdict.REGRESSED


def test_a_first_call_that_grew_by_tens_of_milliseconds_is_unchanged_however_many_percent() -> None:
    """A fresh H100 night: a bidirectional case's first call 11 -> 23 ms (+106%) and a GRU's 11 -> 43 ms (+278%),
    over a 100% threshold but under the 0.5 s floor; with the floor off they regress."""
    history = [_cold(0.0115), _cold(0.0101), _cold(0.0114)]
    got = judge(record("a", 1.0, seed=1), record("a", 1.0, seed=9, cold=_cold(0.0233)), history=_history(history))
    assert got is not None and not got.fails
    assert got.comparisons["first_call"].verdict is Verdict.UNCHANGED
    assert "moved 12 ms, under the cold floor of 0.5 s" in got.comparisons["first_call"].explain()
    assert _judged(history, _cold(0.0433))["first_call"] is Verdict.UNCHANGED
    assert _judged(history, _cold(0.0433), cold_floor=0.0)["first_call"] is Verdict.REGRESSED


def test_a_compile_cache_hit_that_loaded_a_fifth_of_a_second_slower_is_unchanged_and_plan_building_is_not() -> None:
    """A changed-driver night on an H100: a Keras-on-JAX program's first call from the compile cache took 0.40 s
    against 0.17-0.29 s (+109%, over the 100% threshold) and failed the night; under the 0.5 s floor it holds, while
    1.5 s of plan building on top of the same history still regresses."""
    history = [_cold(0.173), _cold(0.177), _cold(0.189), _cold(0.285), _cold(0.246)]
    assert _judged(history, _cold(0.396))["first_call"] is Verdict.UNCHANGED
    assert _judged(history, _cold(0.189 + 1.5))["first_call"] is Verdict.REGRESSED


def test_the_first_case_of_its_framework_in_a_process_reports_a_slow_first_call_and_fails_nothing() -> None:
    """1.75-47 ms stored, 2.3 s on a fresh runner's first torch case: ambiguous, named why; the next case fails."""
    history = [_cold(0.00175), _cold(0.047), _cold(0.00177)]
    first = judge(record("a", 1.0, seed=1), record("a", 1.0, seed=9, cold=_cold(2.3, first=True)),
                  history=_history(history))
    assert first is not None and not first.fails
    assert first.comparisons["first_call"].verdict is Verdict.AMBIGUOUS
    assert "the process's first case of its framework" in first.comparisons["first_call"].explain()
    assert _judged(history, _cold(2.3))["first_call"] is Verdict.REGRESSED


def test_the_first_case_of_a_process_leaves_its_cold_costs_out_of_the_history() -> None:
    """Stored, a first-of-process first call (1.83 s on a fresh H100) would widen every later night's threshold."""
    assert "cudnn/first_call" not in summarize(record("a", cold=_cold(1.83, first=True)), "x").metrics
    assert summarize(record("a", cold=_cold(0.012)), "x").metrics["cudnn/first_call"] == 0.012


def test_only_the_first_case_of_each_framework_is_the_first_of_its_process() -> None:
    assert [first_of_process(f) for f in ("fw-x", "fw-x", "fw-y", "fw-x")] == [True, False, True, False]


def test_a_history_too_short_reports_the_change_and_fails_nothing() -> None:
    """Two stored processes measured the first call: a 5x first call is ambiguous, named why, never failed."""
    v = judge(record("a", 1.0, seed=1), record("a", 1.0, seed=9, cold=_cold(2.0)),
              history=_history([_cold(0.40), _cold(0.42)]))
    assert v is not None and not v.fails
    first = v.comparisons["first_call"]
    assert first.verdict is Verdict.AMBIGUOUS and "reported, not judged: 2 stored process(es)" in first.explain()


def test_a_history_without_first_calls_judges_none() -> None:
    """Stored before first calls were measured (the first night after this change): nothing to judge, nothing fails."""
    v = judge(record("a", 1.0, seed=1), record("a", 1.0, seed=9, cold=_cold(2.0)), history=_history([None] * 4))
    assert v is not None and not v.fails and not v.cold and "first_call" not in v.comparisons


def test_a_compile_cache_hit_is_never_judged_against_misses_nor_a_miss_against_hits() -> None:
    """Misses compiled for 30 s: a 2 s hit is no improvement, and a later 30 s miss is no regression against hits."""
    misses = [_cold(compile_s=s, cache=MISS) for s in (30.0, 31.0, 29.0)]
    hits = [_cold(compile_s=s, cache=HIT) for s in (2.0, 2.1, 1.9)]
    assert "compile_time" not in _judged(misses, _cold(compile_s=2.0, cache=HIT))
    assert "compile_time" not in _judged(hits, _cold(compile_s=30.0, cache=MISS))
    assert _judged(misses + hits, _cold(compile_s=2.05, cache=HIT))["compile_time"] is Verdict.UNCHANGED
    assert _judged(misses + hits, _cold(compile_s=80.0, cache=MISS))["compile_time"] is Verdict.REGRESSED


# ------------------------------------------------------------------------------------ timing and injection


class _Side:
    """A side whose step takes ``s`` seconds on a fake clock."""

    def __init__(self, clock: list[float], s: float) -> None:
        self.clock, self.s = clock, s

    def step(self) -> None:
        self.clock[0] += self.s


def test_the_injected_cold_delay_lands_in_the_cudnn_first_call_of_matching_cases_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """RNNPERF_INJECT_COLD_DELAY_MS: slept inside the cuDNN side's first call of a matching case, nowhere else."""
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    monkeypatch.setenv("RNNPERF_INJECT_COLD_DELAY_MS", "torch-lstm-*=1500")
    sides = {"cudnn": _Side(now, 0.2), "generic": _Side(now, 0.05), "none": None}
    calls = first_calls(sides, lambda: None, "torch-lstm-train-fp32", clock=lambda: now[0], sleep=sleep)
    assert calls == pytest.approx({"cudnn": 1.7, "generic": 0.05})
    other = first_calls(sides, lambda: None, "torch-gru-train-fp32", clock=lambda: now[0], sleep=sleep)
    assert other == pytest.approx({"cudnn": 0.2, "generic": 0.05})


def test_the_cold_delay_is_milliseconds_and_a_minute_at_most() -> None:
    assert parse_injection("torch-*=1500", "RNNPERF_INJECT_COLD_DELAY_MS") == [("torch-*", 1500.0)]
    with pytest.raises(ValueError, match="RNNPERF_INJECT_COLD_DELAY_MS: 'torch-\\*=1e6': 1e\\+06 milliseconds is more "
                                         "than 60000"):
        parse_injection("torch-*=1e6", "RNNPERF_INJECT_COLD_DELAY_MS")
    with pytest.raises(ValueError, match="is not <case-id glob>=<milliseconds>"):
        parse_injection("torch-*", "RNNPERF_INJECT_COLD_DELAY_MS")


def test_one_time_costs_are_paid_once_per_process_before_any_first_call() -> None:
    """The warm-up of a key runs once, however many cases build after it: no case's first call depends on its place."""
    ran: list[str] = []
    for _ in range(3):
        once_per_process("test:cold-warm-up", lambda: ran.append("warm"))
    assert ran == ["warm"]
