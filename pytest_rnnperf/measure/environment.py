"""Software fingerprint: package versions, fingerprint keys and environment diffs.

``software_info`` is cheap and imports no framework. Each backend reads its own framework's build, loaded
CUDA/cuDNN and precision flags with ``backends.base.runtime_info``.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
from importlib import metadata
from typing import Mapping

from pytest_rnnperf.backends import specs
from pytest_rnnperf.backends.base import short_error
from pytest_rnnperf.model.flags import unavailable

# Distributions every fingerprint reports, by the key they are reported under; each backend adds its own
# framework's (BackendSpec.distributions). A framework may be installed under another distribution name
# (tensorflow-cpu, tf-nightly, ...): the first found wins.
BASE_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "pytest": ("pytest",),
    "pytest-benchmark": ("pytest-benchmark",),
    "numpy": ("numpy",),
    "nvidia-ml-py": ("nvidia-ml-py",),
}
# NVIDIA library wheels by key: these carry the cuDNN and cuBLAS that pip-installed frameworks actually
# load. CUDA 12 names them nvidia-cublas-cu12, CUDA 13 plain nvidia-cublas (but nvidia-cudnn-cu13); a
# lookalike such as nvidia-cudnn-frontend is another package and must not match.
NVIDIA_WHEELS: dict[str, str] = {
    "cudnn_wheel": "nvidia-cudnn",
    "cublas_wheel": "nvidia-cublas",
    "cuda_runtime_wheel": "nvidia-cuda-runtime",
}
# What identifies a comparable environment besides the backends' own fields, as key -> (source, field).
# "device" is GpuInfo.as_dict(), "software" the merged software_info and backends' runtime_info. Left
# out on purpose: the volatile fields (temperature, current clocks, processes, throttle reasons), the GPU's
# UUID (the same model on another runner is comparable), the python patch version (noise).
_DEVICE_KEYS: dict[str, tuple[str, str]] = {
    "gpu": ("device", "name"),
    "compute_capability": ("device", "compute_capability"),
    "driver": ("device", "driver_version"),
    "cuda_driver": ("device", "cuda_driver_version"),
    "python": ("software", "python_minor"),
}
_WHEEL_KEYS: dict[str, tuple[str, str]] = {"cudnn_wheel": ("software", "cudnn_wheel"),
                                           "cublas_wheel": ("software", "cublas_wheel")}


def distributions() -> dict[str, tuple[str, ...]]:
    """Every distribution the fingerprint reports: the base ones, then each registered backend's."""

    out = dict(BASE_DISTRIBUTIONS)
    for spec in specs():
        out.update(spec.distributions)
    return out


def key_field_map() -> dict[str, tuple[str, str]]:
    """Fingerprint key -> (source, field): device, python, frameworks, NVIDIA wheels, backends' runtime fields."""

    keys = dict(_DEVICE_KEYS)
    for spec in specs():
        keys.update({k: ("software", k) for k in spec.distributions})
    keys.update(_WHEEL_KEYS)
    for spec in specs():
        keys.update({k: ("software", k) for k in spec.key_fields})
    return keys


def _dist_version(names: tuple[str, ...]) -> str:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception as exc:  # broken metadata on disk
            return unavailable(short_error(exc))
    return unavailable("not installed")


def _nvidia_wheels() -> dict[str, str]:
    """Installed NVIDIA library wheels, e.g. ``{"cudnn_wheel": "9.19.0.56 (nvidia-cudnn-cu13)"}``."""
    found: dict[str, list[str]] = {}
    try:
        for dist in metadata.distributions():
            name = (dist.name or "").lower().replace("_", "-")
            for key, base in NVIDIA_WHEELS.items():
                if re.fullmatch(re.escape(base) + r"(-cu\d+)?", name):
                    found.setdefault(key, []).append(f"{dist.version} ({name})")
    except Exception:  # an unreadable site-packages entry must not hide the rest of the fingerprint
        pass
    return {key: ", ".join(sorted(set(found[key]))) for key in NVIDIA_WHEELS if key in found}


