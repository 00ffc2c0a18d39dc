"""pytest side of pytest-rnnperf: options, markers, fixtures, header, benchmark hooks and summary.

Thin by design: everything that measures, compares or formats lives in the core modules, which know
nothing of pytest; this module translates settings in and outcomes (skip, fail, report) out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Generator

import pytest

from .cases import CUDNN_CELLS, SCALES, Case, cross_id

SESSION_KEY = pytest.StashKey["Any"]()
FAILED_KEY = pytest.StashKey[int]()


@dataclass(frozen=True)
class Setting:
    """One option: ``--rnnperf-<name>`` on the command line, ``rnnperf_<name>`` in the ini file."""

    name: str
    default: Any
    convert: Callable[[str], Any]
    help: str
    marker: bool = False  # may also be set per test with @pytest.mark.rnnperf(<name>=...)
    choices: tuple[str, ...] | None = None
    switch: bool = False  # a flag without a value on the command line; true/false in the ini file
    check: Callable[[Any], str | None] | None = None  # what is wrong with a converted value, or None

    @property
    def flag(self) -> str:
        """The command-line flag."""
        return "--rnnperf-" + self.name.replace("_", "-")

    @property
    def ini(self) -> str:
        """The ini key (also the argparse dest)."""
        return "rnnperf_" + self.name


def _bool(value: str) -> bool:
    """Parse an ini boolean the way pytest users write them."""
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _at_least(low: float, strict: bool = False) -> Callable[[Any], str | None]:
    """A check that a number is >= low (> low when strict)."""
    def check(value: Any) -> str | None:
        ok = value > low if strict else value >= low
        return None if ok else f"{value!r} must be {'>' if strict else '>='} {low:g}"
    return check


def _tag_problem(tag: Any) -> str | None:
    """Why ``tag`` cannot name a baseline file, or None."""
    from .baselines import tag_problem

    return tag_problem(str(tag))


SETTINGS: tuple[Setting, ...] = (
    Setting("scale", "auto", str, "case matrix size: smoke (CPU CI), nightly, full; auto = nightly with a "
            "GPU, smoke without", choices=("auto",) + SCALES),
    Setting("rounds", 20, int, "timed interleaved rounds per case and side", marker=True, check=_at_least(1)),
    Setting("min_block_ms", 10.0, float, "minimum length of one timed block of steps, in ms (amortizes "
            "the device sync)", marker=True, check=_at_least(0)),
    Setting("energy_s", 1.0, float, "seconds of steps per side in a dedicated NVML energy window (0: off)",
            marker=True, check=_at_least(0)),
    Setting("max_case_s", 60.0, float, "time budget per case for the timed rounds, in s", marker=True,
            check=_at_least(0, strict=True)),
    Setting("baselines", "baselines", str, "folder of stored baselines, one subfolder per GPU model (relative "
            "to the rootdir)"),
    Setting("update_baseline", False, _bool, "record this run as the newest baseline of this GPU model (adds "
            "a file; never overwrites one)", switch=True),
    Setting("baseline_tag", "baseline", str, "name part of a recorded baseline file (NNNN_<tag>.json)",
            check=_tag_problem),
    Setting("min_effect", 0.05, float, "smallest change that counts as a regression or improvement "
            "(0.05 = 5%), on top of the statistical test", check=_at_least(0, strict=True)),
    Setting("host_bound_effect", 0.35, float, "threshold for cases that kept the GPU busy less than half the "
            "time (their time is mostly host time, which drifts between runs)", check=_at_least(0, strict=True)),
    Setting("no_fail_regression", False, _bool, "report regressions against the baseline without failing "
            "the tests", switch=True),
    Setting("report_dir", "rnnperf-report", str, "folder for rnnperf.json, summary.md and speedups.png "
            "('none' to write nothing)"),
    Setting("markdown", "", str, "also write the Markdown summary to this path ($GITHUB_STEP_SUMMARY is "
            "used when set)"),
)
_BY_NAME = {s.name: s for s in SETTINGS}


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the rnnperf option group; every option has an ini twin of the same name."""
    group = parser.getgroup("rnnperf", "pytest-rnnperf: cuDNN vs generic RNN benchmarks")
    for s in SETTINGS:
        where = f"ini {s.ini}" + (f"; marker rnnperf({s.name}=...)" if s.marker else "")
        text = s.help.replace("%", "%%")  # argparse formats help strings with %
        kwargs: dict[str, Any] = {"dest": s.ini, "default": None}
        if s.switch:
            kwargs.update(action="store_const", const="true", help=f"{text} ({where})")
        else:
            kwargs["help"] = f"{text} (default {s.default}; {where})"
        if s.choices:
            kwargs["choices"] = s.choices
        group.addoption(s.flag, **kwargs)
        parser.addini(s.ini, s.help, default=str(s.default))


