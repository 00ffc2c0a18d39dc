"""Device time from CUPTI records, on a fake CUPTI and a fake clock: union, rounds, calibration, kernel tables."""

from __future__ import annotations

import pytest
from fake_cupti import FakeCupti
from fake_nvml import FakeClock

from pytest_rnnperf.model.timing import Measurement
from pytest_rnnperf.measure.device_time import (
    DeviceTimer, _short, kernel_changes, kernel_proof, kernel_table, steps_for, union_ns,
)
from pytest_rnnperf.model.timing import DeviceTiming, KernelStat


def test_union_counts_overlaps_once_and_gaps_not_at_all() -> None:
    """Nested and overlapping kernels count once; idle gaps between launches do not count."""
    assert union_ns([(0, 10), (2, 5), (8, 12), (20, 25)]) == 12 + 5
    assert union_ns([]) == 0
    assert union_ns([(5, 5)]) == 0


def _steps(cupti: FakeCupti, clock: FakeClock, device_s: float, host_s: float, name: str, launches: int = 1):
    """A step that launches ``launches`` kernels worth ``device_s`` in all and takes ``host_s`` of host time."""
    def step() -> None:
        for _ in range(launches):
            cupti.launch(name, device_s / launches)
            clock.advance(device_s / launches)
        clock.advance(max(0.0, host_s - device_s))
    return step


@pytest.mark.parametrize("units_per_ns", [1.0, 2.1])
def test_device_time_per_step_whatever_cuptis_clock_unit(units_per_ns: float) -> None:
    """Busy time per step comes out in seconds even when CUPTI counts 2.1 units per ns (calibrated on the host clock)."""
    clock = FakeClock()
    cupti = FakeCupti(clock, units_per_ns)
    timer = DeviceTimer(cupti=cupti, host_clock=lambda: int(clock() * 1e9))
    a = _steps(cupti, clock, 0.0005, 0.0015, "RNN_blockPersist_fp_LSTM")
    b = _steps(cupti, clock, 0.0020, 0.0100, "elementwise", launches=40)
    cudnn, generic = timer.pair(a, b, lambda: None, rounds=(6, 3), steps=(4, 2))
    assert cudnn.busy.median == pytest.approx(0.0005, rel=1e-3) and cudnn.busy.timer == "device"
    assert len(cudnn.busy.samples) == 6 and cudnn.busy.steps_per_block == 4 and len(generic.busy.samples) == 3
    assert generic.busy.median == pytest.approx(0.0020, rel=1e-3) and generic.launches_per_step == 40
    assert cudnn.clock_scale == pytest.approx(1 / units_per_ns, rel=1e-3)
    assert cudnn.kernels == (KernelStat("RNN_blockPersist_fp_LSTM", pytest.approx(0.5, rel=1e-3), 1.0),)
    assert cupti.enabled == set()  # tracing is off again


def test_records_that_never_arrive_are_an_error_not_zero() -> None:
    """Another profiler took the buffers: a one-line RuntimeError, never a device time of zero."""
    clock = FakeClock()
    cupti = FakeCupti(clock)
    cupti.lost = True
    timer = DeviceTimer(cupti=cupti, host_clock=lambda: int(clock() * 1e9))
    step = _steps(cupti, clock, 0.001, 0.002, "k")
    with pytest.raises(RuntimeError, match="CUPTI recorded no kernel for the cudnn side"):
        timer.pair(step, step, lambda: None, rounds=2, steps=(1, 1))


def test_a_cupti_clock_that_does_not_move_with_the_host_is_refused() -> None:
    """A clock source that stands still (or races) would make any figure; refuse it in one line."""
    clock = FakeClock()
    cupti = FakeCupti(clock)
    host = iter(range(0, 10**12, 10**9))  # the host clock runs 1 s per read: nothing like CUPTI's
    timer = DeviceTimer(cupti=cupti, host_clock=lambda: next(host))
    step = _steps(cupti, clock, 0.001, 0.002, "k")
    with pytest.raises(RuntimeError, match="does not track the host's"):
        timer.pair(step, step, lambda: None, rounds=2, steps=(1, 1))


