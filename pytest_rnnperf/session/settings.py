"""The settings table: every option's name, default, type, check and where it may be set.

Pure data and plain validation, no pytest: ``plugin`` turns each ``Setting`` into a command-line flag and
an ini key (and a ``@pytest.mark.rnnperf(...)`` keyword where ``marker`` is set), and ``__main__`` reuses
the same checks for the offline commands, so a value is judged the same way wherever it is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from pytest_rnnperf.model.cases import PRECISIONS, SCALES
from pytest_rnnperf.store.baselines import tag_problem
from pytest_rnnperf.judge.verdicts import Policy


class SettingError(ValueError):
    """A value that cannot be used; the message says what is wrong with it (the caller names where it came from)."""


def to_int(value: Any) -> int:
    """A whole number, from an int or its text; 2.5, True or "many" are refused rather than rounded."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise SettingError(f"{value!r} is not a whole number")
    try:
        return int(str(value).strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise SettingError(f"{value!r} is not a whole number") from None


def to_float(value: Any) -> float:
    """A finite number, from a number or its text; inf and nan are refused (no threshold means infinity)."""
    if isinstance(value, bool):
        raise SettingError(f"{value!r} is not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SettingError(f"{value!r} is not a number") from None
    if not math.isfinite(number):
        raise SettingError(f"{value!r} is not a finite number")
    return number


def to_bool(value: Any) -> bool:
    """An ini boolean as pytest users write them (1/true/yes/on, 0/false/no/off or empty)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    raise SettingError(f"{value!r} is not true or false")


def to_str(value: Any) -> str:
    """Text as given."""
    return str(value)


def at_least(low: float, strict: bool = False) -> Callable[[Any], str | None]:
    """A check that a number is >= low (> low when strict)."""
    def check(value: Any) -> str | None:
        ok = value > low if strict else value >= low
        return None if ok else f"{value!r} must be {'>' if strict else '>='} {low:g}"
    return check


@dataclass(frozen=True)
class Setting:
    """One option: ``--rnnperf-<name>`` on the command line, ``rnnperf_<name>`` in the ini file."""

    name: str
    default: Any
    convert: Callable[[Any], Any]
    help: str
    marker: bool = False  # may also be set per test with @pytest.mark.rnnperf(<name>=...)
    choices: tuple[str, ...] | None = None
    switch: bool = False  # a flag without a value on the command line; true/false in the ini file
    check: Callable[[Any], str | None] | None = None  # what is wrong with a converted value, or None
    path: bool = False  # the value names a file or folder

    @property
    def flag(self) -> str:
        """The command-line flag."""
        return "--rnnperf-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        """The ini key (also the argparse dest)."""
        return "rnnperf_" + self.name

    def parse(self, raw: Any) -> Any:
        """The value converted and checked; SettingError says what is wrong."""
        value = self.convert(raw)
        if self.choices and value not in self.choices:
            raise SettingError(f"{value!r} is not one of {', '.join(self.choices)}")
        problem = self.check(value) if self.check else None
        if problem:
            raise SettingError(problem)
        return value


_POLICY = Policy()

SETTINGS: tuple[Setting, ...] = (
    Setting("scale", "auto", to_str, "case matrix size: smoke (CPU CI), nightly, full; auto = nightly with a "
            "GPU, smoke without", choices=("auto",) + SCALES),
    Setting("rounds", 8, to_int, "timed interleaved wall-clock rounds per case and side", marker=True, check=at_least(1)),
    Setting("min_block_ms", 10.0, to_float, "minimum length of one timed block of steps, in ms (amortizes "
            "the device sync)", marker=True, check=at_least(0)),
    Setting("energy_s", 1.0, to_float, "seconds of steps per side in a dedicated NVML energy window (0: off)",
            marker=True, check=at_least(0)),
    Setting("max_case_s", 60.0, to_float, "time budget per case for the timed rounds, in s", marker=True,
            check=at_least(0, strict=True)),
    Setting("device_rounds", 8, to_int, "traced rounds of the cuDNN side for device time (CUPTI, needs "
            "cupti-python; the generic side gets half, at least 3); 0 turns device time off", marker=True, check=at_least(0)),
    Setting("precision", "fp32", to_str, "precision of a model checked with rnnperf.model() (the ready suite "
            "sets its own per case)", marker=True, choices=PRECISIONS),
    Setting("baselines", "baselines", to_str, "folder of stored baselines, one subfolder per GPU model (relative "
            "to the rootdir)", path=True),
    Setting("update_baseline", False, to_bool, "record this run as the newest baseline of this GPU model (adds "
            "a file; never overwrites one)", switch=True),
    Setting("baseline_tag", "baseline", to_str, "name part of a recorded baseline file (NNNN_<tag>.json)",
            check=tag_problem),
    Setting("record_processes", 3, to_int, "processes a recorded baseline measures each cuDNN case in (this one and "
            "fresh worker processes), so its history has a between-process spread from the first night (1 to 10)",
            check=lambda v: None if 1 <= v <= 10 else f"{v!r} must be between 1 and 10"),
    Setting("keep_run", False, to_bool, "add this run to its GPU model's history (NNNN_run.json beside the "
            "baselines) when it passed without a regression; nightly CI keeps its runs so the history learns "
            "each case's noise", switch=True),
    Setting("min_processes", _POLICY.min_processes, to_int, "stored processes a case's history needs before it "
            "is judged across processes (fewer: against its newest stored record alone)", check=at_least(2)),
    Setting("min_effect", _POLICY.min_effect, to_float, "smallest change of the cuDNN wall time that counts as a "
            "regression or improvement where either run has no device time (0.05 = 5%)",
            check=at_least(0, strict=True)),
    Setting("host_bound_effect", _POLICY.host_bound_effect, to_float, "wall-time threshold for cases that kept "
            "the GPU busy less than half the time, where either run has no device time", check=at_least(0, strict=True)),
    Setting("device_effect", _POLICY.device_min_effect, to_float, "smallest change of the cuDNN device time that "
            "counts as a regression or improvement (0.03 = 3%)", check=at_least(0, strict=True)),
    Setting("host_effect", _POLICY.host_effect, to_float, "smallest change of the host overhead (wall minus device "
            "time) that counts as a regression", check=at_least(0, strict=True)),
    Setting("fail_host", False, to_bool, "fail a case whose host overhead regressed (off: reported by name; host "
            "time drifts with the runner)", switch=True),
    Setting("no_fail_regression", False, to_bool, "report regressions against the baseline without failing "
            "the tests", switch=True),
    Setting("report_dir", "rnnperf-report", to_str, "folder for rnnperf.json, summary.md and speedups.png "
            "('none' to write nothing)", path=True),
    Setting("markdown", "", to_str, "also append the Markdown summary to this file ($GITHUB_STEP_SUMMARY is "
            "used when set)", path=True),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
MARKER_SETTINGS: tuple[str, ...] = tuple(s.name for s in SETTINGS if s.marker)


@dataclass(frozen=True)
class Settings:
    """Resolved values of every setting (marker > command line > ini > default) for one test or the session."""

    scale: str
    rounds: int
    min_block_ms: float
    energy_s: float
    max_case_s: float
    device_rounds: int
    precision: str
    baselines: str
    update_baseline: bool
    baseline_tag: str
    record_processes: int
    keep_run: bool
    min_processes: int
    min_effect: float
    host_bound_effect: float
    device_effect: float
    host_effect: float
    fail_host: bool
    no_fail_regression: bool
    report_dir: str
    markdown: str

    @classmethod
    def defaults(cls, **overrides: Any) -> Settings:
        """Every default, with ``overrides`` applied (for code that runs outside pytest)."""
        values = {s.name: s.default for s in SETTINGS}
        values.update(overrides)
        return cls(**values)

    def policy(self) -> Policy:
        """The verdict policy these settings ask for."""
        return Policy(min_effect=self.min_effect, host_bound_effect=self.host_bound_effect,
                      device_min_effect=self.device_effect, host_effect=self.host_effect, fail_host=self.fail_host,
                      min_processes=self.min_processes)
