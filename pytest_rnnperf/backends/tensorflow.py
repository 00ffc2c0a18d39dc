"""TensorFlow backend: Keras 3 ``LSTM/GRU(use_cudnn=True)`` (``CudnnRNNV3``) versus ``use_cudnn=False``.

Keras 3 on TensorFlow decides the cuDNN path when the layer is called: ``use_cudnn=True`` emits
``CudnnRNNV3`` (and ``CudnnRNNBackpropV3`` under a gradient tape) or raises; ``use_cudnn=False`` runs the
generic ``tf.while_loop`` over the cell. ``SimpleRNN`` has no cuDNN path in Keras, so the plain-RNN cells
are built on the generic side only (their cuDNN counterpart is torch's, through the canonical weights).

Keras is batch-major (B, T, I) while the canonical arrays are time-major (T, B, I): the transposes happen
on the host, once per set of inputs, never inside the timed step.

TensorFlow and Keras are imported only when a pair is built or runtime/GPU info is read, never when this
module loads; the weight converters are pure NumPy.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from pytest_rnnperf.backends import IMPLS, BackendSpec, BackendUnavailable, ModelOptions, OutOfDeviceMemory, require_usable
from pytest_rnnperf.backends.base import FrameworkBackend, get_value, loaded_cudnn, loaded_libraries, runtime_info
from pytest_rnnperf.backends.keras_layers import (
    SIMPLE_RNN_NO_CUDNN, build_stack, flag_check, forward, from_keras, keras3_problem, keras_backend_setting,
    keras_dtype, layer_variables, to_keras,
)
from pytest_rnnperf.backends.keras_model_steps import build_pair
from pytest_rnnperf.backends.padding import padded_f32, padding_for
from pytest_rnnperf.backends.tf_common import (  # TensorFlow pieces shared with the Keras model copies
    graph_op_types, import_tf, keras_on_tf, memory_growth_setup, precision_flags,
)
from pytest_rnnperf.model.flags import unavailable
from pytest_rnnperf.model.reference import CaseInputs
from pytest_rnnperf.model.results import ImplResult, PathProof

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import Case, ModelCase
    from pytest_rnnperf.model.reference import RNNWeights

# Graph op types of the cuDNN path (forward, and its gradient in train mode). Keras 3.15's TF backend
# calls tf.raw_ops.CudnnRNNV3 directly; the registered gradient of CudnnRNNV3 is CudnnRNNBackpropV3.
_CUDNN_FORWARD_OP = "CudnnRNNV3"
_CUDNN_BACKWARD_OP = "CudnnRNNBackpropV3"
# Any CudnnRNN* op (older V1/V2 variants included) counts as cuDNN when proving the generic side.
_CUDNN_PREFIX = "CudnnRNN"
# The generic Keras loop is a tf.while_loop: "While" (stateful body) or "StatelessWhile".
_WHILE_OPS = ("While", "StatelessWhile")

TF_KEYS: tuple[str, ...] = (
    "tf.version", "tf.keras_version", "tf.cuda_build", "tf.cudnn_build", "tf.cudnn_runtime", "tf.gpus",
    "tf.tensor_float_32", "tf.op_determinism", "tf.memory_growth", "tf.cudnn_library", "tf.cublas_library",
    "tf.cudart_library",
)

# Keras has no cuDNN SimpleRNN, so the plain RNN cells run on the generic side only.
SPEC = BackendSpec(
    name="tf", title="TensorFlow/Keras 3", module=__name__, cudnn_cells=("lstm", "gru"),
    distributions={"tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly"),
                   "keras": ("keras",)},
    runtime_prefix="tf.", keras_backend="tensorflow",
    key_fields=("tf.cuda_build", "tf.cudnn_build", "tf.cudnn_runtime", "tf.tensor_float_32", "tf.op_determinism"),
)

def build_layers(case: "Case", weights: "RNNWeights", impl: str, device: str) -> list[Any]:
    """A stack of ``num_layers`` built Keras layers on ``device`` holding exactly the canonical ``weights``."""
    tf = import_tf()
    with tf.device(device):
        return build_stack(keras_on_tf(), case, weights, impl)


def _to_numpy(t: Any) -> np.ndarray:
    """Move a tensor to the host and widen it to float64."""
    return np.asarray(t.numpy(), dtype=np.float64)


def _device_for(tf: Any, precision: str, what: str) -> str:
    """TF's device for a pair: the GPU where TF sees one; half precision on the CPU is a skip naming ``what``."""
    device = "/GPU:0" if tf.config.list_physical_devices("GPU") else "/CPU:0"
    if precision in ("fp16", "bf16") and device == "/CPU:0":
        raise BackendUnavailable(f"{precision} {what} need a CUDA GPU (no half-precision CPU path is compared)")
    return device


