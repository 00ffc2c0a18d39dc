"""Where baselines live on disk: find the newest, list the GPU models, write a new one atomically.

Layout (pytest-benchmark's own file storage, one folder per GPU model so that a model is never compared
with another model's numbers):

    baselines/<gpu_slug>/<pytest-benchmark machine id>/NNNN_<tag>.json   (or .json.gz, gzipped by hand)

Every stored run is found by the names here (``RUN_NAME``, ``stored_run_files``) and nowhere else, so a plugin
run, the kept-run history, numbering the next file and every subcommand see the same files. Files are never
overwritten: recording a baseline adds the next number, and the newest number is the
baseline. A file named like a baseline where it is never read (one folder too high or too deep, misnamed, a
broken symlink) stops the run. What is inside a file is ``records``'s business.
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Sequence

from pytest_rnnperf.model.records import BaselineError

# A stored run, plain or gzipped (runs kept as evidence are compressed to a tenth of their size).
RUN_NAME = re.compile(r"^.+\.json(\.gz)?$")
_NAME = re.compile(r"^(\d{4})_(.+?)\.json(\.gz)?$")
LAST = 9999  # four digits, as pytest-benchmark's file storage numbers its runs: reader and writer agree
# What a user meant as a baseline: numbered (any width) or saying so. Such a file where it is never read stops
# the run instead of being skipped; other files (notes, evidence) are left alone.
_LIKE = re.compile(r"^(\d+_.*|.*baseline.*)\.json(\.gz)?$", re.IGNORECASE)
# pytest-benchmark's machine id (utils.get_machine_id), e.g. Linux-CPython-3.12-64bit: below a folder of that
# shape only NNNN_<tag>.json is read, so a file named like a baseline there or deeper is misnamed or misplaced.
_MACHINE = re.compile(r"^[^-]*-[^-]+-\d+\.\d+-\d+bit$")
# A recorder writes here first; a killed run may leave one behind (.gitignore keeps it out of commits).
TEMP_PREFIX, TEMP_SUFFIX = ".rnnperf-", ".tmp"
KEPT_TAG = "run"  # name part of a run kept for the history (NNNN_run.json)


def _files(folder: Path) -> list[Path]:
    """Numbered stored runs directly under ``folder``/*/ (pytest-benchmark's machine-id subfolders)."""
    if not folder.is_dir():
        return []
    return [p for p in folder.glob("*/*") if _NAME.match(p.name) and p.is_file()]


def stored_run_files(folder: Path) -> list[Path]:
    """Every file under ``folder`` (any depth) named like a stored run, plain or gzipped, sorted: what ``history`` reads."""
    return sorted(p for p in folder.rglob("*") if RUN_NAME.match(p.name) and p.is_file())


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
    """Every baseline of this GPU model, newest first (by ``find_latest``'s order).

    BaselineError (one line naming the path) for a folder that cannot be read, a file where the folder should
    be, a broken symlink named like a baseline, and a baseline misnamed or one folder too high or too deep.
    """
    files = _stored(root / gpu_slug, machine_id)
    return sorted(files, key=lambda p: (1 if machine_id and p.parent.name == machine_id else 0, _number(p)), reverse=True)


def _entries(folder: Path) -> list[Path]:
    """What ``folder`` holds, sorted; BaselineError when it cannot be listed."""
    try:
        with os.scandir(folder) as listing:
            return sorted(Path(entry.path) for entry in listing)
    except OSError as exc:
        raise BaselineError(f"{folder}: cannot read this folder: {exc.strerror or exc}") from None


def _stored(folder: Path, machine_id: str | None) -> list[Path]:
    """The baseline files of one GPU model's folder (none when it does not exist); BaselineError as ``find_all``."""
    try:
        if not folder.exists() and not folder.is_symlink():
            return []
    except OSError as exc:  # a folder above it that cannot be searched
        raise BaselineError(f"{folder}: cannot read: {exc.strerror or exc}") from None
    if not folder.is_dir():
        if folder.is_symlink() and not folder.exists():
            raise BaselineError(f"{folder}: the folder of the {folder.name} baselines is {_broken_link(folder)}")
        raise BaselineError(f"{folder}: a file where the folder of the {folder.name} baselines should be; move it away")
    files = []
    for entry in _entries(folder):
        if entry.is_dir():
            files += _machine_files(entry)
        elif entry.is_symlink() and not entry.exists():  # a machine folder whose target is gone reads as empty
            raise BaselineError(f"{entry}: {_broken_link(entry)}; in a GPU model's folder it hides what it held")
        elif _LIKE.match(entry.name):
            raise BaselineError(f"{entry}: a baseline one folder too high, where it is never read: move it into "
                                f"{folder / (machine_id or '<pytest-benchmark machine id>')}/")
    return files


def _machine_files(folder: Path) -> list[Path]:
    """The NNNN_<tag>.json files of one machine-id folder; BaselineError as ``find_all``."""
    machine = bool(_MACHINE.match(folder.name))
    files = []
    numbered: dict[int, Path] = {}
    for entry in _entries(folder):
        if _NAME.match(entry.name):
            if not entry.is_file():
                raise BaselineError(f"{entry}: {_not_a_file(entry)}")
            if (other := numbered.setdefault(_number(entry), entry)) != entry:
                # The newest number is the baseline and the order is the history's: one number, one run.
                raise BaselineError(f"{entry}: numbered {_number(entry):04d} like {other.name} beside it; one "
                                    f"number is one stored run: renumber one, or move one out of {folder}/")
            files.append(entry)
        elif not machine:
            continue  # evidence/ and the like: only numbered files are read there, the rest is theirs
        elif entry.is_dir():
            deeper = next((p for p in sorted(entry.rglob("*")) if _LIKE.match(p.name)), None)
            if deeper is not None:
                depth = len(deeper.relative_to(folder).parts) - 1
                raise BaselineError(f"{deeper}: a baseline {'one folder' if depth == 1 else f'{depth} folders'} too "
                                    f"deep, where it is never read: move it up into {folder}/")
        elif _LIKE.match(entry.name):
            raise BaselineError(f"{entry}: named like a baseline, but only NNNN_<tag>.json (four digits) is read: "
                                f"rename it in {folder}/ (gzipped: NNNN_<tag>.json.gz)")
    return files


