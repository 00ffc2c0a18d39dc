"""What the subcommands share: the one-line argument parser, number checks, the program's name, loading runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from pytest_rnnperf.judge.verdicts import Policy
from pytest_rnnperf.session.settings import SettingError, at_least, to_float, to_fraction
from pytest_rnnperf.store.baselines import machine_folder_problem
from pytest_rnnperf.store.runs import load_run

DEFAULT = Policy()


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (exit 2), without the usage block."""

    def error(self, message: str) -> NoReturn:
        """One line naming the argument and what is wrong."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def number(check: Callable[[Any], str | None], convert: Callable[[Any], float] = to_float) -> Callable[[str], float]:
    """An argparse type: a finite number that passes ``check`` (the same checks as the plugin's options)."""
    def parse(text: str) -> float:
        try:
            value = convert(text)
        except SettingError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        problem = check(value)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return value
    return parse


def positive() -> Callable[[str], float]:
    """An argparse type: a finite number > 0."""
    return number(at_least(0, strict=True))


def fraction(low: float = 0, strict: bool = True) -> Callable[[str], float]:
    """An argparse type for a threshold: 0.03 or "3%"; a bare 3 (meant 3%) is refused with a hint."""
    return number(at_least(low, strict=strict), convert=to_fraction)


def path_given(text: str) -> Path:
    """An argparse type: a path that is not empty (an empty one would mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty; give a path")
    return Path(text)


def text_given(what: str) -> Callable[[str], str]:
    """An argparse type: text that is not empty (``what`` names what to give instead, e.g. "a case id")."""
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"empty; give {what}")
        return text
    return parse


def prog() -> str:
    """How the user called us: ``rnnperf`` (the console script) or ``python -m pytest_rnnperf``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m pytest_rnnperf" if name in ("", "__main__.py", "-c") else name


def load(paths: Sequence[Path], allow_other_gpu: bool, force: str = "--allow-other-gpu to force",
         distinct: bool = False) -> list[Any]:
    """The stored runs; BaselineError for an unusable file, ValueError for runs of different GPU models.

    ``force`` says how to go on anyway where the command can; ``distinct`` refuses one run given twice (a spread
    of a run with itself is 0%, which reads as a quiet machine).
    """

    runs = [load_run(p) for p in paths]
    models = sorted({r.gpu_slug or "an unknown GPU" for r in runs})
    if len(models) > 1 and not allow_other_gpu:
        raise ValueError(f"the runs are from different GPU models ({', '.join(models)}): their times differ by "
                         f"design ({force})")
    if distinct:
        seen: dict[Any, Path] = {}
        given: set[Path] = set()
        for path, stored in zip(paths, runs):
            if path.resolve() in given:  # resolved: "r1.json" and "./r1.json" are one file
                raise ValueError(f"{path} is given twice")
            given.add(path.resolve())
            key = (stored.datetime, tuple(sorted(stored.records)), tuple(r.cudnn.samples if r.cudnn else None
                                                                           for _, r in sorted(stored.records.items())))
            if key in seen:
                raise ValueError(f"{path} holds the same run as {seen[key]} (a copy?); give runs of different nights")
            seen[key] = path
    return runs


def gpu_folder_problem(folder: Path) -> str | None:
    """Why ``folder`` is not a GPU model's folder of stored runs (baselines/<gpu>), as an error line; None if it is."""
    if not folder.is_dir():
        return f"error: {folder}: not a folder (give baselines/<gpu>)"
    if (machine := machine_folder_problem(folder)) is not None:
        return f"error: {machine}"
    return None
