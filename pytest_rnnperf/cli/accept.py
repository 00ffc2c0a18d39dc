"""``accept baselines/<gpu> --reason TEXT [--from NNNN]``: mark a deliberate change (a driver, cuDNN or framework
upgrade) so that each case's history restarts with the runs kept from then on, the reason stored beside them in
``accepted.json``. Nothing stored is changed or removed. Exit 0 (2 on unusable input)."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_rnnperf.cli.args import gpu_folder_problem, path_given, text_given
from pytest_rnnperf.model.records import BaselineError, StoredRun
from pytest_rnnperf.store import accepts
from pytest_rnnperf.store.baselines import find_all, number_of, replace_json
from pytest_rnnperf.store.runs import load_paths


def add_parser(subparsers: Any) -> None:
    """The ``accept`` subcommand and its options."""
    acc = subparsers.add_parser("accept", help="accept a deliberate change: each case's history restarts after it")
    acc.add_argument("folder", type=path_given, help="a GPU model's folder of stored runs (baselines/<gpu>)")
    acc.add_argument("--reason", type=text_given("why the change is accepted"), required=True,
                     help="why, stored with the acceptance (e.g. 'cuDNN 9.19 -> 9.27 upgrade')")
    acc.add_argument("--from", dest="from_run", type=text_given("a stored run's number, e.g. 0028"), default=None,
                     help="the stored run (NNNN or its file name) the history restarts at; default: the next kept run")


def run(args: argparse.Namespace) -> tuple[int, list[str]]:
    """Exit code and lines of ``accept`` for parsed arguments."""
    folder: Path = args.folder
    if (problem := gpu_folder_problem(folder)) is not None:
        return 2, [problem]
    path = folder / accepts.FILE_NAME
    try:
        runs = list(load_paths(find_all(folder.parent, folder.name)).runs)
        before = accepts.newest(accepts.load(path))
    except BaselineError as exc:
        return 2, [f"error: {exc}"]
    instant = datetime.now(timezone.utc)
    # Whole microseconds: a run stored earlier within the same second must stay before the acceptance.
    now, shown = instant.isoformat(), instant.isoformat(timespec="seconds")
    start = _start(runs, args.from_run) if args.from_run is not None else None
    if isinstance(start, str):
        return 2, [f"error: {start}"]
    entry = accepts.Accepted(since=start.datetime if start else now, reason=args.reason, accepted_at=shown,
                             from_run=start.path.name if start else "")
    if before is not None and accepts.newest([before, entry]) is before and before.since != entry.since:
        return 2, [f"error: --from {args.from_run}: stored before the change already accepted since {before.since} "
                   f"({before.reason}); judging already restarts later"]
    replace_json(path, accepts.with_new(path, entry))
    kept, left_out = accepts.after(runs, entry)
    restart = start.path.name if start else "the next run kept with --rnnperf-keep-run"
    return 0, [f"accepted: each case's history restarts at {restart}; {left_out} older stored run(s) are no longer "
               f"judged against ({len(kept)} from then on), the reason stored in {path}"]


def _start(runs: list[StoredRun], given: str) -> StoredRun | str:
    """The dated stored run ``given`` names (NNNN or a file name), or a one-line problem."""
    named = [r for r in runs if given in (r.path.name, r.path.name.split(".")[0])
             or (given.isdigit() and number_of(r.path) == int(given))]
    if not named:
        return f"--from {given}: no stored run of that number or name here ({len(runs)} stored)"
    if len(named) > 1:
        return f"--from {given}: {len(named)} stored runs match ({', '.join(str(r.path) for r in named)}); give the file name"
    if accepts.instant(named[0].datetime) is None:
        return f"--from {given}: {named[0].path} holds no date (machine_info / datetime), so runs after it cannot be told"
    return named[0]
