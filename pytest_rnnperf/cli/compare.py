"""``compare OLD NEW``: the plugin's verdicts of NEW against the baseline OLD; exit 0 no regression, 1 a case regressed.

OLD may be a GPU model's folder (``baselines/<gpu>``): each case is then judged against its history there, as
the plugin judges it (files numbered from NEW's own number on are left out when NEW lies in that folder), and
``--confirm-nights`` reads the nights before NEW from the suspects its kept runs name. Against one OLD file it is
refused: the night before NEW left its suspect cases' records out of its file, so one file cannot say it.
"""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_rnnperf.cli.args import load, number, path_given
from pytest_rnnperf.judge.noise import load as load_noise
from pytest_rnnperf.judge.rules import thresholds as declared
from pytest_rnnperf.judge.verdicts import Outcome, Policy, Verdict, compare_runs, confirmed, judge
from pytest_rnnperf.model.records import BaselineError
from pytest_rnnperf.report.rows import deciding, environment_changes, record_kernel_lines, verdict_counts
from pytest_rnnperf.report.text import fit, terminal_width
from pytest_rnnperf.session.settings import Setting, threshold_setting, thresholds
from pytest_rnnperf.store.baselines import find_all, machine_folder_problem, number_of
from pytest_rnnperf.store.history import case_history, violating_nights
from pytest_rnnperf.store.runs import load_paths, load_run


def threshold_flag(parser: argparse.ArgumentParser, s: Setting) -> None:
    """The flag ``--<name>`` of a threshold's setting: the plugin's checks, its default, its help."""
    flag = "--" + s.name.replace("_", "-")
    if s.switch:
        parser.add_argument(flag, action="store_true", help=s.help.replace("%", "%%"))
    else:
        parser.add_argument(flag, type=number(s.check or (lambda _: None), convert=s.convert), default=s.default,
                            help=f"{s.help} (default {s.typed_default})".replace("%", "%%"))


def add_parser(subparsers: Any) -> None:
    """The ``compare`` subcommand and its options."""
    cmp = subparsers.add_parser("compare", help="verdict per case of NEW against the baseline OLD")
    cmp.add_argument("old", type=path_given, help="baseline run (e.g. baselines/NVIDIA_H200/.../0001_baseline.json), or a "
                                            "GPU model's folder (baselines/NVIDIA_H200) to judge against its history")
    cmp.add_argument("new", type=path_given, help="run to judge (e.g. the --benchmark-json of tonight's run)")
    for t in declared():  # each threshold a rule declares for users, as --<name>
        if t.option:
            threshold_flag(cmp, threshold_setting(t))
    cmp.add_argument("--allow-other-gpu", action="store_true",
                     help="compare runs from different GPU models (refused by default: their times differ by design)")
    cmp.add_argument("--any-order", action="store_true",
                     help="compare even where OLD was recorded after NEW (refused by default: swapped files read as "
                          "'improved')")
    cmp.add_argument("--noise", type=path_given, default=None,
                     help="per-case device-time thresholds of this GPU model (baselines/<gpu>/noise.json)")
    cmp.add_argument("--changed", action="store_true",
                     help="list only the cases that did not come out unchanged (the last line still counts them all)")


def run(args: argparse.Namespace) -> tuple[int, list[str]]:
    """Exit code and lines of ``compare`` for parsed arguments."""

    policy = Policy(**{t.name: getattr(args, t.name) for t in declared() if t.option})
    return compare_files(args.old, args.new, policy, args.allow_other_gpu, args.noise, args.any_order, args.changed,
                         terminal_width())


