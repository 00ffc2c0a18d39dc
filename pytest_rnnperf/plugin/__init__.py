"""pytest side of pytest-rnnperf: options, markers, fixtures and hooks that delegate to the run's session.

No decisions here: the ``RnnperfSession`` (``session/session.py``) owns the run, ``fixtures.py`` is what a test
uses, ``benchmark.py`` talks to pytest-benchmark. This module translates: settings in (command line, ini,
markers, each checked before anything runs), outcomes out (usage errors, skips, failures, the summary).
"""

from __future__ import annotations

import difflib
import os
import shlex
import sys
import time
import warnings
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Generator, Literal

import pytest

from pytest_rnnperf.backends import INJECT_ENVS, compile_cache, parse_injection, specs
from pytest_rnnperf.backends.compile_cache import folder_problem, resolved
from pytest_rnnperf.backends.keras_layers import keras_backend_choice
from pytest_rnnperf.measure.ahead import AheadModel
from pytest_rnnperf.measure.environment import software_info
from pytest_rnnperf.measure.gpu import TelemetryWindow, nvml_index, read_gpu_info
from pytest_rnnperf.measure.placement import Placement, place, plan, usable_gpus, worker_number
from pytest_rnnperf.measure.threads import (ThreadShare, allowed_cpus, cpu_ranges, limit_imported, limit_worker,
                                            own_cpus, pin_process)
from pytest_rnnperf.model.cases import Case
from pytest_rnnperf.model.records import CaseRecord
from pytest_rnnperf.plugin import declared, hooks
from pytest_rnnperf.plugin.benchmark import (add_entries, benchmark_json, benchmark_session, compare_fail_problems,
                                             compare_without_our_section, configure, machine_id, move_tables,
                                             off_for_xdist, option_problems, storage_problem)
from pytest_rnnperf.plugin.fixtures import ClaimsFixture, RnnperfFixture, known_issue
from pytest_rnnperf.plugin.hooks import reserved
from pytest_rnnperf.plugin.ids import stored_test_id
from pytest_rnnperf.plugin.live import HeardFailures, LiveFailures, TestSpan, note_failure
from pytest_rnnperf.report.files import foreign_files
from pytest_rnnperf.report.text import fit, header_lines, library_lines, summary_lines, terminal_width
from pytest_rnnperf.session.run import Run
from pytest_rnnperf.session.session import RnnperfSession, UsageProblem, WorkerRun
from pytest_rnnperf.session.settings import (MARKER_SETTINGS, Setting, SettingError, Settings, missing_library, setting,
                                             settings_table, thresholds)
from pytest_rnnperf.store.baselines import broken_link_on_the_way, root_problem, writable_problem

SESSION_KEY = pytest.StashKey[RnnperfSession]()
KERAS_LINE = pytest.StashKey[str]()  # the header's line on the Keras backend chosen for this process, or ""
FIXTURE_KEY = pytest.StashKey[RnnperfFixture]()  # a test's rnnperf fixture, checked again as the test returns
WORKER_KEY = "rnnperf"  # pytest-xdist: the worker's results, handed to the controller
DECLARED_ARGS = pytest.StashKey[dict[str, Any]]()  # a test's declared rnnperf.model() arguments (plugin/declared.py)
DECLARED_KEY = pytest.StashKey[str]()  # the case id of a test's declared model
THREADS_KEY = pytest.StashKey[ThreadShare]()  # a pytest-xdist worker's share of the CPU threads
SHARDING = "rnnperf-sharding"  # pytest-xdist controller: the scheduler and each worker's cost (plugin/schedule.py)
LIVE_FAILURES = "rnnperf-live-failures"  # names each failed test as it fails (plugin/live.py)
TEST_SPAN = "rnnperf-test-span"  # when the first test started and the last ended (plugin/live.py)
HEARD_FAILURES = "rnnperf-heard-failures"  # counts failed reports, notes an interruption (plugin/live.py)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register the hooks a conftest.py implements to extend pytest-rnnperf (plugin/hooks.py)."""

    pluginmanager.add_hookspecs(hooks)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Before a conftest.py or test module imports Keras: an installed backend where its default, TensorFlow, is not."""

    share = limit_worker(os.environ)  # a pytest-xdist worker's CPU threads, before a conftest imports a framework
    if share is not None:
        early_config.stash[THREADS_KEY] = share
    backend, line = keras_backend_choice(os.environ)
    if backend is not None:  # this process's Keras; the backends' subprocesses set their own
        os.environ["KERAS_BACKEND"] = backend
    early_config.stash[KERAS_LINE] = line


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the rnnperf option group; every option has an ini twin of the same name."""
    group = parser.getgroup("rnnperf", "pytest-rnnperf: cuDNN vs generic RNN benchmarks")
    for s in settings_table():
        where = f"ini {s.ini}" + (f"; marker rnnperf({s.name}=...)" if s.marker else "")
        text = s.help.replace("%", "%%")  # argparse formats help strings with %
        kwargs: dict[str, Any] = {"dest": s.ini, "default": None}
        if s.switch:
            kwargs.update(action="store_const", const="true", help=f"{text} ({where})")
        else:
            kwargs["help"] = f"{text} (default {s.typed_default.replace('%', '%%')}; {where})"
        if s.choices:
            kwargs["choices"] = s.choices
        group.addoption(s.flag, **kwargs)
        parser.addini(s.ini, s.help, default=s.typed_default)


