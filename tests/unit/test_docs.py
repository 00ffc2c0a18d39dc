"""The documentation: the options table in docs/options.md is the one the settings table renders."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_rnnperf.session import options_doc
from pytest_rnnperf.session.settings import SETTINGS

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def test_the_options_page_holds_the_table_the_settings_render() -> None:
    """docs/options.md cannot drift from the settings table: regenerate it after changing a setting."""
    page = (DOCS / "options.md").read_text(encoding="utf-8")
    assert options_doc.splice(page, options_doc.options_markdown()) == page, (
        f"docs/options.md is out of date with pytest_rnnperf/session/settings.py; run: {options_doc.REGENERATE}")


def test_every_setting_has_one_row_with_its_flag_ini_key_and_marker() -> None:
    rows = options_doc.options_markdown().splitlines()[2:]
    assert len(rows) == len(SETTINGS)
    for setting, row in zip(SETTINGS, rows):
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert cells[:2] == [f"`{setting.flag}`", f"`{setting.ini}`"]
        assert cells[4] == ("yes" if setting.marker else "")


def test_a_help_text_cannot_break_the_table() -> None:
    """A pipe, an angle bracket or an underscore in a help text stays text inside its cell."""
    assert options_doc._escape("a|b <tag> $X_Y *z*") == r"a\|b &lt;tag&gt; $X\_Y \*z\*"


def test_the_command_line_writes_and_checks_the_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "options.md"
    page.write_text(f"# Options\n\n{options_doc.BEGIN}\n| stale |\n{options_doc.END}\n\nafter\n")
    assert options_doc.main(["--check", "--page", str(page)]) == 1
    assert options_doc.REGENERATE in capsys.readouterr().err
    assert options_doc.main(["--write", "--page", str(page)]) == 0
    assert options_doc.main(["--check", "--page", str(page)]) == 0
    text = page.read_text()
    assert "| stale |" not in text and "`--rnnperf-rounds`" in text and text.endswith(f"{options_doc.END}\n\nafter\n")
    assert options_doc.main([]) == 0
    assert capsys.readouterr().out == options_doc.options_markdown()
    page.write_text("# Options without markers\n")
    assert options_doc.main(["--write", "--page", str(page)]) == 2
    assert "markers" in capsys.readouterr().err