@dataclass
class TFImpl:
    """One side of a TF pair: the Keras layer stack, its inputs on the device, and the traced step."""

    name: str
    case: "Case"
    layers: list[Any]
    device: str
    inputs: CaseInputs
    weights: "RNNWeights"
    _args: tuple[Any, ...] = field(default=(), repr=False)
    _variables: list[list[list[Any]]] = field(default_factory=list, repr=False)
    _step_fn: Any = field(default=None, repr=False)
    _parity_fn: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """Move the timing inputs to the device once and wrap the computation in tf.functions."""
        tf = import_tf()
        directions = self.case.shape.directions
        self._variables = [layer_variables(layer, directions) for layer in self.layers]
        self._args = self._device_inputs(self.inputs)
        # Two functions over the same computation: the timed one keeps a single trace for the timing
        # shapes, the parity one takes inputs of any other shape (a trace costs ~1 s per side on a GPU).
        # autograph=False: Keras builds its own tf.while_loop, and there is no Python control flow to convert.
        options: dict[str, Any] = dict(jit_compile=False, reduce_retracing=True, autograph=False)
        self._step_fn = tf.function(self._compute, **options)
        self._parity_fn = tf.function(self._compute, **options)

    @property
    def _train(self) -> bool:
        """Forward + backward (train) or forward only (infer)."""
        return self.case.mode == "train"

    def _device_inputs(self, inputs: CaseInputs, pad: int = 0) -> tuple[Any, ...]:
        """Input and upstream gradients as batch-major device tensors of the case's dtype (host transposes, into
        float32 in one pass), each with ``pad`` zero sequences appended on the device (see ``padding``)."""
        tf = import_tf()
        dtype = keras_dtype(self.case.precision)

        def dev(a: np.ndarray) -> Any:
            """A host array (batch first) as a device tensor of the case's dtype, ``pad`` zero rows longer."""
            t = tf.cast(tf.constant(padded_f32(a)), dtype)
            return tf.pad(t, [[0, pad]] + [[0, 0]] * (len(a.shape) - 1)) if pad else t

        with tf.device(self.device):
            x = dev(np.swapaxes(inputs.x, 0, 1))
            if not self._train:
                return (x,)
            # States are (B, H) per layer/direction already; one tensor per state in canonical order.
            d_out = dev(np.swapaxes(inputs.d_output, 0, 1))
            d_h = tuple(dev(inputs.d_h_n[k]) for k in range(inputs.d_h_n.shape[0]))
            d_c = () if inputs.d_c_n is None else tuple(dev(inputs.d_c_n[k]) for k in range(inputs.d_c_n.shape[0]))
            return (x, d_out, d_h, d_c)

    def _compute(
        self, x: Any, d_out: Any = None, d_h: tuple[Any, ...] = (), d_c: tuple[Any, ...] = ()
    ) -> tuple[Any, ...]:
        """Forward, plus in train mode the gradients w.r.t. x and every weight for the given upstream grads."""
        tf = import_tf()
        if d_out is None:
            y, h_list, c_list = forward(self.layers, self.case.cell, x)
            return (y, tuple(h_list), tuple(c_list))
        flat_vars = [v for layer in self._variables for direction in layer for v in direction]
        with tf.GradientTape() as tape:
            tape.watch(x)
            y, h_list, c_list = forward(self.layers, self.case.cell, x)
        grads = tape.gradient(
            [y, *h_list, *c_list],
            [x, *flat_vars],
            output_gradients=[d_out, *d_h, *d_c],
            unconnected_gradients=tf.UnconnectedGradients.ZERO,
        )
        return (y, tuple(h_list), tuple(c_list), grads[0], tuple(grads[1:]))

    def step(self) -> None:
        """One timed step; nothing is copied to the host and the device is not synchronized here."""
        with precision_flags(self.case.precision):
            self._step_fn(*self._args)

    def result(self, inputs: CaseInputs | None = None) -> ImplResult:
        """Outputs and gradients for ``inputs`` (default: the timing inputs) as float64 canonical arrays."""
        batch = None
        pad = None if inputs is None else padding_for(inputs, self.inputs)
        if inputs is None:
            fn, args = self._step_fn, self._args  # exactly the traced graph that is timed
        elif pad is not None:
            # A batch slice (or other inputs of the timing shapes) runs in the timed trace instead of a new one:
            # padded with zero sequences whose upstream gradients are zero, so they add nothing to any gradient,
            # then cut off again.
            batch = inputs.x.shape[1] if pad else None
            fn, args = self._step_fn, self._device_inputs(inputs, pad)
        else:
            fn, args = self._parity_fn, self._device_inputs(inputs)
        with precision_flags(self.case.precision):
            res = fn(*args)
        if batch is not None:
            res = _first_sequences(res, batch)
        y, h_list, c_list = res[:3]
        d_input = d_weights = None
        if self._train:
            d_x, d_vars = res[3], res[4]
            d_input = np.swapaxes(_to_numpy(d_x), 0, 1)
            it = iter(d_vars)
            keras_grads = [
                [[_to_numpy(next(it)) for _ in direction] for direction in layer] for layer in self._variables
            ]
            s = self.case.shape
            d_weights = from_keras(
                self.case.cell, s.input_size, s.hidden_size, s.num_layers, s.bidirectional, keras_grads, gradients=True
            )
        return ImplResult(
            output=np.swapaxes(_to_numpy(y), 0, 1),
            h_n=np.stack([_to_numpy(h) for h in h_list]),
            c_n=np.stack([_to_numpy(c) for c in c_list]) if c_list else None,
            d_input=d_input,
            d_weights=d_weights,
        )

    def prove_path(self) -> PathProof:
        """Inspect the timed step's traced graph: cuDNN must contain CudnnRNNV3 (+ its backprop), generic must not."""
        concrete = self._step_fn.get_concrete_function(*self._args)  # the same trace step() runs
        ops = graph_op_types(concrete)
        counts: dict[str, int] = {}
        for op in ops:
            counts[op] = counts.get(op, 0) + 1
        cudnn = sorted(op for op in counts if op.startswith(_CUDNN_PREFIX))
        loops = sorted(op for op in counts if op in _WHILE_OPS)
        seen = ", ".join(f"{op} x{counts[op]}" for op in cudnn) or "no CudnnRNN op"
        if self.name == "cudnn":
            wanted = [_CUDNN_FORWARD_OP] + ([_CUDNN_BACKWARD_OP] if self._train else [])
            missing = [op for op in wanted if op not in counts]
            ok = not missing
            evidence = f"graph ops: {seen}" + (f"; missing {', '.join(missing)}" if missing else "")
            if loops:
                evidence += f"; also {', '.join(f'{op} x{counts[op]}' for op in loops)} (a generic loop)"
        else:
            ok = not cudnn and bool(loops)
            loop_text = ", ".join(f"{op} x{counts[op]}" for op in loops) or "no While loop"
            evidence = (f"graph ops: no {_CUDNN_FORWARD_OP}; generic {loop_text}" if not cudnn
                        else f"cuDNN ops in the generic graph: {seen}; {loop_text}")
        evidence += f" ({len(ops)} ops in graph + library)"
        flags_ok, flags = flag_check(self.layers, self.name)
        return PathProof(impl=self.name, ok=ok and flags_ok, evidence=f"{evidence}; {flags}")