def _option(config: pytest.Config, s: Setting) -> Any:
    """One setting from the command line, else the ini file, else its default; UsageError naming it if bad."""
    raw = config.getoption(s.ini)
    if raw is None:
        raw = config.getini(s.ini)
    try:
        return s.parse(raw)
    except SettingError as exc:
        raise pytest.UsageError(f"{s.flag} / {s.ini}: {exc}") from None


def resolve(config: pytest.Config, item: pytest.Item | None = None) -> Settings:
    """Every setting for ``item`` (or the session): marker > command line > ini > default."""
    values = {s.name: _option(config, s) for s in settings_table()}
    marker = item.get_closest_marker("rnnperf") if item is not None else None
    if marker is not None:
        # Checked at collection (_marker_problem), so a bad marker never gets this far.
        values.update({k: setting(k).parse(v) for k, v in marker.kwargs.items()})
    return Settings.of(values)


def _marker_problem(item: pytest.Item) -> str | None:
    """What is wrong with the test's rnnperf markers, or None."""
    for marker in item.iter_markers("rnnperf"):
        if marker.args:
            return f"@pytest.mark.rnnperf takes keywords only ({', '.join(MARKER_SETTINGS)}), got {marker.args!r}"
        for key, value in marker.kwargs.items():
            if key not in MARKER_SETTINGS:
                return f"@pytest.mark.rnnperf({key}=...): unknown setting; per-test settings: {', '.join(MARKER_SETTINGS)}"
            try:
                setting(key).parse(value)
            except SettingError as exc:
                return f"@pytest.mark.rnnperf({key}={value!r}): {exc}"
    return None


def _space_form_path(config: pytest.Config, s: Setting) -> str | None:
    """A path given as ``--flag PATH`` that pytest may have taken for a test path while choosing its rootdir.

    pytest picks rootdir and ini file before plugins add their options, so the separate PATH counts as a
    test path there (pytest issue #8846); with ``--flag=PATH`` it does not. Harmless when PATH lies inside
    the folder of the ini file pytest found; anything else is refused before collection.
    """
    args = shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + [str(a) for a in config.invocation_params.args]
    for opt, value in zip(args, args[1:]):
        if opt == "--":
            break
        path = config.invocation_params.dir / value
        if opt == s.flag and not value.startswith("-") and path.exists():
            ini = config.inipath
            if ini is None or not path.resolve().is_relative_to(ini.parent.resolve()):
                return value
    return None


def _unknown_ini_keys(config: pytest.Config) -> list[str]:
    """The ini file's rnnperf_* keys that name no setting: pytest only warns, and the setting meant keeps its default."""

    unknown = getattr(config, "_get_unknown_ini_keys", lambda: ())()  # pytest's own list (it warns after collection)
    known = [s.ini for s in settings_table()]
    problems = []
    for key in sorted(k for k in unknown if k.lower().startswith("rnnperf")):
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else f" (the settings: {', '.join(known)})"
        problems.append(f"{config.inipath or 'ini file'}: {key} is no pytest-rnnperf setting{hint}; the setting "
                        f"meant would keep its default")
    return problems


def _markdown_problem(target: Path, store: Path | None, root: Path) -> str | None:
    """Why the Markdown summary cannot be appended to ``target`` (None when it can); ``store``: the baselines folder."""
    if store is not None and target.resolve().is_relative_to(store):
        return f"{target} is inside the baselines folder {root}, which holds stored runs only; give a file outside it"
    if target.is_dir():
        return f"{target} is a folder, not a file"
    if not target.parent.is_dir():
        return f"folder {target.parent} does not exist"
    if not os.access(target if target.exists() else target.parent, os.W_OK):
        return f"{target} is not writable"
    return None


def _compile_cache_problem(settings: Settings, store: Path | None, root: Path) -> str | None:
    """Why the compile cache cannot live where the settings put it (None when it can, or when it is off)."""

    folder = compile_cache_folder(settings)
    if folder is None:
        return None
    # Checked before the folder is made: the baselines folder holds stored runs only.
    if store is not None and folder.resolve().is_relative_to(store):
        return f"{folder} is inside the baselines folder {root}, which holds stored runs only; give a folder outside it"
    return folder_problem(folder)