def software_info() -> dict[str, str]:
    """Python and package versions from installed metadata; imports no framework."""
    info = {"python": platform.python_version(), "python_minor": ".".join(platform.python_version_tuple()[:2])}
    info.update({key: _dist_version(names) for key, names in distributions().items()})
    info.update(_nvidia_wheels())
    return info


def not_the_wheels(loaded: str, wheels: str | None) -> list[str]:
    """The copies in a ``loaded_libraries`` value whose version is none of the installed ``wheels``' versions.

    ``wheels`` as software_info has it (``"9.19.0.56 (nvidia-cudnn-cu13)"``, several joined by ", "); a library
    states fewer parts of its version than its wheel (cuDNN 9.19.0 of wheel 9.19.0.56), so those parts are compared.
    """
    if not wheels or wheels.startswith("unavailable") or loaded.startswith("unavailable"):
        return []
    shipped = [w.split()[0].split(".") for w in wheels.split(", ") if w.strip()]
    odd = []
    for copy in loaded.split("; "):
        version, at, _ = copy.partition(" at ")
        parts = version.split(".")
        if at and not any(w[:len(parts)] == parts for w in shipped):
            odd.append(copy)
    return odd



def key_fields(device: dict[str, str], software: dict[str, str]) -> dict[str, str]:
    """The fingerprint's fields (``key_field_map``) present in the device and software dicts, under their keys."""
    sources = {"device": device, "software": dict(software)}
    if "python_minor" not in sources["software"] and "python" in software:  # an older stored fingerprint
        sources["software"]["python_minor"] = ".".join(software["python"].split(".")[:2])
    return {key: sources[src][name] for key, (src, name) in key_field_map().items() if name in sources[src]}


def fingerprint_key(fields: dict[str, str]) -> str:
    """Stable short hash of ``fields``: the first 12 hex digits of sha256 over their sorted JSON."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def diff_environments(old: dict[str, str], new: dict[str, str]) -> list[tuple[str, str, str]]:
    """``(field, old, new)`` for each differing field, ``absent`` for a missing side; fingerprint keys first.

    A framework whose runtime fields (``torch.*``, ``tf.*``) are missing on one side did not run there
    (e.g. ``-k torch`` tonight): that is not a change, so its fields are left out rather than listed as absent.
    """

    for prefix in [s.runtime_prefix for s in specs() if s.runtime_prefix]:
        if not any(k.startswith(prefix) for k in old) or not any(k.startswith(prefix) for k in new):
            old = {k: v for k, v in old.items() if not k.startswith(prefix)}
            new = {k: v for k, v in new.items() if not k.startswith(prefix)}
    order = {key: i for i, key in enumerate(key_field_map())}
    keys = sorted(set(old) | set(new), key=lambda k: (order.get(k, len(order)), k))
    return [(k, old.get(k, "absent"), new.get(k, "absent")) for k in keys
            if old.get(k, "absent") != new.get(k, "absent")]


def unrecorded(diff: list[tuple[str, str, str]], old: Mapping[str, str]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """``diff`` split in two: the changes, and the fields a stored run of an older format did not record.

    Such a run lacks a field its framework's other fields are there beside (``torch.cudnn_library`` where
    ``torch.version`` is): the framework ran, the older recorder did not write the field. A missing framework
    version (``jax``) stays a change: it names what was installed.
    """
    prefixes = {key.split(".", 1)[0] + "." for key in old if "." in key}
    missing = [key for key, before, _ in diff
               if before == "absent" and key not in old and "." in key and key.split(".", 1)[0] + "." in prefixes]
    return [change for change in diff if change[0] not in missing], missing


def format_diff(diff: list[tuple[str, str, str]]) -> list[str]:
    """Lines such as ``driver: 580.159 -> 590.1`` for a regression report."""
    return [f"{key}: {_short(before)} -> {_short(after)}" for key, before, after in diff]


def _short(value: str, width: int = 80) -> str:
    """``value``, cut to ``width`` characters with its full length named (an injection spec lists every case)."""
    return value if len(value) <= width else f"{value[:width]}... ({len(value)} characters)"