def compare_files(old: Path, new: Path, policy: Policy = Policy(), allow_other_gpu: bool = False,
                  noise_file: Path | None = None, any_order: bool = False, changed: bool = False,
                  width: int | None = None) -> tuple[int, list[str]]:
    """Exit code and the lines to print for ``compare`` (per-case device thresholds from ``noise_file``).

    ``changed`` leaves out the cases that came out unchanged; ``width`` wraps the lines to it (None: as they are).
    """

    try:
        notes: tuple[str, ...] = ()
        suspects: dict[str, int] = {}
        if old.is_dir():
            runs, cur, notes = history_runs(old, new)
            suspects = violating_nights(runs)
            runs = [r for r in runs if r.records]  # a night of suspects only names them, it holds no record
            if not runs:
                raise ValueError(f"{old}: no stored run before {new.name} holds a record")
            base = runs[0]
        elif policy.confirm_nights > 1:
            return 2, [f"error: --confirm-nights={policy.confirm_nights} needs OLD to be a GPU model's folder "
                       f"(baselines/<gpu>): the nights before NEW are read from the suspects its kept runs name"]
        else:
            base, cur = load([old, new], allow_other_gpu, distinct=True)  # a run against itself always passes
            runs = []
            if not any_order and base.datetime and cur.datetime and _when(base.datetime) > _when(cur.datetime):
                return 2, [f"error: OLD {old} is newer than NEW {new} ({base.datetime} after {cur.datetime}): swap them, "
                           f"or give --any-order"]
        if noise_file is not None:
            policy = load_noise(noise_file).applied_to(policy)
    except (BaselineError, ValueError) as exc:
        return 2, [f"error: {exc}"]
    verdicts = judge_history(runs, cur, policy, suspects) if runs else compare_runs(base, cur, policy)
    if not verdicts:  # e.g. the night torch saw no GPU and skipped every cuDNN case: not a pass
        return 2, [f"error: nothing in common: none of the {len(base.records)} case(s) of {old.name} is in {new}"]
    lines = [f"baseline {old} ({base.gpu_slug}) vs {new} ({cur.gpu_slug}); thresholds: {thresholds(policy)}"]
    shown = [v for v in verdicts if not (changed and v.outcome is Outcome.UNCHANGED)]
    for v in shown:
        label = {Outcome.REGRESSED_NOT_FAILED: "FLAGGED", Outcome.SUSPECT: "SUSPECT",
                 Outcome.AMBIGUOUS_CLOCK: "CLOCK"}.get(v.outcome, str(v.verdict).upper())
        if v.host_regressed and v.verdict is not Verdict.REGRESSED:
            label = "HOST" if v.fails else "HOST-FLAG"
        # The step metric that decided, where another than the device time: busy and kernel time, the steady kernels.
        step = deciding(v)
        lines.append(f"{label:<10} {v.case_id}: {v.time.explain()}"
                     + (f"; {step.explain()}" if step is v.balanced or step is v.steady else "")
                     + (f"; {v.host.explain()}" if v.host is not None else "")
                     + (f"; {v.speedup.explain()}" if v.speedup is not None else "")
                     + (f" [window: {v.flagged}]" if v.flagged else "")
                     + (f" [{v.host_bound}]" if v.host_bound else ""))
        lines += [f"{'':<10} {why}" for why in (v.drift, v.clock, v.suspect) if why]
        if v.verdict is Verdict.AMBIGUOUS and not v.processes:
            lines.append(f"{'':<10} {_too_few_processes(v.case_id, runs, policy)}")
        if v.moved:
            kernels = [k.explain() for k in v.kernels] or record_kernel_lines(base.records.get(v.case_id),
                                                                               cur.records.get(v.case_id))
            if kernels:
                lines.append(f"{'':<10} kernels: " + "; ".join(kernels))
    missing = sorted(set(base.records) - set(cur.records))
    if missing:
        lines.append(f"not in {new.name}: {', '.join(missing)}")
    # A baseline written before a field was recorded lacks it: that is no change of the stack.
    diff = environment_changes(base.environment, cur.environment, base.path.name if base.format < cur.format else "")
    lines.append("environment changes: " + ("; ".join(diff) if diff else "none"))
    lines.append(f"{len(verdicts)} case(s) compared: " + (verdict_counts(verdicts) or "none in common")
                 + (f" ({len(verdicts) - len(shown)} unchanged not listed: --changed)" if changed else ""))
    lines += [f"note: {note}" for note in notes]
    code = 1 if any(v.fails for v in verdicts) else 0
    return code, fit(lines, width, hang=11) if width else lines


def _too_few_processes(case_id: str, runs: list[Any], policy: Policy) -> str:
    """Why an ambiguous case was judged one process against one: the history it had, and what would decide it."""

    if not runs:
        return ("ambiguous with too few processes: OLD is one run, judged one process against one; give its GPU "
                "model's folder to judge against the processes stored there")
    have = len(case_history(runs, case_id).processes)
    return (f"ambiguous with too few processes: {have} stored, {policy.min_processes} needed to judge across "
            f"processes (record with --rnnperf-record-processes, or keep nightly runs with --rnnperf-keep-run)")


def history_runs(folder: Path, new: Path) -> tuple[list[Any], Any, tuple[str, ...]]:
    """The stored runs of a GPU model's folder (newest first) that came before ``new``, ``new``, and notes on copies
    counted once; ValueError if there is none."""

    if (machine := machine_folder_problem(folder)) is not None:
        raise ValueError(machine)
    cur = load_run(new)
    inside = new.resolve().parent.parent == folder.resolve() and number_of(new) > 0
    paths = [p for p in find_all(folder.parent, folder.name)
             if p.resolve() != new.resolve() and not (inside and number_of(p) >= number_of(new))]
    if not paths:
        raise ValueError(f"{folder}: no stored run before {new.name} (expected {folder}/<machine id>/NNNN_<tag>.json)")
    loaded = load_paths(paths)
    other = [r for r in loaded.runs if r.gpu_slug != cur.gpu_slug]
    if other:
        raise ValueError(f"{other[0].path} is a run of {other[0].gpu_slug}, {new} of {cur.gpu_slug}: a history is one GPU model's")
    return list(loaded.runs), cur, loaded.notes


def judge_history(runs: list[Any], cur: Any, policy: Policy, suspects: dict[str, int] | None = None) -> list[Any]:
    """Each case of ``cur`` judged against its history in ``runs`` (newest first), as the plugin judges it, a failure
    confirmed over the nights running it regressed on before (``suspects``, as ``violating_nights`` reads them)."""

    out = []
    for case_id, record in cur.records.items():
        stored = next((r.records[case_id] for r in runs if case_id in r.records), None)
        if stored is None:
            continue
        verdict = judge(stored, record, policy, history=case_history(runs, case_id).judged)
        if verdict is not None:
            out.append(confirmed(verdict, (suspects or {}).get(case_id, 0), policy.confirm_nights))
    return out


def _when(stamp: str) -> Any:
    """A stored run's datetime, comparable across time zones (naive stamps read as UTC)."""

    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)  # unreadable: never "newer", so no refusal on it
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