def compile_cache_folder(settings: Settings) -> Path | None:
    """The compile cache's folder, absolute (relative to the current directory), or None when it is off."""

    folder = resolved(settings.compile_cache, os.environ)
    return None if folder is None else folder.absolute()


def _output_problems(config: pytest.Config, settings: Settings) -> list[str]:
    """What is wrong with the paths the run will write to, found before anything runs."""

    problems = _unknown_ini_keys(config)
    for s in settings_table():
        if s.path and (value := _space_form_path(config, s)) is not None:
            problems.append(f"{s.flag} {value}: write {s.flag}={value} (pytest reads a separate path as a test path "
                            f"while it picks its rootdir, now {config.rootpath})")
    root = baseline_root(config, settings)
    # The baselines folder holds stored runs only: a report or summary written there would replace or append to
    # one (a Markdown summary appended to a baseline made it unreadable) or be read back as one.
    store = root.resolve() if settings.baselines.strip() else None
    if settings.report_dir and settings.report_dir.lower() != "none":
        folder = Path(settings.report_dir)
        if store is not None and folder.resolve().is_relative_to(store):
            problems.append(f"--rnnperf-report-dir / rnnperf_report_dir: {folder} is inside the baselines folder "
                            f"{root}, which holds stored runs only; give a folder outside it")
        elif (why := writable_problem(folder)) is not None:
            problems.append(f"--rnnperf-report-dir / rnnperf_report_dir: {why}")
        elif not hasattr(config, "workerinput") and (foreign := foreign_files(folder)):  # workers: checked before them
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            problems.append(f"--rnnperf-report-dir / rnnperf_report_dir: {folder} holds files no rnnperf report wrote "
                            f"({shown}); the report (rnnperf.json, summary.md, index.html, plots) would replace those "
                            f"of its names: give an empty or new folder, or one an earlier run wrote its report to")
    if (why := _compile_cache_problem(settings, store, root)) is not None:
        problems.append(f"--rnnperf-compile-cache / rnnperf_compile_cache: {why}")
    for name, value in (("--rnnperf-markdown / rnnperf_markdown", settings.markdown),
                        ("GITHUB_STEP_SUMMARY", os.environ.get("GITHUB_STEP_SUMMARY", ""))):
        if value and (why := _markdown_problem(Path(value), store, root)) is not None:
            problems.append(f"{name}: {why}")
    if not settings.baselines.strip():  # the rootdir itself would be searched for GPU folders: nothing compared
        problems.append("--rnnperf-baselines / rnnperf_baselines: empty; give the baselines folder (default: baselines)")
    elif (why := broken_link_on_the_way(root)) is not None:  # reads as no folder: nothing would be compared
        problems.append(f"--rnnperf-baselines / rnnperf_baselines: {why}")
    elif root.exists() and not root.is_dir():
        problems.append(f"--rnnperf-baselines / rnnperf_baselines: {root} is a file, not a folder")
    elif (why := root_problem(root, settings.baselines)) is not None:
        problems.append(f"--rnnperf-baselines / rnnperf_baselines: {why}")
    elif settings.update_baseline and (why := writable_problem(root)) is not None:
        problems.append(f"--rnnperf-update-baseline: cannot record into {why}")
    elif settings.keep_run and (why := writable_problem(root)) is not None:
        problems.append(f"--rnnperf-keep-run: cannot keep the run in {why}")
    if settings.update_baseline and settings.keep_run:
        problems.append("--rnnperf-update-baseline and --rnnperf-keep-run: choose one (a recorded baseline is already "
                        "part of the history)")
    elif not root.exists() and not settings.update_baseline and settings.baselines != setting("baselines").default:
        problems.append(f"--rnnperf-baselines / rnnperf_baselines: {root} does not exist (a typo would silently "
                        f"compare with nothing; --rnnperf-update-baseline creates it)")
    problems += option_problems(config, settings, root)

    for name in INJECT_ENVS:
        try:
            parse_injection(os.environ.get(name, ""), name)
        except ValueError as exc:
            problems.append(str(exc))
    stored = "--rnnperf-update-baseline" if settings.update_baseline else "--rnnperf-keep-run" if settings.keep_run else ""
    injected = [name for name in INJECT_ENVS if os.environ.get(name, "").strip()]
    if stored and injected:  # a run slowed on purpose would teach the baselines (or the history) its slowdown
        problems.append(f"{stored}: {' and '.join(injected)} set: a run with injected faults is never stored; unset "
                        f"{'them' if len(injected) > 1 else 'it'} to store the run")
    return problems


def baseline_root(config: pytest.Config, settings: Settings) -> Path:
    """The baselines folder, relative to the rootdir unless absolute."""
    return config.rootpath / settings.baselines


