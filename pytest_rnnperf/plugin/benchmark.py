"""pytest-benchmark glue: each timed side of a case becomes one of its benchmark entries.

pytest-benchmark's fixture can be used once per test and times on the host; our samples are already
device-synchronized per step, so they go straight into its session, where --benchmark-json, -save,
-compare and -histogram pick them up like any other benchmark. Its storage is pointed at this GPU
model's baseline folder, so a stored run is both a pytest-benchmark file and an rnnperf baseline; only
--rnnperf-update-baseline writes there (a --benchmark-save into it is refused: it would be a baseline of any run).

Under pytest-xdist pytest-benchmark switches itself off in every process. A worker that has a GPU of its own
still times, and hands each record with its entry's names (``entry_source``) to the controller, which adds
the entries to its own session: its --benchmark-json, -save and -compare then work on the merged run.

Everything this package knows of pytest-benchmark's insides lives here, tested with the range pinned in
pyproject.toml: ``config._benchmarksession`` (its session: ``benchmarks``, ``disabled``, ``storage``, ``logger``),
the attributes its ``Metadata`` reads off a fixture (``_Entry``), its JSON writer, and its option names.
"""

from __future__ import annotations

import importlib.util
import json
import os
from functools import partial
from pathlib import Path
from typing import Any, Generator, Sequence

from pytest_rnnperf.model.process import ProcessSummary
from pytest_rnnperf.model.records import CaseRecord
from pytest_rnnperf.plugin.ids import stored_test_id
from pytest_rnnperf.session.settings import Settings
from pytest_rnnperf.store.runs import benchmark_extra

DEFAULT_STORAGE = "file://./.benchmarks"  # pytest-benchmark's default --benchmark-storage


class _Entry:
    """The attributes pytest-benchmark's ``Metadata`` reads off a fixture, for one side of a case."""

    def __init__(self, name: str, nodeid: str, params: dict[str, Any], callspec_id: str | None, side: str,
                 group: str, extra_info: dict[str, Any]) -> None:
        """Name the entry after the test with the side inserted first in the parameter id."""
        self.param = f"{side}-{callspec_id}" if callspec_id else side
        self.params = dict(params, side=side)
        self.name = f"{name.split('[')[0]}[{self.param}]"
        self.fullname = nodeid.split("[")[0] + f"[{self.param}]"
        self.group = group
        self.extra_info = extra_info
        self.cprofile_stats = None
        self.has_error = False


def _plain(value: Any) -> Any:
    """A parameter value as JSON-plain data (a Case becomes its id), so stored files parse with plain json."""
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    return getattr(value, "id", repr(value))


def entry_source(item: Any) -> dict[str, Any]:
    """What names a test's entries (its name, node id and parameters), as plain JSON a pytest-xdist worker can hand over."""
    callspec = getattr(item, "callspec", None)
    return {"name": item.name, "nodeid": stored_test_id(item),
            "params": {k: _plain(v) for k, v in (callspec.params.items() if callspec is not None else ())},
            "callspec_id": callspec.id if callspec is not None else None}


def add_entries(bs: Any, source: dict[str, Any], record: CaseRecord, processes: Sequence[ProcessSummary] = ()) -> list[Any]:
    """Append the record's cuDNN and generic samples to pytest-benchmark's session ``bs`` for the test ``source`` names.

    ``processes``: the summaries of the extra processes the case was recorded in, stored beside its record.
    """
    from pytest_benchmark.stats import Metadata

    added = []
    for side in ("cudnn", "generic"):
        m = getattr(record, side)
        if m is None:
            continue
        entry = _Entry(source["name"], source["nodeid"], source["params"], source["callspec_id"], side, record.id,
                       benchmark_extra(record, side, processes))
        options = {"rounds": len(m.samples), "steps_per_block": m.steps_per_block, "timer": m.timer,
                   "interleaved": record.cudnn is not None}
        md = Metadata(entry, iterations=m.steps_per_block, options=options)
        for sample in m.samples:
            md.stats.update(sample)  # already seconds per step
        bs.benchmarks.append(md)
        added.append(md)
    return added