def _not_a_file(path: Path) -> str:
    """Why ``path``, named like a baseline, is no file: a dangling or looping symlink, or a folder."""
    if not path.is_symlink():
        return "a folder, not a baseline file"
    return _broken_link(path) or "a symlink to something that is not a file"


def _broken_link(path: Path) -> str:
    """How the symlink ``path`` is broken ("a symlink that loops", "a symlink to X, which does not exist"), or ""."""
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink that loops"
        return f"a symlink to {os.readlink(path)}, which does not exist"
    return ""


def broken_link_on_the_way(path: Path) -> str | None:
    """Where a dangling or looping symlink stands on the way to ``path`` (itself included), or None.

    A baselines folder behind such a link (a share not mounted, a moved checkout) looks like no folder at all:
    the run would compare with nothing.
    """
    for part in reversed((path, *path.parents)):
        if part.is_symlink() and (why := _broken_link(part)):
            return f"{part} is {why}"
    return None


def root_problem(root: Path, given: str, gpu_slug: str = "") -> str | None:
    """Why ``root`` (the baselines folder, ``given`` as typed) is one GPU model's folder instead, or None."""
    if gpu_slug and root.name == gpu_slug:
        why = f"({gpu_slug})"
    else:
        held = _model_folder_content(root)
        if held is None:
            return None
        why = f"(it holds {held})"
    return (f"{root} is the folder of one GPU model {why}; give the baselines folder above it: "
            f"--rnnperf-baselines={Path(given).parent}")


def machine_folder_problem(folder: Path) -> str | None:
    """Why ``folder``, given where a GPU model's folder is wanted, is one of its machine folders instead, or None.

    The name tells: a machine id (Linux-CPython-3.12-64bit) has a shape no GPU model's slug has.
    """
    if _MACHINE.match(folder.name):
        return f"{folder} is a machine folder; give the GPU model's folder: {folder.parent}"
    return None


def _model_folder_content(folder: Path) -> str | None:
    """What in ``folder`` only a GPU model's folder holds (noise.json, a machine folder of baselines), or None."""
    try:
        if (folder / "noise.json").is_file():
            return "noise.json"
        for sub in sorted(folder.iterdir()) if folder.is_dir() else ():
            if _MACHINE.match(sub.name) and sub.is_dir() and any(_NAME.match(p.name) for p in sub.iterdir()):
                return f"{sub.name}/"
    except OSError:  # what cannot be read is find_all's to report
        pass
    return None


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
    numbers = [_number(p) for p in folder.iterdir() if _NAME.match(p.name)] if folder.is_dir() else []
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


def output_problem(flag: str, path: Path, example: str, inputs: Sequence[Path] = ()) -> str | None:
    """Why ``path`` cannot be a new output file (one that exists is never replaced, none goes among the stored runs
    ``inputs`` read), or None when it can."""
    if path.is_dir():
        return f"{flag} {path}: a folder, not a file (e.g. {flag} {path / example})"
    if path.exists() or path.is_symlink():
        return f"{flag} {path}: the file exists and is never replaced; give a new name"
    if (among := among_stored_runs(flag, path, inputs)) is not None:
        return among
    if _LIKE.match(path.name) and _MACHINE.match(path.parent.name):
        return (f"{flag} {path}: named like a stored run in a machine folder, where every run of pytest-rnnperf would "
                f"read it as one; give a file outside the baselines folder")
    why = _write_blocker(path.parent)
    return None if why is None else f"{flag} {path}: {why}"


def among_stored_runs(flag: str, path: Path, inputs: Sequence[Path]) -> str | None:
    """Why the output ``path`` lies where stored runs are read (a folder of ``inputs``, or the GPU model's folder of a
    stored run among them), or None: what a command reads is never written."""
    target = path.resolve()
    for given in map(Path, inputs):
        if not given.is_dir() and _NAME.match(given.name) and _MACHINE.match(given.resolve().parent.name):
            # baselines/<gpu>/<machine id>/NNNN_<tag>.json: its GPU model's folder, as typed where it can be
            given = given.parent.parent if _MACHINE.match(given.parent.name) else given.resolve().parent.parent
        source = given.resolve()
        if source.is_dir() and (target == source or source in target.parents):
            return f"{flag} {path}: inside {given}, a folder of stored runs that is read, never written"
    return None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically; FileExistsError if ``path`` exists (nothing is replaced)."""
    tmp = _temp_json(path.parent, data)
    try:
        os.link(tmp, path)  # fails if the name exists, where a rename would replace it
    finally:
        os.unlink(tmp)


def replace_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically, replacing it: a reader sees the old file or the new one, never half."""
    os.replace(_temp_json(path.parent, data), path)


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


def baseline_tag_problem(tag: Any) -> str | None:
    """Why ``tag`` cannot name a recorded baseline (NNNN_<tag>.json), or None: a file name part, and not a kept run's."""
    if str(tag) == KEPT_TAG:  # NNNN_run.json would read to a person as a nightly run kept for the history
        return f"{tag!r} names the runs --rnnperf-keep-run keeps (NNNN_{KEPT_TAG}.json); give a baseline another tag"
    return tag_problem(tag)