def _workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers this controller starts (0 without any, and in a worker)."""
    if (hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist")
            or config.getoption("dist", "no") == "no"):
        return 0
    # xdist turns -n 2 into two "popen" gateway specs (fewer with --maxprocesses); --tx 3*popen counts three.
    counts = [spec.split("*", 1)[0] for spec in config.getoption("tx", None) or []]
    return sum(int(n) if n.isdigit() else 1 for n in counts)


def gpu_workers(config: pytest.Config) -> int | None:
    """For a suite's ``pytest_xdist_auto_num_workers``: ``-n auto`` starts one worker per GPU (None: xdist decides)."""

    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):  # the user's own count for -n auto wins
        return None
    gpus, _ = usable_gpus(os.environ)
    return len(gpus) if gpus else None  # no GPU: one worker per CPU, for the reference checks


def pytest_configure(config: pytest.Config) -> None:
    """Check every setting and output path, read the device and software fingerprint, load the baseline."""
    config.addinivalue_line("markers", f"rnnperf({', '.join(MARKER_SETTINGS)}): per-test rnnperf settings "
                            "(override command line and ini)")
    config.addinivalue_line("markers", "gpu: the test needs a GPU; skipped, with the reason, where NVML sees none")
    config.addinivalue_line("markers", declared.MARKER_LINE)

    if (missing := missing_library("rich")) is not None:  # the summary's tables: found now, not after every test
        raise pytest.UsageError(f"pytest-rnnperf {missing}")
    settings = resolve(config)
    problems = _output_problems(config, settings)
    if problems:
        raise pytest.UsageError("\n".join(problems))

    # Before any test module is collected: a team's Keras test imports TensorFlow at collection time and builds
    # its model before the tf backend gets to set memory growth, and TF would then map (nearly) all GPU memory,
    # starving the session's other frameworks. A user's own setting wins (the tf backend sets the same default).
    os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    placement = None
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: pin its GPU before any framework is imported
        placement = place(config.workerinput["workerid"], int(config.workerinput["workercount"]), os.environ)
        placement.apply(os.environ)
        if THREADS_KEY in config.stash:
            placement = _take_share(placement, config.stash[THREADS_KEY])

    # This process's frameworks read the folder when they are imported; its subprocesses get it in their environment.
    cache = compile_cache_folder(settings)
    compile_cache.use(cache)
    run = Run(gpu=read_gpu_info(nvml_index()), software=software_info(), settings=settings,
              root=baseline_root(config, settings), machine_id=machine_id(), placement=placement, compile_cache=cache,
              compile_cache_empty=cache is not None and compile_cache.is_empty(cache))
    session = RnnperfSession(replace(run, extra_environment=_extra_environment(config, run)))
    session.plan = [WorkerRun(p, read_gpu_info(nvml_index() if p.index is None else p.index))
                for p in plan(_workers(config), os.environ)]
    session.on_verdict = lambda verdict: config.hook.pytest_rnnperf_case_verdict(config=config, verdict=verdict)
    config.stash[SESSION_KEY] = session
    if not hasattr(config, "workerinput"):  # the process that owns the terminal names each failure as it comes
        config.pluginmanager.register(LiveFailures(config), LIVE_FAILURES)
        config.pluginmanager.register(TestSpan(session), TEST_SPAN)
        config.pluginmanager.register(HeardFailures(session), HEARD_FAILURES)
    if session.plan:  # a pytest-xdist controller (pytest-xdist is optional: imported only where it runs)
        from pytest_rnnperf.plugin.schedule import Sharding, record_cost, record_framework

        def ahead(cases: list[str]) -> str | None:
            """The line the workers' budgets start with, foreseen here (None without a budget)."""
            return session.budget_for(cases, len(session.plan)).ahead() if session.settings.budget > 0 else None

        def stored(key: str) -> CaseRecord | None:
            """The newest stored record of a case or test, read when asked: the history loads after this hook."""
            return session.stored.stored_record(key)

        config.pluginmanager.register(Sharding(lambda key: record_cost(stored(key)), ahead,
                                               lambda key: record_framework(stored(key))), SHARDING)
    problem = storage_problem(config, session)
    if problem:
        raise pytest.UsageError(problem)
    try:
        latest = session.load_baseline()
    except UsageProblem as exc:
        raise pytest.UsageError(str(exc)) from None
    if (settings.update_baseline or settings.keep_run) and not hasattr(config, "workerinput"):  # the controller writes
        problems = session.recorder().problems()
        if problems:
            raise pytest.UsageError("\n".join(problems))
    configure(config, session, latest)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse a --benchmark-compare-fail gate that cannot fire, once pytest-benchmark has loaded what it compares with."""
    bs = benchmark_session(session.config)
    if bs is not None and not hasattr(session.config, "workerinput") and (problems := compare_fail_problems(bs)):
        raise pytest.UsageError("\n".join(problems))


def _take_share(placement: Placement, share: ThreadShare) -> Placement:
    """Limit the pools started before the worker's share was set, and pin a worker with a GPU of its own to its own
    CPUs (named in its placement); a worker without one times nothing, and its tests may use every core."""
    limit_imported(share.threads)  # torch imported before the environment was set (by another plugin)
    if not placement.pin:
        return placement
    cpus = own_cpus(allowed_cpus(), worker_number(placement.worker), share.threads)
    return replace(placement, cpus=cpu_ranges(cpus)) if pin_process(cpus) else placement


def _extra_environment(config: pytest.Config, run: Run) -> dict[str, str]:
    """The environment fields conftests add (plugin/hooks.py); a UsageError where one is the plugin's own."""

    own = dict(run.environment({}), **{name: "" for name in INJECT_ENVS})
    extras: dict[str, str] = {}
    own.update({f"{spec.name}.": "" for spec in specs()})  # each framework's runtime fields, read later
    for extra in config.hook.pytest_rnnperf_environment(config=config):
        why = reserved(extra, own)
        if why is not None:
            raise pytest.UsageError(f"pytest_rnnperf_environment (conftest.py): {why}")
        extras.update(extra)
    return extras


