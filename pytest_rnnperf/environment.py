"""Software fingerprint: package versions, build and run-time CUDA/cuDNN, precision and determinism flags.

``software_info`` is cheap and imports no framework. ``torch_runtime_info`` and ``tf_runtime_info`` import
their framework only when called and never raise: a value that cannot be read is ``"unavailable: <reason>"``.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import platform
import re
from collections.abc import Callable
from importlib import metadata
from typing import Any

from pytest_rnnperf.device import unavailable

# Distributions whose versions go into the fingerprint, by the key they are reported under. A framework
# may be installed under another distribution name (tensorflow-cpu, tf-nightly, ...): the first found wins.
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "pytest": ("pytest",),
    "pytest-benchmark": ("pytest-benchmark",),
    "numpy": ("numpy",),
    "torch": ("torch",),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly"),
    "keras": ("keras",),
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

TORCH_KEYS: tuple[str, ...] = (
    "torch.version", "torch.cuda_build", "torch.cudnn_version", "torch.cudnn_available", "torch.cudnn_enabled",
    "torch.cuda_available", "torch.device_name", "torch.cudnn_allow_tf32", "torch.matmul_allow_tf32",
    "torch.float32_matmul_precision", "torch.cudnn_rnn_fp32_precision", "torch.matmul_fp32_precision",
    "torch.cudnn_benchmark", "torch.cudnn_deterministic", "torch.deterministic_algorithms",
)
TF_KEYS: tuple[str, ...] = (
    "tf.version", "tf.keras_version", "tf.cuda_build", "tf.cudnn_build", "tf.cudnn_runtime", "tf.gpus",
    "tf.tensor_float_32", "tf.op_determinism", "tf.memory_growth",
)

# What identifies a comparable environment, as key -> (source, field). "device" is DeviceInfo.as_dict(),
# "software" the merged software_info / torch_runtime_info / tf_runtime_info. Left out on purpose: the
# volatile fields (temperature, current clocks, processes, throttle reasons), the GPU's UUID (the same
# model on another runner is comparable), the python patch version (a 3.11.7 -> 3.11.9 update is noise).
KEY_FIELDS: dict[str, tuple[str, str]] = {
    "gpu": ("device", "name"),
    "compute_capability": ("device", "compute_capability"),
    "driver": ("device", "driver_version"),
    "cuda_driver": ("device", "cuda_driver_version"),
    "python": ("software", "python_minor"),
    "torch": ("software", "torch"),
    "tensorflow": ("software", "tensorflow"),
    "keras": ("software", "keras"),
    "cudnn_wheel": ("software", "cudnn_wheel"),
    "cublas_wheel": ("software", "cublas_wheel"),
    "torch.cuda_build": ("software", "torch.cuda_build"),
    "torch.cudnn_version": ("software", "torch.cudnn_version"),
    "tf.cuda_build": ("software", "tf.cuda_build"),
    "tf.cudnn_build": ("software", "tf.cudnn_build"),
    "tf.cudnn_runtime": ("software", "tf.cudnn_runtime"),
    "torch.cudnn_allow_tf32": ("software", "torch.cudnn_allow_tf32"),
    "torch.matmul_allow_tf32": ("software", "torch.matmul_allow_tf32"),
    "torch.float32_matmul_precision": ("software", "torch.float32_matmul_precision"),
    "torch.cudnn_rnn_fp32_precision": ("software", "torch.cudnn_rnn_fp32_precision"),
    "torch.cudnn_benchmark": ("software", "torch.cudnn_benchmark"),
    "torch.cudnn_deterministic": ("software", "torch.cudnn_deterministic"),
    "torch.deterministic_algorithms": ("software", "torch.deterministic_algorithms"),
    "tf.tensor_float_32": ("software", "tf.tensor_float_32"),
    "tf.op_determinism": ("software", "tf.op_determinism"),
}


def _short(exc: BaseException) -> str:
    """``Type: first line`` of an exception, short enough for a header line."""
    text = str(exc).strip().splitlines()[0][:80] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _get(fn: Callable[[], Any], fmt: Callable[[Any], str] = str) -> str:
    """Read and format one value, or ``unavailable: <exception>``; never raises."""
    try:
        return fmt(fn())
    except Exception as exc:  # a framework attribute moved or a device is missing: report, don't fail
        return unavailable(_short(exc))


def _dist_version(names: tuple[str, ...]) -> str:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception as exc:  # broken metadata on disk
            return unavailable(_short(exc))
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
    info.update({key: _dist_version(names) for key, names in DISTRIBUTIONS.items()})
    info.update(_nvidia_wheels())
    return info


def format_cudnn_version(version: int | None) -> str:
    """cuDNN's integer version as text: 91900 -> ``9.19.0`` (cuDNN 9), 8902 -> ``8.9.2`` (cuDNN 8 and older)."""
    if version is None:
        return unavailable("no cuDNN")
    v = int(version)
    if v >= 90000:  # cuDNN 9 changed the encoding from major*1000 to major*10000
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def _import_failed(keys: tuple[str, ...], module: str, exc: BaseException) -> dict[str, str]:
    why = f"{module} not installed" if isinstance(exc, ImportError) else f"{module} import failed ({_short(exc)})"
    return {key: unavailable(why) for key in keys}


