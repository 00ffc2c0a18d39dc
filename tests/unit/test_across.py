"""Judging across processes: the history's spread, the verdict of one process, each kernel on its own, drift."""

from __future__ import annotations

import pytest

from pytest_rnnperf.judge.across import NOISE_FLOOR, across, kernels, nearest_mode, speeds, spread, stored_speed
from pytest_rnnperf.judge.compare import Verdict
from pytest_rnnperf.judge.policy import Policy
from pytest_rnnperf.judge.rules import mix_changes
from pytest_rnnperf.judge.sensitivity import drift, sensitivity
from pytest_rnnperf.model.process import ProcessSummary
from pytest_rnnperf.model.records import BASELINE, KEPT, StoredRun
from pytest_rnnperf.store.history import case_history


def _proc(busy: float, source: str = "p", reported: bool = False, **kernel_ms: float) -> ProcessSummary:
    """A process of one case: busy time in ms and its kernels in ms per step (``reported``: stored as a report)."""
    metrics = {"busy": busy / 1e3, "work": busy / 1e3, "wall": busy * 1.2 / 1e3}
    metrics.update({f"kernel/{name}": ms / 1e3 for name, ms in kernel_ms.items()})
    return ProcessSummary("case", source, metrics, reported=reported)


# The TF bf16 LSTM case on H100 (ms per step): mode A as recorded; in mode B, cuDNN's elementwise kernel falls
# under 2% of the step and the 128x256 GEMM takes 4.5% of the step more.
MODE_A = dict(sgemm=7.21, gemm64=6.0, xmma=4.9, gemm256=4.5, bp2=1.0, cell=0.5)
MODE_B = dict(MODE_A, sgemm=8.31, bp2=0.275)


def _mode(kernel_ms: dict[str, float], n: int, reported: bool = False) -> list[ProcessSummary]:
    """``n`` processes of one kernel mix, each 0.1% apart, busy the sum of their kernels."""
    return [_proc(sum(kernel_ms.values()) * (1 + 0.001 * i), reported=reported,
                  **{k: v * (1 + 0.001 * i) for k, v in kernel_ms.items()}) for i in range(n)]


def _moved(history: list[ProcessSummary], now: ProcessSummary) -> dict[str, Verdict]:
    """Each kernel that moved against the processes of this process's nearest mode, as the rules judge it."""
    near = nearest_mode(history, now, 3)
    return {c.metric: c.verdict for c in mix_changes(kernels(near, now, {}, floor=0.03, k=4.0), 0.03)}


def test_one_odd_process_barely_moves_the_center_or_the_noise() -> None:
    """Median and MAD: a fifth process 30% off leaves the center and the noise where four steady ones put them."""
    steady = spread([1.0, 1.002, 0.998, 1.001])
    odd = spread([1.0, 1.002, 0.998, 1.001, 1.3])
    assert odd.center == pytest.approx(steady.center, rel=0.002)
    assert odd.noise < 0.01


def test_the_noise_is_never_taken_below_its_floor_and_the_threshold_never_below_the_policy() -> None:
    """Identical processes still leave NOISE_FLOOR; the threshold is at least the floor and grows with noise."""
    assert spread([2.0, 2.0, 2.0]).noise == NOISE_FLOOR
    assert spread([2.0, 2.0, 2.0]).threshold(0.03, 4.0) == 0.03
    noisy = spread([1.0, 1.1, 0.9, 1.05, 0.95])
    assert noisy.threshold(0.03, 4.0) > 0.2


def test_a_history_of_three_processes_keeps_the_noise_of_its_widest_one() -> None:
    """The H100 history of the JAX bidirectional LSTM (0005, 0021, 0022: busy 5.69, 5.71, 5.84 ms): its median
    deviation saw 0.3%, so processes of the case's own spread (+5.0% at 5.99 ms) regressed night after night."""
    history = [5.6937, 5.7091, 5.8353]
    assert spread(history).noise > 0.01
    night = across("cudnn device time", history, [5.99, 5.99, 5.995], floor=0.03, k=4.0)
    assert night.verdict is Verdict.UNCHANGED
    assert across("cudnn device time", history, [6.6, 6.6, 6.61], floor=0.03, k=4.0).verdict is Verdict.REGRESSED


def test_a_ten_percent_shift_against_steady_processes_regresses_and_one_percent_does_not() -> None:
    """Six steady processes: +10% regressed with the count in its line, +1% unchanged."""
    history = [1.0, 1.001, 0.999, 1.002, 0.998, 1.0]
    slow = across("cudnn device time", history, [1.10, 1.101, 1.099, 1.1], floor=0.03, k=4.0)
    assert slow.verdict is Verdict.REGRESSED and "against 6 processes" in slow.explain()
    same = across("cudnn device time", history, [1.01, 1.011, 1.009, 1.01], floor=0.03, k=4.0)
    assert same.verdict is Verdict.UNCHANGED


