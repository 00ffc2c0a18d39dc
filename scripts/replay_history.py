"""Replay the across-process rule over a GPU model's stored history, leaving out one process at a time.

    python scripts/replay_history.py baselines/NVIDIA_H100_80GB_HBM3 [--extra REPORT.json ...] [--host-floor 1.0]

Each stored process of each case with at least four is judged, on its medians, against the others: the cuDNN
device time, summed kernel time, their geometric mean (balanced time), their ratio (kernel overlap, against the least
of the others) and host overhead at the policy's thresholds,
and every kernel with the kernel rule (nearest mode, reports included as the plugin reads them,
half-the-growth-reached-the-step, kernel mix). The held-out
process is also given a synthetic spin kernel of 3% and 5% of the step, to count how many the kernel rule would
name, and a uniform 3% slowdown of its whole step, to count how many device or balanced time would fail.
``--steady NOISE`` also judges each held-out process on its steady kernels (``across.steady_kernels`` of the others
at NOISE; the plugin's ``rules.SteadyTime`` uses 1%), at the line that catches the device floor 19 times in 20
(``across.Spread.catching``). ``--device-floor`` replays every rule at another floor than the policy's 3%.
A held-out process at a slower speed the others ran in three stored runs passes, as in the plugin
(``across.stored_speed``); ``--no-speeds`` replays the rule before that. A process stored without device time (an
early record) is left out of what it did not measure, not its case with it.
``--extra`` adds the
processes of rnnperf.json reports (null runs that were not kept). Point estimates only (no bootstrap interval):
an upper bound on what the plugin, which requires a whole interval beyond the threshold, would report.
This is how the rule's changes are checked before a GPU run; the GPU runs are the evidence
(baselines/<gpu>/evidence/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_rnnperf.judge import across as xp  # noqa: E402
from pytest_rnnperf.judge.compare import Comparison, Verdict  # noqa: E402
from pytest_rnnperf.judge.policy import Policy  # noqa: E402
from pytest_rnnperf.judge.rules import balanced, mix_changes  # noqa: E402
from pytest_rnnperf.judge.steady import steady_series  # noqa: E402
from pytest_rnnperf.model.metrics import BALANCED  # noqa: E402
from pytest_rnnperf.model.process import BUSY, HOST, WORK, ProcessSummary, summarize  # noqa: E402
from pytest_rnnperf.model.records import CaseRecord, RecordError, StoredRun  # noqa: E402
from pytest_rnnperf.store.baselines import find_all  # noqa: E402
from pytest_rnnperf.store.history import case_history, case_ids  # noqa: E402
from pytest_rnnperf.store.runs import load_run  # noqa: E402


def stored_runs(gpu_folder: Path) -> list[StoredRun]:
    """The GPU model's stored runs, newest first (as ``find_all`` lists them)."""
    paths = [p for p in gpu_folder.glob("*/*.json") if p.parent.name != "evidence"]
    return sorted((load_run(p) for p in paths), key=lambda r: r.path.name, reverse=True)


def reports(gpu_folder: Path) -> dict[str, list[ProcessSummary]]:
    """Each case's stored reports (kept runs where it regressed, not failed): the kernel rule reads their kernel mix
    (``judge.across.nearest_mode``), so the replay gives them to it too, never holding them out."""
    runs = stored_runs(gpu_folder)
    return {c: [s for s in case_history(runs, c).judged if s.reported] for c in case_ids(runs)}


def histories(gpu_folder: Path, extra: Sequence[Path], at_least: int = 4) -> dict[str, list[ProcessSummary]]:
    """Every case's stored processes (plus the extra reports' processes), where there are ``at_least``."""
    runs = stored_runs(gpu_folder)
    more: dict[str, list[ProcessSummary]] = {}
    for report in extra:
        for raw in json.loads(report.read_text())["results"]:
            try:
                record = CaseRecord.from_dict(raw)
            except RecordError:
                continue
            if record.cudnn_device is not None:
                more.setdefault(record.id, []).append(summarize(record, report.name))
    out = {}
    for case_id in case_ids(runs):
        processes = list(case_history(runs, case_id).processes) + more.get(case_id, [])
        if len(processes) >= at_least:
            out[case_id] = [with_balanced(s) for s in processes]
    return out


def with_balanced(summary: ProcessSummary) -> ProcessSummary:
    """``summary`` with its balanced time (``rules.BalancedTime``), where it has busy and summed kernel time."""
    busy, work = summary.get(BUSY), summary.get(WORK)
    return replace(summary, metrics=dict(summary.metrics, **{BALANCED: balanced(busy, work)})) if busy and work \
        else summary


def slowdown_caught(processes: list[ProcessSummary], slower: float, policy: Policy, min_runs: int = 0) -> int:
    """How many held-out processes, their whole step ``slower`` (busy and kernel time), device or balanced time
    would fail against the others (with ``min_runs``: not where it lands at a slower speed they know)."""
    caught = 0
    for i, now in enumerate(processes):
        rest = processes[:i] + processes[i + 1:]
        for metric in (BUSY, BALANCED):
            past, value = [s.get(metric) or 0.0 for s in rest], (now.get(metric) or 0.0) * slower
            sp = xp.spread(past)
            if value / sp.center - 1 > sp.threshold(policy.device_effect, policy.history_k) and not (
                    min_runs and xp.stored_speed(past, [s.source for s in rest], value, floor=policy.device_effect,
                                                 k=policy.history_k, min_runs=min_runs)):
                caught += 1
                break
    return caught


