"""Commands for stored runs, outside pytest: one module per subcommand, dispatched by name.

``compare OLD NEW``: the plugin's verdicts; exit 0 no regression, 1 a case regressed.
``spread RUN RUN [RUN...]``: run-to-run spread per case; exit 0 within target, 1 not.
``noise RUN RUN [RUN...] --out FILE``: each case's device-time spread over null runs, stored as the per-case
thresholds of that GPU model (``baselines/<gpu>/noise.json``); exit 0.
``history PATH [PATH...]``: each case's series over many stored runs (files or folders), per GPU model, and its
change points (steps and drifts, ``history/changes.py`` says how); exit 0 none toward slower, 1 one toward slower.
``sensitivity baselines/<gpu>``: per case, the smallest regression its history can detect; exit 0.
``accept baselines/<gpu> --reason TEXT``: a deliberate change; each case's history restarts after it; exit 0.
All exit 2 on unusable input (a file, an option), with a one-line error on stderr, and 3 on an internal
error (a bug: the traceback follows), so a crash is never read as "a case regressed".

A subcommand is a module with ``add_parser(subparsers)`` and ``run(args) -> (exit code, lines)``; adding one
is a new module and its entry in ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from typing import Any, Protocol, Sequence

from pytest_rnnperf.cli import accept, compare, history, noise, sensitivity, spread
from pytest_rnnperf.cli.args import Parser, prog


class Command(Protocol):
    """What a subcommand module provides."""

    def add_parser(self, subparsers: Any) -> None:
        """Add the subcommand and its options to ``subparsers``."""

    def run(self, args: argparse.Namespace) -> tuple[int, list[str]]:
        """Exit code and the lines to print (stderr for exit 2, stdout otherwise)."""


# In the order --help lists them; each module's parser carries the same name as its key.
COMMANDS: dict[str, Command] = {"compare": compare, "spread": spread, "noise": noise, "history": history,
                                "sensitivity": sensitivity, "accept": accept}


def parser() -> argparse.ArgumentParser:
    """Command-line interface: every subcommand of ``COMMANDS``."""
    top = Parser(prog=prog(), description="Compare stored pytest-rnnperf runs (pytest-benchmark JSON files).")
    sub = top.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return top


def _missing(exc: Exception) -> str | None:
    """``needs rich: pip install 'rich>=13'`` where ``exc`` is a library this package needs that is not installed."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    from pytest_rnnperf.session.settings import missing_library

    return missing_library(exc.name.split(".")[0])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pytest_rnnperf`` and the ``rnnperf`` script."""
    args = parser().parse_args(argv)
    try:
        code, lines = COMMANDS[args.command].run(args)
    except Exception as exc:  # a bug, not bad input: say so, and never exit 1 ("regressed") by accident
        if (needs := _missing(exc)) is not None:  # a library not installed is no bug: what to install, in a line
            print(f"{prog()}: {needs}", file=sys.stderr)
            return 2
        traceback.print_exc()
        print(f"{prog()}: internal error (please report it with the traceback above)", file=sys.stderr)
        return 3
    stream = sys.stderr if code == 2 else sys.stdout
    for line in lines:
        print(line, file=stream)
    return code


if __name__ == "__main__":
    sys.exit(main())
