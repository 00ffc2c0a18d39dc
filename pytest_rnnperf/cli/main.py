"""Commands for stored runs, outside pytest.

``compare OLD NEW``: the plugin's verdicts; exit 0 no regression, 1 a case regressed.
``spread RUN RUN [RUN...]``: run-to-run spread per case; exit 0 within target, 1 not.
``noise RUN RUN [RUN...] --out FILE``: each case's device-time spread over null runs, stored as the per-case
thresholds of that GPU model (``baselines/<gpu>/noise.json``); exit 0.
``history PATH [PATH...]``: each case's series over many stored runs (files or folders), per GPU model, and its
change points (steps and drifts, ``history/changes.py`` says how); exit 0 none toward slower, 1 one toward slower.
All exit 2 on unusable input (a file, an option), with a one-line error on stderr, and 3 on an internal
error (a bug: the traceback follows), so a crash is never read as "a case regressed".
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from pytest_rnnperf.session.settings import SettingError, at_least, to_float
from pytest_rnnperf.judge.verdicts import Policy

_DEFAULT = Policy()


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (exit 2), without the usage block."""

    def error(self, message: str) -> NoReturn:
        """One line naming the argument and what is wrong."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _number(check: Callable[[Any], str | None]) -> Callable[[str], float]:
    """An argparse type: a finite number that passes ``check`` (the same checks as the plugin's options)."""
    def parse(text: str) -> float:
        try:
            value = to_float(text)
        except SettingError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        problem = check(value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value
    return parse


def _prog() -> str:
    """How the user called us: ``rnnperf`` (the console script) or ``python -m pytest_rnnperf``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m pytest_rnnperf" if name in ("", "__main__.py", "-c") else name


def _parser() -> argparse.ArgumentParser:
    """Command-line interface."""
    positive = _number(at_least(0, strict=True))
    parser = _Parser(prog=_prog(), description="Compare stored pytest-rnnperf runs (pytest-benchmark JSON files).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    cmp = sub.add_parser("compare", help="verdict per case of NEW against the baseline OLD")
    cmp.add_argument("old", type=Path, help="baseline run (e.g. baselines/NVIDIA_H200/.../0001_baseline.json)")
    cmp.add_argument("new", type=Path, help="run to judge (e.g. the --benchmark-json of tonight's run)")
    cmp.add_argument("--min-effect", type=positive, default=_DEFAULT.min_effect,
                     help=f"smallest change that counts (default {_DEFAULT.min_effect})")
    cmp.add_argument("--host-bound-effect", type=positive, default=_DEFAULT.host_bound_effect,
                     help=f"threshold for cases that kept the GPU busy less than half the time "
                          f"(default {_DEFAULT.host_bound_effect})")
    cmp.add_argument("--device-effect", type=positive, default=_DEFAULT.device_min_effect,
                     help=f"smallest change of the cuDNN device time that counts (default {_DEFAULT.device_min_effect})")
    cmp.add_argument("--host-effect", type=positive, default=_DEFAULT.host_effect,
                     help=f"smallest change of the host overhead that counts (default {_DEFAULT.host_effect})")
    cmp.add_argument("--fail-host", action="store_true", help="exit 1 on a host overhead regression too")
    cmp.add_argument("--allow-other-gpu", action="store_true",
                     help="compare runs from different GPU models (refused by default: their times differ by design)")
    cmp.add_argument("--noise", type=Path, default=None,
                     help="per-case device-time thresholds of this GPU model (baselines/<gpu>/noise.json)")
    spr = sub.add_parser("spread", help="run-to-run spread (max/min - 1) of each case's speedup and cuDNN time")
    spr.add_argument("runs", type=Path, nargs="+", help="two or more stored runs of the same GPU model")
    spr.add_argument("--target", type=positive, default=0.03, help="spread to aim for (default 0.03)")
    spr.add_argument("--min-step-ms", type=_number(at_least(0)), default=1.0, help="cases with cuDNN steps "
                     "shorter than this are listed but not held to the target (default 1.0)")
    spr.add_argument("--allow-other-gpu", action="store_true", help="spread over runs of different GPU models")
    nse = sub.add_parser("noise", help="each case's device-time spread over null runs of one GPU model, "
                                       "written as its per-case thresholds")
    nse.add_argument("runs", type=Path, nargs="+", help="two or more stored null runs (same GPU model and software)")
    nse.add_argument("--out", type=Path, default=None,
                     help="write the thresholds here, e.g. baselines/<gpu>/noise.json (refuses to replace a file)")
    _history_parser(sub)
    return parser


def _history_parser(sub: Any) -> None:
    """The ``history`` subcommand's options."""
    from pytest_rnnperf.history.changes import DEFAULT_MIN_SHIFT, FALLBACKS, METRICS, PENALTY

    his = sub.add_parser(
        "history", help="each case's series over many stored runs per GPU model, and its change points",
        description=f"Each case's series over stored runs, per GPU model (runs of different models are never "
                    f"mixed), ordered by start time, and its change points: ruptures' PELT on log values, "
                    f"penalty {PENALTY:g}*noise^2*ln(runs), noise from the series itself; consecutive shifts one "
                    f"way are a drift where one ramp explains them. Exit 0: no change point toward slower "
                    f"(longer time, lower speedup); 1: one or more, however long ago; 2: unusable input; "
                    f"3: internal error.")
    his.add_argument("paths", type=Path, nargs="+", metavar="PATH",
                     help="stored runs, or folders searched for *.json (baselines/, nightly --benchmark-json files)")
    his.add_argument("--metric", choices=sorted(METRICS), default="device",
                     help="cuDNN device time per step (default), cuDNN wall time per step, or the wall speedup")
    his.add_argument("--fallback", choices=FALLBACKS, default="skip",
                     help="--metric device, a run without device time for a case: leave that run out of the "
                          "case's series (skip, default) or follow the case in wall time (wall)")
    his.add_argument("--min-shift", type=_number(at_least(0)), default=DEFAULT_MIN_SHIFT,
                     help=f"smallest change of level reported (default {DEFAULT_MIN_SHIFT})")
    his.add_argument("--plot", type=Path, default=None, metavar="DIR", help="write one PNG per GPU model here")
    his.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the result as JSON here")


def _load(paths: Sequence[Path], allow_other_gpu: bool) -> list[Any]:
    """The stored runs; BaselineError for an unusable file, ValueError for runs of different GPU models."""
    from pytest_rnnperf.model.records import load_run

    runs = [load_run(p) for p in paths]
    models = sorted({r.gpu_slug or "an unknown GPU" for r in runs})
    if len(models) > 1 and not allow_other_gpu:
        raise ValueError(f"the runs are from different GPU models ({', '.join(models)}): their times differ by "
                         f"design (--allow-other-gpu to force)")
    return runs


def spread_files(paths: Sequence[Path], target: float, min_step_ms: float,
                 allow_other_gpu: bool = False) -> tuple[int, list[str]]:
    """Exit code (0 within target, 1 not) and lines: per case, the speedup and cuDNN-time spread across runs."""
    import numpy as np

    from pytest_rnnperf.model.records import BaselineError
    from pytest_rnnperf.model.stats import spread

    if len(paths) < 2:
        return 2, ["error: spread needs at least two runs"]
    try:
        runs = _load(paths, allow_other_gpu)
    except (BaselineError, ValueError) as exc:
        return 2, [f"error: {exc}"]
    common = [c for c in runs[0].records if all(c in r.records and r.records[c].cudnn is not None for r in runs)]
    if not common:
        return 2, ["error: the runs share no cuDNN case"]
    below = Policy().host_bound_below
    lines = [f"{'case':<48} {'speedups':>28} {'spread':>7} {'cuDNN ms':>26} {'spread':>7}"]
    held: list[float] = []
    time_spread: dict[bool, list[float]] = {True: [], False: []}  # host-bound? -> cuDNN-time spreads
    for case_id in common:
        recs = [r.records[case_id] for r in runs]
        speedups = [float(rec.generic.median / rec.cudnn.median) for rec in recs]  # type: ignore[union-attr]
        times = [float(rec.cudnn.median) * 1e3 for rec in recs]  # type: ignore[union-attr]
        s_sp, s_t = spread(speedups), spread(times)
        counted = min(times) >= min_step_ms
        if counted:
            held.append(s_sp)
        busy = [b for b in (rec.gpu_busy for rec in recs) if b is not None]
        if busy:
            time_spread[min(busy) < below].append(s_t)
        lines.append(f"{case_id:<48} {' '.join(f'{v:.2f}x' for v in speedups):>28} {s_sp:>6.1%}{'' if counted else '*'} "
                     f"{' '.join(f'{v:.3f}' for v in times):>26} {s_t:>6.1%}")
    within = sum(v <= target for v in held)
    if held:
        lines.append(f"speedup spread over {len(runs)} runs, cases with cuDNN steps >= {min_step_ms} ms: median "
                     f"{np.median(held):.1%}, max {max(held):.1%}; {within}/{len(held)} within {target:.0%}"
                     + (" (* = shorter steps, not held to the target)" if len(held) < len(common) else ""))
    else:
        lines.append(f"speedup spread over {len(runs)} runs: no case has cuDNN steps >= {min_step_ms} ms, none is "
                     "held to the target (--min-step-ms to lower the bar)")
    # The verdicts' own split (Policy.host_bound_below): what min effect each group can bear here.
    for host_bound, label in ((False, f"GPU >= {below:.0%} busy"), (True, "host-bound")):
        values = time_spread[host_bound]
        if values:
            lines.append(f"cuDNN-time spread, {label}: {len(values)} cases, median {np.median(values):.1%}, max "
                         f"{max(values):.1%}; {sum(v <= target for v in values)}/{len(values)} within {target:.0%}")
    return (0 if within == len(held) else 1), lines


def noise_files(paths: Sequence[Path], out: Path | None) -> tuple[int, list[str]]:
    """Exit code and lines for ``noise``: per case, the device-time spread and the threshold it justifies."""
    from pytest_rnnperf.judge.noise import measure
    from pytest_rnnperf.model.records import BaselineError

    if len(paths) < 2:
        return 2, ["error: noise needs at least two stored runs"]
    if out is not None and out.exists():
        return 2, [f"error: {out} exists; move it away first (it is never replaced by accident)"]
    try:
        runs = _load(paths, allow_other_gpu=False)
    except (BaselineError, ValueError) as exc:
        return 2, [f"error: {exc}"]
    result = measure(runs)
    if not result.spread:
        return 2, ["error: no case has device time in two or more of these runs"]
    floor = _DEFAULT.device_min_effect
    lines = [f"{'case':<52} {'device spread':>13} {'threshold':>9}"]
    for case_id, value in sorted(result.spread.items(), key=lambda kv: -kv[1]):
        lines.append(f"{case_id:<52} {value:>13.1%} {result.effect(case_id, floor):>9.1%}")
    lines.append(f"{len(result.spread)} case(s) over {len(runs)} runs: {result.raised(floor)} judged above {floor:.0%}")
    if out is not None:
        from pytest_rnnperf.store.baselines import write_json

        try:
            write_json(out, result.to_dict())
        except OSError as exc:  # a read-only folder, a file where a folder should be, a file that appeared
            return 2, [f"error: cannot write {out}: {exc.strerror or exc}"]
        lines.append(f"written: {out}")
    return 0, lines


def compare_files(old: Path, new: Path, policy: Policy = Policy(), allow_other_gpu: bool = False,
                  noise_file: Path | None = None) -> tuple[int, list[str]]:
    """Exit code and the lines to print for ``compare`` (per-case device thresholds from ``noise_file``)."""
    from pytest_rnnperf.measure.environment import diff_environments, format_diff
    from pytest_rnnperf.judge.noise import load as load_noise
    from pytest_rnnperf.model.records import BaselineError
    from pytest_rnnperf.report.render import record_kernel_lines, verdict_counts
    from pytest_rnnperf.judge.verdicts import Outcome, Verdict, compare_runs

    try:
        base, cur = _load([old, new], allow_other_gpu)
        if noise_file is not None:
            policy = load_noise(noise_file).applied_to(policy)
    except (BaselineError, ValueError) as exc:
        return 2, [f"error: {exc}"]
    verdicts = compare_runs(base, cur, policy)
    lines = [f"baseline {old} ({base.gpu_slug}) vs {new} ({cur.gpu_slug}); min effect {policy.min_effect:.0%} (wall), "
             f"{policy.device_min_effect:.0%} (device), {policy.host_effect:.0%} (host overhead)"]
    for v in verdicts:
        label = "FLAGGED" if v.outcome is Outcome.REGRESSED_NOT_FAILED else str(v.verdict).upper()
        if v.host_regressed and v.verdict is not Verdict.REGRESSED:
            label = "HOST" if v.fails else "HOST-FLAG"
        lines.append(f"{label:<10} {v.case_id}: {v.time.explain()}"
                     + (f"; {v.host.explain()}" if v.host is not None else "")
                     + (f"; {v.speedup.explain()}" if v.speedup is not None else "")
                     + (f" [window: {v.flagged}]" if v.flagged else "")
                     + (f" [{v.host_bound}]" if v.host_bound else ""))
        if v.moved:
            kernels = record_kernel_lines(base.records.get(v.case_id), cur.records.get(v.case_id))
            if kernels:
                lines.append(f"{'':<10} kernels: " + "; ".join(kernels))
    missing = sorted(set(base.records) - set(cur.records))
    if missing:
        lines.append(f"not in {new.name}: {', '.join(missing)}")
    diff = format_diff(diff_environments(base.environment, cur.environment))
    lines.append("environment changes: " + ("; ".join(diff) if diff else "none"))
    lines.append(f"{len(verdicts)} case(s) compared: " + (verdict_counts(verdicts) or "none in common"))
    return (1 if any(v.fails for v in verdicts) else 0), lines


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pytest_rnnperf`` and the ``rnnperf`` script."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "spread":
            code, lines = spread_files(args.runs, args.target, args.min_step_ms, args.allow_other_gpu)
        elif args.command == "noise":
            code, lines = noise_files(args.runs, args.out)
        elif args.command == "history":
            from pytest_rnnperf.history.changes import history_files

            code, lines = history_files(args.paths, args.metric, args.fallback, args.min_shift, args.plot, args.json)
        else:
            policy = Policy(min_effect=args.min_effect, host_bound_effect=args.host_bound_effect,
                            device_min_effect=args.device_effect, host_effect=args.host_effect,
                            fail_host=args.fail_host)
            code, lines = compare_files(args.old, args.new, policy, args.allow_other_gpu, args.noise)
    except Exception:  # a bug, not bad input: say so, and never exit 1 ("regressed") by accident
        traceback.print_exc()
        print(f"{_prog()}: internal error (please report it with the traceback above)", file=sys.stderr)
        return 3
    stream = sys.stderr if code == 2 else sys.stdout
    for line in lines:
        print(line, file=stream)
    return code


if __name__ == "__main__":
    sys.exit(main())