def _runtime_info(module: str, keys: tuple[str, ...], read: Callable[[Any], dict[str, str]]) -> dict[str, str]:
    """Import ``module`` and ``read`` its fields; every failure becomes "unavailable: <reason>" values."""
    try:
        framework = __import__(module)  # the import statement's hook, as `import torch` would use
    except Exception as exc:  # not installed, or a broken build (missing CUDA libraries, ABI errors)
        return _import_failed(keys, module, exc)
    try:
        return read(framework)
    except Exception as exc:  # the framework's config API itself missing or broken: still never raise
        return {key: unavailable(_short(exc)) for key in keys}


def torch_runtime_info() -> dict[str, str]:
    """torch's build and loaded CUDA/cuDNN, device and precision/determinism flags; imports torch."""
    return _runtime_info("torch", TORCH_KEYS, _torch_info)


def _torch_info(torch: Any) -> dict[str, str]:
    cudnn, cuda = torch.backends.cudnn, torch.backends.cuda
    cuda_ok = _get(torch.cuda.is_available)
    return {
        "torch.version": _get(lambda: torch.__version__),
        "torch.cuda_build": _get(lambda: torch.version.cuda or "none (CPU build)"),
        # The cuDNN loaded at run time, which can differ from the one torch was built with.
        "torch.cudnn_version": _get(cudnn.version, format_cudnn_version),
        "torch.cudnn_available": _get(cudnn.is_available),
        "torch.cudnn_enabled": _get(lambda: cudnn.enabled),
        "torch.cuda_available": cuda_ok,
        "torch.device_name": (_get(lambda: torch.cuda.get_device_name(0)) if cuda_ok == "True"
                              else unavailable("no CUDA device")),
        "torch.cudnn_allow_tf32": _get(lambda: cudnn.allow_tf32),
        "torch.matmul_allow_tf32": _get(lambda: cuda.matmul.allow_tf32),
        "torch.float32_matmul_precision": _get(torch.get_float32_matmul_precision),
        # torch >= 2.9 spells precision per backend and operator; older torch lacks these (unavailable).
        "torch.cudnn_rnn_fp32_precision": _get(lambda: cudnn.rnn.fp32_precision),
        "torch.matmul_fp32_precision": _get(lambda: cuda.matmul.fp32_precision),
        "torch.cudnn_benchmark": _get(lambda: cudnn.benchmark),
        "torch.cudnn_deterministic": _get(lambda: cudnn.deterministic),
        "torch.deterministic_algorithms": _get(torch.are_deterministic_algorithms_enabled),
    }


def _loaded_cudnn(maps_path: str = "/proc/self/maps", loader: Callable[[str], Any] | None = None) -> str:
    """Version of the libcudnn mapped into this process, asked of the library itself; Linux only."""
    try:
        with open(maps_path) as f:
            paths = {parts[5].strip() for parts in (line.split(None, 5) for line in f if "libcudnn" in line)
                     if len(parts) == 6}
    except Exception:
        paths = set()
    libs = sorted(p for p in paths if os.path.basename(p).startswith("libcudnn.so"))
    if not libs:
        return unavailable("TF does not expose the loaded cuDNN version and no libcudnn is loaded yet")
    # RTLD_NOLOAD: only ever get a handle on the copy already loaded, never load another one.
    load = loader or (lambda p: ctypes.CDLL(p, mode=os.RTLD_NOLOAD | os.RTLD_LAZY))
    got = _get(lambda: load(libs[0]).cudnnGetVersion(), format_cudnn_version)
    return got if got.startswith("unavailable") else f"{got} ({os.path.basename(libs[0])})"


