"""The line that names a failed rnnperf test the moment it fails."""

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