def _first_sequences(res: Sequence[Any], batch: int) -> tuple[Any, ...]:
    """A ``_compute`` result cut to its first ``batch`` sequences (weight gradients are sums: kept whole)."""
    y, h_list, c_list = res[0][:batch], tuple(h[:batch] for h in res[1]), tuple(c[:batch] for c in res[2])
    if len(res) == 3:
        return (y, h_list, c_list)
    return (y, h_list, c_list, res[3][:batch], res[4])


@dataclass
class TFPair:
    """cuDNN and generic Keras stacks with identical weights on one device."""

    cudnn: TFImpl | None
    generic: TFImpl | None
    device: str

    def sync(self) -> None:
        """Block until every device has finished its queued work; no tensor is copied to the host.

        ``tf.test.experimental.sync_devices()`` (in every TF we support, >= 2.16) runs a SyncDevice op on
        each logical device, which waits for its streams, then drains TF's own async queue (~30-70 us on a CPU).
        """
        import_tf().test.experimental.sync_devices()

    def close(self) -> None:
        """Drop the layers and tensors; keras.backend.clear_session() is global and would break other pairs."""
        self.cudnn = self.generic = None
        gc.collect()


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
    return runtime_info("tensorflow", TF_KEYS, _tf_info)


def _tf_info(tf: Any) -> dict[str, str]:
    build: dict[str, Any] = {}
    with contextlib.suppress(Exception):  # a CPU build or an old TF: the two fields say so below
        build = dict(tf.sysconfig.get_build_info())
    cpu_build = "unavailable: not a CUDA build of TF"
    return {
        "tf.version": get_value(lambda: tf.__version__),
        "tf.keras_version": get_value(lambda: tf.keras.__version__),
        "tf.cuda_build": str(build["cuda_version"]) if "cuda_version" in build else cpu_build,
        "tf.cudnn_build": str(build["cudnn_version"]) if "cudnn_version" in build else cpu_build,
        "tf.cudnn_runtime": loaded_cudnn(),
        "tf.gpus": get_value(lambda: _tf_gpus(tf)),
        "tf.tensor_float_32": get_value(tf.config.experimental.tensor_float_32_execution_enabled),
        "tf.op_determinism": get_value(lambda: _tf_op_determinism(tf)),
        "tf.memory_growth": get_value(lambda: _tf_memory_growth(tf)),
        **loaded_libraries("tf."),  # TF opens cuDNN at its first GPU op: until then "not loaded"
    }


