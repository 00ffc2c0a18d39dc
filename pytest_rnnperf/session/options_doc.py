"""The options reference (docs/options.md), rendered from the settings table (the rules' thresholds among them).

``python -m pytest_rnnperf.session.options_doc`` prints the table; ``--write`` puts it into docs/options.md
between the page's markers, ``--check`` exits 1 when the page's table is not the one rendered here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from pytest_rnnperf.session.settings import Setting, settings_table, to_bool, to_float, to_fraction, to_int, to_str

PAGE = Path("docs") / "options.md"
BEGIN = "<!-- BEGIN options table: generated from pytest_rnnperf/session/settings.py; do not edit by hand -->"
END = "<!-- END options table -->"
MODULE = "pytest_rnnperf.session.options_doc"
REGENERATE = f"python -m {MODULE} --write"

_KINDS: dict[Callable[[Any], Any], str] = {to_int: "whole number", to_float: "number", to_bool: "true/false",
                                           to_str: "text", to_fraction: "fraction or percent (0.03, 3%)"}


def escape(text: str) -> str:
    """Text safe inside a Markdown table cell (on GitHub and in MkDocs alike)."""
    for char in ("\\", "`", "*", "_", "[", "]"):
        text = text.replace(char, "\\" + char)
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def code(text: str) -> str:
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
        return code(setting.typed_default)
    if isinstance(value, float):
        return code(f"{value:g}")
    return code(str(value))


def _values(setting: Setting) -> str:
    """What the option takes: its choices, a flag, a path, or the kind of value."""
    if setting.choices:
        return ", ".join(code(c) for c in setting.choices)
    if setting.switch:
        return "flag (ini: true/false)"
    if setting.path:
        return "path"
    return _KINDS.get(setting.convert, escape(getattr(setting.convert, "__name__", "value")))


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table of ``rows`` (cells already escaped or code spans) under ``header``."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cells) + " |" for cells in rows]) + "\n"


def options_markdown() -> str:
    """The Markdown table of every setting: flag, ini key, default, values, marker, what it does."""
    rows = [[code(s.flag), code(s.ini), _default(s), _values(s), "yes" if s.marker else "", escape(s.help)]
            for s in settings_table()]
    return markdown_table(["option", "ini", "default", "values", "marker", "what it does"], rows)


def splice(page: str, table: str, begin: str = BEGIN, end: str = END) -> str:
    """``page`` with the text between its ``begin`` and ``end`` markers replaced by ``table``."""
    start, stop = page.find(begin), page.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"no '{begin}' ... '{end}' markers in this order")
    return page[:start] + begin + "\n\n" + table + "\n" + page[stop:]


def page_main(argv: list[str] | None, module: str, doc: str | None, default_page: Path, tables: str,
              render: Callable[[str], str]) -> int:
    """A generated page's command line: print ``tables``, write ``render(page)`` into the page (--write), or exit 1
    when the page differs from it (--check); exit 2 when the page cannot be read or lacks its markers."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="put the tables into the page between their markers")
    action.add_argument("--check", action="store_true", help="exit 1 when the page's tables are out of date")
    parser.add_argument("--page", type=Path, default=default_page, help=f"the page (default: {default_page})")
    args = parser.parse_args(argv)
    name = module.rsplit(".", 1)[-1]
    if not (args.write or args.check):
        sys.stdout.write(tables)
        return 0
    try:
        page = args.page.read_text(encoding="utf-8")
        updated = render(page)
    except (OSError, ValueError) as exc:
        print(f"{name}: {args.page}: {exc}", file=sys.stderr)
        return 2
    if args.check:
        if updated != page:
            print(f"{name}: {args.page} is out of date; run: python -m {module} --write", file=sys.stderr)
            return 1
        return 0
    if updated != page:
        args.page.write_text(updated, encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Print the table, or write it into the options page (--write), or check the page (--check)."""
    table = options_markdown()
    return page_main(argv, MODULE, __doc__, PAGE, table, lambda page: splice(page, table))


if __name__ == "__main__":
    sys.exit(main())
