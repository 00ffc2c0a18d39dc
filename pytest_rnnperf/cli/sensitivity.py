"""``sensitivity baselines/<gpu>``: per case, the smallest regression its history can detect, and which cases need
more processes; ``--case ID`` shows how each kernel's noise was learned. Exit 0 (2 on unusable input)."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_rnnperf.cli.args import DEFAULT, gpu_folder_problem, path_given, text_given
from pytest_rnnperf.judge.across import NOISE_FLOOR, spread
from pytest_rnnperf.judge.sensitivity import noise_causes, sensitivity
from pytest_rnnperf.model.metrics import BUSY, KERNEL, MS, WALL, show
from pytest_rnnperf.model.process import ProcessSummary
from pytest_rnnperf.model.records import BaselineError
from pytest_rnnperf.report.text import fit, terminal_width, text_table
from pytest_rnnperf.store.baselines import gpus_with_baselines
from pytest_rnnperf.store.history import case_history, case_ids
from pytest_rnnperf.store.runs import load_model


def add_parser(subparsers: Any) -> None:
    """The ``sensitivity`` subcommand and its options."""
    sen = subparsers.add_parser("sensitivity", help="per case, the smallest regression its stored history can detect")
    sen.add_argument("folder", type=path_given, help="a GPU model's folder of stored runs (baselines/<gpu>)")
    sen.add_argument("--case", type=text_given("a case id"), default=None,
                     help="one case id: its kernels across the history, each with its noise, and what spreads its "
                          "step (overlap, the host, a kernel at two speeds, the clock, the cards)")


def run(args: argparse.Namespace) -> tuple[int, list[str]]:
    """Exit code and lines of ``sensitivity`` for parsed arguments."""

    folder: Path = args.folder
    if (problem := gpu_folder_problem(folder)) is not None:
        return 2, [problem]
    try:  # a misplaced, misnamed or broken file is one line naming it, as in the run
        loaded = load_model(folder.parent, folder.name)
    except BaselineError as exc:
        return 2, [f"error: {exc}"]
    if not loaded.runs:
        models = gpus_with_baselines(folder)
        if models:  # the baselines folder itself: its GPU models' folders are one level down
            return 2, [f"error: {folder}: the baselines folder, which holds one folder per GPU model; give one "
                       f"of them: {', '.join(str(folder / m) for m in models)}"]
        if loaded.notes:  # an accepted change with no run kept after it yet
            return 2, [f"error: {folder}: no stored run to judge against; {loaded.notes[-1]}"]
        return 2, [f"error: {folder}: no stored run (expected {folder}/<machine id>/NNNN_<tag>.json)"]

    runs = list(loaded.runs)
    code, lines = (kernel_table(runs, args.case, terminal_width()) if args.case is not None
                   else (0, case_table(runs, terminal_width())))
    if code == 0:  # an error stays one line
        lines += [f"note: {note}" for note in loaded.notes]
    return code, lines


def case_table(runs: list[Any], width: int | None = None) -> list[str]:
    """One row per case: processes, noise between them, the smallest regression a new process is failed for
    (within ``width``; None: as wide as its cells)."""

    rows, found = [], []
    for case_id in case_ids(runs):
        history = case_history(runs, case_id)
        if not any(p.get(WALL) for p in history.processes):
            continue  # a generic-only case (against the float64 reference): nothing timed to judge
        s = sensitivity(case_id, history.processes, DEFAULT)
        found.append(s)
        rows.append([case_id, str(s.processes), s.metric, "-" if s.noise is None else f"{s.noise:.2%}",
                     s.shown, history.since, s.status])
    lines = text_table(["case", "processes", "metric", "noise", "smallest", "since", "status"], rows, right={1, 3, 4},
                       width=width)
    few = [s.case_id for s in found if s.smallest is None]
    short = [s for s in found if s.smallest is not None and not s.resolves]
    noisy = sum(1 for s in short if s.by_noise and not s.few)
    young = sum(1 for s in short if s.by_noise and s.few)
    held = f"{young} by how few processes they hold, " if young else ""
    lines.append(f"{len(found)} case(s): {len(found) - len(few) - len(short)} resolve their floor (caught 19 times in "
                 f"20), {noisy} limited by their own noise, {held}{len(short) - noisy - young} called at their floor, "
                 f"{len(few)} need {DEFAULT.min_processes} processes (record with --rnnperf-record-processes, or keep "
                 f"nightly runs with --rnnperf-keep-run)")
    return fit(lines, width) if width else lines


def kernel_table(runs: list[Any], case_id: str, width: int | None = None) -> tuple[int, list[str]]:
    """The cuDNN side's kernels of one case in every process of its history (ms/step), center and noise; within
    ``width``, the newest processes that fit (the center and noise still count them all)."""

    history = case_history(runs, case_id)
    if not history.processes:
        return 2, [f"error: no stored run holds {case_id}"]
    # A process's column is about 10 characters wide with its gap; the kernel name, median and noise keep ~60.
    shown = len(history.processes) if width is None else max(1, min(len(history.processes), (width - 60) // 11))
    names = list(dict.fromkeys(n for s in history.processes for n in s.kernels))
    rows = []
    for name in names:
        values = [s.kernels.get(name, 0.0) for s in history.processes]
        present = [v for v in values if v > 0]
        noise = spread(present).noise if len(present) >= 3 else None
        rows.append([name[:60]] + [show(KERNEL, v or None, fine=True) for v in values[-shown:]]
                    + [_median_ms(present), "-" if noise is None else f"{noise:.2%}"])
    busy = [s.get(BUSY) or 0.0 for s in history.processes]
    timed = [b for b in busy if b > 0]  # a process without device time (no CUPTI) has no busy time to show
    rows.append([f"{BUSY} (the step)"] + [show(BUSY, v or None, fine=True) for v in busy[-shown:]]
                + [_median_ms(timed), f"{spread(timed).noise:.2%}" if len(timed) >= 3 else "-"])
    header = [f"kernel ({MS}/step)"] + [s.source for s in history.processes[-shown:]] + ["median", "noise"]
    lines = [f"{case_id}: {len(history.processes)} processes since {history.since} (noise: 1.4826 x MAD of the logs, "
             f"at least {NOISE_FLOOR:.1%}; '-' = did not run)"]
    if shown < len(history.processes):
        lines.append(f"the newest {shown} processes shown (a wider terminal shows more); median and noise of all "
                     f"{len(history.processes)}")
    table = text_table(header, rows, right=set(range(1, len(header))), width=width)
    # Each lent night may be a new card: which card ran a process tells card-to-card spread from the one-card noise.
    cards = {run.path.name: card for run in runs if (card := run.card_of(case_id))}
    why = _why_noisy(case_id, history.processes, cards)
    return 0, (fit(lines, width) + table + fit(why, width)) if width else lines + table + why


def _why_noisy(case_id: str, processes: Sequence[ProcessSummary], cards: Mapping[str, str] | None = None) -> list[str]:
    """What limits the case where its own noise does, or spreads its busy time where its steady kernels resolve the
    floor instead, one line per cause (``judge.sensitivity.noise_causes``; ``cards``: file name -> GPU uuid)."""
    s = sensitivity(case_id, processes, DEFAULT)
    if s.smallest is None or (s.resolves and s.metric != "steady") or not s.by_noise or s.few:
        return [s.status]
    causes = noise_causes(processes, cards)
    if s.resolves:
        return [s.status] + (["what spreads its busy time:"] + [f"  - {cause}" for cause in causes] if causes else [])
    head = f"its own noise ({s.noise:.1%}) limits it to {s.shown}"
    if not causes:
        return [head + "; no single cause stands out in its history"]
    return [head + "; what spreads it:"] + [f"  - {cause}" for cause in causes]


def _median_ms(values: list[float]) -> str:
    """The median of the processes where it ran, in ms ("-" where it ran in none)."""

    return show(KERNEL, statistics.median(values) if values else None, fine=True)