def test_a_shift_within_a_noisy_historys_own_noise_is_not_a_regression() -> None:
    """A case that moves 8% between processes is not failed for +8%."""
    history = [1.0, 1.08, 0.93, 1.05, 0.96]
    assert across("t", history, [1.08, 1.081, 1.079], floor=0.03, k=4.0).verdict is not Verdict.REGRESSED


def test_a_lower_speedup_is_the_worse_side() -> None:
    """higher_is_better: a 20% lower speedup regressed."""
    c = across("speedup", [5.0, 5.01, 4.99], [4.0, 4.01, 3.99], floor=0.05, k=4.0, higher_is_better=True)
    assert c.verdict is Verdict.REGRESSED


# The H100's T60-B4700 LSTM, busy ms per step: 17.2 in most processes, 18.7 where its GEMM ran at 5.3 ms.
FAST_AND_SLOW = [17.1, 17.2, 17.15, 17.25, 18.7, 17.2, 17.12, 18.75, 17.18, 17.22, 18.68, 17.16]


def _runs(n: int) -> list[str]:
    """``n`` stored files, one process each."""
    return [f"{i:04d}_run.json" for i in range(n)]


def test_speeds_split_where_two_neighbours_lie_more_than_the_gap_apart() -> None:
    """17.1-17.25 is one speed, 18.68-18.75 another: 8% apart against a gap of 1.5%."""
    groups = speeds(FAST_AND_SLOW, _runs(12), 0.015)
    assert [[v for v, _ in g] for g in groups] == [sorted(FAST_AND_SLOW)[:9], [18.68, 18.7, 18.75]]


def test_a_value_at_a_slower_speed_of_three_runs_lies_at_it_and_one_between_speeds_does_not() -> None:
    """18.6 lies within 3% of the slow speed's median; 17.9 (+4% on the fast one) lies at neither."""
    known = stored_speed(FAST_AND_SLOW, _runs(12), 18.6, floor=0.03, k=4.0, min_runs=3)
    assert known is not None and known.n == 3 and known.center == pytest.approx(18.7)
    assert stored_speed(FAST_AND_SLOW, _runs(12), 17.9, floor=0.03, k=4.0, min_runs=3) is None
    assert stored_speed(FAST_AND_SLOW, _runs(12), 19.5, floor=0.03, k=4.0, min_runs=3) is None
    assert stored_speed(FAST_AND_SLOW, _runs(12), 0.0, floor=0.03, k=4.0, min_runs=3) is None
    assert stored_speed([], [], 18.6, floor=0.03, k=4.0, min_runs=3) is None


def test_a_speed_needs_its_processes_from_min_runs_stored_files_and_lies_on_the_worse_side() -> None:
    """Three processes of one recorded baseline are no speed; a faster group is never one (the median's side)."""
    one_file = [*_runs(9), "0009_baseline.json", "0009_baseline.json#2", "0009_baseline.json#3"]
    ordered = sorted(FAST_AND_SLOW)
    assert stored_speed(ordered, one_file, 18.7, floor=0.03, k=4.0, min_runs=3) is None
    assert stored_speed(ordered, _runs(12), 18.7, floor=0.03, k=4.0, min_runs=3) is not None
    faster = [1 / v for v in FAST_AND_SLOW]  # the slow processes are now the fast ones
    assert stored_speed(faster, _runs(12), 1 / 18.7, floor=0.03, k=4.0, min_runs=3) is None
    assert stored_speed(faster, _runs(12), 1 / 18.7, floor=0.03, k=4.0, min_runs=3, higher_is_better=True) is not None


def test_a_process_at_a_stored_slower_speed_is_unchanged_with_its_reason_and_without_sources_regresses() -> None:
    """across(): 18.7 ms against the history above regressed (+8.6%, threshold 3%); with each value's file, it lies
    at a speed three runs ran, and says so."""
    now = [18.7, 18.71, 18.69, 18.7]
    assert across("cudnn device time", FAST_AND_SLOW, now, floor=0.03, k=4.0).verdict is Verdict.REGRESSED
    known = across("cudnn device time", FAST_AND_SLOW, now, floor=0.03, k=4.0, sources=_runs(12), min_runs=3)
    assert known.verdict is Verdict.UNCHANGED
    assert known.why == "at a speed 3 of the 12 stored processes ran, +8.7% on their median"