def off_for_xdist(bs: Any) -> bool:
    """pytest-benchmark switched itself off because pytest-xdist is active (not by --benchmark-disable)."""
    if not bs.disabled:
        return False
    # 5.3 and later say so themselves (xdist_warning: set only when the user had not disabled it).
    if hasattr(bs, "xdist_warning"):
        return bool(bs.xdist_warning)
    # Older releases (5.1, 5.2) only warn: ask the same questions they ask.
    config = bs.config
    by_user = config.getoption("benchmark_disable") and not config.getoption("benchmark_enable")
    xdist = config.getoption("dist", "no") != "no" or os.environ.get("PYTEST_XDIST_WORKER")
    return bool(xdist and not by_user and not bs.skip)


def benchmark_json(config: Any, bs: Any, benchmarks: list[Any] | None = None,
                   meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The pytest-benchmark JSON of this run, as ``--benchmark-json`` would write it (data included).

    ``benchmarks`` (some of the session's entries) and ``meta`` (``machine_info["rnnperf"]``) make one GPU
    model's file out of a pytest-xdist run over several models.
    """
    machine_info = bs.get_machine_info()
    if meta is not None:
        machine_info["rnnperf"] = meta
    if benchmarks is None:
        benchmarks = bs.benchmarks
    commit_info = config.hook.pytest_benchmark_generate_commit_info(config=config)
    return config.hook.pytest_benchmark_generate_json(config=config, benchmarks=benchmarks, include_data=True,
                                                      machine_info=machine_info, commit_info=commit_info)


def option_problems(config: Any, settings: Settings, root: Path) -> list[str]:
    """What is wrong with the pytest-benchmark options given with this run, found before anything runs."""
    problems: list[str] = []
    given = config.getoption("benchmark_json", None)
    if given is not None and hasattr(given, "write"):
        problems += _opened_json_problems(Path(given.name), root)
    elif given is not None:
        problems += _json_path_problems(config, given, settings, root)
    # A run stored (a baseline, or a nightly run kept for the history) is pytest-benchmark's JSON of its timings.
    storing = [(flag, verb) for flag, verb, wanted in (("--rnnperf-update-baseline", "record", settings.update_baseline),
                                                      ("--rnnperf-keep-run", "keep", settings.keep_run)) if wanted]
    for flag, verb in storing:
        if not config.pluginmanager.has_plugin("benchmark"):
            problems.append(f"{flag} needs pytest-benchmark, which -p no:benchmark turned off (a stored run is "
                            f"pytest-benchmark's JSON)")
        for option in ("benchmark_disable", "benchmark_skip"):
            if config.getoption(option, None):
                problems.append(f"{flag} with --{option.replace('_', '-')}: nothing would be timed to {verb}")
    if config.getoption("benchmark_compare_fail", None) and not config.getoption("benchmark_compare", None):
        problems.append("--benchmark-compare-fail needs --benchmark-compare (pytest-benchmark would say so only "
                        "after the whole run)")
    if config.getoption("benchmark_histogram", None):
        missing = [m for m in ("pygal", "pygaljs") if importlib.util.find_spec(m) is None]
        if missing:
            problems.append(f"--benchmark-histogram needs {' and '.join(missing)}: "
                            f"pip install 'pytest-benchmark[histogram]'")
    return problems


def compare_fail_problems(bs: Any) -> list[str]:
    """Why --benchmark-compare-fail is a gate that cannot fire, known once pytest-benchmark has loaded the compared run.

    pytest-benchmark says "requires valid --benchmark-compare" only after the whole run, and reads an absolute
    threshold (mean:5) in seconds: above the stored time of every entry it fires only where a time more than doubles.
    """
    checks = getattr(bs, "compare_fail", None) or []
    if not checks or not bs.compare:  # no gate, or turned off by ``configure`` with a note
        return []
    if not bs.compared_mapping:
        return [f"--benchmark-compare-fail: --benchmark-compare={bs.compare} matches no stored run in {bs.storage}; "
                f"the gate would have nothing to compare with"]
    problems = []
    for check in checks:
        if type(check).__name__ != "DifferenceRegressionCheck":  # a percentage scales with the time it judges
            continue
        stored = [b["stats"][check.field] for run in bs.compared_mapping.values() for b in run.values()
                  if isinstance(b.get("stats", {}).get(check.field), (int, float))]
        if stored and check.threshold > max(stored):
            problems.append(f"--benchmark-compare-fail={check.field}:{check.threshold:g}: an absolute threshold is in "
                            f"seconds, more than the stored {check.field} of every entry (at most {max(stored) * 1e3:.2g} "
                            f"ms), so it fires only where a time more than doubles; give a share ({check.field}:5%) "
                            f"or seconds ({check.field}:{max(stored) * 0.05:.2g} is 5% of the slowest)")
    return problems


def _opened_json_problems(path: Path, root: Path) -> list[str]:
    """--benchmark-json as pytest-benchmark before 5.3 gives it: a file it opened (and emptied) while parsing."""
    if path.resolve().is_relative_to(root.resolve()):
        return [f"--benchmark-json={path}: this pytest-benchmark opened and emptied {path} while reading the command "
                f"line, before pytest-rnnperf could refuse a file in the baselines folder; restore it from version "
                f"control, and use pytest-benchmark 5.3 or later, which opens it only at the end"]
    return []


def _json_path_problems(config: Any, given: Any, settings: Settings, root: Path) -> list[str]:
    """--benchmark-json as a path: pytest-benchmark 5.3 and later open it only after the whole run."""
    target, shown = config.invocation_params.dir / str(given), Path(str(given))
    # The baselines folder is the store nothing may replace. A --benchmark-json elsewhere is the run's own
    # output (rnnperf-run.json in CI, the same name on every rerun), which users expect to be rewritten.
    if settings.baselines.strip() and target.resolve().is_relative_to(root.resolve()):
        if target.resolve().is_file():
            return [f"--benchmark-json={given}: {target.resolve()} is a file in the baselines folder and is never "
                    f"replaced; write the run elsewhere (--rnnperf-update-baseline records a new baseline)"]
        # A new file there is read back as a stored run (named like one, the newest baseline), whatever the run did.
        return [f"--benchmark-json={given}: {target.resolve()} is inside the baselines folder, where a stored run "
                f"joins what later runs are judged against; write the run elsewhere (--rnnperf-update-baseline "
                f"records a new baseline)"]
    if target.is_dir():
        return [f"--benchmark-json={given}: {given} is a folder, not a file"]
    if not target.parent.is_dir():
        return [f"--benchmark-json={given}: folder {shown.parent} does not exist"]
    if not os.access(target if target.exists() else target.parent, os.W_OK):
        return [f"--benchmark-json={given}: {given} is not writable"]
    return []


def storage_problem(config: Any, session: Any) -> str | None:
    """Why pytest-benchmark's storage cannot take this run's --benchmark-save / --benchmark-autosave, or None.

    Saved into the baselines folder, the run would be read back as the newest baseline whatever its outcome
    (failed, regressed, interrupted); and a pytest-xdist run over GPUs of different models has no one folder.
    """
    save, autosave = config.getoption("benchmark_save", None), config.getoption("benchmark_autosave", None)
    if not (save or autosave):
        return None
    flag = f"--benchmark-save={save}" if save else "--benchmark-autosave"
    if len(session.planned_models()) > 1:
        return (f"--benchmark-save / --benchmark-autosave: the pytest-xdist workers have GPUs of different models "
                f"({', '.join(w.gpu_label() for w in session.plan)}) and pytest-benchmark stores one run in one folder; "
                f"--rnnperf-update-baseline records one file per model")
    storage = config.getoption("benchmark_storage", None) or DEFAULT_STORAGE
    folder = _storage_folder(config, storage)
    if storage == DEFAULT_STORAGE and session.gpu.available:  # configure() points it at this GPU model's baselines
        folder = session.run.root / session.gpu.gpu_slug
    if folder is not None and folder.resolve().is_relative_to(session.run.root.resolve()):
        return (f"{flag}: pytest-benchmark would save this run into {folder}, inside the baselines folder, where it "
                f"becomes the newest baseline whatever the run's outcome; record a baseline with "
                f"--rnnperf-update-baseline, or save elsewhere with --benchmark-storage=file://<folder>")
    return None


def _storage_folder(config: Any, storage: str) -> Path | None:
    """The folder a --benchmark-storage value names (None for a storage that is no folder, e.g. elasticsearch)."""
    if storage.startswith("file://"):
        storage = storage[len("file://"):]
    elif "://" in storage:
        return None
    return Path(config.invocation_params.dir) / storage


def configure(config: Any, session: Any, latest: Path | None) -> None:
    """Point pytest-benchmark's storage and compare at this GPU model's baselines (before it loads them).

    pytest-benchmark names its storage folders by OS and Python only, so two GPU models would share one;
    storing under baselines/<gpu model>/ keeps every model apart. Its bare --benchmark-compare looks only in
    this Python's machine-id folder; it is given the exact file our verdicts use, so both compare with the
    same run. Where there is nothing to compare (no GPU, no baseline yet) it is told so instead of searching
    .benchmarks, and a folder is only made when something will be saved there.
    """
    compare = config.getoption("benchmark_compare", None)
    if compare and len(session.planned_models()) > 1:
        # It compares every entry with one stored run, which holds one model's numbers.
        compare = _compare_off(config, session, "the pytest-xdist workers have GPUs of different models and "
                               "pytest-benchmark compares with one stored run; the verdicts judge each model against "
                               "its own", "GPUs of different models")
    if compare is True and latest is not None and latest.name.endswith(".gz"):
        # pytest-benchmark reads plain JSON only: it would warn that it failed to load the file, and compare nothing.
        compare = _compare_off(config, session, f"pytest-benchmark cannot read the gzipped {latest.name}; the "
                               f"verdicts judge against it", "a gzipped baseline")
    folder = session.run.root / session.gpu.gpu_slug
    saving = session.settings.update_baseline or config.getoption("benchmark_save", None) or config.getoption(
        "benchmark_autosave", None)
    if session.gpu.available and config.getoption("benchmark_storage", None) == DEFAULT_STORAGE and (
            folder.is_dir() or saving):
        config.option.benchmark_storage = "file://" + str(folder)  # pytest-benchmark creates it when it loads
    if compare is True and latest is not None:  # the bare flag; an explicit NUM or ID is left alone
        config.option.benchmark_compare = str(latest.resolve())
    elif compare and latest is None:
        config.option.benchmark_compare = []
        why = ("no GPU (baselines are per GPU model)" if not session.gpu.available
               else f"no baseline for {session.gpu.gpu_slug} yet")
        session.measured.notes.append(f"--benchmark-compare: nothing to compare: {why}")
        if config.getoption("benchmark_compare_fail", None):
            # pytest-benchmark would raise a usage error after the whole run; there is nothing to fail against.
            config.option.benchmark_compare_fail = None
            session.measured.notes.append("--benchmark-compare-fail: no stored run to compare with yet; nothing to check")


def _compare_off(config: Any, session: Any, why: str, short: str) -> list[str]:
    """Turn pytest-benchmark's --benchmark-compare (and -fail with it) off, saying why in the notes; its new value."""
    config.option.benchmark_compare = []
    session.measured.notes.append(f"--benchmark-compare: off: {why}")
    if config.getoption("benchmark_compare_fail", None):
        config.option.benchmark_compare_fail = None
        session.measured.notes.append(f"--benchmark-compare-fail: off with --benchmark-compare ({short})")
    return []


def machine_id() -> str:
    """pytest-benchmark's machine id (e.g. ``Linux-CPython-3.11-64bit``): the folder a stored run goes to."""
    from pytest_benchmark.utils import get_machine_id

    return str(get_machine_id())


def benchmark_session(config: Any) -> Any:
    """pytest-benchmark's BenchmarkSession (None if that plugin is disabled)."""
    return getattr(config, "_benchmarksession", None)


_ABSENT = object()
_MACHINE_FIELDS_SHOWN = 3  # the warning stays one readable line; the stored JSON keeps every field


def machine_differences(ours: dict[str, Any], stored: dict[str, Any]) -> list[str]:
    """Each field of two machine_info dicts that differs, as ``cpu.count: 16 -> 32`` (nested keys dotted)."""
    def flat(info: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in info.items():
            if isinstance(value, dict):
                out.update(flat(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
        return out

    def short(value: Any) -> str:
        text = "absent" if value is _ABSENT else str(value)
        return text if len(text) <= 40 else f"{text[:37]}..."

    # As stored (pytest-benchmark compares the JSON): a live tuple equals the list it was saved as.
    a, b = (flat(json.loads(json.dumps(info, default=str))) for info in (stored, ours))
    return [f"{key}: {short(a.get(key, _ABSENT))} -> {short(b.get(key, _ABSENT))}"
            for key in sorted(a.keys() | b.keys()) if a.get(key, _ABSENT) != b.get(key, _ABSENT)]


def compare_without_our_section(benchmarksession: Any, machine_info: dict[str, Any],
                                compared_benchmark: dict[str, Any]) -> Generator[None, Any, Any]:
    """The body of pytest-benchmark's compare_machine_info hook wrapper: one short line instead of two dumps."""
    # pytest-benchmark compares at configure time, before any framework has loaded, so our section (which
    # holds the frameworks' runtime CUDA/cuDNN and flags) always differs: the end-of-run summary diffs it field by
    # field instead. Its own warning prints both machine_info dicts whole (thousands of columns, once a worker
    # under xdist): name the fields that differ, and let it compare the stored dict with itself.
    stored = dict(compared_benchmark.get("machine_info") or {})
    ours = dict(machine_info)
    differences = machine_differences({k: v for k, v in ours.items() if k != "rnnperf"},
                                      {k: v for k, v in stored.items() if k != "rnnperf"})
    if differences:
        more = len(differences) - _MACHINE_FIELDS_SHOWN
        benchmarksession.logger.warning(
            f"Benchmark machine_info is different from the run stored in {benchmarksession.storage}: "
            + "; ".join(differences[:_MACHINE_FIELDS_SHOWN]) + (f" (and {more} more)" if more > 0 else ""))
    machine_info.clear()
    machine_info.update(stored)
    try:
        return (yield)
    finally:
        machine_info.clear()
        machine_info.update(ours)


TABLES_FILE = "benchmark.txt"  # pytest-benchmark's tables of the rnnperf timings, beside rnnperf.json


class _TextWriter:
    """The terminal reporter's methods pytest-benchmark's table writes through, collecting the text instead."""

    def __init__(self) -> None:
        """Start with no text."""
        self.parts: list[str] = []

    def write(self, text: str, **markup: Any) -> None:
        """Text as it is (colours dropped)."""
        self.parts.append(text)

    def write_line(self, line: str, **markup: Any) -> None:
        """A line of text."""
        self.parts.append(line + "\n")

    def rewrite(self, line: str, **markup: Any) -> None:
        """A progress line: nothing for a file."""


def _tables_text(bs: Any, groups: list[Any]) -> str:
    """pytest-benchmark's terminal tables of ``groups``, as text (its histograms drawn as usual, if asked for)."""

    from pytest_benchmark.table import TableResults
    from pytest_benchmark.utils import report_noprogress

    writer = _TextWriter()
    TableResults(columns=bs.columns, sort=bs.sort, histogram=bs.histogram, name_format=bs.name_format,
                 logger=bs.logger, scale_unit=partial(bs.config.hook.pytest_benchmark_scale_unit, config=bs.config),
                 ).display(writer, groups, progress_reporter=report_noprogress)
    return "".join(writer.parts)


def move_tables(bs: Any, report_dir: str) -> str | None:
    """Take pytest-benchmark's tables of the rnnperf timings out of the terminal, into ``report_dir``/benchmark.txt.

    Each case prints a table of its own there, about ten lines: hundreds of lines that pushed the rnnperf summary
    off the screen. A user's own benchmarks keep theirs. Returns the summary's line about it (None: nothing moved).
    """
    if bs is None or not bs.groups:
        return None
    ours = [g for g in bs.groups if all("rnnperf" in (b.get("extra_info") or {}) for b in g[1])]
    if not ours:
        return None
    where = "not written (--rnnperf-report-dir=none)"
    if report_dir and report_dir.lower() != "none":
        path = Path(report_dir) / TABLES_FILE
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_tables_text(bs, ours), encoding="utf-8")
            where = f"in {path}"
        except OSError as exc:
            where = f"not written to {path}: {exc.strerror or exc}"
    rest = [g for g in bs.groups if not any(g is o for o in ours)]
    if rest:
        bs.groups = rest
    else:  # no groups would skip its --benchmark-compare-fail check too; quiet skips the tables only
        bs.quiet = True
    return (f"pytest-benchmark: its tables of {len(ours)} case(s) {where} (--rnnperf-benchmark-tables prints them "
            f"here; --benchmark-json keeps every timing)")