def test_the_kernel_table_keeps_the_longest_and_folds_the_rest() -> None:
    """Per-step ms and launches by name, longest first, the tail in one '(N other kernels)' row."""
    records = [(0, 3_000_000, "gemm"), (0, 1_000_000, "gemm"), (0, 500_000, "cell")] + \
        [(0, 1000, f"tiny{i}") for i in range(3)]
    table = kernel_table(records, steps=2, rows=2)
    assert table[0] == KernelStat("gemm", 2.0, 1.0) and table[1] == KernelStat("cell", 0.25, 0.5)
    assert table[2].name == "(3 other kernels)" and table[2].launches_per_step == 1.5


def test_kernel_changes_name_what_grew_appeared_or_vanished() -> None:
    """cuDNN switching algorithms: the persistent kernel vanishes, a cell kernel and GEMMs appear; noise is dropped."""
    before = [KernelStat("RNN_blockPersist_fp_LSTM", 0.20, 1), KernelStat("gemm", 0.10, 2), KernelStat("fill", 0.01, 2)]
    after = [KernelStat("elemWiseRNNcell", 0.15, 28), KernelStat("gemm", 0.35, 30), KernelStat("fill", 0.0102, 2)]
    lines = [c.describe() for c in kernel_changes(before, after)]
    assert lines == ["gemm 0.100 -> 0.350 ms/step (+250%)", "vanished: RNN_blockPersist_fp_LSTM (0.200 ms/step)",
                     "appeared: elemWiseRNNcell (0.150 ms/step)"]
    assert kernel_changes(before, before) == []


def test_demangled_names_keep_their_template_and_lose_their_parameters() -> None:
    """The readable name keeps what names the algorithm, not the parameter list."""
    assert _short("void cudnn::rnn::RNN_blockPersist_fp_LSTM<float, float, float, 128>(cudnn::rnn::Params)") == \
        "cudnn::rnn::RNN_blockPersist_fp_LSTM<float, float, float, 128>"
    assert len(_short("k" * 300)) == 100


def test_a_round_holds_a_few_milliseconds_of_work() -> None:
    """Steps per traced round: about 5 ms of them, at least one, at most the cap."""
    assert steps_for(0.001) == 5 and steps_for(0.02) == 1 and steps_for(1e-7) == 200 and steps_for(0.0) == 1


def test_each_side_is_traced_warm_not_in_the_state_the_other_side_left() -> None:
    """A step that runs 2x slower right after the other side (cold caches) is measured at its warm time."""
    clock = FakeClock()
    cupti = FakeCupti(clock)
    last = {"side": ""}

    def side(name: str, device_s: float):
        def step() -> None:
            cold = last["side"] not in ("", name)
            last["side"] = name
            cupti.launch(name, device_s * (2.0 if cold else 1.0))
            clock.advance(device_s * (2.0 if cold else 1.0) + 0.001)
        return step

    timer = DeviceTimer(cupti=cupti, host_clock=lambda: int(clock() * 1e9))
    a, b = timer.pair(side("a", 0.010), side("b", 0.020), lambda: None, rounds=4, steps=(1, 1))
    assert a.busy.samples == pytest.approx((0.010,) * 4) and b.busy.samples == pytest.approx((0.020,) * 4)


def _timing(launches: float, forward: float = 0.0, backward: float = 0.0, cells: float = 0.0) -> DeviceTiming:
    """A side's device timing with only what the kernel-level proof reads."""
    busy = Measurement("x", (0.001,), 1, timer="device")
    return DeviceTiming(busy=busy, work=busy, launches_per_step=launches, kernels=(), rnn_forward=forward,
                        rnn_backward=backward, generic_cells=cells)