def test_a_kernel_that_appeared_with_five_percent_of_the_step_is_named() -> None:
    """A spin kernel absent from every process, 5% of the step now: regressed, by name."""
    history = [_proc(10.0, rnn=6.0, gemm=4.0) for _ in range(4)]
    now = _proc(10.5, rnn=6.0, gemm=4.0, spin=0.5)
    found = kernels(history, now, {"spin": [0.0005] * 4}, floor=0.03, k=4.0)
    assert [c.metric for c in found if c.verdict is Verdict.REGRESSED] == ["kernel/spin"]
    assert "appeared: " in found[0].explain() and "0.500 ms/step" in found[0].explain()


def test_a_grown_kernel_is_regressed_even_when_another_kernel_got_faster() -> None:
    """The RNN kernel +0.9 ms (9% of the step) while a GEMM is 0.9 ms faster: the RNN kernel is still named."""
    history = [_proc(10.0, rnn=6.0, gemm=4.0) for _ in range(4)]
    now = _proc(10.0, rnn=6.9, gemm=3.1)
    found = {c.metric: c.verdict for c in kernels(history, now, {}, floor=0.03, k=4.0)}
    assert found == {"kernel/rnn": Verdict.REGRESSED, "kernel/gemm": Verdict.IMPROVED}


def test_a_kernel_that_appeared_where_another_shrank_as_much_is_a_mix_change_not_a_regression() -> None:
    """H100 null: a tensor-op GEMM appeared (+5.4% of the step) while cuDNN's elementwise kernel freed 8.5%."""
    history = [_proc(10.0, rnn=6.0, elementwise=2.0, gemm=2.0) for _ in range(4)]
    now = _proc(10.0, rnn=6.0, elementwise=1.15, gemm=2.0, tensorop=0.54)
    found = mix_changes(kernels(history, now, {}, floor=0.03, k=4.0), 0.03)
    verdicts = {c.metric: c.verdict for c in found}
    assert verdicts == {"kernel/tensorop": Verdict.AMBIGUOUS, "kernel/elementwise": Verdict.IMPROVED}
    line = next(c for c in found if c.metric == "kernel/tensorop").explain()
    assert line.startswith("appeared: tensorop 0.540 ms/step") and "the kernel mix changed" in line and "8.5%" in line


def test_a_kernel_that_appeared_beyond_what_others_freed_is_still_a_regression() -> None:
    """An 8% spin while a kernel freed 4% of the step: +4% net, regressed by name; with nothing freed, regressed too."""
    history = [_proc(10.0, rnn=6.0, elementwise=2.0, gemm=2.0) for _ in range(4)]
    freed_a_little = _proc(10.4, rnn=6.0, elementwise=1.6, gemm=2.0, spin=0.8)
    found = {c.metric: c.verdict for c in mix_changes(kernels(history, freed_a_little, {}, floor=0.03, k=4.0), 0.03)}
    assert found["kernel/spin"] is Verdict.REGRESSED
    nothing_freed = _proc(10.5, rnn=6.0, elementwise=2.0, gemm=2.0, spin=0.5)
    found = {c.metric: c.verdict for c in mix_changes(kernels(history, nothing_freed, {}, floor=0.03, k=4.0), 0.03)}
    assert found == {"kernel/spin": Verdict.REGRESSED}


def test_a_grown_kernel_is_never_excused_by_the_kernel_mix() -> None:
    """The RNN kernel +9% while a GEMM freed 9%: a kernel that was there got slower, so it stays regressed."""
    history = [_proc(10.0, rnn=6.0, gemm=4.0) for _ in range(4)]
    found = mix_changes(kernels(history, _proc(10.0, rnn=6.9, gemm=3.1), {}, floor=0.03, k=4.0), 0.03)
    assert {c.metric: c.verdict for c in found} == {"kernel/rnn": Verdict.REGRESSED, "kernel/gemm": Verdict.IMPROVED}


def _folded(busy: float, smallest: float, **kernel_ms: float) -> ProcessSummary:
    """A stored process whose kernel table was cut: its rows, the smallest of them ``smallest``, then the folded row."""
    return _proc(busy, smallest=smallest, **{"(other kernels)": 0.6}, **kernel_ms)


