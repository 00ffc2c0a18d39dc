"""JAX at the edge, shared by every backend that runs on JAX (native JAX, Keras on JAX).

Importing JAX (GPU preallocation off, the compile cache set), its cuDNN RNN module and CUDA device, reading which
RNN a compiled step's HLO runs, naming an out-of-memory error, and whether JAX (and its GPU) can be used. No
backend module is imported here, so the backends that share it stay apart. JAX is imported only when one of
these is called, never when this module loads.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from typing import Any, Callable, TypeVar

import numpy as np

from pytest_rnnperf.backends.base import FrameworkBackend
from pytest_rnnperf.backends.cold import once_per_process
from pytest_rnnperf.model.cold import cache_state
from pytest_rnnperf.backends.compile_cache import configure_jax
from pytest_rnnperf.model.results import PathProof

# Custom-call targets of jax's cuDNN LSTM, from jaxlib/gpu_rnn.py: jaxlib >= 0.4.36 lowers rnn_fwd/rnn_bwd
# to f"{platform}dnn_rnn_ffi" / f"{platform}dnn_rnn_bwd_ffi" with platform "cu" (typed FFI), older jaxlib
# to the legacy "cudnn_rnn" / "cudnn_rnn_bwd". Either spelling counts.
_CUDNN_FORWARD = re.compile(r"cudnn_rnn(_ffi)?")
_CUDNN_BACKWARD = re.compile(r"cudnn_rnn_bwd(_ffi)?")
# Any DNN-library RNN call ("hipdnn_rnn_ffi" on ROCm too) disqualifies the generic side.
_DNN_RNN = "dnn_rnn"
# Custom-call targets as HLO text (compiled) and StableHLO text (lowered) spell them.
_COMPILED_TARGET = re.compile(r'custom_call_target="([^"]+)"')
_LOWERED_TARGET = re.compile(r"stablehlo\.custom_call\s+@([\w.$-]+)")
# lax.scan lowers to a while loop: "stablehlo.while" in the lowered module, "while(" in compiled HLO.
_LOWERED_WHILE = re.compile(r"\bstablehlo\.while\b")
_COMPILED_WHILE = re.compile(r"\swhile\(")
# A dot's operand precision in the lowered module, pretty ("precision = [HIGHEST, HIGHEST]") or generic
# ("#stablehlo<precision HIGHEST>") form; a dot_general without one runs at XLA's DEFAULT.
_LOWERED_DOT = re.compile(r"stablehlo\.dot_general\b[^\n]*")
_DOT_PRECISION = re.compile(r"precision = \[(\w+)|#stablehlo<precision (\w+)>")

# Matmul precision each mode traces Keras's JAX steps under: XLA runs fp32 matmuls as TF32 on a GPU unless told
# "highest".
JAX_MATMUL_PRECISION = {"tf32": "tensorfloat32", "fp16": "default", "bf16": "default"}


def import_jax() -> Any:
    """Import JAX on first use, with GPU preallocation off unless the user or an earlier import decided.

    The variable is read when JAX creates its GPU client, which happens after the import, so setting it
    before the first import covers this process (a user's explicit setting wins).
    """
    if "jax" not in sys.modules:
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    configure_jax(jax)  # before the first compile: the run's compiled steps go to (and come from) the cache
    return jax


def _rnn() -> Any:
    """``jax.experimental.rnn`` (imports JAX)."""
    import_jax()
    from jax.experimental import rnn

    return rnn


def _cuda_device(jax: Any) -> Any | None:
    """The first CUDA device JAX sees, or None (CPU-only jaxlib, no plugin, no GPU)."""
    try:
        devices = jax.devices("cuda")
    except RuntimeError:  # "Unknown backend cuda": no CUDA plugin, or it found no GPU
        return None
    return devices[0] if devices else None


def _targets(pattern: re.Pattern[str], text: str) -> Counter[str]:
    """DNN RNN custom-call targets in ``text`` with their counts."""
    return Counter(t for t in pattern.findall(text) if _DNN_RNN in t)


def cudnn_calls(lowered: str, compiled: str) -> tuple[int, int, int]:
    """(forward, backward) cuDNN RNN custom calls of a step's compiled HLO (what runs), and every DNN RNN call of
    its traced module (what it asked for: a generic step must ask for none, even one XLA dropped as dead)."""
    ran = _targets(_COMPILED_TARGET, compiled)
    forward = sum(n for t, n in ran.items() if _CUDNN_FORWARD.fullmatch(t))
    backward = sum(n for t, n in ran.items() if _CUDNN_BACKWARD.fullmatch(t))
    return forward, backward, sum(_targets(_LOWERED_TARGET, lowered).values())


def dot_precisions(lowered: str) -> Counter[str]:
    """Operand precision of each dot_general in a lowered module ("DEFAULT" where none is set)."""
    out: Counter[str] = Counter()
    for line in _LOWERED_DOT.findall(lowered):
        found = _DOT_PRECISION.search(line)
        out[(found.group(1) or found.group(2)) if found else "DEFAULT"] += 1
    return out


def hlo_proof(impl: str, lowered: str, compiled: str, train: bool, dot_precision: str | None = None) -> PathProof:
    """Which LSTM a step's HLO runs: cuDNN's custom calls and no loop, or a while loop and no cuDNN call.

    ``lowered`` is the step's StableHLO (what was traced), ``compiled`` the optimized HLO of the executable
    (what runs: a custom call XLA dropped as dead would be missing there). With ``dot_precision`` every
    matmul of the step must carry that operand precision (HIGHEST for fp32: XLA would run others in TF32).
    """
    ran = _targets(_COMPILED_TARGET, compiled)
    traced = _targets(_LOWERED_TARGET, lowered)
    loops, compiled_loops = len(_LOWERED_WHILE.findall(lowered)), len(_COMPILED_WHILE.findall(compiled))
    calls = ", ".join(f"{t} x{n}" for t, n in sorted(ran.items()))
    if impl == "cudnn":
        forward = sum(n for t, n in ran.items() if _CUDNN_FORWARD.fullmatch(t))
        backward = sum(n for t, n in ran.items() if _CUDNN_BACKWARD.fullmatch(t))
        missing = ["cudnn_rnn"] if not forward else []
        if train and not backward:
            missing.append("cudnn_rnn_bwd")
        ok = not missing and not loops and not compiled_loops
        evidence = f"HLO: custom_call {calls}" if calls else "HLO: no cuDNN RNN custom call"
        if missing:
            evidence += f"; missing {', '.join(missing)}"
        evidence += (f"; while loop x{max(loops, compiled_loops)} (a generic loop)" if loops or compiled_loops
                     else "; no while loop")
    else:
        cudnn = ran + traced
        ok = not cudnn and loops > 0
        evidence = ("HLO: no cuDNN RNN custom call" if not cudnn
                    else "HLO: cuDNN RNN custom call in the generic step: "
                         + ", ".join(f"{t} x{n}" for t, n in sorted(cudnn.items())))
        evidence += (f"; while loop x{loops} (lax.scan), x{compiled_loops} after XLA" if loops
                     else "; no while loop")
    dots = dot_precisions(lowered)
    if dots:
        evidence += "; dot precision " + ", ".join(f"{p} x{n}" for p, n in sorted(dots.items()))
        if dot_precision is not None and set(dots) != {dot_precision}:
            ok = False
            evidence += f" (expected {dot_precision} only)"
    return PathProof(impl=impl, ok=ok, evidence=evidence)


def oom_reason(exc: BaseException) -> str | None:
    """A one-line out-of-memory reason for ``exc``, or None when it is not one.

    XLA reports a failed allocation as RESOURCE_EXHAUSTED; a cuDNN RNN that cannot get its workspace
    returns CUDNN_STATUS_ALLOC_FAILED (or a CUDA out-of-memory status) from inside the custom call.
    """
    if not isinstance(exc, (RuntimeError, MemoryError)):
        return None
    markers = ("RESOURCE_EXHAUSTED", "ALLOC_FAILED", "out of memory", "Out of memory")
    text = str(exc)
    for line in text.splitlines():
        if any(m in line for m in markers):
            # XLA appends "[tf-allocator-allocation-error=''] [executable_name='...']": not for a skip line.
            return line.split(" [", 1)[0].strip()[:160]
    return None



class JaxFramework(FrameworkBackend):
    """Whether jax and jaxlib can be imported here, and whether JAX sees a CUDA GPU with its cuDNN RNN kernels."""

    framework = "jax"
    install = "pip install 'pytest-rnnperf[jax]'"
    requires = (("jax", "jax is not installed (pip install 'pytest-rnnperf[jax]')"),
                ("jaxlib", "jax is not installed (pip install 'pytest-rnnperf[jax]')"))

    def load_framework(self) -> Any:
        """Import JAX with its preallocation and compile cache set."""
        return import_jax()

    def device_problem(self) -> str | None:
        """None when JAX sees a CUDA GPU and has its cuDNN RNN kernels, else a one-line reason."""
        jax = import_jax()
        if _cuda_device(jax) is None:
            return (f"no CUDA GPU visible to jax {jax.__version__} (backend {jax.default_backend()}; the GPU build is "
                    "pip install 'jax[cuda13]' or 'jax[cuda12]')")
        gpu_rnn = getattr(_rnn(), "gpu_rnn", None)
        if gpu_rnn is None or not hasattr(gpu_rnn, "compute_rnn_workspace_reserve_space_sizes"):
            return f"jax {jax.__version__} sees a CUDA GPU but its CUDA plugin has no cuDNN RNN kernels (jaxlib gpu_rnn)"
        return None


# The persistent compilation cache's events (jax.monitoring), counted since this process started listening.
_CACHE_EVENTS: Counter[str] = Counter()
_CACHE_HIT, _CACHE_MISS = "/jax/compilation_cache/cache_hits", "/jax/compilation_cache/cache_misses"
T = TypeVar("T")


def with_cache_state(jax: Any, build: Callable[[], T]) -> tuple[T, str]:
    """What ``build()`` (which compiles) returns, and how JAX's persistent compilation cache served it
    (``model.cold.cache_state``)."""
    once_per_process("jax:cache-events", lambda: jax.monitoring.register_event_listener(
        lambda event, **_: _CACHE_EVENTS.update([event])))
    hits, misses = _CACHE_EVENTS[_CACHE_HIT], _CACHE_EVENTS[_CACHE_MISS]
    out = build()
    return out, cache_state(_CACHE_EVENTS[_CACHE_HIT] - hits, _CACHE_EVENTS[_CACHE_MISS] - misses)


def warm_device(jax: Any, device: Any) -> None:
    """Pay this process's one-time costs on ``device`` once (the client, a compile, a transfer): no case's first call does."""
    once_per_process(f"jax:{device}", lambda: jax.block_until_ready(
        jax.jit(lambda a: a @ a)(jax.device_put(np.ones((8, 8), np.float32), device))))
