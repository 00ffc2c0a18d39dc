"""What the subcommands share: the one-line argument parser, number checks, the program's name, loading runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from pytest_rnnperf.judge.verdicts import Policy
from pytest_rnnperf.session.settings import SettingError, at_least, to_float

DEFAULT = Policy()


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (exit 2), without the usage block."""

    def error(self, message: str) -> NoReturn:
        """One line naming the argument and what is wrong."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def number(check: Callable[[Any], str | None]) -> Callable[[str], float]:
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


def positive() -> Callable[[str], float]:
    """An argparse type: a finite number > 0."""
    return number(at_least(0, strict=True))


def prog() -> str:
    """How the user called us: ``rnnperf`` (the console script) or ``python -m pytest_rnnperf``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m pytest_rnnperf" if name in ("", "__main__.py", "-c") else name


def load(paths: Sequence[Path], allow_other_gpu: bool) -> list[Any]:
    """The stored runs; BaselineError for an unusable file, ValueError for runs of different GPU models."""
    from pytest_rnnperf.model.records import load_run

    runs = [load_run(p) for p in paths]
    models = sorted({r.gpu_slug or "an unknown GPU" for r in runs})
    if len(models) > 1 and not allow_other_gpu:
        raise ValueError(f"the runs are from different GPU models ({', '.join(models)}): their times differ by "
                         f"design (--allow-other-gpu to force)")
    return runs