def test_a_kernel_that_fell_under_the_cut_of_stored_tables_is_judged_against_their_smallest_row() -> None:
    """The H100 TF LSTM-bi case: a GEMM listed in one stored process (0.124 ms), under the 0.11 ms cut in 12 others,
    0.214 ms tonight (3.2% of a 6.65 ms step): it grew by at most 1.5% of the step, not 3.2%, so nothing is named."""
    history = [_folded(6.65, 0.111, rnn=2.1, gemm=1.45) for _ in range(12)] + [_folded(6.65, 0.124, rnn=2.1, gemm=1.45,
                                                                                      nt=0.124)]
    now = _proc(6.65, rnn=2.1, gemm=1.45, nt=0.214, smallest=0.111)
    assert [c for c in kernels(history, now, {}, floor=0.03, k=4.0) if c.verdict is Verdict.REGRESSED] == []
    # Twice as much (6.4% of the step) still regresses, and says its "before" was a bound.
    grown = kernels(history, _proc(6.86, rnn=2.1, gemm=1.45, nt=0.428, smallest=0.111), {}, floor=0.03, k=4.0)
    regressed = [c for c in grown if c.verdict is Verdict.REGRESSED]
    assert [c.metric for c in regressed] == ["kernel/nt"]
    assert regressed[0].explain().startswith("nt 0.111 -> 0.428 ms/step")
    assert "under the cut of 12 stored kernel tables" in regressed[0].explain()


def test_a_kernel_no_stored_table_listed_is_new_at_its_whole_time_even_where_the_tables_were_cut() -> None:
    """A spin of 3.2% of the step that no stored process listed: appeared, regressed, whatever the tables' cut."""
    history = [_folded(6.65, 0.111, rnn=2.1, gemm=1.45) for _ in range(13)]
    now = _proc(6.86, rnn=2.1, gemm=1.45, spin=0.214, smallest=0.111)
    found = [c for c in kernels(history, now, {}, floor=0.03, k=4.0) if c.verdict is Verdict.REGRESSED]
    assert [c.metric for c in found] == ["kernel/spin"] and found[0].baseline_median == 0


def test_a_kernel_with_a_noisy_history_and_a_change_under_the_floor_are_not_reported() -> None:
    """A GEMM that moves 15% between processes and a 1%-of-step change: nothing reported."""
    history = [_proc(10.0, rnn=6.0, gemm=g) for g in (4.0, 4.6, 3.5, 4.3, 3.8)]
    assert kernels(history, _proc(10.0, rnn=6.1, gemm=4.6), {}, floor=0.03, k=4.0) == []


def test_the_nearest_mode_is_used_where_enough_processes_share_it() -> None:
    """Processes that ran GEMM b instead of a are judged against the ones that did, when there are three."""
    a = [_proc(10.0, rnn=6.0, gemm_a=4.0) for _ in range(3)]
    b = [_proc(10.0, rnn=6.0, gemm_b=4.0) for _ in range(3)]
    now = _proc(10.0, rnn=6.0, gemm_b=4.0)
    assert nearest_mode(a + b, now, 3) == b
    assert nearest_mode(a + b[:1], now, 3) == a + b[:1]


def test_a_mode_seen_in_three_reported_processes_is_history_and_a_process_in_it_is_unchanged() -> None:
    """Modes A and B each in three stored processes, B's kept as reports: a process in B moved nothing, busy included."""
    history = _mode(MODE_A, 3) + _mode(MODE_B, 3, reported=True)
    now = _proc(sum(MODE_B.values()), **MODE_B)
    assert nearest_mode(history, now, 3) == history[3:]
    assert _moved(history, now) == {}
    busy = [s.metrics["busy"] for s in nearest_mode(history, now, 3)]
    assert across("cudnn device time", busy, [now.metrics["busy"]] * 3, floor=0.03, k=4.0).verdict is Verdict.UNCHANGED


def test_a_mode_seen_in_fewer_stored_processes_than_min_processes_still_reports() -> None:
    """Mode B once or twice (as on H100 this week): the GEMM's growth is judged against mode A's processes, regressed;
    one clean process of B and two reports make three, and B is known."""
    now = _proc(sum(MODE_B.values()), **MODE_B)
    for seen in (1, 2):
        history = _mode(MODE_A, 4) + _mode(MODE_B, seen, reported=True)
        assert nearest_mode(history, now, 3) == history[:4]
        assert _moved(history, now)["kernel/sgemm"] is Verdict.REGRESSED
    clean_b = _mode(MODE_B, 1)
    assert _moved(_mode(MODE_A, 4) + clean_b + _mode(MODE_B, 2, reported=True), now) == {}


def test_a_kernel_in_no_stored_mode_still_regresses() -> None:
    """Both modes known, B from reports: a spin kernel on top of mode B appeared in no mode, regressed by name."""
    history = _mode(MODE_A, 3) + _mode(MODE_B, 3, reported=True)
    now = _proc(sum(MODE_B.values()) + 1.2, spin=1.2, **MODE_B)
    assert nearest_mode(history, now, 3) == history[3:]
    assert _moved(history, now) == {"kernel/spin": Verdict.REGRESSED}


