"""``noise RUN RUN [RUN...] --out FILE``: each case's device-time spread over null runs, stored as the per-case
thresholds of that GPU model (``baselines/<gpu>/noise.json``); exit 0."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from pytest_rnnperf.cli.args import DEFAULT, load, path_given
from pytest_rnnperf.judge.noise import MAX_SPREAD, measure
from pytest_rnnperf.model.records import BaselineError
from pytest_rnnperf.report.text import fit, terminal_width, text_table
from pytest_rnnperf.store.baselines import output_problem, write_json


def add_parser(subparsers: Any) -> None:
    """The ``noise`` subcommand and its options."""
    nse = subparsers.add_parser("noise", help="each case's device-time spread over null runs of one GPU model, "
                                              "written as its per-case thresholds")
    nse.add_argument("runs", type=path_given, nargs="+", help="two or more stored null runs (same GPU model and software)")
    nse.add_argument("--out", type=path_given, default=None,
                     help="write the thresholds here, e.g. baselines/<gpu>/noise.json (refuses to replace a file)")


def run(args: argparse.Namespace) -> tuple[int, list[str]]:
    """Exit code and lines of ``noise`` for parsed arguments."""

    return noise_files(args.runs, args.out, terminal_width())


def noise_files(paths: Sequence[Path], out: Path | None, width: int | None = None) -> tuple[int, list[str]]:
    """Exit code and lines for ``noise``: per case, the device-time spread and the threshold it justifies (within
    ``width``; None: as wide as its cells)."""

    if len(paths) < 2:
        return 2, ["error: noise needs at least two stored runs"]
    if out is not None:

        problem = output_problem("--out", out, "noise.json")
        if problem:
            return 2, [f"error: {problem}"]
    try:
        runs = load(paths, allow_other_gpu=False, distinct=True,
                    force="the noise of one GPU model is measured on that model's runs only")
    except (BaselineError, ValueError) as exc:
        return 2, [f"error: {exc}"]
    result = measure(runs)
    if not result.spread:
        return 2, ["error: no case has device time in two or more of these runs"]

    wide = [(k, v) for k, v in result.spread.items() if v > MAX_SPREAD]
    if wide:  # stored, such a spread would switch the case's gate off
        return 2, [f"error: {', '.join(f'{k} moved {v:.0%}' for k, v in wide)} between these runs: at most 100% for "
                   f"null runs; leave out the runs where something changed"]
    floor = DEFAULT.device_effect
    rows = [[case_id, f"{value:.1%}", f"{result.effect(case_id, floor):.1%}"]
            for case_id, value in sorted(result.spread.items(), key=lambda kv: -kv[1])]
    lines = text_table(["case", "device spread", "threshold"], rows, right={1, 2}, width=width)
    lines.append(f"{len(result.spread)} case(s) over {len(runs)} runs: {result.raised(floor)} judged above {floor:.0%}")
    if out is not None:

        try:
            write_json(out, result.to_dict())
        except OSError as exc:  # a read-only folder, a file where a folder should be, a file that appeared
            return 2, [f"error: cannot write {out}: {exc.strerror or exc}"]
        lines.append(f"written: {out}")
    return 0, fit(lines, width) if width else lines
