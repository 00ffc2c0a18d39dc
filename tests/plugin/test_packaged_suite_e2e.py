"""The suite as a team outside this repository gets it: built into the wheel, installed into a fresh virtualenv in a
scratch folder, and run there with ``pytest --pyargs pytest_rnnperf.suites``.

The virtualenv gets the wheel alone (``--no-deps``); the frameworks and pytest come from this test's environment
through a ``.pth`` line, which adds that folder to ``sys.path`` without running its own ``.pth`` files, so the
editable install of this checkout stays out of it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import REPO, torch_sees_a_gpu

# What the wheel is built from: the package and the suite it maps in (pyproject.toml's package-dir).
SOURCES = ("pyproject.toml", "README.md", "pytest_rnnperf", "suites")


def _tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` that git would see (caches left out), by relative path."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    return {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in listed
            if name and (root / name).is_file()}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch folder with ``venv/`` holding the wheel built from this checkout; returns the folder."""
    if shutil.which("git") is None:
        pytest.skip("needs git to list this checkout's files")
    root = tmp_path_factory.mktemp("elsewhere")
    source = root / "source"
    source.mkdir()
    for name in SOURCES:  # built from a copy, so the build's own folders land outside the checkout too
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(root / "dist"), str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = (root / "dist").glob("pytest_rnnperf-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=300)
    python = root / "venv" / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   capture_output=True, timeout=300)
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "zz_test_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    shutil.rmtree(source)
    return root


def _run(folder: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed python in ``folder``, with a home and caches of its own inside ``root``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "PYTEST_", "RNNPERF_"))}
    env.update(HOME=str(root / "home"), XDG_CACHE_HOME=str(root / "home" / ".cache"), COLUMNS="120")
    return subprocess.run([str(root / "venv" / "bin" / "python"), *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=900)


def test_the_wheel_holds_the_suite_inside_the_package_and_no_top_level_suites(installed: Path) -> None:
    """``pytest_rnnperf.suites`` (the claims too) is installed; nothing named ``suites`` lands in site-packages."""
    found = _run(installed, installed, "-c", "import importlib.util as u, pytest_rnnperf.suites.claims.test_claims as c;"
                 "print(c.__file__); print(u.find_spec('suites'))")
    assert found.returncode == 0, found.stderr
    where, top_level = found.stdout.split()
    assert Path(where).is_relative_to(installed / "venv")
    assert top_level == "None"


def test_the_packaged_suite_runs_in_another_folder_and_writes_nothing_outside_it(installed: Path) -> None:
    """On a CPU: the generic paths are checked against float64, the cuDNN cases skipped and counted, and the stored
    runs and reports land in the folder it was run from; this checkout is left as it was."""
    if torch_sees_a_gpu() is not False:
        pytest.skip("needs torch without a GPU (on a GPU the suite times for minutes)")
    project = installed / "team-repo"
    project.mkdir()
    before = _tree_digest(REPO)
    everything = _run(project, installed, "-m", "pytest", "--pyargs", "pytest_rnnperf.suites", "--collect-only", "-q",
                      "-p", "no:cacheprovider")
    assert everything.returncode == 0, everything.stdout[-3000:] + everything.stderr[-3000:]
    assert "test_claims.py" in everything.stdout and "test_cudnn.py" in everything.stdout
    # The claims and cross-framework checks run after every timed case (suites/conftest.py says why).
    listed = everything.stdout
    assert max(listed.rindex(f"{name}::") for name in ("test_cudnn.py", "test_keras_cases.py", "test_models.py")) < \
        min(listed.index(f"{name}::") for name in ("test_claims.py", "test_cross.py"))
    result = _run(project, installed, "-m", "pytest", "--pyargs", "pytest_rnnperf.suites", "-p", "no:cacheprovider",
                  "-rs", "-k", "(torch and not keras and not compile and not claims) or test_models")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    assert "generic path vs float64 reference:" in output
    assert "cuDNN case needs a GPU" in output
    assert (project / "rnnperf-report" / "index.html").is_file()
    # The suite's model checks are stored under the ids a clone gives them, not under this virtualenv's path.
    report = (project / "rnnperf-report" / "rnnperf.json").read_text()
    assert '"suites/test_models.py::test_char_lm_trains_on_cudnn"' in report and "site-packages" not in report
    assert _tree_digest(REPO) == before