def test_a_kernel_that_grew_within_a_known_mode_is_judged_against_that_modes_processes() -> None:
    """The 128x256 GEMM 1.2 ms slower than mode B's: regressed against B's median, not A's."""
    history = _mode(MODE_A, 3) + _mode(MODE_B, 3, reported=True)
    grown = dict(MODE_B, sgemm=MODE_B["sgemm"] + 1.2)
    found = kernels(nearest_mode(history, _proc(sum(grown.values()), **grown), 3),
                    _proc(sum(grown.values()), **grown), {}, floor=0.03, k=4.0)
    assert [(c.metric, c.verdict) for c in found] == [("kernel/sgemm", Verdict.REGRESSED)]
    assert found[0].baseline_median == pytest.approx(MODE_B["sgemm"] / 1e3, rel=0.002)


def test_reported_processes_never_join_a_mode_the_clean_processes_know() -> None:
    """Three reports of mode A with the GEMM slowed (a throttled window, say) beside three clean ones: judged
    against the clean ones, the same slowdown still regresses; reports alone of mode A are not enough either."""
    slowed = dict(MODE_A, sgemm=MODE_A["sgemm"] + 1.2)
    now = _proc(sum(slowed.values()), **slowed)
    history = _mode(MODE_A, 3) + _mode(slowed, 3, reported=True)
    assert nearest_mode(history, now, 3) == history[:3]
    assert _moved(history, now)["kernel/sgemm"] is Verdict.REGRESSED
    young = _mode(MODE_A, 2) + _mode(slowed, 3, reported=True)
    assert nearest_mode(young, now, 3) == young[:2]  # too few to judge across: the newest record decides


def test_a_case_history_judges_with_its_reports_and_shows_its_clean_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept run that reported the case gives a reported process: in ``judged``, never in ``processes``."""
    runs = [_stored("0003_run.json", KEPT, (), reported=("a",)), _stored("0002_run.json", KEPT, ("a",)),
            _stored("0001_baseline.json", BASELINE, ("a",))]
    monkeypatch.setattr("pytest_rnnperf.model.records.summarize", lambda rec, source: ProcessSummary("a", source, {}))
    history = case_history(runs, "a")
    assert history.files == ("0001_baseline.json", "0002_run.json", "0003_run.json")
    assert [(s.source, s.reported) for s in history.judged] == [("0001_baseline.json", False), ("0002_run.json", False),
                                                                ("0003_run.json", True)]
    assert [s.source for s in history.processes] == ["0001_baseline.json", "0002_run.json"]


def test_ten_nights_of_one_percent_each_are_a_drift_and_a_flat_history_is_not() -> None:
    """The change-point check over the history and this process."""
    rising = [_proc(10.0 * 1.01 ** i) for i in range(10)]
    assert "in device time" in drift(rising, 10.0 * 1.01 ** 10 / 1e3, 0.03)
    flat = [_proc(10.0 + 0.01 * (i % 3)) for i in range(10)]
    assert drift(flat, 0.01001, 0.03) == ""
    assert drift(rising[:3], 0.02, 0.03) == ""


def test_a_climb_back_to_a_level_the_history_held_is_no_drift_and_the_same_step_from_a_flat_history_is() -> None:
    """The H100 TF GRU case's device time by process (ms): 19.8-20.1, down to 19.3, back to 20.1 and 19.9 tonight. The
    change-point check sees a +3.1% step over the last two, but that level is the history's own first one."""
    stored = (19.83, 19.83, 20.09, 19.92, 19.66, 19.60, 19.42, 19.42, 19.37, 19.28, 19.35, 20.09)
    assert drift([_proc(v) for v in stored], 19.91 / 1e3, 0.03) == ""
    flat = [_proc(19.35 + 0.02 * (i % 3)) for i in range(11)] + [_proc(20.09)]
    assert "in device time over the history's last 2 of 13 processes" in drift(flat, 19.91 / 1e3, 0.03)