def _report_files(config: pytest.Config, session: RnnperfSession) -> None:
    """Let conftests write more report files beside rnnperf.json; the summary names them."""
    folder = session.settings.report_dir
    if session.report_rows is None or not folder or folder.lower() == "none":
        return
    written = [name for names in config.hook.pytest_rnnperf_report_files(config=config, folder=Path(folder),
                                                                          rows=session.report_rows) for name in names]
    if written:
        session.measured.notes.append(f"reports written by conftest hooks to {folder}/: {', '.join(written)}")


def require_plugin(config: pytest.Config, who: str) -> None:
    """For a conftest.py that imports from this module: a one-line UsageError where pytest has not loaded the plugin."""
    if config.pluginmanager.is_registered(sys.modules[__name__]):
        return
    why = " (PYTEST_DISABLE_PLUGIN_AUTOLOAD is set)" if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") else ""
    raise pytest.UsageError(f"{who} needs the pytest-rnnperf plugin, which is not loaded{why}: add "
                            f"-p pytest_rnnperf.plugin to the command line or to addopts")


def _session(config: pytest.Config) -> RnnperfSession:
    """The RnnperfSession of this pytest run."""
    return config.stash[SESSION_KEY]


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a malformed rnnperf marker before any test runs, naming the test; skip ``gpu`` tests without a GPU; on
    a GPU, order the tests a stored answer may stand for cheapest first within their kind."""
    gpu = _session(config).gpu
    no_gpu = pytest.mark.skip(reason=f"no GPU visible: {gpu.reason}")
    scale = resolved_scale(config)
    for item in items:
        problem = _marker_problem(item)
        if problem:
            raise pytest.UsageError(f"{item.nodeid}: {problem}")
        # A malformed declaration: one line now, not on a first night. Read once: the team's function runs once.
        if (args := declared.declared_args(item, scale)) is not None:
            item.stash[DECLARED_ARGS] = args
        if not gpu.available and item.get_closest_marker("gpu") is not None:
            item.add_marker(no_gpu)
    _cheapest_answers_first(config, items)  # a conftest's own order (the suite's: claims last) came first


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Start the subprocesses a module's cases need as soon as it is collected, so that their framework imports
    overlap the collection of the modules after it (which imports this process's frameworks) and the first tests.

    A pytest-xdist worker starts them too, though another worker may run their tests: started only when a test came,
    a Keras subprocess held that test 13 s on two H200s (0.3 s in one process), and since a subprocess exits without
    its framework's teardown, one left unused costs the worker 0.2 s at its end."""
    items = [item for item in (report.result or ()) if isinstance(item, pytest.Item)]
    if not items or not report.passed or items[0].config.option.collectonly or SESSION_KEY not in items[0].config.stash:
        return
    _session(items[0].config).backends.start(_collected_frameworks(items)[0])


