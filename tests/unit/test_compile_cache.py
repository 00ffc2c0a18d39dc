"""The compile cache kept between runs: the setting, the folder checks, what reaches subprocesses and frameworks,
and (on the CPU, with JAX installed) that a JAX case really fills DIR/xla."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_rnnperf.backends import compile_cache
from pytest_rnnperf.backends.compile_cache import (
    CACHE_ENV, configure_inductor, configure_jax, default_folder, environment, folder_problem, resolved,
)
from pytest_rnnperf.backends.keras import KERAS_JAX
from pytest_rnnperf.measure.subprocesses import subprocess_env
from pytest_rnnperf.session.settings import Settings, setting


@pytest.fixture(autouse=True)
def _no_process_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a subprocess would: no folder set by use(), none inherited."""
    monkeypatch.setattr(compile_cache, "_folder", None)
    monkeypatch.delenv(CACHE_ENV, raising=False)


def test_the_setting_is_text_with_an_empty_default_and_a_flag_and_ini_key_of_its_name() -> None:
    cache = setting("compile_cache")
    assert (cache.flag, cache.ini, cache.default, cache.path) == (
        "--rnnperf-compile-cache", "rnnperf_compile_cache", "", True)
    assert cache.parse("none") == "none" and cache.parse("/tmp/c") == "/tmp/c"
    assert Settings.defaults().compile_cache == ""


def test_the_default_folder_follows_xdg_cache_home_and_falls_back_to_dot_cache() -> None:
    assert default_folder({"XDG_CACHE_HOME": "/x/cache", "HOME": "/home/u"}) == "/x/cache/pytest-rnnperf"
    assert default_folder({"HOME": "/home/u"}) == "/home/u/.cache/pytest-rnnperf"
    # The XDG rule: a relative XDG_CACHE_HOME is invalid and ignored.
    assert default_folder({"XDG_CACHE_HOME": "rel", "HOME": "/home/u"}) == "/home/u/.cache/pytest-rnnperf"


def test_none_turns_the_cache_off_and_empty_means_the_default_folder() -> None:
    env = {"HOME": "/home/u"}
    assert resolved("none", env) is None and resolved(" NONE ", env) is None
    assert resolved("", env) == Path("/home/u/.cache/pytest-rnnperf")
    assert resolved("/c", env) == Path("/c")


def test_a_usable_folder_is_created_with_its_xla_and_inductor_subfolders(tmp_path: Path) -> None:
    assert folder_problem(tmp_path / "a" / "cache") is None
    assert (tmp_path / "a" / "cache" / "xla").is_dir() and (tmp_path / "a" / "cache" / "inductor").is_dir()


def test_a_file_in_the_way_is_one_line_naming_the_folder(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    problem = folder_problem(tmp_path / "file" / "cache")
    assert problem is not None and problem.startswith(f"cannot create {tmp_path / 'file' / 'cache'}: ")
    assert "\n" not in problem


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a user that permissions apply to")
def test_a_read_only_folder_is_one_line_naming_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert folder_problem(folder / "cache") == f"cannot create {folder / 'cache'}: Permission denied"
    finally:
        folder.chmod(0o755)


def test_subprocesses_get_the_folder_jax_flags_and_inductor_folder_in_their_environment(tmp_path: Path) -> None:
    env = environment(tmp_path)
    assert env[CACHE_ENV] == str(tmp_path) and env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
    assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "xla")
    assert env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    assert env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] == "-1"
    # Off: the variable is emptied, so a folder this process inherited does not reach the subprocess.
    assert environment(None) == {CACHE_ENV: ""}


def test_a_subprocess_environment_has_the_sessions_extra_and_the_spec_s_own_last(tmp_path: Path) -> None:
    env = subprocess_env(KERAS_JAX, {CACHE_ENV: str(tmp_path), "KERAS_BACKEND": "torch"})
    assert env[CACHE_ENV] == str(tmp_path)
    assert env["KERAS_BACKEND"] == "jax"  # the spec's environment is what the subprocess exists for
    assert "PYTHONPATH" in env


def test_the_process_folder_comes_from_use_else_from_the_parent_s_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert compile_cache.current() is None
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "parent"))
    assert compile_cache.current() == tmp_path / "parent"
    compile_cache.use(tmp_path / "own")
    assert compile_cache.current() == tmp_path / "own"
    compile_cache.use(None)
    assert compile_cache.current() is None


class _FakeConfig:
    """jax.config as far as configure_jax uses it: attributes read, updates recorded."""

    def __init__(self) -> None:
        """Start with JAX's defaults and no updates."""
        self.jax_compilation_cache_dir = None
        self.jax_persistent_cache_min_compile_time_secs = 1.0
        self.jax_persistent_cache_min_entry_size_bytes = 0
        self.updates: list[tuple[str, Any]] = []

    def update(self, name: str, value: Any) -> None:
        """Record and apply one update."""
        self.updates.append((name, value))
        setattr(self, name, value)


class _FakeJax:
    """A module with a ``config``."""

    def __init__(self) -> None:
        """A fresh config."""
        self.config = _FakeConfig()


def test_jax_is_pointed_at_dir_xla_once_and_caches_everything(tmp_path: Path) -> None:
    jax = _FakeJax()
    compile_cache.use(tmp_path)
    configure_jax(jax)
    configure_jax(jax)  # imported again: nothing left to change
    assert jax.config.updates == [("jax_compilation_cache_dir", str(tmp_path / "xla")),
                                  ("jax_persistent_cache_min_compile_time_secs", 0),
                                  ("jax_persistent_cache_min_entry_size_bytes", -1)]


def test_with_the_cache_off_jax_and_inductor_are_left_alone(tmp_path: Path) -> None:
    jax = _FakeJax()
    environ: dict[str, str] = {}
    configure_jax(jax)
    configure_inductor(environ)
    assert jax.config.updates == [] and environ == {}


def test_inductor_gets_dir_inductor_unless_the_user_chose_a_folder(tmp_path: Path) -> None:
    compile_cache.use(tmp_path)
    environ: dict[str, str] = {}
    configure_inductor(environ)
    assert environ == {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    mine = {"TORCHINDUCTOR_CACHE_DIR": "/mine"}
    configure_inductor(mine)
    assert mine == {"TORCHINDUCTOR_CACHE_DIR": "/mine"}


# A smoke-scale JAX case on the CPU in a fresh process (JAX's config is per process): the folder comes from the
# environment, as a backend subprocess gets it.
_JAX_CASE = textwrap.dedent("""
    from pytest_rnnperf.backends.jax import JaxBackend
    from pytest_rnnperf.measure.runner import RunConfig, run_case
    from pytest_rnnperf.model.cases import Case, Shape
    from pytest_rnnperf.model.timing import TimingConfig

    quick = TimingConfig(rounds=2, min_rounds=1, warmup_steps=1, warmup_s=0.0, min_block_s=0.0, max_time_s=5.0)
    record = run_case(Case("jax", "lstm", Shape(4, 2, 3, 5), "infer"), JaxBackend(), RunConfig(timing=quick),
                      impls=("generic",))
    assert record.paths_ok, record.proofs
""")


def test_a_jax_case_compiled_on_the_cpu_writes_its_programs_into_dir_xla(tmp_path: Path) -> None:
    pytest.importorskip("jax")
    env = dict(os.environ, **{CACHE_ENV: str(tmp_path), "JAX_PLATFORMS": "cpu"})
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([sys.executable, "-c", _JAX_CASE], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [p for p in (tmp_path / "xla").rglob("*") if p.is_file()], "JAX wrote nothing into DIR/xla"