def test_sensitivity_says_when_a_case_needs_more_processes() -> None:
    """Two processes: judged against one record; twelve quiet ones with a steady kernel: resolves 3%; the same without
    kernel tables: called at the floor, which it catches half the time; noisy: limited."""
    policy = Policy()
    assert sensitivity("case", [_proc(10.0)] * 2, policy).smallest is None
    quiet = [10.0 + 0.001 * i for i in range(12)]
    assert sensitivity("case", [_proc(v, cell=v) for v in quiet], policy).status \
        == "resolves 3% on its steady kernels (100% of its kernel time)"
    floor = sensitivity("case", [_proc(v) for v in quiet], policy)
    assert floor.status.startswith("called at its 3% floor, which it reaches half the time: 3.8% is caught 19 times")
    noisy = sensitivity("case", [_proc(v) for v in (10.0, 11.0, 9.0, 10.6, 9.4)], policy)
    assert noisy.smallest is not None and noisy.smallest > 0.03 and "limits it" in noisy.status
    assert not noisy.few and not sensitivity("case", [_proc(v, cell=v) for v in quiet], policy).few


def test_a_quiet_young_history_says_its_few_processes_limit_it_not_its_noise() -> None:
    """A whole H200 night recorded with three processes a case, one night kept: 72 cases at 3.1% whose noise was at
    its 0.5% floor were said to be limited by their own noise. Four processes, not their spread, draw that line."""
    young = sensitivity("case", [_proc(v, cell=v) for v in (10.0, 10.01, 10.02, 10.005)], Policy())
    assert young.few and young.shown == "3.1%" and young.status.startswith(
        "its 4 processes limit it to 3.1% on its steady kernels (100% of its kernel time): their noise is at its 0.5% "
        "floor, and more processes (kept nights) narrow the line")


def test_the_sensitivity_table_counts_the_cases_its_few_processes_limit_apart_from_the_noisy_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``sensitivity``'s last line: a quiet case of four processes is counted as limited by how few they are."""
    from pytest_rnnperf.cli.sensitivity import case_table

    procs = {f"{i + 1:04d}_run.json": _proc(v, f"{i + 1:04d}_run.json", cell=v)
             for i, v in enumerate((10.0, 10.01, 10.02, 10.005))}
    monkeypatch.setattr(StoredRun, "summaries", lambda self, c: [procs[self.path.name]])
    runs = [_stored(name, BASELINE if i == 0 else KEPT, ("case",)) for i, name in enumerate(procs)][::-1]
    assert case_table(runs)[-1].startswith("1 case(s): 0 resolve their floor (caught 19 times in 20), 0 limited by "
                                           "their own noise, 1 by how few processes they hold, 0 called at their floor")


def test_a_reach_just_past_the_floor_is_shown_with_a_second_decimal_so_it_never_reads_as_the_floor() -> None:
    """3.02% is "3.02%" (it does not resolve 3%); 3.0% itself and 3.4% keep one decimal."""
    from pytest_rnnperf.judge.sensitivity import Sensitivity

    assert Sensitivity("c", 30, "steady", 0.0053, 0.0302, 0.03).shown == "3.02%"
    assert Sensitivity("c", 30, "steady", 0.005, 0.03, 0.03).shown == "3.0%"
    assert Sensitivity("c", 30, "steady", 0.006, 0.034, 0.03).shown == "3.4%"
    assert Sensitivity("c", 2, "device", None, None, 0.03).shown == "-"


def test_a_catching_line_lies_under_the_floor_by_its_noise_and_never_nearer_than_k_noises() -> None:
    """At the 0.5% noise floor the line is 3% - 1.645 x 0.5%, and a change of 3% is caught 19 times in 20 (its reach);
    at 0.8% noise the guard of 4 noises draws the line, and what it catches 19 times in 20 lies beyond the floor."""
    quiet = spread([1.0 + 0.0001 * i for i in range(30)])
    assert quiet.catching(0.03, 4.0) == pytest.approx(0.03 - 1.645 * NOISE_FLOOR)
    assert quiet.reach(quiet.catching(0.03, 4.0)) == pytest.approx(0.03)
    noisy = spread([1.0, 1.008, 0.992] * 10)
    assert noisy.catching(0.03, 4.0) == pytest.approx(noisy.guard(4.0)) and noisy.guard(4.0) > 0.03 - 1.645 * noisy.noise
    assert noisy.reach(noisy.catching(0.03, 4.0)) > 0.03


def test_a_change_of_the_floor_regresses_on_a_catching_line_and_stays_ambiguous_on_the_floor() -> None:
    """Thirty quiet processes, this one 3% slower with rounds 0.1% apart: the steady kernels' line calls it, the
    floor's line (busy time's) leaves it ambiguous."""
    history = [1.0 + 0.0001 * (i % 7) for i in range(30)]
    now = [1.0303 * (1 + 0.001 * (i % 5 - 2)) for i in range(20)]
    assert across("t", history, now, floor=0.03, k=4.0, catch=True).verdict is Verdict.REGRESSED
    assert across("t", history, now, floor=0.03, k=4.0).verdict is Verdict.AMBIGUOUS
    assert across("t", history, [v * 1.0 for v in history[:20]], floor=0.03, k=4.0, catch=True).verdict \
        is Verdict.UNCHANGED


