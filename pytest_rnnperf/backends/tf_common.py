"""TensorFlow at the edge, shared by everything that runs Keras on TensorFlow (the tf backend, Keras model copies).

Importing TensorFlow with GPU memory growth on (and Keras after it), pinning TF32 around a step, and reading the op
types of a traced graph. No backend module is imported here, so the modules that share it stay apart. TensorFlow
is imported only when one of these is called, never when this module loads.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

# Result of the one-time memory-growth setup, shown by runtime_info (None until TF was first used here).
_MEMORY_GROWTH: str | None = None


def import_tf() -> Any:
    """Import TensorFlow on first use, turning on GPU memory growth before anything initialises the GPU.

    Without memory growth TF maps (nearly) all GPU memory at its first GPU op, and torch cases of the same
    session would then run out of memory.
    """
    global _MEMORY_GROWTH
    # Before the import: TF reads this when it initialises a GPU, so it also covers GPU use by code that
    # reaches TF before us (a user's explicit setting wins).
    os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    import tensorflow as tf

    if _MEMORY_GROWTH is None:
        gpus = tf.config.list_physical_devices("GPU")  # does not initialise the devices
        try:
            for gpu in gpus:
                tf.config.experimental.set_memory_growth(gpu, True)
            _MEMORY_GROWTH = f"on ({len(gpus)} GPU(s))" if gpus else "n/a (no GPU)"
        except RuntimeError as exc:  # TF initialised the GPUs already: growth can no longer change
            env = os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH", "")
            _MEMORY_GROWTH = f"not set: {str(exc)[:120]} (TF_FORCE_GPU_ALLOW_GROWTH={env!r})"
    return tf


def keras_on_tf() -> Any:
    """Keras 3 imported the way the tf backend needs it: after TensorFlow, with GPU memory growth on."""
    import_tf()
    import keras

    return keras


def memory_growth_setup() -> str:
    """What the one-time memory-growth setup did ("unknown" until TensorFlow was first imported here)."""
    return _MEMORY_GROWTH or "unknown"


@contextlib.contextmanager
def precision_flags(precision: str) -> Iterator[None]:
    """Pin TF32 on (precision "tf32") or off (everything else) around a run, and restore it afterwards.

    TF32 is TensorFlow's default and a process-wide flag read when a kernel is launched, so each step sets
    it for its own case instead of trusting whatever the previous case left behind.
    """
    tf = import_tf()
    experimental = tf.config.experimental
    saved = experimental.tensor_float_32_execution_enabled()
    wanted = precision == "tf32"
    if saved != wanted:
        experimental.enable_tensor_float_32_execution(wanted)
    try:
        yield
    finally:
        if saved != wanted:
            experimental.enable_tensor_float_32_execution(saved)


def graph_op_types(concrete: Any) -> list[str]:
    """Op types of a concrete function's graph, including the function library (while-loop bodies, ...)."""
    graph_def = concrete.graph.as_graph_def()
    ops = [node.op for node in graph_def.node]
    for fn in graph_def.library.function:
        ops += [node.op for node in fn.node_def]
    return ops