def steady_change(rest: list[ProcessSummary], now: ProcessSummary, limit: float,
                  policy: Policy) -> list[tuple[float, float]]:
    """``now``'s steady-kernel time against ``rest``'s (kernels chosen from ``rest`` alone): its change and threshold
    on the plain sum and, where the rule weighs them too, on the weighted time; empty where ``rest`` has no steady
    kernel ``now`` ran."""
    names = [n for n in xp.steady_kernels(rest, limit) if now.kernels.get(n, 0.0) > 0]
    if not names:
        return []
    found = []
    for mix, past in steady_series(rest, names):
        sp = xp.spread(past)
        found.append((mix.time(now.kernels) / sp.center - 1, sp.catching(policy.device_effect, policy.history_k)))
    return found


def steady_replay(processes: list[ProcessSummary], limit: float, policy: Policy,
                  slower: float = 1.03) -> tuple[list[float], int, int]:
    """Each held-out process against the rest on its steady kernels (failing on either value, as the rule does): the
    alarms (the largest change beyond its threshold), how many would fail with the whole step ``slower``, and how
    many could be judged at all."""
    alarms, caught, judged = [], 0, 0
    for i, now in enumerate(processes):
        found = steady_change(processes[:i] + processes[i + 1:], now, limit, policy)
        if not found:
            continue
        judged += 1
        beyond = [change for change, line in found if change > line]
        alarms += [max(beyond)] if beyond else []
        caught += any((1 + change) * slower - 1 > line for change, line in found)
    return alarms, caught, judged


def metric_alarms(processes: list[ProcessSummary], metric: str, floor: float, k: float,
                  min_runs: int = 0) -> list[float]:
    """The held-out processes' changes beyond their threshold (toward slower), one per alarm; with ``min_runs``, not
    those at a slower speed the others ran in that many stored runs (``across.stored_speed``, as the plugin)."""
    # A process that did not measure the metric (one stored before device time was kept) is left out, not its case.
    measured = [(v, s.source) for s in processes if (v := s.get(metric)) is not None and v > 0]
    if len(measured) < 4:
        return []
    alarms = []
    for i, (value, _) in enumerate(measured):
        rest = [m for j, m in enumerate(measured) if j != i]
        sp = xp.spread([v for v, _ in rest])
        change = value / sp.center - 1
        if change > sp.threshold(floor, k) and not (min_runs and xp.stored_speed(
                [v for v, _ in rest], [src for _, src in rest], value, floor=floor, k=k, min_runs=min_runs)):
            alarms.append(change)
    return alarms


def overlap_alarms(processes: list[ProcessSummary], floor: float) -> list[float]:
    """The held-out processes whose kernels overlapped less than the least of the rest by ``floor`` (as
    rules.KernelOverlap, on medians), where the rest overlap by more than it; one change per alarm."""
    ratios = [w / b for s in processes if (b := s.get(BUSY)) and (w := s.get(WORK))]
    alarms = []
    for i, ratio in enumerate(ratios):
        rest = ratios[:i] + ratios[i + 1:]
        if len(rest) >= 3 and float(np.median(rest)) >= 1 + floor and ratio < min(rest) / (1 + floor):
            alarms.append(ratio / min(rest) - 1)
    return alarms


def kernel_failures(rest: list[ProcessSummary], now: ProcessSummary, policy: Policy,
                    min_runs: int = 0) -> list[Comparison]:
    """The kernels the rule would fail ``now`` on, judged against ``rest`` (as rules.kernel_comparisons does)."""
    near = xp.nearest_mode(rest, now, policy.min_processes)
    found = xp.kernels(near, now, {}, floor=policy.device_effect, k=policy.history_k, min_runs=min_runs)
    step = (now.get(BUSY) or 0.0) / float(np.median([s.get(BUSY) or 0.0 for s in near])) - 1
    held = [replace(c, verdict=Verdict.AMBIGUOUS) if c.verdict is Verdict.REGRESSED and c.baseline_median > 0
            and step < 0.5 * (c.ratio.estimate - 1) else c for c in found]
    return [c for c in mix_changes(held, policy.device_effect) if c.verdict is Verdict.REGRESSED]