@pytest.hookimpl(tryfirst=True)  # before the terminal names the libraries each framework loaded (that waits)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the backend subprocesses the selected cases need and stop those only deselected cases needed."""
    config = session.config
    if SESSION_KEY not in config.stash:
        return
    _session(config).collected = time.monotonic()
    frameworks, _ = _collected_frameworks(session.items)
    if config.option.collectonly or session.testsfailed or not session.items:
        _session(config).backends.stop(keep=())
        return
    _session(config).backends.stop(keep=frameworks)
    _session(config).backends.start(frameworks)
    _session(config).compile_ahead(_to_compile(session.items))
    _session(config).plan_budget([_case_id(item) for item in session.items if _times_cudnn(item)],
                                 {item.name: kind for item in session.items if (kind := _answer_kind(item))})


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before a test: its case's compile ahead (or its declared model's) is awaited; a test that may time anything else
    stops them all first."""
    if SESSION_KEY not in item.config.stash or _checks_parity(item):  # a parity test times nothing
        return
    case = _timed_case(item)
    _session(item.config).before_test(case.id if case is not None else item.stash.get(DECLARED_KEY, None))


def _to_compile(items: list[pytest.Item]) -> list[Case | AheadModel]:
    """What a first night may compile ahead, in the run's order: the items' cases and their declared models."""
    found: list[Case | AheadModel] = []
    for item in items:
        if (case := _timed_case(item)) is not None:
            found.append(case)
        elif (args := item.stash.get(DECLARED_ARGS, None)) is not None:
            model = declared.ahead_model(item, args, resolve(item.config, item).precision)
            found += [model] if model is not None else []
            # Its test waits for its model, or for nothing where none compiles: it does not stop the others.
            item.stash[DECLARED_KEY] = stored_test_id(item) if model is None else model.id
    return found


def _timed_case(item: pytest.Item) -> Case | None:
    """The case a test parametrized by one times (a parity test times none)."""
    if _checks_parity(item):
        return None
    return next((value for value in _params(item).values() if isinstance(value, Case)), None)


def _params(item: pytest.Item) -> dict[str, Any]:
    """The item's parametrization (empty for a test that has none)."""
    callspec = getattr(item, "callspec", None)
    return callspec.params if callspec is not None else {}


def _checks_parity(item: pytest.Item) -> bool:
    """The item is one of the ready suite's parity tests (a reference or cross-framework case), which times nothing."""
    return any(name in _params(item) for name in ("reference_case", "cross_case"))


def _answer_kind(item: pytest.Item) -> str | None:
    """What stored answer may stand for the item (``claims_reason``): "claims" (a claims test), "parity" (a parity
    test of the ready suite), "known issue" (an rnnperf test marked to fail), or None."""
    fixtures = getattr(item, "fixturenames", ())
    if "rnnperf_claims" in fixtures:
        return "claims"
    if _checks_parity(item):
        return "parity"
    return "known issue" if "rnnperf" in fixtures and known_issue(item) else None


