"""The options reference (docs/options.md), rendered from the settings table so the two cannot drift.

``python -m pytest_rnnperf.session.options_doc`` prints the table; ``--write`` puts it into docs/options.md
between the page's markers, ``--check`` exits 1 when the page's table is not the one rendered here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

from pytest_rnnperf.session.settings import SETTINGS, Setting, to_bool, to_float, to_fraction, to_int, to_str

PAGE = Path("docs") / "options.md"
BEGIN = "<!-- BEGIN options table: generated from pytest_rnnperf/session/settings.py; do not edit by hand -->"
END = "<!-- END options table -->"
REGENERATE = "python -m pytest_rnnperf.session.options_doc --write"

_KINDS: dict[Callable[[Any], Any], str] = {to_int: "whole number", to_float: "number", to_bool: "true/false",
                                           to_str: "text", to_fraction: "fraction or percent (0.03, 3%)"}


def _escape(text: str) -> str:
    """Text safe inside a Markdown table cell (on GitHub and in MkDocs alike)."""
    for char in ("\\", "`", "*", "_", "[", "]"):
        text = text.replace(char, "\\" + char)
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _code(text: str) -> str:
    """A code span (the settings' names and values hold no backquote)."""
    return f"`{text}`"


def _default(setting: Setting) -> str:
    """The default as a user would type it: off/on for switches, 0.05 rather than 0.05000, thresholds as 5%."""
    value = setting.default
    if setting.switch:
        return "on" if value else "off"
    if value == "":
        return "(unset)"
    if setting.convert is to_fraction:
        return _code(setting.typed_default)
    if isinstance(value, float):
        return _code(f"{value:g}")
    return _code(str(value))


def _values(setting: Setting) -> str:
    """What the option takes: its choices, a flag, a path, or the kind of value."""
    if setting.choices:
        return ", ".join(_code(c) for c in setting.choices)
    if setting.switch:
        return "flag (ini: true/false)"
    if setting.path:
        return "path"
    return _KINDS.get(setting.convert, _escape(getattr(setting.convert, "__name__", "value")))


def options_markdown() -> str:
    """The Markdown table of every setting: flag, ini key, default, values, marker, what it does."""
    lines = ["| option | ini | default | values | marker | what it does |", "|---|---|---|---|---|---|"]
    for s in SETTINGS:
        cells = [_code(s.flag), _code(s.ini), _default(s), _values(s), "yes" if s.marker else "", _escape(s.help)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def splice(page: str, table: str) -> str:
    """``page`` with the text between its BEGIN and END markers replaced by ``table``."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no '{BEGIN}' ... '{END}' markers in this order")
    return page[:start] + BEGIN + "\n\n" + table + "\n" + page[end:]


def main(argv: list[str] | None = None) -> int:
    """Print the table, or write it into the options page (--write), or check the page (--check)."""
    parser = argparse.ArgumentParser(prog="python -m pytest_rnnperf.session.options_doc", description=__doc__)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="put the table into the page between its markers")
    action.add_argument("--check", action="store_true", help="exit 1 when the page's table is out of date")
    parser.add_argument("--page", type=Path, default=PAGE, help=f"the options page (default: {PAGE})")
    args = parser.parse_args(argv)
    table = options_markdown()
    if not (args.write or args.check):
        sys.stdout.write(table)
        return 0
    try:
        page = args.page.read_text(encoding="utf-8")
        updated = splice(page, table)
    except (OSError, ValueError) as exc:
        print(f"options_doc: {args.page}: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if updated != page:
            print(f"options_doc: {args.page} is out of date with the settings; run: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    if updated != page:
        args.page.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