def _stored(name: str, kind: str, case_ids: tuple[str, ...], reported: tuple[str, ...] = ()) -> StoredRun:
    """A stored run holding records of ``case_ids`` (only counted here, never read) and reports of ``reported``."""
    from pathlib import Path

    return StoredRun(path=Path(name), gpu_slug="G", environment={}, records={c: object() for c in case_ids},  # type: ignore[misc]
                     kind=kind, reported={c: ProcessSummary(c, "", {"busy": 0.01}) for c in reported})


def test_a_history_starts_at_the_newest_baseline_holding_the_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kept runs after the newest baseline with the case, oldest first; older baselines left out."""
    monkeypatch.setattr(StoredRun, "summaries", lambda self, c: [ProcessSummary(c, self.path.name, {})])
    runs = [_stored("0004_run.json", KEPT, ("a",)), _stored("0003_baseline.json", BASELINE, ("b",)),
            _stored("0002_run.json", KEPT, ("a",)), _stored("0001_baseline.json", BASELINE, ("a", "b"))]
    assert case_history(runs, "a").files == ("0001_baseline.json", "0002_run.json", "0004_run.json")
    assert case_history(runs, "b").files == ("0003_baseline.json",)


def test_the_kernel_table_takes_medians_over_the_processes_where_a_kernel_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process without device time shows '-', and neither it nor a missing kernel pulls a median toward 0."""
    from pytest_rnnperf.cli.sensitivity import kernel_table

    procs = {"0001_baseline.json": _proc(10.0, rnn=6.0, gemm=4.0), "0002_run.json": ProcessSummary("case", "w", {}),
             "0003_run.json": _proc(10.4, rnn=6.0, gemm=4.4), "0004_run.json": _proc(10.2, rnn=6.2)}
    monkeypatch.setattr(StoredRun, "summaries", lambda self, c: [procs[self.path.name]])
    runs = [_stored(name, BASELINE if "baseline" in name else KEPT, ("case",)) for name in reversed(procs)]
    code, lines = kernel_table(runs, "case")
    rows = {line.split()[0]: line.split() for line in lines[3:]}
    assert code == 0
    assert rows["gemm"][1:] == ["4.0000", "-", "4.4000", "-", "4.2000", "-"]  # two processes: too few for a noise
    # noise: 1.4826 x the median of |ln(v / 10.2)| = 1.4826 x ln(10.4 / 10.2) = 2.88%
    assert rows["busy"][3:] == ["10.0000", "-", "10.4000", "10.2000", "10.2000", "2.88%"]


def _noisy(busy: list[float], work: list[float], wall: list[float] | None = None, clocks: list[float] | None = None,
           **kernel_ms: list[float]) -> list[ProcessSummary]:
    """Processes of one case from per-process series (ms per step; ``clocks`` in MHz)."""
    out = []
    for i, (b, w) in enumerate(zip(busy, work)):
        metrics = {"busy": b / 1e3, "work": w / 1e3, "wall": (wall[i] if wall else 2.0 + 0.001 * (i % 3)) / 1e3}
        metrics.update({f"kernel/{name}": ms[i] / 1e3 for name, ms in kernel_ms.items()})
        clock = None if clocks is None else clocks[i]
        out.append(ProcessSummary("case", f"{i:04d}_run.json", metrics, sm_clock_mhz=clock))
    return out


def test_a_steady_history_names_no_cause_of_noise() -> None:
    """Ten processes within 0.2% of each other: nothing spreads them."""
    from pytest_rnnperf.judge.sensitivity import noise_causes

    steady = [1.0 + 0.0002 * (i % 5) for i in range(10)]
    assert noise_causes(_noisy(steady, steady, rnn=steady)) == ()


def test_busy_time_that_spreads_while_the_kernels_hold_is_named_overlap_and_moving_with_the_wall_the_host() -> None:
    """A bidirectional case: busy +-6% by process, its summed kernel time +-1% the other way, wall with busy."""
    from pytest_rnnperf.judge.sensitivity import noise_causes

    swing = [(-1) ** i * (0.02 + 0.01 * (i % 4)) for i in range(12)]
    busy, work = [5.5 * (1 + d) for d in swing], [7.0 * (1 - d / 4) for d in swing]
    causes = noise_causes(_noisy(busy, work, wall=[9.6 * (1 + d) for d in swing]))
    assert len(causes) == 2, causes
    assert causes[0].startswith("how its kernels overlap varies by process: its busy time spreads ")
    assert "(r = -1.00)" in causes[0] and causes[0].endswith("judging the summed time alone would hide a lost overlap")
    assert causes[1].startswith("its device time moves with its wall time (r = +1.00): the host sets the gaps of "
                                "its 5.")


