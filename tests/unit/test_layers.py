"""The package's layers: every import points down (import-linter's contract in pyproject.toml)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("importlinter", reason="import-linter is in the test extra")


def _lint(project: Path, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with the contract of ``project``'s pyproject.toml, importing the package from ``pythonpath``."""
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filename={str(project / 'pyproject.toml')!r}, no_cache=True))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=project, env=env)


def test_every_import_in_the_package_points_down_the_layers() -> None:
    result = _lint(ROOT, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "KEPT" in result.stdout


def test_an_import_up_the_layers_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "pytest_rnnperf", tmp_path / "pytest_rnnperf",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    cases = tmp_path / "pytest_rnnperf" / "model" / "cases.py"
    cases.write_text(cases.read_text() + "\nfrom pytest_rnnperf.judge import verdicts  # noqa: E402\n")
    result = _lint(tmp_path, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "pytest_rnnperf.model is not allowed to import pytest_rnnperf.judge" in result.stdout


def test_third_party_backends_still_find_their_types_on_pytest_rnnperf_backends() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from pytest_rnnperf.backends import BackendSpec, CaseInputs, ImplResult, PathProof
    assert {t.__module__ for t in (CaseInputs, ImplResult, PathProof)} == {
        "pytest_rnnperf.model.reference", "pytest_rnnperf.model.results"}
    assert BackendSpec.__module__ == "pytest_rnnperf.backends"
