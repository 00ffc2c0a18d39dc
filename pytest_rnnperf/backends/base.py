"""What every backend shares: whether its framework can be used here, and reading its runtime without ever raising.

``FrameworkBackend`` asks the same questions in the same order for every backend (installed? set up as it needs?
importable? usable? a GPU?); a backend declares only its modules, its install command and the checks of its own.
A backend's fingerprint fields (build, loaded CUDA/cuDNN, precision flags) are read through ``runtime_info``,
which imports the framework only when called; a value that cannot be read is ``"unavailable: <reason>"``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from collections.abc import Callable
from typing import Any

from pytest_rnnperf.model.flags import unavailable


def short_error(exc: BaseException) -> str:
    """``Type: first line`` of an exception, short enough for a header line."""
    text = str(exc).strip().splitlines()[0][:80] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def import_problem(module: str, load: Callable[[], Any], install: str) -> str | None:
    """Why ``module`` cannot be used here (not installed, or installed and failing to import), or None when it imports.

    ``load`` imports it as the backend does; ``install`` is the command that installs it. A broken or mismatched
    build (jaxlib against another jax, a missing CUDA library) is a skip reason naming the error, not a traceback
    in every case.
    """
    if importlib.util.find_spec(module) is None:
        return f"{module} is not installed ({install})"
    try:
        load()
    except Exception as exc:
        return f"{module} is installed but cannot be imported ({short_error(exc)}); reinstall it ({install})"
    return None


class FrameworkBackend:
    """The availability preamble of a backend: one-line reasons why its framework, or its GPU, cannot be used here.

    The checks run in this order, the first reason winning: each module of ``requires`` is installed; the
    backend's ``setup_problem`` (a setting it needs, a version); ``framework`` imports through ``load_framework``
    (a broken install names its error); the backend's ``usable_problem`` (what only the imported framework can
    tell). ``gpu_unavailable_reason`` adds ``device_problem`` (no CUDA GPU, no cuDNN) to those.
    """

    name: str = ""
    framework: str = ""  # the module imported to use the backend ("": none is imported to judge it)
    install: str = ""  # the command that installs it, named in the import reasons
    requires: tuple[tuple[str, str], ...] = ()  # (module, reason when it is not installed), checked first

    def load_framework(self) -> Any:
        """Import the framework as the backend does (some set environment variables first)."""
        return importlib.import_module(self.framework)

    def setup_problem(self) -> str | None:
        """Why the backend cannot run in this process before importing anything (a setting, a version), or None."""
        return None

    def usable_problem(self) -> str | None:
        """Why the imported framework cannot be used (a missing compiler, an unsupported Python), or None."""
        return None

    def device_problem(self) -> str | None:
        """Why the usable framework has no cuDNN path here (no CUDA GPU, no cuDNN), or None."""
        return None

    def unavailable_reason(self) -> str | None:
        """None when the framework can build pairs here; else a one-line reason (not installed, ...)."""
        for module, missing in self.requires:
            if importlib.util.find_spec(module) is None:
                return missing
        problem = self.setup_problem()
        if problem is None and self.framework:
            problem = import_problem(self.framework, self.load_framework, self.install)
        return problem or self.usable_problem()

    def gpu_unavailable_reason(self) -> str | None:
        """None when a CUDA GPU with cuDNN is usable; else a one-line reason for skipping cuDNN cases."""
        return self.unavailable_reason() or self.device_problem()


def get_value(fn: Callable[[], Any], fmt: Callable[[Any], str] = str) -> str:
    """Read and format one value, or ``unavailable: <exception>``; never raises."""
    try:
        return fmt(fn())
    except Exception as exc:  # a framework attribute moved or a device is missing: report, don't fail
        return unavailable(short_error(exc))


def format_cudnn_version(version: int | None) -> str:
    """cuDNN's integer version as text: 91900 -> ``9.19.0`` (cuDNN 9), 8902 -> ``8.9.2`` (cuDNN 8 and older)."""
    if version is None:
        return unavailable("no cuDNN")
    v = int(version)
    if v >= 90000:  # cuDNN 9 changed the encoding from major*1000 to major*10000
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def _import_failed(keys: tuple[str, ...], module: str, exc: BaseException) -> dict[str, str]:
    why = f"{module} not installed" if isinstance(exc, ImportError) else f"{module} import failed ({short_error(exc)})"
    return {key: unavailable(why) for key in keys}


