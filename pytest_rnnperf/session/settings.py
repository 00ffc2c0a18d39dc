"""The settings table: every option's name, default, type, check and where it may be set.

Pure data and plain validation, no pytest: ``plugin`` turns each ``Setting`` into a command-line flag and
an ini key (and a ``@pytest.mark.rnnperf(...)`` keyword where ``marker`` is set), and ``cli`` reuses
the same checks for the offline commands, so a value is judged the same way wherever it is given. The
thresholds' rows are made from the rules' declarations (``judge.rules.thresholds``), never written here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, metadata, requires
from importlib.util import find_spec
from typing import Any, Callable, Mapping

from pytest_rnnperf.judge.params import FRACTION, Threshold
from pytest_rnnperf.judge.rules import thresholds as declared
from pytest_rnnperf.judge.verdicts import Policy
from pytest_rnnperf.model.cases import PRECISIONS, SCALES
from pytest_rnnperf.store.baselines import baseline_tag_problem


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


def to_fraction(value: Any) -> float:
    """A threshold as a fraction (0.03 = 3%), from a number or its text; "3%" reads as 0.03.

    A bare number of 1 or more is refused: it is almost always a percent typed as a number (3 meaning 3%),
    which would silently raise the threshold to 300%. Such a threshold can still be written as "300%".
    """
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            return to_float(value.strip()[:-1]) / 100
        except SettingError:
            raise SettingError(f"{value!r} is not a number or a percent") from None
    number = to_float(value)
    if number >= 1:
        raise SettingError(f"{number!r} would be {number:.0%}: thresholds are fractions (0.03 = 3%); for {number:g}% "
                           f"write {number / 100:g} or {number:g}%")
    return number


def percent(fraction: float) -> str:
    """A fraction as a percent, as precise as it was given: 0.03 -> "3%", 0.025 -> "2.5%"."""
    return f"{fraction * 100:.4g}%"


def thresholds(policy: Policy) -> str:
    """The thresholds a policy judges with, in one line (printed wherever verdicts are)."""
    host = "failed" if policy.fail_host else "reported, not failed"
    return (f"cuDNN device time {percent(policy.device_effect)}, wall time {percent(policy.min_effect)} "
            f"(host-bound {percent(policy.host_bound_effect)}), host overhead {percent(policy.host_effect)} ({host})")


def missing_library(module: str, distribution: str | None = None) -> str | None:
    """``needs <module>: pip install '<requirement>'`` where ``module`` cannot be imported, else None.

    The requirement is the one this package declares for ``distribution`` (the module's name unless given),
    version included, or the extra that brings it, so the line says exactly what to install.
    """

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    try:
        if find_spec(module) is not None:
            return None
    except (ImportError, ValueError):  # a parent package that cannot be imported, a module without a spec
        pass
    wanted = canonicalize_name(distribution or module)
    install = distribution or module
    try:
        extras = metadata("pytest-rnnperf").get_all("Provides-Extra") or []
        declared = [Requirement(r) for r in requires("pytest-rnnperf") or []]
    except PackageNotFoundError:  # run from a source tree without installing it
        extras, declared = [], []
    for req in declared:
        if canonicalize_name(req.name) != wanted:
            continue
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            install = f"{req.name}{req.specifier}"
            break
        extra = next((e for e in extras if req.marker.evaluate({"extra": e})), None)
        if extra is not None:
            install = f"pytest-rnnperf[{extra}]"
            break
    return f"needs {module}: pip install '{install}'"


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


def at_least(low: float, strict: bool = False, high: float | None = None) -> Callable[[Any], str | None]:
    """A check that a number is >= low (> low when strict), and <= high where given."""
    def check(value: Any) -> str | None:
        ok = value > low if strict else value >= low
        if not ok:
            return f"{value!r} must be {'>' if strict else '>='} {low:g}"
        if high is not None and value > high:
            return f"{value!r} must be <= {high:g}"
        return None
    return check


def percent_between(low: float, high: float) -> Callable[[Any], str | None]:
    """A check that a fraction lies in [low, high], its message in percent as the option is written."""
    def check(value: Any) -> str | None:
        if low <= value <= high:
            return None
        return f"{percent(value)} must be between {percent(low)} and {percent(high)}"
    return check


def not_empty(value: Any) -> str | None:
    """A check that a path setting is not empty (an empty one would silently write nothing)."""
    return None if str(value).strip() else "empty: give a folder, or 'none' to turn the reports off"


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
    def typed_default(self) -> str:
        """The default as a user types it (thresholds as percents: a bare 1.0 is refused as a fraction)."""
        return percent(self.default) if self.convert is to_fraction else str(self.default)

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


BEFORE: tuple[Setting, ...] = (
    Setting("scale", "auto", to_str, "case matrix size: smoke (CPU CI), nightly, full; auto = nightly with a "
            "GPU, smoke without", choices=("auto",) + SCALES),
    # The upper bounds keep a typo (an extra zero, a unit mixed up) from running for days: far beyond any
    # useful value, and a stored record of that many samples stays within what the reader accepts.
    Setting("rounds", 8, to_int, "timed interleaved wall-clock rounds per case and side (at most 1000)", marker=True,
            check=at_least(1, high=1000)),
    Setting("min_block_ms", 10.0, to_float, "minimum length of one timed block of steps, in ms (amortizes "
            "the device sync; at most 10000)", marker=True, check=at_least(0, high=10_000)),
    Setting("energy_s", 1.0, to_float, "seconds of steps per side in a dedicated NVML energy window (0: off; at "
            "most 60)", marker=True, check=at_least(0, high=60)),
    Setting("max_case_s", 60.0, to_float, "time budget per case for the timed rounds, the energy window and the "
            "device-time rounds, in s (at most 3600; the minimum rounds always run)", marker=True,
            check=at_least(0, strict=True, high=3600)),
    Setting("max_noise", 0.005, to_fraction, "stop timing a case's rounds once both sides' medians are this steady "
            "(relative standard error; the first 4 rounds always run, --rnnperf-rounds caps them; 0: every round; "
            "at most 100%)", marker=True, check=percent_between(0, 1)),
    Setting("budget", 0.0, to_float, "minutes the whole run may take: once the cases still to come would not fit, "
            "the steadiest time their minimum rounds only and the rest share what is left; full checks, claims and "
            "parity tests that a change asked for wait for later nights, one a night at least; the summary says "
            "what was cut (0: no budget; at most 1440)", check=at_least(0, high=1440)),
    Setting("recheck_days", 7.0, to_float, "days a case's full check (parity against float64, the energy window) "
            "holds while the environment is unchanged; between, the sides are compared with each other only, and "
            "the claims, parity tests, known issues (xfail) and generic-only model checks a stored run answered are "
            "skipped (0: check every case fully)", marker=True, check=at_least(0, high=3650)),
    Setting("device_rounds", 8, to_int, "traced rounds of the cuDNN side for device time (CUPTI, needs "
            "cupti-python; the generic side gets half, at least 3); 0 turns device time off (at most 1000)",
            marker=True, check=at_least(0, high=1000)),
    Setting("precision", "fp32", to_str, "precision of a model checked with rnnperf.model() (the ready suite "
            "sets its own per case)", marker=True, choices=PRECISIONS),
    Setting("baselines", "baselines", to_str, "folder of stored baselines, one subfolder per GPU model (relative "
            "to the rootdir)", path=True),
    Setting("update_baseline", False, to_bool, "record this run as the newest baseline of this GPU model (adds "
            "a file; never overwrites one)", switch=True),
    Setting("baseline_tag", "baseline", to_str, "name part of a recorded baseline file (NNNN_<tag>.json)",
            check=baseline_tag_problem),
    Setting("record_processes", 3, to_int, "processes a recorded baseline measures each cuDNN case in (this one and "
            "fresh subprocesses), so its history has a between-process spread from the first night (1 to 10)",
            check=lambda v: None if 1 <= v <= 10 else f"{v!r} must be between 1 and 10"),
    Setting("record_gpus", "this", to_str, "where a recorded baseline's extra processes run: this (the GPU this "
            "process times on) or all (by turns on every GPU the run may use, this one first: the history holds "
            "several cards from its first night, for nightlies that land on any card of a pool; a pytest-xdist "
            "worker keeps to its own GPU)", choices=("this", "all")),
    Setting("keep_run", False, to_bool, "add this run to its GPU model's history (NNNN_run.json beside the "
            "baselines) when no test failed, its cases that regressed (reported, not failed) as reports that teach "
            "only a kernel mix; nightly CI keeps its runs so the history learns each case's noise and modes", switch=True),
)
# The thresholds users may set come here, between what is stored and what is reported.
AFTER: tuple[Setting, ...] = (
    Setting("no_fail_regression", False, to_bool, "report regressions against the baseline without failing "
            "the tests", switch=True),
    Setting("report_dir", "rnnperf-report", to_str, "folder for rnnperf.json, summary.md, index.html and speedups.png "
            "('none' to write nothing)", path=True, check=not_empty),
    Setting("markdown", "", to_str, "also append the Markdown summary to this file ($GITHUB_STEP_SUMMARY is "
            "used when set)", path=True),
    Setting("benchmark_tables", False, to_bool, "also print pytest-benchmark's tables of the rnnperf timings in the "
            "terminal (off: they go to benchmark.txt in the report folder; the rnnperf summary comes last either "
            "way)", switch=True),
    # Kept between runs so a nightly skips most of its compiling; never inside the baselines folder.
    Setting("compile_cache", "", to_str, "folder of the compile cache kept between runs (XLA's for JAX and Keras "
            "on JAX in DIR/xla, Inductor's in DIR/inductor); empty: $XDG_CACHE_HOME/pytest-rnnperf or "
            "~/.cache/pytest-rnnperf; 'none' turns it off", path=True),
    # Compiling beside the other cases takes GPU memory and host time of its own: a shared or small GPU may want it off.
    Setting("compile_ahead", "auto", to_str, "on a night whose compile cache starts empty, build the cases that "
            "compile once ahead, in processes of their own, behind the other cases: auto (in a run of one process on "
            "a GPU) or off (each compiles at its turn)", choices=("auto", "off")),
)


def threshold_setting(t: Threshold) -> Setting:
    """The setting of a threshold a rule declares: its name, default, help, and a check of its bounds."""
    convert = {bool: to_bool, int: to_int}.get(t.type, to_fraction if t.unit == FRACTION else to_float)
    if t.low is None:
        return Setting(t.name, t.default, convert, t.help, switch=t.type is bool)
    low = at_least(t.low, strict=t.strict, high=t.high)

    def check(value: Any) -> str | None:
        """The bounds the rule declares (a strict upper one included)."""
        return low(value) or (None if t.within(value) else f"{value!r} must be < {t.high:g}")
    return Setting(t.name, t.default, convert, t.help, switch=t.type is bool, check=check)


def settings_table() -> tuple[Setting, ...]:
    """Every setting, the rules' thresholds among them (read at each call: a new rule brings its own)."""
    return BEFORE + tuple(threshold_setting(t) for t in declared() if t.option) + AFTER


def setting(name: str) -> Setting:
    """The setting called ``name``; KeyError if there is none."""
    return {s.name: s for s in settings_table()}[name]


MARKER_SETTINGS: tuple[str, ...] = tuple(s.name for s in BEFORE + AFTER if s.marker)


@dataclass(frozen=True)
class Settings:
    """Resolved values of every setting (marker > command line > ini > default) for one test or the session.

    The thresholds' values are kept in ``judging`` and read as ``settings.<name>`` like the others.
    """

    scale: str
    rounds: int
    min_block_ms: float
    energy_s: float
    max_case_s: float
    max_noise: float
    budget: float
    recheck_days: float
    device_rounds: int
    precision: str
    baselines: str
    update_baseline: bool
    baseline_tag: str
    record_processes: int
    record_gpus: str
    keep_run: bool
    no_fail_regression: bool
    report_dir: str
    markdown: str
    benchmark_tables: bool
    compile_cache: str
    compile_ahead: str
    judging: Mapping[str, Any]

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Settings:
        """The settings of ``values`` (one per setting by name), the thresholds' set apart."""
        names = {t.name for t in declared() if t.option}
        return cls(**{k: v for k, v in values.items() if k not in names},
                   judging={k: v for k, v in values.items() if k in names})

    @classmethod
    def defaults(cls, **overrides: Any) -> Settings:
        """Every default, with ``overrides`` applied (for code that runs outside pytest)."""
        return cls.of({s.name: s.default for s in settings_table()} | overrides)

    def __getattr__(self, name: str) -> Any:
        """The value of the threshold ``name``."""
        judging = self.__dict__.get("judging", {})
        if name not in judging:
            raise AttributeError(f"{type(self).__name__} has no setting {name!r}")
        return judging[name]

    def policy(self) -> Policy:
        """The verdict policy these settings ask for."""
        return Policy(**self.judging)