class TFBackend(FrameworkBackend):
    """Builds TF/Keras pairs; says why it cannot (TF or Keras 3 missing, other Keras backend, no GPU)."""

    name = "tf"
    framework = "tensorflow"
    install = "pip install 'pytest-rnnperf[tf]'"
    # Named apart: Keras installed for torch or JAX lacks tensorflow alone.
    requires = tuple((module, f"{module} is not installed (pip install 'pytest-rnnperf[tf]')")
                     for module in ("tensorflow", "keras"))

    def setup_problem(self) -> str | None:
        """Keras 3, set to its tensorflow backend (or to none, which is tensorflow)."""
        if problem := keras3_problem("the tf backend"):
            return problem
        backend = keras_backend_setting()
        if backend and backend != "tensorflow":
            return (f"Keras is set to the {backend!r} backend (KERAS_BACKEND or keras.json); "
                    "the tf backend needs 'tensorflow'")
        return None

    def device_problem(self) -> str | None:
        """None when TensorFlow sees a GPU (CUDA build), else a one-line reason."""
        tf = import_tf()
        info = tf.sysconfig.get_build_info()
        if not info.get("is_cuda_build", False):
            return f"TensorFlow {tf.__version__} is not built with CUDA (no cuDNN path)"
        if not tf.config.list_physical_devices("GPU"):
            return f"no GPU visible to TensorFlow {tf.__version__} (built for CUDA {info.get('cuda_version', '?')})"
        return None

    def runtime_info(self) -> dict[str, str]:
        """TF/Keras versions, CUDA/cuDNN, TF32 and memory-growth state (imports TensorFlow)."""
        import_tf()  # memory growth first, before tf_runtime_info may touch the GPU
        info = dict(tf_runtime_info())
        info["tf.memory_growth_setup"] = memory_growth_setup()
        return info

    def build(
        self, case: "Case", weights: "RNNWeights", inputs: CaseInputs, impls: tuple[str, ...] = IMPLS
    ) -> TFPair:
        """Build the requested sides on the GPU (cuDNN needs one) or on the CPU for generic-only pairs."""
        reason = self.unavailable_reason()
        if reason:
            raise BackendUnavailable(reason)
        if "cudnn" in impls and case.cell.startswith("rnn_"):
            raise BackendUnavailable(SIMPLE_RNN_NO_CUDNN)
        if "cudnn" in impls:
            reason = self.gpu_unavailable_reason()
            if reason:
                raise BackendUnavailable(reason)
        tf = import_tf()
        device = _device_for(tf, case.precision, "RNNs")
        native_log: list[str] = []
        try:
            sides = {}
            for impl in impls:
                # One layer stack per side from the same canonical weights: nothing is shared between them.
                layers = build_layers(case, weights, impl, device)
                sides[impl] = TFImpl(impl, case, layers, device, inputs, weights)
            pair = TFPair(cudnn=sides.get("cudnn"), generic=sides.get("generic"), device=device)
            # One untimed step per side traces the graph and surfaces out-of-memory here, as a skip. The
            # native log is kept because a cuDNN RNN that cannot get its workspace fails with an
            # InternalError ("Failed to call DoRnnForward ...") whose only OOM evidence is TF's log line.
            with _native_stderr(native_log):
                for side in sides.values():
                    side.step()
                pair.sync()
            return pair
        except tf.errors.OpError as exc:
            reason = _oom_reason(tf, exc, "".join(native_log))
            if reason is None:
                raise
            sides = {}
            gc.collect()
            # TF's allocator keeps the memory it grew to (memory growth never shrinks the pool).
            raise OutOfDeviceMemory(f"{case.id} does not fit in GPU memory: {reason}") from None


    def build_model(self, case: "ModelCase", model: Any, inputs: Any, impls: tuple[str, ...] = IMPLS, seed: int = 0,
                    *, build: Any = None, options: ModelOptions | None = None) -> Any:
        """Copies of a Keras model built on TensorFlow for each side and a float64 copy (keras_model_steps.py)."""
        require_usable(self, impls)
        tf = import_tf()
        device = _device_for(tf, case.precision, "models")
        with tf.device(device):
            return build_pair(case, keras_on_tf(), model, build, inputs, impls, seed, options, device=device,
                              oom=lambda exc: _oom_reason(tf, exc, "") if isinstance(exc, tf.errors.OpError) else None)


