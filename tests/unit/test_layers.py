"""The package's layers: every import points down (import-linter's contract in pyproject.toml), old paths still work."""

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


@pytest.mark.parametrize("old, name, new", [
    ("pytest_rnnperf.records", "load_run", "pytest_rnnperf.store.runs"),
    ("pytest_rnnperf.records", "CaseRecord", "pytest_rnnperf.model.records"),
    ("pytest_rnnperf.history", "load_runs", "pytest_rnnperf.history.runs"),
    ("pytest_rnnperf.device", "FlagKind", "pytest_rnnperf.model.flags"),
    ("pytest_rnnperf.device", "read_gpu_info", "pytest_rnnperf.measure.gpu"),
    ("pytest_rnnperf.timing.device", "DeviceTimer", "pytest_rnnperf.measure.device_time"),
    ("pytest_rnnperf.report", "header_lines", "pytest_rnnperf.report.text"),
    ("pytest_rnnperf.settings", "tag_problem", "pytest_rnnperf.store.baselines"),
])
def test_an_old_import_path_still_works_for_one_release_and_says_where_the_name_went(
        old: str, name: str, new: str) -> None:
    code = (f"import warnings; warnings.simplefilter('always')\n"
            f"with warnings.catch_warnings(record=True) as seen:\n"
            f"    from {old} import {name}\n"
            f"print({name}.__module__); print([str(w.message) for w in seen])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    module, said = out.splitlines()
    assert module == new
    assert "moved to " + new in said


def test_third_party_backends_still_find_their_types_on_pytest_rnnperf_backends() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from pytest_rnnperf.backends import BackendSpec, CaseInputs, ImplResult, PathProof
    assert {t.__module__ for t in (CaseInputs, ImplResult, PathProof)} == {
        "pytest_rnnperf.model.reference", "pytest_rnnperf.model.results"}
    assert BackendSpec.__module__ == "pytest_rnnperf.backends"


@pytest.mark.parametrize("old, new", [("Worker", "BackendSubprocess"), ("WorkerPool", "SubprocessPool"),
                                      ("WorkerError", "SubprocessFailed")])
def test_the_backend_processes_old_names_still_work_for_one_release(old: str, new: str) -> None:
    """Backend processes are subprocesses now (pytest-xdist's are the workers); the old names warn and still work."""
    from pytest_rnnperf.measure import subprocesses

    with pytest.warns(DeprecationWarning, match=f"{old} is now {new}"):
        found = getattr(subprocesses, old)
    assert found is getattr(subprocesses, new)


@pytest.mark.parametrize("old, new", [("DeviceInfo", "GpuInfo"), ("read_device_info", "read_gpu_info")])
def test_the_gpus_old_names_still_work_for_one_release(old: str, new: str) -> None:
    """The card is "gpu" everywhere now ("device" is device time, or a framework's device); old names warn."""
    from pytest_rnnperf.measure import gpu

    with pytest.warns(DeprecationWarning, match=f"{old} is now {new}"):
        found = getattr(gpu, old)
    assert found is getattr(gpu, new)