def _tf_gpus(tf: Any) -> str:
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return "none"

    def describe(gpu: Any) -> str:
        try:
            details = tf.config.experimental.get_device_details(gpu)
            cc = details.get("compute_capability")
            return f"{details['device_name']}" + (f" (cc {cc[0]}.{cc[1]})" if cc else "")
        except Exception:
            return str(gpu.name)
    return f"{len(gpus)}: " + ", ".join(map(describe, gpus))


def _tf_op_determinism(tf: Any) -> bool:
    fn = getattr(tf.config.experimental, "is_op_determinism_enabled", None)
    if fn is None:  # not public in TF 2.21; the framework module has it since 2.8
        from tensorflow.python.framework import config as tf_config
        fn = tf_config.is_op_determinism_enabled
    return bool(fn())


def _tf_memory_growth(tf: Any) -> str:
    gpus = tf.config.list_physical_devices("GPU")
    env = os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH")
    suffix = f"; TF_FORCE_GPU_ALLOW_GROWTH={env}" if env is not None else ""
    if not gpus:
        return unavailable("no GPU visible to TF") if not suffix else suffix[2:]
    get = tf.config.experimental.get_memory_growth
    growth = [f"{g.name.split('physical_device:')[-1]} {'on' if get(g) else 'off'}" for g in gpus]
    return ", ".join(growth) + suffix


def tf_runtime_info() -> dict[str, str]:
    """TensorFlow's version, build CUDA/cuDNN, GPUs and precision/determinism/memory flags; imports TF."""
    return _runtime_info("tensorflow", TF_KEYS, _tf_info)


def _tf_info(tf: Any) -> dict[str, str]:
    build: dict[str, Any] = {}
    with contextlib.suppress(Exception):  # a CPU build or an old TF: the two fields say so below
        build = dict(tf.sysconfig.get_build_info())
    cpu_build = "unavailable: not a CUDA build of TF"
    return {
        "tf.version": _get(lambda: tf.__version__),
        "tf.keras_version": _get(lambda: tf.keras.__version__),
        "tf.cuda_build": str(build["cuda_version"]) if "cuda_version" in build else cpu_build,
        "tf.cudnn_build": str(build["cudnn_version"]) if "cudnn_version" in build else cpu_build,
        "tf.cudnn_runtime": _loaded_cudnn(),
        "tf.gpus": _get(lambda: _tf_gpus(tf)),
        "tf.tensor_float_32": _get(tf.config.experimental.tensor_float_32_execution_enabled),
        "tf.op_determinism": _get(lambda: _tf_op_determinism(tf)),
        "tf.memory_growth": _get(lambda: _tf_memory_growth(tf)),
    }


def key_fields(device: dict[str, str], software: dict[str, str]) -> dict[str, str]:
    """The fields of ``KEY_FIELDS`` present in the device and software dicts, under their key names."""
    sources = {"device": device, "software": dict(software)}
    if "python_minor" not in sources["software"] and "python" in software:  # an older stored fingerprint
        sources["software"]["python_minor"] = ".".join(software["python"].split(".")[:2])
    return {key: sources[src][name] for key, (src, name) in KEY_FIELDS.items() if name in sources[src]}


def fingerprint_key(fields: dict[str, str]) -> str:
    """Stable short hash of ``fields``: the first 12 hex digits of sha256 over their sorted JSON."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def diff_environments(old: dict[str, str], new: dict[str, str]) -> list[tuple[str, str, str]]:
    """``(field, old, new)`` for each differing field, ``absent`` for a missing side; KEY_FIELDS order first.

    A framework whose runtime fields (``torch.*``, ``tf.*``) are missing on one side did not run there
    (e.g. ``-k torch`` tonight): that is not a change, so its fields are left out rather than listed as absent.
    """
    for prefix in ("torch.", "tf."):
        if not any(k.startswith(prefix) for k in old) or not any(k.startswith(prefix) for k in new):
            old = {k: v for k, v in old.items() if not k.startswith(prefix)}
            new = {k: v for k, v in new.items() if not k.startswith(prefix)}
    order = {key: i for i, key in enumerate(KEY_FIELDS)}
    keys = sorted(set(old) | set(new), key=lambda k: (order.get(k, len(order)), k))
    return [(k, old.get(k, "absent"), new.get(k, "absent")) for k in keys
            if old.get(k, "absent") != new.get(k, "absent")]


def format_diff(diff: list[tuple[str, str, str]]) -> list[str]:
    """Lines such as ``driver: 580.159 -> 590.1`` for a regression report."""
    return [f"{key}: {before} -> {after}" for key, before, after in diff]
