"""The line that names a failed rnnperf test the moment it fails, and the span of the run's tests."""

from __future__ import annotations

import pytest

from pytest_rnnperf.plugin.live import FAILED_PROPERTY, failure_line, live_line


def _excinfo(exc: BaseException) -> pytest.ExceptionInfo[BaseException]:
    """The ExceptionInfo of ``exc`` raised and caught."""
    try:
        raise exc
    except BaseException:
        return pytest.ExceptionInfo.from_current()


def _report(reason: str | None, outcome: str = "failed") -> pytest.TestReport:
    """A call report of one suite test, carrying ``reason`` as a worker would."""
    props = [] if reason is None else [(FAILED_PROPERTY, reason)]
    return pytest.TestReport("suites/test_cudnn.py::test_cudnn_vs_generic[torch-gru-infer-fp32-T50]", ("x", 1, "t"),
                             {}, outcome, None, "call", user_properties=props)


def test_a_failure_s_line_is_its_message_and_an_error_s_names_its_type() -> None:
    """pytest.fail's table opens with the verdict; a crash (out of memory, say) keeps its type."""
    assert failure_line(_excinfo(pytest.fail.Exception("case: cuDNN device time regressed\n  table"))) \
        == "case: cuDNN device time regressed"
    assert failure_line(_excinfo(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore"))) \
        == "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert failure_line(_excinfo(MemoryError())) == "MemoryError"


def test_the_live_line_drops_the_case_id_the_test_name_holds_and_fits_the_width() -> None:
    """The case's own id is in the test's name already; a long reason is cut with an ellipsis."""
    line = live_line(_report("torch-gru-infer-fp32-T50: cuDNN device time regressed"), 120)
    assert line == "rnnperf: test_cudnn_vs_generic[torch-gru-infer-fp32-T50] failed: cuDNN device time regressed"
    crash = live_line(_report("RuntimeError: CUDA out of memory " + "x" * 200), 110)
    assert crash is not None and "failed: RuntimeError: CUDA out of memory" in crash
    assert len(crash) == 110 and crash.endswith("…")
    assert live_line(_report(None), 120) is None and live_line(_report("r", "passed"), 120) is None


def test_the_span_holds_the_first_test_s_start_and_the_latest_test_s_end() -> None:
    """A second test's start does not move the first; each end does (pytest-xdist interleaves workers' tests)."""
    from types import SimpleNamespace

    from pytest_rnnperf.plugin.live import TestSpan

    ticks = iter([10.0, 12.0, 15.0])
    session = SimpleNamespace(tests_began=None, tests_ended=None)
    span = TestSpan(session, clock=lambda: next(ticks))  # type: ignore[arg-type]
    where = ("test_x.py", 1, "test_x")
    span.pytest_runtest_logstart("a", where)
    span.pytest_runtest_logstart("b", where)
    span.pytest_runtest_logfinish("a", where)
    span.pytest_runtest_logfinish("b", where)
    assert (session.tests_began, session.tests_ended) == (10.0, 15.0)


def test_the_span_notes_when_each_worker_handed_its_results_over() -> None:
    """pytest-xdist's controller hears each worker go down once it has sent its results: the time is noted by worker."""
    from types import SimpleNamespace

    from pytest_rnnperf.plugin.live import TestSpan

    ticks = iter([20.0, 23.5])
    session = SimpleNamespace(tests_began=None, tests_ended=None, handed_over={})
    span = TestSpan(session, clock=lambda: next(ticks))  # type: ignore[arg-type]
    for worker in ("gw1", "gw0"):
        span.pytest_testnodedown(SimpleNamespace(gateway=SimpleNamespace(id=worker)), None)
    assert session.handed_over == {"gw1": 20.0, "gw0": 23.5}


def test_the_terminal_s_process_counts_each_failed_report_and_hears_an_interruption() -> None:
    """A pytest-xdist controller hears each worker's failed report as it comes (their results may never come), and a
    Ctrl-C whose exit status pytest loses (its own handler raised again) is still known at the run's end."""
    from fake_nvml import FakeNVML

    from pytest_rnnperf.measure.gpu import read_gpu_info
    from pytest_rnnperf.plugin.live import HeardFailures
    from pytest_rnnperf.session.run import Run
    from pytest_rnnperf.session.session import RnnperfSession

    session = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={}))
    heard = HeardFailures(session)
    for outcome in ("failed", "passed", "skipped", "failed"):
        heard.pytest_runtest_logreport(_report(None, outcome))
    assert session.measured.failed == 2 and session.incomplete() is None
    heard.pytest_keyboard_interrupt(_excinfo(KeyboardInterrupt()))
    assert session.incomplete() == "the run was interrupted (KeyboardInterrupt)"