def setting(config: pytest.Config, name: str, item: pytest.Item | None = None) -> Any:
    """Resolve a setting: marker > command line > ini > default, converted to its type."""
    s = _BY_NAME[name]
    if item is not None and s.marker:
        marker = item.get_closest_marker("rnnperf")
        if marker is not None and name in marker.kwargs:
            return s.convert(marker.kwargs[name])
    raw = config.getoption(s.ini)
    if raw is None:
        raw = config.getini(s.ini)
    try:
        value = s.convert(raw)
    except (TypeError, ValueError):
        raise pytest.UsageError(f"{s.flag} / {s.ini}: cannot read {raw!r} as {s.convert.__name__}") from None
    if s.choices and value not in s.choices:
        raise pytest.UsageError(f"{s.flag} / {s.ini}: {value!r} is not one of {', '.join(s.choices)}")
    problem = s.check(value) if s.check else None
    if problem:
        raise pytest.UsageError(f"{s.flag} / {s.ini}: {problem}")
    return value


def pytest_configure(config: pytest.Config) -> None:
    """Register markers and read the device and software fingerprint once for the session."""
    config.addinivalue_line("markers", "rnnperf(rounds, min_block_ms, energy_s, max_case_s): per-test rnnperf "
                            "settings (override command line and ini)")
    config.addinivalue_line("markers", "gpu: the test needs a CUDA GPU; skipped with the reason otherwise")
    for s in SETTINGS:
        setting(config, s.name)  # fail fast on a malformed option, before collection, not after the suite ran
    root = baseline_root(config)
    if root.exists() and not root.is_dir():
        raise pytest.UsageError(f"--rnnperf-baselines / rnnperf_baselines: {root} is a file, not a folder")
    from .device import nvml_index, read_device_info
    from .environment import software_info
    from .session import RunSession

    run = RunSession(device=read_device_info(nvml_index()), software=software_info())
    config.stash[SESSION_KEY] = run
    _configure_baselines(config, run)


def baseline_root(config: pytest.Config) -> Any:
    """The baselines folder, relative to the rootdir unless absolute."""
    return config.rootpath / setting(config, "baselines")


def _configure_baselines(config: pytest.Config, run: Any) -> None:
    """Point pytest-benchmark's storage at this GPU model's folder and load the newest baseline.

    pytest-benchmark names its storage folders by OS and Python only, so two GPU models would share
    one; storing under baselines/<gpu model>/ keeps every model apart. An explicit --benchmark-storage
    is left alone. A stored file that cannot be read stops the run with one line naming it.
    """
    from pytest_benchmark.utils import get_machine_id

    from .baselines import BaselineError, find_latest, load_run

    if not run.device.available:
        return  # no GPU: no cuDNN timings to compare or record
    folder = baseline_root(config) / run.device.gpu_slug
    if config.getoption("benchmark_storage", None) == "file://./.benchmarks":
        config.option.benchmark_storage = "file://" + str(folder)
    latest = find_latest(baseline_root(config), run.device.gpu_slug, get_machine_id())
    if latest is not None:
        try:
            run.baseline = load_run(latest)
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Keep --benchmark-compare-fail from crashing a first run that has no baseline yet."""
    bs = getattr(session.config, "_benchmarksession", None)
    if bs is not None and bs.compare_fail and not bs.compared_mapping:
        # pytest-benchmark raises a usage error at the end in this case; with no stored run there is
        # nothing to fail against, so the option has nothing to do (the summary says how to record one).
        bs.compare_fail = []
        _session(session.config).notes.append(
            "--benchmark-compare-fail: no stored run to compare with yet; nothing to check")


def _session(config: pytest.Config) -> Any:
    """The RunSession of this pytest run."""
    return config.stash[SESSION_KEY]


def resolved_scale(config: pytest.Config) -> str:
    """The case-matrix scale: the option, or nightly with a GPU and smoke without one."""
    scale = setting(config, "scale")
    if scale == "auto":
        return "nightly" if _session(config).device.available else "smoke"
    return scale


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Device and software fingerprint, and warnings about a noisy machine (never failures)."""
    from .device import noise_warnings
    from .report import header_lines

    run = _session(config)
    lines = header_lines(run, scale=resolved_scale(config))
    lines += [f"rnnperf: warning: {w}" for w in noise_warnings(run.device, own_pid=os.getpid())]
    return lines


