"""Where baselines live on disk: find the newest, list the GPU models, write a new one atomically.

Layout (pytest-benchmark's own file storage, one folder per GPU model so that a model is never compared
with another model's numbers):

    baselines/<gpu_slug>/<pytest-benchmark machine id>/NNNN_<tag>.json

Files are never overwritten: recording a baseline adds the next number, and the newest number is the
baseline. What is inside a file is ``records``'s business.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from pytest_rnnperf.model.records import BaselineError

_NAME = re.compile(r"^(\d{4})_(.+)\.json$")
LAST = 9999  # four digits, as pytest-benchmark's file storage numbers its runs: reader and writer agree
# A recorder writes here first; a killed run may leave one behind (.gitignore keeps it out of commits).
TEMP_PREFIX, TEMP_SUFFIX = ".rnnperf-", ".tmp"


def _files(folder: Path) -> list[Path]:
    """Numbered JSON files directly under ``folder``/*/ (pytest-benchmark's machine-id subfolders)."""
    if not folder.is_dir():
        return []
    return [p for p in folder.glob("*/*.json") if _NAME.match(p.name) and p.is_file()]


def _number(path: Path) -> int:
    """The NNNN of a baseline file name."""
    match = _NAME.match(path.name)
    return int(match.group(1)) if match else 0


def number_of(path: Path) -> int:
    """The NNNN of a stored run's file name (0 for another name)."""
    return _number(path)


def find_latest(root: Path, gpu_slug: str, machine_id: str | None = None) -> Path | None:
    """The newest baseline of this GPU model: highest number, preferring this machine id's folder."""
    files = find_all(root, gpu_slug, machine_id)
    return files[0] if files else None


def find_all(root: Path, gpu_slug: str, machine_id: str | None = None) -> list[Path]:
    """Every baseline of this GPU model, newest first (by ``find_latest``'s order)."""
    files = _files(root / gpu_slug)
    return sorted(files, key=lambda p: (1 if machine_id and p.parent.name == machine_id else 0, _number(p)), reverse=True)


def gpus_with_baselines(root: Path) -> list[str]:
    """GPU slugs that have at least one baseline file under ``root``."""
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if d.is_dir() and _files(d))


def write_new(folder: Path, tag: str, data: dict[str, Any]) -> Path:
    """Write ``data`` as the next ``NNNN_<tag>.json`` in ``folder``, atomically and never over a file.

    The JSON goes to a temporary file in the same folder, is fsynced, then hard-linked to its final name:
    a link fails if the name exists (so two writers cannot take the same number) and a reader never sees
    a half-written file (a killed run leaves at most a stray temporary file, never a truncated baseline).
    The file gets the permissions of any new file under the umask, not mkstemp's private 0600.
    """
    problem = tag_problem(tag)
    if problem:
        raise ValueError(f"baseline tag: {problem}")
    full = _full_problem(folder)
    if full:
        raise BaselineError(full)
    tmp = _temp_json(folder, data)
    try:
        for _ in range(1000):
            number = _next_number(folder)
            if number > LAST:
                raise BaselineError(_full_problem(folder))
            target = folder / f"{number:04d}_{tag}.json"
            try:
                os.link(tmp, target)
                return target
            except FileExistsError:
                continue  # another writer took that number: take the next
        raise BaselineError(f"{folder}: could not find a free baseline number")
    finally:
        os.unlink(tmp)


def _next_number(folder: Path) -> int:
    """The number the next baseline in ``folder`` takes."""
    numbers = [_number(p) for p in folder.glob("*.json") if _NAME.match(p.name)] if folder.is_dir() else []
    return max(numbers, default=0) + 1


def _full_problem(folder: Path) -> str:
    """Why ``folder`` takes no further baseline (its last number is taken), or "" while it does."""
    if _next_number(folder) <= LAST:
        return ""
    return (f"{folder}: holds baseline {LAST}, the last four-digit number (NNNN_<tag>.json, as pytest-benchmark "
            f"numbers its files): archive the older files outside the baselines folder and renumber the rest from 0001")


def record_problem(folder: Path) -> str | None:
    """Why a baseline cannot be recorded into ``folder`` (made on demand), or None when it can: asked before a run."""
    return writable_problem(folder) or _full_problem(folder) or None


def output_problem(flag: str, path: Path, example: str) -> str | None:
    """Why ``path`` cannot be a new output file (one that exists is never replaced), or None when it can."""
    if path.is_dir():
        return f"{flag} {path}: a folder, not a file (e.g. {flag} {path / example})"
    if path.exists() or path.is_symlink():
        return f"{flag} {path}: the file exists and is never replaced; give a new name"
    why = _write_blocker(path.parent)
    return None if why is None else f"{flag} {path}: {why}"


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically; FileExistsError if ``path`` exists (nothing is replaced)."""
    tmp = _temp_json(path.parent, data)
    try:
        os.link(tmp, path)  # fails if the name exists, where a rename would replace it
    finally:
        os.unlink(tmp)


def _temp_json(folder: Path, data: dict[str, Any]) -> str:
    """``data`` as JSON in a new fsynced temporary file in ``folder`` (made on demand), with umask permissions."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=True)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def _umask() -> int:
    """This process's umask, read without changing it (os.umask would, for a moment, for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022  # the common default where /proc does not say


def writable_problem(folder: Path) -> str | None:
    """Why files cannot be created in ``folder`` (made on demand), or None when they can."""
    why = _write_blocker(folder)
    return None if why is None else f"{folder}: {why}"


def _write_blocker(folder: Path) -> str | None:
    """What on the way to ``folder`` stops a file being created there, naming that path; None when nothing does."""
    target = folder
    try:
        while not target.exists():
            if target.parent == target:
                return "no existing parent folder"
            target = target.parent
    except OSError as exc:  # a folder on the way that cannot be searched
        return f"cannot look into {target.parent}: {exc.strerror or exc}"
    if not target.is_dir():
        return f"{target} is a file, not a folder"
    if not os.access(target, os.W_OK | os.X_OK):
        return f"{target} is not writable"
    return None


def tag_problem(tag: Any) -> str | None:
    """Why ``tag`` cannot be the name part of a baseline file (NNNN_<tag>.json), or None when it can."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(tag)):
        return f"{tag!r}: use letters, digits, '.', '_' and '-' only"
    if len(str(tag)) > 245:  # NNNN_<tag>.json must fit a file name's 255 bytes
        return f"{len(str(tag))} characters: at most 245 (a file name NNNN_<tag>.json holds at most 255)"
    return None
