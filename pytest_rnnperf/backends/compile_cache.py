"""The compile cache a run keeps between runs: XLA's in ``<folder>/xla``, Inductor's in ``<folder>/inductor``.

Building a case is mostly compiling (XLA for JAX and Keras on JAX, Inductor for torch.compile); a nightly that
keeps the compiled programs of the night before skips most of that. The folder reaches every process that
compiles: this one through ``use()``, backend subprocesses through their environment (``environment()``).
Nothing here imports a framework at load time: ``configure_jax`` and ``configure_inductor`` run at the edge
where the backend imports its framework.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Mapping

# The folder handed to backend subprocesses; empty means off (a parent run with the cache off).
CACHE_ENV = "RNNPERF_COMPILE_CACHE"
OFF = "none"
XLA_DIR = "xla"
INDUCTOR_DIR = "inductor"

_folder: str | None = None  # set by use(): this process's folder, ahead of CACHE_ENV


def default_folder(environ: Mapping[str, str]) -> str:
    """``$XDG_CACHE_HOME/pytest-rnnperf``, else ``~/.cache/pytest-rnnperf`` (the XDG base directory rule)."""
    base = environ.get("XDG_CACHE_HOME", "").strip()
    root = Path(base) if base and Path(base).is_absolute() else Path(environ.get("HOME") or Path.home()) / ".cache"
    return str(root / "pytest-rnnperf")


def resolved(value: str, environ: Mapping[str, str]) -> Path | None:
    """The cache folder a setting names (``""``: the default; ``none``: None, the cache is off)."""
    text = value.strip()
    if text.lower() == OFF:
        return None
    return Path(os.path.expanduser(text or default_folder(environ)))


def folder_problem(folder: Path) -> str | None:
    """Why the cache cannot live in ``folder`` (creating it and its two subfolders), or None when it can."""
    try:
        for sub in (XLA_DIR, INDUCTOR_DIR):
            (folder / sub).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot create {folder}: {exc.strerror or exc}"
    if not os.access(folder / XLA_DIR, os.W_OK | os.X_OK) or not os.access(folder / INDUCTOR_DIR, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    return None


def is_empty(folder: Path) -> bool:
    """Whether neither XLA nor Inductor kept anything in ``folder`` yet (a first night on a runner)."""
    return not any(any((folder / sub).iterdir()) for sub in (XLA_DIR, INDUCTOR_DIR) if (folder / sub).is_dir())


def environment(folder: Path | None) -> dict[str, str]:
    """What a backend subprocess needs in its environment to use ``folder`` (None: the cache off)."""
    if folder is None:
        return {CACHE_ENV: ""}
    # Inductor reads its folder from the environment when it first compiles, and JAX its flags when imported:
    # set at the start, they hold however the subprocess's code gets to its framework (a team's build() included).
    env = {CACHE_ENV: str(folder), "TORCHINDUCTOR_CACHE_DIR": str(folder / INDUCTOR_DIR)}
    env.update({name.upper(): str(value) for name, value in jax_settings(folder).items()})
    return env


def use(folder: Path | None) -> None:
    """Make ``folder`` this process's cache (None: off); the frameworks pick it up when they are imported."""
    global _folder
    _folder = "" if folder is None else str(folder)


def current() -> Path | None:
    """This process's cache folder: the one ``use()`` set, else the one the parent passed, else None (off)."""
    value = _folder if _folder is not None else os.environ.get(CACHE_ENV, "")
    return Path(value) if value else None


def jax_settings(folder: Path) -> dict[str, Any]:
    """The jax.config values that cache every compiled program in ``folder/xla``, however small or quick."""
    # JAX's defaults skip programs that compile in under a second and small entries: a case's steps are many
    # such programs, so both limits go (-1 as the persistent cache guide's quick start gives it).
    return {"jax_compilation_cache_dir": str(folder / XLA_DIR), "jax_persistent_cache_min_compile_time_secs": 0,
            "jax_persistent_cache_min_entry_size_bytes": -1}


def configure_jax(jax: Any | None = None) -> None:
    """Point JAX's persistent compilation cache at this process's folder (a no-op with the cache off)."""
    folder = current()
    if folder is None:
        return
    jax = jax if jax is not None else importlib.import_module("jax")
    for name, value in jax_settings(folder).items():
        if getattr(jax.config, name, None) != value:
            jax.config.update(name, value)


def configure_inductor(environ: Any = None) -> None:
    """Point Inductor's on-disk cache at this process's folder, unless the user chose one or the cache is off."""
    environ = os.environ if environ is None else environ
    folder = current()
    if folder is not None:
        environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(folder / INDUCTOR_DIR))


__all__ = ["CACHE_ENV", "configure_inductor", "configure_jax", "current", "default_folder", "environment",
           "folder_problem", "jax_settings", "resolved", "use"]
