"""The README and the documentation site (docs/, mkdocs.yml): short, linked, and the options table generated."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_rnnperf.session import options_doc
from pytest_rnnperf.session.settings import settings_table

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README = REPO / "README.md"


def _links(text: str) -> list[str]:
    """The targets of the Markdown links in ``text`` (inline links only)."""
    return re.findall(r"\]\(([^)\s]+)\)", text)


def _nav_pages() -> list[str]:
    """The pages mkdocs.yml's nav lists, in order."""
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    return [page for entry in nav for page in entry.values()]


def test_the_options_page_holds_the_table_the_settings_render() -> None:
    """docs/options.md cannot drift from the settings table: regenerate it after changing a setting."""
    page = (DOCS / "options.md").read_text(encoding="utf-8")
    assert options_doc.splice(page, options_doc.options_markdown()) == page, (
        f"docs/options.md is out of date with pytest_rnnperf/session/settings.py; run: {options_doc.REGENERATE}")


def test_the_commands_page_holds_every_subcommands_flags_as_their_parsers_render_them() -> None:
    """docs/cli.md cannot drift from the subcommands' parsers: regenerate it after changing a flag."""
    from pytest_rnnperf.cli import reference
    from pytest_rnnperf.cli.main import COMMANDS

    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert reference.render(page) == page, (
        f"docs/cli.md is out of date with pytest_rnnperf/cli/; run: python -m {reference.MODULE} --write")
    for command, flags in (
            ("compare", ("`old`", "`--device-effect DEVICE_EFFECT`", "`--any-order`", "`--noise NOISE`")),
            ("spread", ("`runs ...`", "`--target TARGET`", "`--min-step-ms MIN_STEP_MS`")),
            ("history", ("`--metric {device,speedup,wall}`",))):
        table = reference.command_markdown(command)
        assert all(f"| {flag} |" in table for flag in flags), table
    assert all(f"## {command}" in page for command in COMMANDS)


def test_every_setting_has_one_row_with_its_flag_ini_key_and_marker() -> None:
    rows = options_doc.options_markdown().splitlines()[2:]
    assert len(rows) == len(settings_table())
    for setting, row in zip(settings_table(), rows):
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert cells[:2] == [f"`{setting.flag}`", f"`{setting.ini}`"]
        assert cells[4] == ("yes" if setting.marker else "")


def test_a_help_text_cannot_break_the_table() -> None:
    """A pipe, an angle bracket or an underscore in a help text stays text inside its cell."""
    assert options_doc.escape("a|b <tag> $X_Y *z*") == r"a\|b &lt;tag&gt; $X\_Y \*z\*"


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


def test_the_readme_is_read_in_five_minutes() -> None:
    words = len(README.read_text().split())
    assert words < 1500, f"README.md has {words} words; move reference material into docs/"


def test_the_readmes_test_command_is_the_one_ci_runs() -> None:
    """.ci/run runs the README's 'Run the tests' block, line for line."""
    block = re.search(r"## Run the tests\n\n```bash\n(.*?)```", README.read_text(), re.S)
    assert block, "README.md has no 'Run the tests' bash block"
    ci = (REPO / ".ci" / "run").read_text()
    assert block.group(1) in ci


def test_the_readmes_links_resolve_and_reach_every_docs_page() -> None:
    links = [link for link in _links(README.read_text()) if "://" not in link]
    for link in links:
        assert (REPO / link.split("#")[0]).exists(), f"README.md links to {link}, which does not exist"
    pages = sorted(p.relative_to(REPO).as_posix() for p in DOCS.glob("*.md"))
    assert sorted(set(link for link in links if link.startswith("docs/") and link.endswith(".md"))) == pages  # not img/


def test_the_site_nav_lists_every_docs_page_once() -> None:
    nav = _nav_pages()
    assert len(nav) == len(set(nav))
    assert sorted(nav) == sorted(p.name for p in DOCS.glob("*.md"))


def test_the_site_builds_with_no_warning(tmp_path: Path) -> None:
    """What CI runs after the tests (.ci/run); needs the docs extra."""
    pytest.importorskip("mkdocs", reason="the site needs the docs extra: pip install -e '.[docs]'")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_hook_has_an_example_and_the_hooks_page_shows_it() -> None:
    """docs/hooks.md cannot drift from plugin/hooks.py: each hookspec's conftest example is on the page verbatim."""
    import inspect
    import textwrap

    from pytest_rnnperf.plugin import hooks

    page = (DOCS / "hooks.md").read_text(encoding="utf-8")
    specs = [f for name, f in inspect.getmembers(hooks, inspect.isfunction) if name.startswith("pytest_rnnperf_")]
    assert len(specs) >= 3
    for spec in specs:
        doc = inspect.getdoc(spec) or ""
        assert "Example::" in doc and "# conftest.py" in doc, f"{spec.__name__}: no conftest.py example"
        example = textwrap.dedent(doc.split("Example::", 1)[1]).strip("\n")
        assert f"## `{spec.__name__}`" in page and example in page, f"docs/hooks.md: {spec.__name__} or its example"
