"""The commands reference (docs/cli.md), rendered from each subcommand's parser so the two cannot drift.

``python -m pytest_rnnperf.cli.reference`` prints the tables; ``--write`` puts each into docs/cli.md between its
markers, ``--check`` exits 1 when one of the page's tables is not the one rendered here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_rnnperf.cli.main import COMMANDS, parser
from pytest_rnnperf.session.options_doc import code, escape, markdown_table, page_main, splice

PAGE = Path("docs") / "cli.md"
MODULE = "pytest_rnnperf.cli.reference"


def markers(command: str) -> tuple[str, str]:
    """The comments that hold ``command``'s table on the page."""
    return (f"<!-- BEGIN {command} table: generated from pytest_rnnperf/cli/{command}.py; do not edit by hand -->",
            f"<!-- END {command} table -->")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, by name."""
    top = parser()
    # argparse has no public way to list a parser's arguments.
    found = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return dict(found.choices)


def _written(action: argparse.Action) -> str:
    """How the argument is typed: ``old``, ``runs ...``, ``--target TARGET``, ``--metric {a,b}``, ``--fail-host``."""
    if not action.option_strings:
        name = str(action.metavar or action.dest)
        return f"{name} ..." if action.nargs in ("+", "*") else name
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    choices = "{" + ",".join(map(str, action.choices)) + "}" if action.choices else ""
    value = action.metavar or choices or action.dest.upper()
    return f"{', '.join(action.option_strings)} {value}"


def command_markdown(command: str) -> str:
    """The Markdown table of one subcommand: each argument and option as typed, and its help."""
    actions = [a for a in _subcommands()[command]._actions if not isinstance(a, argparse._HelpAction)]
    return markdown_table(["argument", "what it does"],
                          [[code(_written(a)), escape((a.help or "") % vars(a))] for a in actions])


def render(page: str) -> str:
    """``page`` with every subcommand's table between its markers."""
    for command in COMMANDS:
        page = splice(page, command_markdown(command), *markers(command))
    return page


def main(argv: list[str] | None = None) -> int:
    """Print the tables, or write them into the commands page (--write), or check the page (--check)."""
    tables = "\n".join(f"## {command}\n\n{command_markdown(command)}" for command in COMMANDS)
    return page_main(argv, MODULE, __doc__, PAGE, tables, render)


if __name__ == "__main__":
    sys.exit(main())
