"""The stored runs a history reads: files or folders of them, each run counted once, in the order they ran."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from pytest_rnnperf.model.records import BaselineError, StoredRun
from pytest_rnnperf.store.baselines import stored_run_files
from pytest_rnnperf.store.runs import Loaded, distinct, load_run, read_json


def _not_a_run(path: Path) -> str | None:
    """Why a JSON file found in a folder is clearly no pytest-rnnperf run, or None when it may be a broken one."""
    try:
        data = read_json(path)
    except BaselineError:
        return None  # a truncated nightly run reads the same as any broken file: an error, never skipped
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        return "not a pytest-benchmark run"
    info = data.get("machine_info")
    if not isinstance(info, dict) or not isinstance(info.get("rnnperf"), dict):
        return "a pytest-benchmark run not written by pytest-rnnperf"
    return None


def load_runs(paths: Sequence[Path]) -> Loaded:
    """Every stored run under ``paths`` (files, or folders searched for *.json and *.json.gz); BaselineError for a bad one."""
    runs: list[StoredRun] = []
    notes: list[str] = []
    seen: set[Path] = set()
    for given in map(Path, paths):
        if given.is_dir():
            files = stored_run_files(given)
            if not files:
                notes.append(f"{given}: no *.json or *.json.gz file")
        elif given.is_file():
            files = [given]
        else:
            raise BaselineError(f"{given}: no such file or folder")
        for path in files:
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                runs.append(load_run(path))
            except BaselineError:
                reason = _not_a_run(path) if given.is_dir() else None
                if reason is None:  # named on the command line, or a pytest-rnnperf run that cannot be read
                    raise
                notes.append(f"skipped {path}: {reason}")
    return distinct(runs, notes)


def _when(run: StoredRun) -> datetime | None:
    """When the run started (pytest-benchmark's ``datetime``, UTC where it names no zone), None if unreadable."""
    text = run.datetime.strip()
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def order_runs(runs: Sequence[StoredRun]) -> tuple[list[StoredRun], str | None]:
    """Runs by start time; by file name (and a note saying so) when any of them has no readable datetime."""
    whens = [_when(r) for r in runs]
    if all(w is not None for w in whens):
        order = sorted(range(len(runs)), key=lambda i: (whens[i], runs[i].path.name, str(runs[i].path)))
        return [runs[i] for i in order], None
    undated = sum(w is None for w in whens)
    return (sorted(runs, key=lambda r: (r.path.name, str(r.path))),
            f"{undated} run(s) without a readable datetime: runs ordered by file name")
