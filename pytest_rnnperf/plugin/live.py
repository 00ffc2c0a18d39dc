"""What the process that owns the terminal hears as tests run: a failed case named the moment it fails, on a line
of its own, and when the first test started and the last ended.

pytest prints a failure's message only at the end of the run; a night cut short by its job's time limit would
then show a bare ``F`` and no reason. The worker (or the one process) puts the first line of the failure on the
report, where pytest-xdist carries it to the controller, and the process that owns the terminal writes it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rnnperf.report.text import terminal_width

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.session.session import RnnperfSession

# The test report's user property holding the first line of an rnnperf test's failure.
FAILED_PROPERTY = "rnnperf_failed"
# The fixtures that make a test one of ours: its failure is a case's (or a claim's) verdict.
OUR_FIXTURES = frozenset({"rnnperf", "rnnperf_claims"})


def failure_line(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """The failure's first line: the message of ``pytest.fail``, else the exception's type and message."""
    lines = str(excinfo.value).strip().splitlines()
    first = lines[0] if lines else ""
    if excinfo.errisinstance(pytest.fail.Exception):
        return first or "failed"
    return f"{excinfo.typename}: {first}" if first else excinfo.typename


def note_failure(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """Put the first line of a failed rnnperf test's call on its report (for ``LiveFailures``)."""
    if report.when == "call" and report.failed and call.excinfo is not None \
            and OUR_FIXTURES & set(getattr(item, "fixturenames", ())):
        report.user_properties.append((FAILED_PROPERTY, failure_line(call.excinfo)))


def live_line(report: pytest.TestReport, width: int) -> str | None:
    """e.g. "rnnperf: test_x[torch-lstm-...] failed: cuDNN device time regressed ...", fitted to ``width``."""
    reason = next((str(v) for k, v in report.user_properties if k == FAILED_PROPERTY), None)
    if reason is None or not report.failed:
        return None
    test = report.nodeid.split("::")[-1]
    head, _, rest = reason.partition(": ")
    # The case's own message opens with its id, which the test's name already holds.
    line = f"rnnperf: {test} failed: {rest if rest and head in test else reason}"
    return line if len(line) <= width else line[:width - 1] + "…"


class LiveFailures:
    """The terminal's side: writes each failed rnnperf test's line as its report arrives."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Write the failure's line at once (a worker's report reaches the controller through this hook too)."""
        terminal: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        line = live_line(report, terminal_width(self.config.get_terminal_writer().fullwidth)) if terminal else None
        if line is not None:
            terminal.ensure_newline()
            writer = self.config.get_terminal_writer()
            if writer.width_of_current_line:  # pytest-xdist writes its progress past the reporter's own bookkeeping
                writer.line()
            terminal.write_line(line)


class HeardFailures:
    """What the process that owns the terminal hears that keeps a run from being clean: each failed test report (a
    pytest-xdist controller hears its workers' as they come, though their results may never come) and an
    interruption, which pytest loses from the exit status where its own Ctrl-C handler raises again."""

    def __init__(self, session: RnnperfSession) -> None:
        """Count on ``session.measured`` and note the interruption on ``session``."""
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """One more failed test phase (setup, call or teardown), as pytest counts it."""
        if report.failed:
            self.session.measured.failed += 1

    @pytest.hookimpl(tryfirst=True)  # before another plugin's handler can raise a second KeyboardInterrupt
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """The run stopped early: a Ctrl-C, pytest-xdist's stop or ``pytest.exit``, e.g. "(KeyboardInterrupt)"."""
        message = str(excinfo.value)
        self.session.interrupted = f"the run was interrupted ({excinfo.typename}{': ' + message if message else ''})"


class TestSpan:
    """When the first test started and the latest ended (pytest-xdist's controller hears of every worker's), so that
    the summary can say what the run spent outside its tests."""

    __test__ = False  # a class named Test*: not one for pytest to collect

    def __init__(self, session: RnnperfSession, clock: Any = time.monotonic) -> None:
        """Note the edges on ``session``, read off ``clock``."""
        self.session = session
        self.clock = clock

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        """The first test's start."""
        if self.session.tests_began is None:
            self.session.tests_began = self.clock()

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        """The latest test's end."""
        self.session.tests_ended = self.clock()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist controller: when a worker's results came (its end is on the run's path to the report)."""
        self.session.handed_over[str(node.gateway.id)] = self.clock()


__all__ = ["FAILED_PROPERTY", "HeardFailures", "LiveFailures", "TestSpan", "failure_line", "live_line", "note_failure"]
