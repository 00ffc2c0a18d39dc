"""``history PATH [PATH...]``: each case's series over many stored runs (files or folders), per GPU model, and
its change points (steps and drifts, ``history/changes.py`` says how); exit 0 none toward slower, 1 one toward
slower (within ``--since``, where given)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pytest_rnnperf.cli.args import fraction, path_given
from pytest_rnnperf.history.changes import DEFAULT_MIN_SHIFT, FALLBACKS, METRICS, PENALTY, parse_since
from pytest_rnnperf.history.render import history_files
from pytest_rnnperf.report.text import terminal_width
from pytest_rnnperf.session.settings import missing_library

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.history.changes import Window


def add_parser(subparsers: Any) -> None:
    """The ``history`` subcommand and its options."""

    his = subparsers.add_parser(
        "history", help="each case's series over many stored runs per GPU model, and its change points",
        description=f"Each case's series over stored runs, per GPU model (runs of different models are never "
                    f"mixed), ordered by start time, and its change points: ruptures' PELT on log values, "
                    f"penalty {PENALTY:g}*noise^2*ln(runs), noise from the series itself; consecutive shifts one "
                    f"way are a drift where one ramp explains them. Exit 0: no change point toward slower "
                    f"(longer time, lower speedup) in the --metric series; 1: one or more, however long ago, or "
                    f"only within --since; 2: unusable input; 3: internal error.")
    his.add_argument("paths", type=path_given, nargs="+", metavar="PATH",
                     help="stored runs, or folders searched for *.json (baselines/, nightly --benchmark-json files)")
    his.add_argument("--metric", choices=sorted(METRICS), default="device",
                     help="cuDNN device time per step (default), cuDNN wall time per step, or the wall speedup")
    his.add_argument("--fallback", choices=FALLBACKS, default="skip",
                     help="--metric device, a run without device time for a case: leave that run out of the "
                          "case's series (skip, default) or follow the case in wall time (wall)")
    his.add_argument("--min-shift", type=fraction(0, strict=False), default=DEFAULT_MIN_SHIFT,
                     help=f"smallest change of level reported (default {DEFAULT_MIN_SHIFT})")
    his.add_argument("--since", type=_since, default=None, metavar="N|YYYY-MM-DD",
                     help="exit 1 only for a change point toward slower within the newest N runs of each GPU model "
                          "(N nights of a nightly), or in the runs started on or after the date: a step accepted "
                          "once stops failing later nights (default: the whole history)")
    his.add_argument("--plot", type=path_given, default=None, metavar="DIR", help="write one PNG per GPU model here")
    his.add_argument("--json", type=path_given, default=None, metavar="FILE", help="write the result as JSON here")
    his.add_argument("--html", type=path_given, default=None, metavar="DIR",
                     help="write a site here (a new or empty folder): per GPU model each case's series with its "
                          "change points, and the changes newest first with the environment diff and the kernels "
                          "that moved; it opens from disk, no network")


def _since(text: str) -> Window:
    """An argparse type: ``--since`` as a window (a bad one is the parser's one-line error)."""

    try:
        return parse_since(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace) -> tuple[int, list[str]]:
    """Exit code and lines of ``history`` for parsed arguments."""

    for module, wanted in (("rich", True), ("matplotlib", args.plot is not None)):
        if wanted and (missing := missing_library(module)) is not None:  # an install problem, not a bug (exit 3)
            return 2, [f"error: history {missing}"]

    return history_files(args.paths, args.metric, args.fallback, args.min_shift, args.plot, args.json, args.html,
                         args.since, terminal_width())