@pytest.fixture(scope="session")
def gpu_fingerprint(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The device and software fingerprint of this session: fields and the stable baseline key."""
    run = _session(request.config)
    return {"device": run.device.as_dict(), "environment": run.environment(), "key": run.fingerprint(),
            "gpu_slug": run.device.gpu_slug, "available": run.device.available}


@pytest.fixture
def telemetry_window() -> Callable[[], Any]:
    """Factory of NVML telemetry windows (context managers) for the session's GPU."""
    from .device import TelemetryWindow, nvml_index

    return lambda: TelemetryWindow(index=nvml_index())


class RnnperfFixture:
    """What a suite test uses: measure a case (cuDNN vs generic or generic vs reference) and check it."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        """Bind to the requesting test (its markers and node id name the stored results)."""
        self._item = request.node
        self._config = request.config

    def _run_config(self) -> Any:
        """Timing and telemetry settings for this test (marker > CLI > ini)."""
        from .device import TelemetryWindow, nvml_index
        from .runner import RunConfig
        from .timing import TimingConfig

        bs = getattr(self._config, "_benchmarksession", None)
        disabled = bool(bs is not None and bs.disabled)
        get = lambda name: setting(self._config, name, self._item)  # noqa: E731
        # --benchmark-disable: one round, no energy window; the checks still run.
        timing = TimingConfig(rounds=1 if disabled else get("rounds"), min_rounds=1 if disabled else 5,
                              warmup_s=0.0 if disabled else TimingConfig.warmup_s,
                              min_block_s=get("min_block_ms") / 1e3, max_time_s=get("max_case_s"))
        device = _session(self._config).device
        index = nvml_index()
        return RunConfig(timing=timing, energy_s=0.0 if disabled else get("energy_s"),
                         gpu_name=device.name if device.available else "",
                         window_factory=(lambda: TelemetryWindow(index=index)) if device.available else None)

    def _run(self, case: Case, impls: tuple[str, ...]) -> Any:
        """Run the case or skip with the backend's one-line reason."""
        from .backends import BackendUnavailable, OutOfDeviceMemory
        from .runner import run_case

        bs = getattr(self._config, "_benchmarksession", None)
        if bs is not None and bs.skip:
            pytest.skip("benchmarks are skipped (--benchmark-skip)")
        run = _session(self._config)
        backend = run.backend(case.framework)
        reason = backend.unavailable_reason()
        if reason is None and "cudnn" in impls:
            reason = backend.gpu_unavailable_reason()
            if reason is not None:
                reason = f"cuDNN case needs a GPU: {reason}"
            else:
                reason = parallel_reason(self._config)
        if reason is None:
            try:
                result = run_case(case, backend, self._run_config(), impls=impls)
            except (BackendUnavailable, OutOfDeviceMemory) as exc:
                reason = str(exc)
        if reason is not None:
            run.skipped.append((case.id, reason))
            pytest.skip(reason)
        if "cudnn" in impls and run.baseline is not None and not (bs is not None and bs.disabled):
            result = self._judge(case, backend, result, impls)
        run.results.append(result)
        if bs is not None and not bs.disabled:
            record_benchmarks(bs, self._item, result)
        return result

    def _judge(self, case: Case, backend: Any, result: Any, impls: tuple[str, ...]) -> Any:
        """Compare with the baseline; an ambiguous verdict is re-measured once before it stands."""
        from .baselines import compare_records
        from .runner import run_case

        run = _session(self._config)
        stored = run.baseline.records.get(case.id)
        if stored is None:
            return result
        effects = {"min_effect": setting(self._config, "min_effect"),
                   "host_bound_effect": setting(self._config, "host_bound_effect")}
        verdict = compare_records(case.id, stored, result.as_record(), **effects)
        if verdict is not None and verdict.verdict == "ambiguous":
            result = run_case(case, backend, self._run_config(), impls=impls)
            verdict = compare_records(case.id, stored, result.as_record(), remeasured=True, **effects)
        if verdict is not None:
            run.verdicts[case.id] = verdict
        return result

    def measure(self, case: Case) -> Any:
        """cuDNN vs generic on the GPU: path proofs, parity, interleaved timing. Skips without a GPU."""
        return self._run(case, ("cudnn", "generic"))

    def reference(self, case: Case) -> Any:
        """Generic side alone vs the float64 reference, on the GPU if there is one, else on the CPU."""
        return self._run(case, ("generic",))

    def cross(self, case: Case) -> Any:
        """The case's canonical weights in torch and in TF/Keras, compared: cuDNN sides where a GPU is seen."""
        from .backends import BackendUnavailable, OutOfDeviceMemory
        from .runner import RunConfig, run_cross

        run = _session(self._config)
        sides = []
        reason = None
        for framework in ("torch", "tf"):
            backend = run.backend(framework)
            reason = backend.unavailable_reason()
            if reason is not None:
                break
            on_gpu = backend.gpu_unavailable_reason() is None and case.cell in CUDNN_CELLS[framework]
            sides.append((framework, backend, "cudnn" if on_gpu else "generic"))
        if reason is None:
            try:
                result = run_cross(case, (sides[0], sides[1]), RunConfig())
            except (BackendUnavailable, OutOfDeviceMemory) as exc:
                reason = str(exc)
        if reason is not None:
            run.skipped.append((cross_id(case), reason))
            pytest.skip(reason)
        run.cross.append(result)
        return result

    def check(self, result: Any) -> None:
        """Fail with a table when a path proof, the parity or the speedup floor does not hold."""
        from .report import gate_failures, path_parity_failures, regression_failure
        from .runner import CrossResult

        if isinstance(result, CrossResult):
            problems = path_parity_failures(result.id, result.proofs, result.parity)
            if problems:
                pytest.fail("\n".join(problems), pytrace=False)
            return
        problems = gate_failures(result)
        run = _session(self._config)
        verdict = run.verdicts.get(result.case.id)
        if verdict is not None and verdict.regressed and not setting(self._config, "no_fail_regression"):
            problems.append(regression_failure(verdict, run))
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def rnnperf(request: pytest.FixtureRequest) -> RnnperfFixture:
    """Measure and check rnnperf cases; results reach pytest-benchmark and the rnnperf reports."""
    return RnnperfFixture(request)


class _BenchEntry:
    """The attributes pytest-benchmark's ``Metadata`` reads off a fixture, for one side of a case."""

    def __init__(self, item: pytest.Item, side: str, group: str, extra_info: dict[str, Any]) -> None:
        """Name the entry after the test with the side inserted first in the parameter id."""
        callspec = getattr(item, "callspec", None)
        param = callspec.id if callspec is not None else None
        self.param = f"{side}-{param}" if param else side
        # JSON-plain parameters (a Case becomes its id), so every stored file parses with plain json.
        params = {k: getattr(v, "id", v) if not isinstance(v, (str, int, float, bool, type(None))) else v
                  for k, v in (callspec.params.items() if callspec is not None else ())}
        self.params = dict(params, side=side)
        base = item.name.split("[")[0]
        self.name = f"{base}[{self.param}]"
        self.fullname = item.nodeid.split("[")[0] + f"[{self.param}]"
        self.group = group
        self.extra_info = extra_info
        self.cprofile_stats = None
        self.has_error = False


def record_benchmarks(bs: Any, item: pytest.Item, result: Any) -> None:
    """Append the case's cuDNN and generic samples to pytest-benchmark's session.

    pytest-benchmark's fixture can be used once per test and times on the host; our samples are already
    device-synchronized per step, so they go straight into its session, where --benchmark-json, -save,
    -compare and -histogram pick them up like any other benchmark.
    """
    from pytest_benchmark.stats import Metadata

    record = result.as_record()
    for side in ("cudnn", "generic"):
        m = getattr(result, side)
        if m is None:
            continue
        extra = {"rnnperf": record if side == "cudnn" or result.cudnn is None else
                 {"case": record["case"], "side": side, "see": "the cudnn entry of this case for the full record"}}
        entry = _BenchEntry(item, side, result.case.id, extra)
        options = {"rounds": len(m.samples), "steps_per_block": m.steps_per_block,
                   "timer": "perf_counter with device sync per block", "interleaved": result.cudnn is not None}
        md = Metadata(entry, iterations=m.steps_per_block, options=options)
        for sample in m.samples:
            md.stats.update(sample)  # already seconds per step
        bs.benchmarks.append(md)


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """Add the GPU model and the full environment to every JSON pytest-benchmark writes."""
    from .baselines import run_meta

    run = _session(config)
    machine_info["rnnperf"] = run_meta(run.device.gpu_slug, run.environment(), run.fingerprint())


@pytest.hookimpl(wrapper=True)
def pytest_benchmark_compare_machine_info(config: pytest.Config, benchmarksession: Any, machine_info: dict[str, Any],
                                          compared_benchmark: dict[str, Any]) -> Generator[None, Any, Any]:
    """Let pytest-benchmark judge machine_info without our section, and not crash on storage outside the cwd."""
    # pytest-benchmark compares at configure time, before any framework has loaded, so our section (which
    # holds the frameworks' runtime CUDA/cuDNN and flags) always differed from the stored one and every
    # compare warned "machine_info is different". The end-of-run summary diffs that section field by field.
    stored = (compared_benchmark.get("machine_info") or {}).get("rnnperf")
    ours = machine_info.get("rnnperf")
    if stored is not None:
        machine_info["rnnperf"] = stored
    try:
        return (yield)
    except ValueError:
        # Its warning names the storage relative to the cwd, which raises for --rnnperf-baselines=/elsewhere.
        benchmarksession.logger.warning(f"Benchmark machine_info is different from the run stored in "
                                        f"{benchmarksession.storage}.")
        return []
    finally:
        if ours is None:
            machine_info.pop("rnnperf", None)
        else:
            machine_info["rnnperf"] = ours


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the report files and, when asked, record this run as the newest baseline of this GPU."""
    config = session.config
    run = _session(config)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # workers hold part of the results; only the controller writes files
    if setting(config, "update_baseline"):
        run.notes.append(_record_baseline(config, run))
    from .report import write_reports

    if run.results or run.cross or run.skipped:
        run.notes += write_reports(run, setting(config, "report_dir"), setting(config, "markdown"),
                                   os.environ.get("GITHUB_STEP_SUMMARY", ""), baseline_status(config, run))


def parallel_reason(config: pytest.Config) -> str | None:
    """Why cuDNN cases cannot be timed in this session when pytest-xdist runs workers, else None."""
    workers: Any = None
    if hasattr(config, "workerinput"):
        workers = config.workerinput.get("workercount", "several")
    elif config.pluginmanager.hasplugin("xdist"):
        workers = config.getoption("numprocesses", None) or None  # -n 0 means no workers
    if workers is None:
        return None
    # Workers share the GPU: each one's timings include the others' kernels, so speedups and baselines
    # from such a run would be wrong (pytest-benchmark disables itself under xdist for the same reason).
    return f"cuDNN timing needs the GPU to itself and pytest-xdist runs {workers} workers; run without -n"


def _record_baseline(config: pytest.Config, run: Any) -> str:
    """Write this run as the next baseline file of this GPU model; returns the line the summary prints."""
    from pytest_benchmark.utils import get_machine_id

    from .baselines import write_new

    bs = getattr(config, "_benchmarksession", None)
    if not run.device.available:
        return f"baseline not recorded: no GPU ({run.device.reason})"
    parallel = parallel_reason(config)
    if parallel is not None:
        return f"baseline not recorded: {parallel}"
    if bs is None or bs.disabled or not any(r.cudnn is not None for r in run.results):
        return "baseline not recorded: no cuDNN case was timed in this run"
    failed = config.stash.get(FAILED_KEY, 0)
    if failed:
        return f"baseline not recorded: {failed} test(s) failed; a baseline must come from a clean run"
    machine_info = bs.get_machine_info()
    commit_info = config.hook.pytest_benchmark_generate_commit_info(config=config)
    data = config.hook.pytest_benchmark_generate_json(config=config, benchmarks=bs.benchmarks, include_data=True,
                                                      machine_info=machine_info, commit_info=commit_info)
    folder = baseline_root(config) / run.device.gpu_slug / get_machine_id()
    path = write_new(folder, setting(config, "baseline_tag"), data)
    return f"baseline recorded: {path}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Count failures per session (a baseline is only recorded from a run where nothing failed)."""
    report = yield
    if report.failed:
        item.config.stash[FAILED_KEY] = item.config.stash.get(FAILED_KEY, 0) + 1
    return report


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Summary table of every measured case, the framework environment, and the report files written."""
    from .report import summary_lines

    run = _session(config)
    if not run.results and not run.cross and not run.skipped and not run.notes:
        return
    terminalreporter.section("rnnperf summary")
    for line in summary_lines(run, baseline_status(config, run)):
        terminalreporter.write_line(line)


def baseline_status(config: pytest.Config, run: Any) -> str:
    """One line: which baseline this run was compared with, or why none, and how to record one."""
    from .baselines import gpus_with_baselines

    record = "record one with: pytest suites/ --rnnperf-update-baseline"
    if not run.device.available:
        return "baselines: none compared (no GPU)"
    if run.baseline is not None:
        return f"baseline: {run.baseline.path} ({run.baseline.datetime or 'undated'})"
    others = [g for g in gpus_with_baselines(baseline_root(config)) if g != run.device.gpu_slug]
    where = f"; baselines exist for {', '.join(others)} but are never compared with another model" if others else ""
    return f"baseline: none for {run.device.gpu_slug} yet{where}; {record}"