def test_the_kernels_prove_cudnn_ran_forward_and_backward_and_nothing_generic_beside_it() -> None:
    """A clean pair passes; each way of faking the cuDNN path fails with what the kernels showed."""
    generic = _timing(400)
    ok, evidence = kernel_proof("cudnn", _timing(16, forward=1, backward=2), generic, train=True)
    assert ok and evidence == "kernels: cuDNN RNN forward 1, backward 2 per step, no generic cell; 16 vs 400 launches"
    assert kernel_proof("generic", generic, _timing(16, forward=1), train=True) == (True, "kernels: no cuDNN RNN kernel")
    failures = {
        "no cuDNN RNN forward kernel ran": _timing(16, backward=2),
        "no cuDNN RNN backward kernel ran": _timing(16, forward=1),
        "generic cell kernels ran too (50 per step)": _timing(66, forward=1, backward=2, cells=50),
        "416 launches per step, no fewer than the generic side's 400": _timing(416, forward=1, backward=2),
    }
    for message, timing in failures.items():
        ok, evidence = kernel_proof("cudnn", timing, generic, train=True)
        assert not ok and message in evidence, evidence
    assert kernel_proof("cudnn", _timing(4, forward=1), generic, train=False)[0]  # inference needs no backward
    ok, evidence = kernel_proof("generic", _timing(400, forward=1), generic, train=False)
    assert not ok and "cuDNN RNN kernels ran on the generic side" in evidence


def test_the_traced_records_are_sorted_into_cudnn_kernels_and_generic_cells() -> None:
    """Every record counts, not only the table's longest rows: 1 forward, 2 backward, 3 generic cells per step."""
    clock = FakeClock()
    cupti = FakeCupti(clock)
    timer = DeviceTimer(cupti=cupti, host_clock=lambda: int(clock() * 1e9))

    def step() -> None:
        cupti.launch("RNN_blockPersist_fp_LSTM<float, float, float, (int)128>", 0.0002)
        cupti.launch("LSTM_elementWise_bp1<float, float, float>", 0.0001)
        cupti.launch("RNN_blockPersist_bp_LSTM_FMA<float, float, float, (int)128>", 0.0001)
        for _ in range(3):
            cupti.launch("void at::native::<unnamed>::lstm_cell_forward<float, float, int, 2>(int)", 0.0001)
        clock.advance(0.001)

    side, _ = timer.pair(step, step, lambda: None, rounds=2, steps=(2, 2))
    assert (side.rnn_forward, side.rnn_backward, side.generic_cells) == (1.0, 2.0, 3.0)


def test_device_rounds_past_the_first_few_stop_when_the_case_budget_is_spent() -> None:
    """D14 (issue 23): --rnnperf-max-case-s bounded the wall rounds only; 1000 traced rounds ran whatever it said."""
    clock = FakeClock()
    cupti = FakeCupti(clock)

    def step() -> None:
        cupti.launch("k", 0.010)
        clock.advance(0.010)

    timer = DeviceTimer(cupti=cupti, host_clock=lambda: int(clock() * 1e9))
    a, b = timer.pair(step, step, lambda: None, rounds=(1000, 500), steps=(1, 1), max_time_s=0.055)
    assert len(a.busy.samples) == 5  # the warm step and 5 rounds pass 0.055 s: no sixth
    assert len(b.busy.samples) == 3  # the budget is gone: the generic side runs its minimum
    whole, _ = timer.pair(step, step, lambda: None, rounds=8, steps=(1, 1))
    assert len(whole.busy.samples) == 8


def test_steady_traced_rounds_stop_after_the_steady_rounds_and_noisy_ones_run_to_the_cap() -> None:
    """A side whose rounds' host times agree stops at 4 traced rounds; one that alternates 10/13 ms runs all 8."""
    clock = FakeClock()
    cupti = FakeCupti(clock)
    times = iter([0.010, 0.013] * 100)

    def steady() -> None:
        cupti.launch("k", 0.010)
        clock.advance(0.010)

    def noisy() -> None:
        t = next(times)
        cupti.launch("k", t)
        clock.advance(t)

    timer = DeviceTimer(cupti=cupti, host_clock=lambda: int(clock() * 1e9))
    a, b = timer.pair(steady, noisy, lambda: None, rounds=(8, 8), steps=(1, 1), max_noise=0.005)
    assert (len(a.busy.samples), len(b.busy.samples)) == (4, 8)
    every, _ = timer.pair(steady, steady, lambda: None, rounds=8, steps=(1, 1), max_noise=0.0)
    assert len(every.busy.samples) == 8
