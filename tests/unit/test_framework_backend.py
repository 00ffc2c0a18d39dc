"""The availability preamble every backend shares: which reason wins, and what a backend declares itself."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_rnnperf.backends.base import FrameworkBackend


class Declared(FrameworkBackend):
    """A backend that declares every check, each answering what the test sets."""

    name = "declared"
    framework = "json"  # a module every Python has: importing it is never the problem unless load_framework says so
    install = "pip install declared"

    def __init__(self, setup: str | None = None, usable: str | None = None, device: str | None = None,
                 broken: bool = False) -> None:
        """The answers of the backend's own checks, and whether its import fails."""
        self.setup, self.usable, self.device, self.broken = setup, usable, device, broken
        self.requires = (("json", "json is missing"), ("no_such_module_rnnperf", "no_such_module_rnnperf is missing"))

    def load_framework(self) -> Any:
        """Import the framework, or fail as a broken install does."""
        if self.broken:
            raise ImportError("libfoo.so: cannot open shared object file")
        return super().load_framework()

    def setup_problem(self) -> str | None:
        """The set setup answer."""
        return self.setup

    def usable_problem(self) -> str | None:
        """The set usability answer."""
        return self.usable

    def device_problem(self) -> str | None:
        """The set device answer."""
        return self.device


def test_a_missing_module_is_named_before_any_other_check() -> None:
    """The first missing module of ``requires`` is the reason, whatever the backend's own checks would say."""
    backend = Declared(setup="set up wrong", usable="unusable", device="no GPU", broken=True)
    assert backend.unavailable_reason() == "no_such_module_rnnperf is missing"
    assert backend.gpu_unavailable_reason() == "no_such_module_rnnperf is missing"


@pytest.mark.parametrize(("answers", "reason"), [
    (dict(setup="set up wrong", broken=True, usable="unusable"), "set up wrong"),
    (dict(broken=True, usable="unusable"), "json is installed but cannot be imported (ImportError: libfoo.so: cannot "
                                           "open shared object file); reinstall it (pip install declared)"),
    (dict(usable="unusable", device="no GPU"), "unusable"),
    (dict(device="no GPU"), None),
])
def test_the_backend_checks_run_in_order_and_the_first_reason_wins(answers: dict[str, Any], reason: str | None) -> None:
    """Setup before the import, the import before what only the imported framework can tell."""
    backend = Declared(**answers)
    backend.requires = backend.requires[:1]
    assert backend.unavailable_reason() == reason
    assert backend.gpu_unavailable_reason() == (reason or "no GPU")


def test_a_backend_that_declares_nothing_is_available_with_a_gpu() -> None:
    """No module, no framework to import and no checks: nothing stops it."""
    assert FrameworkBackend().unavailable_reason() is None
    assert FrameworkBackend().gpu_unavailable_reason() is None