def _cheapest_answers_first(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a GPU, the tests a stored answer may stand for run cheapest first within their kind, each in the places its
    kind had: a night a change makes run one of each whatever the budget runs the cheapest."""
    if not _session(config).gpu.available:
        return
    places: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        if kind := _answer_kind(item):
            places.setdefault(kind, []).append(index)
    for indices in places.values():
        by_name = {items[i].name: items[i] for i in indices}
        for index, name in zip(indices, _session(config).cheapest_first(list(by_name))):
            items[index] = by_name[name]


def _times_cudnn(item: pytest.Item) -> bool:
    """The item times a cuDNN side: a matrix cuDNN case, or a test that checks its own model."""
    own_model = "rnnperf" in getattr(item, "fixturenames", ()) and not _checks_parity(item)
    return "cudnn_case" in _params(item) or own_model


def _case_id(item: pytest.Item) -> str:
    """The id a cuDNN-timing item's record is stored under: its parametrized case's, else the test's own
    (``rnnperf.model``)."""
    callspec = getattr(item, "callspec", None)
    cases = [v for v in (callspec.params.values() if callspec is not None else ()) if isinstance(v, Case)]
    return cases[0].id if cases else stored_test_id(item)


def _collected_frameworks(items: list[pytest.Item]) -> tuple[list[str], bool]:
    """The frameworks of the items' parametrized cases in order of first use, and whether any checks its own model."""

    frameworks: dict[str, None] = {}
    own_model = False
    for item in items:
        callspec = getattr(item, "callspec", None)
        cases = [v for v in (callspec.params.values() if callspec is not None else ()) if isinstance(v, Case)]
        frameworks.update(dict.fromkeys(case.framework for case in cases))
        own_model = own_model or (not cases and "rnnperf" in getattr(item, "fixturenames", ()))
    return list(frameworks), own_model


def resolved_scale(config: pytest.Config) -> str:
    """The case-matrix scale: the option, or nightly with a GPU and smoke without one."""
    scale = _session(config).settings.scale
    if scale == "auto":
        return "nightly" if _session(config).gpu.available else "smoke"
    return scale


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Device and software fingerprint, and warnings about a noisy machine (never failures)."""

    session = _session(config)
    # The thresholds in use, as read: a percent typed as a fraction or the other way shows here before the run.
    lines = header_lines(session, scale=resolved_scale(config)) + [
        f"rnnperf: regression thresholds: {thresholds(session.settings.policy())}",
        compile_cache_line(session.run.compile_cache, session.run.compile_cache_empty,
                           session.settings.compile_ahead != "off")]
    keras = config.stash.get(KERAS_LINE, "")
    return lines + [keras] if keras else lines


def compile_cache_line(folder: Path | None, empty: bool, ahead: bool = True) -> str:
    """The header's line naming the compile cache kept between runs (``empty`` when the run started, ``ahead``: its
    cases may compile ahead), or saying it is off."""
    if folder is None:
        return "rnnperf: compile cache off (--rnnperf-compile-cache=none)"
    line = f"rnnperf: compile cache {folder} (XLA in xla/, Inductor in inductor/)"
    # A first night compiles every JAX and torch.compile case from scratch: in one process on a GPU, ahead of their
    # turn behind the other cases (measure/ahead.py); else at their build, priced as stored.
    when = ("ahead of their turn, behind the other cases, in a run of one process" if ahead
            else "each at its turn: --rnnperf-compile-ahead=off")
    return line + (f": empty, so cases that compile build from scratch tonight ({when}) and later nights reuse them"
                   if empty else "")


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    """On a GPU, before any test runs: the cuDNN, cuBLAS and CUDA runtime each framework of the run really loaded.

    The header comes before any framework is imported, and the wheel it names may not be what the loader picks;
    the frameworks of the collected cases are read now, as their first case would read them anyway.
    """
    session = _session(config)
    # A budget that cannot hold even the stored fixed costs, or has none to go by, says so before the first case.
    line = None if session.budget is None else session.budget.ahead()
    ahead = [] if line is None else fit([line], terminal_width(config.get_terminal_writer().fullwidth))
    if not session.gpu.available or config.option.collectonly:
        return ahead

    found, own_model = _collected_frameworks(items)
    frameworks = dict.fromkeys(found)  # in order of first use
    if own_model:  # rnnperf.model() checks a model of a framework its test module has imported
        frameworks.update({s.name: None for s in specs() if set(s.model_modules) & set(sys.modules)})
    session.frameworks = tuple(frameworks)
    if hasattr(config, "workerinput"):
        # A pytest-xdist worker's lines never reach the terminal: its first test need not wait for every framework
        # to load (TensorFlow's import, each subprocess's); each loads at the first test that needs it.
        return ahead
    session.load()
    return ahead + library_lines(session)


@pytest.fixture
def rnnperf(request: pytest.FixtureRequest) -> RnnperfFixture:
    """Measure and check rnnperf cases or your own model; results reach pytest-benchmark and the rnnperf reports."""
    fixture = RnnperfFixture(_session(request.config), request.node, resolve(request.config, request.node),
                             benchmark_session(request.config))
    request.node.stash[FIXTURE_KEY] = fixture
    return fixture


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """Fail a test that returned without checking a record that fails, as ``rnnperf.check()`` would have.

    Raised in the call phase, the failure is the test's own: reported, counted (no baseline, no kept run) and
    turned into an expected failure by ``xfail`` exactly as a failing ``check()`` at the end of the test would be.
    """
    result = yield
    fixture = pyfuncitem.stash.get(FIXTURE_KEY, None)
    if fixture is not None:
        fixture.check_forgotten()
    return result


@pytest.fixture
def rnnperf_claims(request: pytest.FixtureRequest) -> ClaimsFixture:
    """Rows of the claims table for this test; ``check()`` fails it where a row breaks a promise.

    The test is skipped, with the stored run named, where a stored run measured it in tonight's environment
    within --rnnperf-recheck-days (the rule of a case's full check).
    """
    session = _session(request.config)
    reason = session.claims_reason(request.node.name)
    if reason is not None:
        pytest.skip(reason)
    return ClaimsFixture(session, request.node.name)


@pytest.fixture(scope="session")
def rnnperf_gpu_fingerprint(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The device and software fingerprint of this session: fields and the stable baseline key."""
    session = _session(request.config)
    session.load()  # every collected framework, as in one process (a pytest-xdist worker reads them lazily)
    return {"device": session.gpu.as_dict(), "environment": session.environment(), "key": session.fingerprint(),
            "gpu_slug": session.gpu.gpu_slug, "available": session.gpu.available}


@pytest.fixture
def rnnperf_telemetry_window() -> Callable[[], Any]:
    """Factory of NVML telemetry windows (context managers) for the session's GPU."""

    return lambda: TelemetryWindow(index=nvml_index())


def _renamed_fixture(old: str, new: str, scope: Literal["session", "function"]) -> Any:
    """A fixture under its old name ``old``: gives what ``new`` gives, with a deprecation warning naming ``new``."""

    def alias(request: pytest.FixtureRequest) -> Any:
        warnings.warn(pytest.PytestDeprecationWarning(f"fixture {old} is now {new}; the old name goes in a later "
                                                      f"release"), stacklevel=2)
        return request.getfixturevalue(new)

    alias.__doc__ = f"Deprecated name of ``{new}`` (fixtures of pytest-rnnperf start with rnnperf_)."
    return pytest.fixture(scope=scope, name=old)(alias)


gpu_fingerprint = _renamed_fixture("gpu_fingerprint", "rnnperf_gpu_fingerprint", "session")
telemetry_window = _renamed_fixture("telemetry_window", "rnnperf_telemetry_window", "function")


@pytest.hookimpl(optionalhook=True)  # pytest-benchmark's hook: -p no:benchmark must not be an INTERNALERROR
def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """Add the GPU model and the full environment to every JSON pytest-benchmark writes."""
    machine_info["rnnperf"] = _session(config).meta()


@pytest.hookimpl(wrapper=True, optionalhook=True)
def pytest_benchmark_compare_machine_info(config: pytest.Config, benchmarksession: Any, machine_info: dict[str, Any],
                                          compared_benchmark: dict[str, Any]) -> Generator[None, Any, Any]:
    """Let pytest-benchmark judge machine_info without our section, and not crash on storage outside the cwd."""
    return (yield from compare_without_our_section(benchmarksession, machine_info, compared_benchmark))

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Note the cases of a test that failed as it is marked to (xfail), so the summary tells known issues apart from
    tonight's findings; add up each rnnperf test's seconds, which a stored run keeps for the claims and parity tests
    that passed. Failures are counted where the terminal is (``HeardFailures``): a controller hears its workers'."""
    report = yield
    note_failure(item, call, report)
    if {"rnnperf", "rnnperf_claims"} & set(getattr(item, "fixturenames", ())):  # a later night's budget prices it by
        costs = _session(item.config).measured.check_costs  # these (claims_meta keeps the checks that passed)
        costs[item.name] = costs.get(item.name, 0.0) + report.duration
    if report.skipped and hasattr(report, "wasxfail") and (fixture := item.stash.get(FIXTURE_KEY, None)):
        # One that raised before its record is named by its test's case: a kept run stores its seconds by that name.
        _session(item.config).measured.expected += fixture.case_ids or [_case_id(item)]
        if _answer_kind(item) == "known issue":  # failed as marked: a stored run may stand for it later
            _session(item.config).measured.passed_tonight(item.name, "known issue")
    return report


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist controller: take a finished worker's results into this session, its timings into pytest-benchmark."""

    bs = benchmark_session(node.config)
    _session(node.config).merge_worker(getattr(node, "workeroutput", {}).get(WORKER_KEY), error,
                                       None if bs is None else partial(add_entries, bs))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Hand a worker's results to the controller; on the controller, record the baseline and write the reports."""
    config = session.config
    ours = _session(config)
    ours.close()  # the subprocesses of other Keras backends: nothing runs after the last test
    if hasattr(config, "workerinput"):
        config.workeroutput[WORKER_KEY] = ours.worker_output()  # type: ignore[attr-defined]
        return
    if (stop := session.shouldstop or session.shouldfail) and ours.interrupted is None:  # -x, a plugin's stop
        ours.interrupted = "the run was stopped early" + (f" ({stop})" if isinstance(stop, str) else "")
    if (sharding := config.pluginmanager.get_plugin(SHARDING)) is not None and (line := sharding.line()):
        ours.measured.notes.append(line)
    if ours.settings.update_baseline or ours.settings.keep_run:
        bs = benchmark_session(config)
        # pytest-benchmark turns itself off under pytest-xdist; the workers' entries reach the controller anyway.
        on = bs is not None and (not bs.disabled or off_for_xdist(bs))
        store = ours.record_baseline if ours.settings.update_baseline else ours.keep_run
        ours.measured.notes += store(partial(benchmark_json, config, bs), benchmarks_on=on, exit_status=int(exitstatus))
    if ours.measured.unrecorded and session.exitstatus == pytest.ExitCode.OK:  # asked for, not written: CI must see it
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    ours.finish(os.environ.get("GITHUB_STEP_SUMMARY", ""))
    _report_files(config, ours)
    if not ours.settings.benchmark_tables:

        line = move_tables(benchmark_session(config), ours.settings.report_dir)
        if line is not None:
            ours.measured.notes.append(line)


@pytest.hookimpl(wrapper=True)  # around every plugin's summary: ours prints after pytest-benchmark's, whatever
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,  # the order plugins were loaded in
                            config: pytest.Config) -> Generator[None, None, None]:
    """The rnnperf summary as the last block: what failed or regressed and what changed, then every case's table."""
    try:
        return (yield)
    finally:  # also when pytest-benchmark's --benchmark-compare-fail raised in its own summary
        _write_summary(terminalreporter, config)


def _write_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Write the rnnperf summary within the terminal's width (80 to 200 columns)."""

    session = _session(config)
    if not session.measured.has_cases() and not session.measured.notes:
        return
    terminalreporter.ensure_newline()  # else the first line of the section comes after a blank one
    terminalreporter.section("rnnperf summary")
    width = terminal_width(config.get_terminal_writer().fullwidth)
    for line in summary_lines(session, session.report_rows, width):
        terminalreporter.write_line(line)