def test_a_kernel_at_two_speeds_is_named_with_both_and_the_few_processes_of_the_rarer_one() -> None:
    """A GEMM at 3.70 ms in eight processes and 5.28 ms in three (8% of the step each time): named, its three
    processes listed; a kernel whose two speeds differ by 0.5% of the step is not."""
    from pytest_rnnperf.judge.sensitivity import noise_causes

    slow = {3, 7, 9}
    gemm = [(5.28 if i in slow else 3.70) * (1 + 0.001 * (i % 3)) for i in range(11)]
    tiny = [(0.11 if i in slow else 0.10) * (1 + 0.001 * (i % 3)) for i in range(11)]
    busy = [18.0 + g - 3.70 for g in gemm]
    causes = noise_causes(_noisy(busy, busy, **{"cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nt_align1>": gemm,
                                                 "elementwise<float>": tiny}))
    gemms = [c for c in causes if "runs at two speeds" in c]
    assert gemms == ["cutlass_80_simt_sgemm_128x128_8x4_nt_align1 runs at two speeds: 3.704 ms in 8 processes, "
                     "5.280 ms in 3 (+43%, 8.8% of the step) (0003_run.json, 0007_run.json, 0009_run.json)"], causes


def test_sm_clocks_that_differ_between_processes_are_named() -> None:
    """Half the processes ran at 1755 MHz, half at 1980: the clock is named with its range."""
    from pytest_rnnperf.judge.sensitivity import noise_causes

    busy = [1.0 + 0.0002 * (i % 5) for i in range(8)]
    causes = noise_causes(_noisy(busy, busy, clocks=[1755.0 if i % 2 else 1980.0 for i in range(8)]))
    assert causes == ("its SM clock differed between processes: 1755-1980 MHz",)


def test_cards_whose_medians_spread_more_than_one_cards_processes_are_named_with_both_spreads() -> None:
    """Four cards, three processes each: the cards 1% apart, the processes on a card within 0.1%. Named only where the
    stored files' cards are known, and not where every process ran on one card. No kernel is steady across cards 1%
    apart, so the summed kernel time is what spreads."""
    from pytest_rnnperf.judge.sensitivity import noise_causes

    offsets = [0.99, 1.0, 1.01, 1.02]
    busy = [5.0 * offsets[i // 3] * (1 + 0.001 * (i % 3)) for i in range(12)]
    history = _noisy(busy, busy, rnn=busy)
    cards = {f"{i:04d}_run.json": f"GPU-{i // 3}" for i in range(12)}
    causes = [c for c in noise_causes(history, cards) if "cards" in c]
    assert causes == ["its summed kernel time differs between cards: the medians of its 4 cards spread 1.5%, its "
                      "processes on one card 0.1% (4 cards ran it more than once); a runner that stays on one card sees "
                      "the smaller"], causes
    assert not any("cards" in c for c in noise_causes(history))
    assert not any("cards" in c for c in noise_causes(history, dict.fromkeys(cards, "GPU-0")))


def test_sensitivity_of_one_case_names_the_cards_of_its_stored_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sensitivity --case``: the card each stored run names (``gpu.uuid``) is what tells the cards apart."""
    from dataclasses import replace

    from pytest_rnnperf.cli.sensitivity import kernel_table

    offsets = [0.99, 1.0, 1.01, 1.02]
    procs = {f"{i + 1:04d}_run.json": _proc(5.0 * offsets[i // 3] * (1 + 0.001 * (i % 3)), f"{i + 1:04d}_run.json",
                                             rnn=5.0 * offsets[i // 3] * (1 + 0.001 * (i % 3))) for i in range(12)}
    monkeypatch.setattr(StoredRun, "summaries", lambda self, c: [procs[self.path.name]])
    runs = [replace(_stored(name, BASELINE if i == 0 else KEPT, ("case",)), environment={"gpu.uuid": f"GPU-{i // 3}"})
            for i, name in enumerate(procs)][::-1]
    code, lines = kernel_table(runs, "case")
    assert code == 0 and any(line.startswith("  - its summed kernel time differs between cards: the medians of its 4 "
                                             "cards spread 1.5%") for line in lines), lines