def with_spin(now: ProcessSummary, rest: list[ProcessSummary], share: float) -> ProcessSummary:
    """``now`` with a spin kernel of ``share`` of the history's step added to its kernels and its busy time."""
    step = float(np.median([s.get(BUSY) or 0.0 for s in rest]))
    metrics = dict(now.metrics, **{"kernel/spin": share * step, BUSY: (now.get(BUSY) or 0.0) + share * step})
    return replace(now, metrics=metrics)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the replay's counts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gpu_folder", type=Path)
    parser.add_argument("--extra", type=Path, nargs="*", default=[], help="rnnperf.json reports of runs not kept")
    parser.add_argument("--host-floor", type=float, default=Policy().host_effect)
    parser.add_argument("--device-floor", type=float, default=Policy().device_effect,
                        help="the device floor to replay at (device_effect; default the policy's)")
    parser.add_argument("--steady", type=float, default=None, metavar="NOISE",
                        help="also judge each process on its kernels within NOISE (e.g. 0.01) between the others")
    parser.add_argument("--no-speeds", action="store_true",
                        help="fail a process at a slower speed the others ran too (the rule before stored speeds)")
    args = parser.parse_args(argv)
    if not find_all(args.gpu_folder.parent, args.gpu_folder.name, None):
        print(f"error: {args.gpu_folder}: no stored runs", file=sys.stderr)
        return 2
    policy = Policy(host_effect=args.host_floor, device_effect=args.device_floor)
    min_runs = 0 if args.no_speeds else policy.min_processes
    cases = histories(args.gpu_folder, args.extra)
    timed = {c: t for c, h in cases.items() if len(t := [s for s in h if s.get(BUSY)]) >= 4}
    held = sum(len(h) for h in timed.values())
    print(f"{len(cases)} case(s) with >= 4 processes, {held} held-out processes with device time")
    for metric, floor in ((BUSY, policy.device_effect), (WORK, policy.device_effect), (BALANCED, policy.device_effect),
                          (HOST, policy.host_effect)):
        alarms = [(case_id, a) for case_id, h in cases.items()
                  for a in metric_alarms(h, metric, floor, policy.history_k, min_runs)]
        print(f"{metric}: {len(alarms)} held-out process(es) beyond the threshold (floor {floor:.0%})"
              + "".join(f"\n  {case_id}: {a:+.0%}" for case_id, a in alarms))
    overlap = [(case_id, a) for case_id, h in cases.items() for a in overlap_alarms(h, policy.overlap_effect)]
    print(f"kernel overlap: {len(overlap)} held-out process(es) below the least of the others (floor "
          f"{policy.overlap_effect:.0%})" + "".join(f"\n  {case_id}: {a:+.0%}" for case_id, a in overlap))
    failures, caught, reported = [], {0.03: 0, 0.05: 0}, reports(args.gpu_folder)
    for case_id, h in timed.items():
        for i, now in enumerate(h):
            rest = h[:i] + h[i + 1:] + reported.get(case_id, [])
            failures += [f"{case_id} #{i}: {c.explain()[:150]}" for c in kernel_failures(rest, now, policy, min_runs)]
            for share in caught:
                spun = kernel_failures(rest, with_spin(now, rest, share), policy, min_runs)
                caught[share] += any(c.metric == "kernel/spin" for c in spun)
    print(f"kernels: {len(failures)} held-out process(es) would fail on a kernel"
          + "".join(f"\n  {f}" for f in failures))
    print(f"a spin of 3% of the step named in {caught[0.03]} of {held}, of 5% in {caught[0.05]} of {held}")
    both = [b for h in cases.values() if len(b := [s for s in h if s.get(BALANCED)]) >= 4]
    print(f"a whole step 3% slower failed by device or balanced time in "
          f"{sum(slowdown_caught(h, 1.03, policy, min_runs) for h in both)} of {sum(len(h) for h in both)}")
    if args.steady is not None:
        print_steady(cases, args.steady, policy)
    return 0


def print_steady(cases: dict[str, list[ProcessSummary]], limit: float, policy: Policy) -> None:
    """The steady-kernel replay: its alarms, the slowdowns it fails, and each case's threshold and share of the step
    on its whole history."""
    # Processes stored before kernel tables were kept have none: the rest of the case's history is replayed.
    timed = {c: k for c, h in cases.items() if len(k := [s for s in h if s.get(BUSY) and s.kernels]) >= 4}
    runs = {c: steady_replay(h, limit, policy) for c, h in timed.items()}
    alarms = [(c, a) for c, (found, _, _) in runs.items() for a in found]
    print(f"steady kernels (within {limit:.1%}): {len(alarms)} held-out process(es) beyond the threshold"
          + "".join(f"\n  {c}: {a:+.1%}" for c, a in alarms))
    print(f"a whole step 3% slower failed on its steady kernels in {sum(r[1] for r in runs.values())} of "
          f"{sum(r[2] for r in runs.values())} judged ({sum(len(h) for h in timed.values())} held out)")
    for case_id, h in timed.items():
        names = xp.steady_kernels(h, limit)
        spreads = [xp.spread(v) for _, v in steady_series(h, names)] if names else []
        threshold = min((sp.catching(policy.device_effect, policy.history_k) for sp in spreads), default=None)
        share = float(np.median([xp.steady_time(s, names) / sum(s.kernels.values()) for s in h])) if names else 0.0
        print(f"  {case_id}: {len(names)} steady kernel(s), {share:.0%} of the summed kernel time, "
              + ("no threshold" if threshold is None else f"threshold {threshold:.1%}"))


if __name__ == "__main__":
    raise SystemExit(main())