def runtime_info(module: str, keys: tuple[str, ...], read: Callable[[Any], dict[str, str]]) -> dict[str, str]:
    """Import ``module`` and ``read`` its fields; every failure becomes "unavailable: <reason>" values."""
    try:
        framework = __import__(module)  # the import statement's hook, as `import torch` would use
    except Exception as exc:  # not installed, or a broken build (missing CUDA libraries, ABI errors)
        return _import_failed(keys, module, exc)
    try:
        return read(framework)
    except Exception as exc:  # the framework's config API itself missing or broken: still never raise
        return {key: unavailable(short_error(exc)) for key in keys}


def loaded_cudnn(maps_path: str = "/proc/self/maps", loader: Callable[[str], Any] | None = None) -> str:
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
    got = get_value(lambda: load(libs[0]).cudnnGetVersion(), format_cudnn_version)
    return got if got.startswith("unavailable") else f"{got} ({os.path.basename(libs[0])})"


# The CUDA libraries a framework's cuDNN path runs on, by runtime field: the file name they load under, the name
# people know, and the software_info key of the wheel that ships them. Which copy a framework runs is decided by
# the dynamic loader (LD_LIBRARY_PATH, ldconfig, RUNPATH), so it can be another than the installed wheel's.
CUDA_LIBRARIES: dict[str, tuple[str, str, str]] = {
    "cudnn_library": ("libcudnn.so", "cuDNN", "cudnn_wheel"),
    "cublas_library": ("libcublas.so", "cuBLAS", "cublas_wheel"),
    "cudart_library": ("libcudart.so", "CUDA runtime", "cuda_runtime_wheel"),
}


def _mapped_files(maps_path: str) -> set[str]:
    """Paths of the files mapped into the process that ``maps_path`` (a /proc/<pid>/maps file) describes."""
    try:
        with open(maps_path) as f:
            return {parts[5].strip() for parts in (line.split(None, 5) for line in f) if len(parts) == 6}
    except Exception:  # not Linux, or no /proc: nothing can be named
        return set()


def _own_version(field: str, lib: Any) -> str:
    """The version a loaded CUDA library states of itself (its file name holds the major version only)."""
    if field == "cudnn_library":
        return format_cudnn_version(lib.cudnnGetVersion())
    value = ctypes.c_int()
    if field == "cublas_library":
        parts = []
        for prop in (0, 1, 2):  # libraryPropertyType: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            if lib.cublasGetProperty(prop, ctypes.pointer(value)) != 0:
                raise OSError(f"cublasGetProperty({prop}) failed")
            parts.append(str(value.value))
        return ".".join(parts)
    if lib.cudaRuntimeGetVersion(ctypes.pointer(value)) != 0:
        raise OSError("cudaRuntimeGetVersion failed")
    return f"{value.value // 1000}.{value.value % 1000 // 10}"


def loaded_libraries(prefix: str, maps_path: str = "/proc/self/maps",
                     loader: Callable[[str], Any] | None = None) -> dict[str, str]:
    """The cuDNN, cuBLAS and CUDA runtime mapped into this process, version and path, as ``<prefix>*_library`` fields.

    Each value is ``"9.19.0 at /path/libcudnn.so.9"`` (the version asked of the library itself; copies joined by
    "; "), or ``unavailable: not loaded`` (also where /proc is missing).
    """
    files = _mapped_files(maps_path)
    # RTLD_NOLOAD: only ever get a handle on the copy already loaded, never load another one.
    load = loader or (lambda p: ctypes.CDLL(p, mode=os.RTLD_NOLOAD | os.RTLD_LAZY))
    out = {}
    for field, (stem, _, _) in CUDA_LIBRARIES.items():
        copies = []
        for path in sorted(f for f in files if os.path.basename(f).startswith(stem)):
            version = get_value(lambda: _own_version(field, load(path)))
            copies.append(f"{version} at {path}" if not version.startswith("unavailable")
                          else f"{path} (version not readable: {version.split(': ', 1)[-1]})")
        out[prefix + field] = "; ".join(copies) or unavailable("not loaded")
    return out
