"""pyproject.toml lists every package of the wheel, the suite mapped in under ``pytest_rnnperf.suites``."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _packages_on_disk() -> set[str]:
    """Every folder with an ``__init__.py`` under the package and the suite, named as installed."""
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "pytest_rnnperf").rglob("__init__.py")}
    found |= {".".join(("pytest_rnnperf", *p.parent.relative_to(REPO).parts))
              for p in (REPO / "suites").rglob("__init__.py")}
    return found


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    """A new subpackage left out of the explicit list would be missing from the installed wheel."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(setuptools["packages"]) == _packages_on_disk()
    assert setuptools["package-dir"] == {"pytest_rnnperf.suites": "suites"}


def test_the_suite_imports_its_own_modules_relatively() -> None:
    """``from suites...`` would work from a clone only; installed, the suite is ``pytest_rnnperf.suites``."""
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "suites").rglob("*.py")
                 if "from suites" in p.read_text() or "import suites" in p.read_text()
                 or '"suites.' in p.read_text()]
    assert offenders == []
