"""The old flat module paths (``pytest_rnnperf.records`` ...), kept importable for one release.

The package now lives in layers (model, backends, measure, judge, store, report, history, session, cli,
plugin). Third-party backends and conftests written against the flat layout keep working: importing an old
path gives the new module (or, for a module that was split, a module that finds each name where it went)
with a DeprecationWarning that names the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from typing import Any, Sequence

# old module -> the new modules its names went to, the main one first
MOVED: dict[str, tuple[str, ...]] = {
    "cases": ("model.cases",), "stats": ("model.stats",), "peaks": ("model.peaks",),
    "parity": ("model.parity",), "reference": ("model.reference",), "records": ("model.records", "store.runs", "store.schema", "model.fields"),
    "timing": ("model.timing",), "timing.wall": ("measure.wall",),
    "timing.device": ("measure.device_time", "model.timing"),
    "device": ("measure.gpu", "model.flags"), "runner": ("measure.runner",),
    "workers": ("measure.subprocesses",), "placement": ("measure.placement",),
    "environment": ("measure.environment", "backends.base"),
    "verdicts": ("judge.verdicts",), "noise": ("judge.noise",), "claims": ("judge.claims",),
    "baselines": ("store.baselines",), "settings": ("session.settings", "store.baselines"),
    "fixture": ("plugin.fixtures",), "bench": ("plugin.benchmark",),
}
# old modules whose name is now a layer package: their names are found through the package's __getattr__
PACKAGES: dict[str, tuple[str, ...]] = {
    "report": ("report.text", "report.rows", "report.markdown", "report.files", "report.plot"), "history": ("history.changes", "history.runs", "history.render"), "session": ("session.session",),
}
ROOT = "pytest_rnnperf"


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; the old path goes in the next release", DeprecationWarning,
                  stacklevel=3)


def find_moved(old: str, name: str, targets: Sequence[str]) -> Any:
    """``name`` of the old module ``old``, looked up in the modules it moved to (AttributeError if none)."""
    for target in targets:
        module = importlib.import_module(f"{ROOT}.{target}")
        if hasattr(module, name):
            found = getattr(module, name)
            home = getattr(found, "__module__", None)  # a name imported there: say where it is defined
            where = home if isinstance(home, str) and home.startswith(ROOT + ".") else module.__name__
            _warn(f"{old}.{name}", f"{where}.{name}")
            return found
    raise AttributeError(f"module {old!r} has no attribute {name!r}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers imports of the old paths with the new modules."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old path, None for everything else."""
        if not fullname.startswith(ROOT + ".") or fullname[len(ROOT) + 1:] not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        """The new module itself, or for a split module one that looks each name up where it went."""
        old = spec.name[len(ROOT) + 1:]
        targets = MOVED[old]
        parent = any(other.startswith(old + ".") for other in MOVED)  # timing held timing.wall: a package
        if len(targets) == 1 and not parent:
            _warn(spec.name, f"{ROOT}.{targets[0]}")
            return importlib.import_module(f"{ROOT}.{targets[0]}")
        module = types.ModuleType(spec.name, f"Moved to {', '.join(ROOT + '.' + t for t in targets)}.")
        module.__getattr__ = lambda name: find_moved(spec.name, name, targets)  # type: ignore[method-assign]
        if parent:
            module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module is already what it should be."""


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())


def renamed_names(module: str, names: dict[str, str], namespace: dict[str, Any]) -> Any:
    """A module ``__getattr__`` that answers each old name of ``names`` with the new one, warning for one release."""

    def __getattr__(name: str) -> Any:
        """An old name, with a DeprecationWarning naming the new one."""
        if name in names:
            warnings.warn(f"{module}.{name} is now {names[name]}; the old name goes in the next release",
                          DeprecationWarning, stacklevel=2)
            return namespace[names[name]]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