@contextlib.contextmanager
def _native_stderr(sink: list[str]) -> Iterator[None]:
    """Copy what native code writes to file descriptor 2 into ``sink``, and pass it through afterwards.

    TensorFlow's C++ log (where allocation failures are reported) bypasses sys.stderr, so the only way to
    read it is at the descriptor; everything captured is written back to the real stderr, nothing is lost.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            data = tmp.read()
            sink.append(data.decode(errors="replace"))
            if data:
                os.write(2, data)


def _oom_reason(tf: Any, exc: Any, native_log: str) -> str | None:
    """A one-line out-of-memory reason for ``exc``, or None when it is not an out-of-memory error."""
    message = str(getattr(exc, "message", "") or exc)
    # Only the allocator's hard failure counts: its "ran out of memory ... not a failure" warning is benign.
    logged_oom = "OOM when allocating" in native_log
    if not isinstance(exc, tf.errors.ResourceExhaustedError) and not logged_oom:
        return None
    for source in (message, native_log):
        for line in source.splitlines():
            if "OOM when allocating" in line:
                # Drop the log prefix ("E0000 ... dnn.cc:933] ") and the long device path.
                line = line[line.index("OOM when allocating") :].split(" on /job:", 1)[0].strip()
                return line[:160]
    first = next((ln.strip() for ln in message.splitlines() if ln.strip()), type(exc).__name__)
    return first[:160]


def get_backend() -> TFBackend:
    """The TensorFlow backend (entry point used by ``load_backend``)."""
    return TFBackend()


__all__ = [
    "SPEC",
    "TF_KEYS",
    "TFBackend",
    "TFImpl",
    "TFPair",
    "build_layers",
    "from_keras",
    "get_backend",
    "graph_op_types",
    "keras_on_tf",
    "precision_flags",
    "tf_runtime_info",
    "to_keras",
]
