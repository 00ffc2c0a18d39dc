"""The claims suite's Keras lab (Keras 3 on TensorFlow): ``LSTM(use_cudnn=True)`` against ``use_cudnn=False``.

Training and inference go through ``model.fit``/``model.predict``/``model.evaluate``, as the seeds' users
ran them; both sides are compiled without XLA, so the only difference is the recurrent layer's path.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_rnnperf.backends.keras_layers import flag_check
from pytest_rnnperf.backends.tensorflow import graph_op_types, keras_on_tf, precision_flags

_POLICY = {"fp64": "float64", "fp32": "float32", "tf32": "float32", "bf16": "mixed_bfloat16",
           "fp16": "mixed_float16"}


@dataclass
class Model:
    """One side: the compiled Keras model, where and how it runs."""

    net: Any
    task: str
    impl: str
    device: str
    precision: str
    steps: int


class KerasLab:
    """Models for the claims on Keras 3 over TensorFlow."""

    name = "keras"
    precisions = ("fp32", "tf32", "bf16", "fp16")  # bf16/fp16: Keras mixed-precision policies

    def __init__(self) -> None:
        """Import Keras on TensorFlow (GPU memory growth on first), or raise ImportError saying why not."""
        self.keras = keras_on_tf()
        backend = self.keras.backend.backend()
        if backend != "tensorflow":
            raise ImportError(f"Keras runs on {backend} in this process (KERAS_BACKEND); the Keras claims need TensorFlow")
        import tensorflow as tf

        self.tf = tf

    def gpu_reason(self) -> str | None:
        """Why there is no cuDNN for Keras here, or None."""
        if not self.tf.config.list_physical_devices("GPU"):
            return "no GPU visible to TensorFlow"
        return None

    def gpu_device(self) -> str:
        """The device of the cuDNN side and of generic-on-GPU."""
        return "/GPU:0"

    def cpu_threads(self) -> int:
        """Threads TensorFlow's CPU kernels use (0 in its config means all cores)."""
        return self.tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count() or 1

    def _place(self, device: str) -> str:
        return "/CPU:0" if device == "cpu" else device

    def build(self, task: str, inputs: int, hidden: int, layers: int, outputs: int, impl: str, device: str,
              precision: str = "fp32", seed: int = 0, like: Model | None = None, lr: float = 3e-3) -> Model:
        """A compiled model (weights from ``seed``, or copied from ``like``) with an Adam optimizer."""
        keras = self.keras
        dtype = _POLICY[precision]
        with self.tf.device(self._place(device)):
            keras.utils.set_random_seed(seed)
            if task == "lm":
                inp = keras.Input(shape=(None,), dtype="int32")
                x = keras.layers.Embedding(outputs, inputs, dtype=dtype)(inp)
            else:
                inp = keras.Input(shape=(None, inputs), dtype="float64" if precision == "fp64" else "float32")
                x = inp
            for i in range(layers):
                last = i == layers - 1
                x = keras.layers.LSTM(hidden, use_cudnn=impl == "cudnn", return_sequences=task == "lm" or not last,
                                      dtype=dtype)(x)
            # The head computes in float32 under mixed precision, as Keras's guide does for outputs.
            out = keras.layers.Dense(outputs, dtype="float64" if precision == "fp64" else "float32")(x)
            net = keras.Model(inp, out)
            if like is not None:
                net.set_weights(like.net.get_weights())
            loss = (keras.losses.MeanSquaredError() if task == "regress"
                    else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            net.compile(optimizer=keras.optimizers.Adam(lr), loss=loss, jit_compile=False)
        return Model(net, task, impl, device, precision, steps=0)

    def tensors(self, m: Model, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The task's arrays in the model's input dtype (Keras feeds host arrays itself)."""
        if m.task == "lm":
            return x.astype(np.int32), y.astype(np.int32)
        dtype = np.float64 if m.precision == "fp64" else np.float32
        return x.astype(dtype), (y.astype(np.int32) if m.task == "classify" else y.astype(dtype))

    def fit(self, m: Model, data: tuple[np.ndarray, np.ndarray], order: np.ndarray, batch: int) -> float:
        """One ``fit`` epoch over ``data`` in ``order`` (no shuffling of its own); the epoch's mean loss."""
        x, y = data
        with self.tf.device(self._place(m.device)), precision_flags(m.precision):
            hist = m.net.fit(x[order], y[order], batch_size=batch, epochs=1, shuffle=False, verbose=0)
        return float(hist.history["loss"][-1])

    def outputs(self, m: Model, x: np.ndarray, batch: int = 1024) -> np.ndarray:
        """``predict`` on ``x`` as float64."""
        with self.tf.device(self._place(m.device)), precision_flags(m.precision):
            return np.asarray(m.net.predict(x, batch_size=batch, verbose=0), dtype=np.float64)

    def loss_on(self, m: Model, data: tuple[np.ndarray, np.ndarray], batch: int = 256) -> float:
        """``evaluate``'s mean loss over ``data``."""
        with self.tf.device(self._place(m.device)), precision_flags(m.precision):
            return float(m.net.evaluate(data[0], data[1], batch_size=batch, verbose=0))

    def predict(self, m: Model, x: np.ndarray, batch: int) -> None:
        """``predict`` over ``x`` in batches (it returns host arrays: the device has finished)."""
        self.outputs(m, x, batch)

    def sync(self, m: Model) -> None:
        """Nothing to wait for: fit/predict/evaluate return host values."""

    def prove(self, m: Model, data: tuple[np.ndarray, np.ndarray]) -> tuple[bool, str]:
        """Each layer kept its ``use_cudnn``, and the traced forward holds CudnnRNNV3 (cuDNN) or no CudnnRNN op."""
        tf = self.tf
        ok_flags, flags = flag_check([layer for layer in m.net.layers if hasattr(layer, "use_cudnn")], m.impl)
        x = data[0][:8]
        with tf.device(self._place(m.device)), precision_flags(m.precision):
            concrete = tf.function(lambda t: m.net(t, training=True)).get_concrete_function(
                tf.TensorSpec(x.shape, tf.as_dtype(x.dtype)))
        ops = graph_op_types(concrete)
        cudnn = sorted({op for op in ops if op.startswith("CudnnRNN")})
        ok = ok_flags and (bool(cudnn) if m.impl == "cudnn" else not cudnn)
        return ok, f"graph ops: {', '.join(cudnn) or 'no CudnnRNN op'}; {flags}"

    def memory_reset(self, m: Model) -> None:
        """Start counting peak device memory."""
        if m.device != "cpu":
            self.tf.config.experimental.reset_memory_stats("GPU:0")

    def memory_peak(self, m: Model) -> int | None:
        """Peak device memory TensorFlow's allocator held since ``memory_reset`` (bytes), None on the CPU."""
        if m.device == "cpu":
            return None
        return int(self.tf.config.experimental.get_memory_info("GPU:0")["peak"])

    def generate(self, m: Model, prompt: list[int], n: int) -> list[int]:
        """``n`` characters after ``prompt``, greedy (deterministic), feeding the whole window each step."""
        ids = list(prompt)
        with self.tf.device(self._place(m.device)), precision_flags(m.precision):
            for _ in range(n):
                logits = m.net(np.asarray([ids[-64:]], dtype=np.int32), training=False)
                ids.append(int(np.asarray(logits)[0, -1].argmax()))
        return ids[len(prompt):]

    def timed(self, m: Model, fn: Any) -> float:
        """Seconds ``fn`` took (Keras calls return host values, so the device has finished)."""
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
