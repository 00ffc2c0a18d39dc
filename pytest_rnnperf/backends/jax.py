"""JAX backend: ``jax.experimental.rnn.lstm`` (a cuDNN custom call) versus ``lstm_ref`` (``lax.scan``), LSTM only.

``jax.experimental.rnn`` has one cuDNN RNN, the double-bias LSTM, registered for CUDA (and ROCm) only, and
JAX's own reference LSTM over ``lax.scan``. Both sides take the same flat float32 weight vector in cuDNN's
layout (``pack_lstm``): the generic side unpacks it inside the jitted step with JAX's own
``unpack_lstm_weights``, so the weight gradients of both sides come back in one layout.

JAX is batch-major (B, T, I) while the canonical arrays are time-major (T, B, I): the transposes happen on
the host, once per set of inputs, never inside the timed step. Each side's step is jitted, lowered and
compiled once in ``build``; ``step()`` calls that compiled executable, and ``prove_path`` reads its HLO.

JAX is imported only when a pair is built or runtime/GPU info is read, never when this module loads; the
weight packers are pure NumPy.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from pytest_rnnperf.model.flags import unavailable
from pytest_rnnperf.backends.base import (format_cudnn_version, get_value, loaded_libraries,
                                          runtime_info)
from pytest_rnnperf.backends import IMPLS, BackendSpec, BackendUnavailable, OutOfDeviceMemory
from pytest_rnnperf.backends.cold import first_calls, first_of_process
from pytest_rnnperf.model.cold import ColdCost
from pytest_rnnperf.model.reference import CaseInputs, LayerWeights, RNNWeights
from pytest_rnnperf.model.results import ImplResult, PathProof
from pytest_rnnperf.backends.jax_common import (  # JAX pieces shared with Keras on JAX
    JaxFramework, _cuda_device, _rnn, dot_precisions, hlo_proof, import_jax, oom_reason, warm_device, with_cache_state,
)
# Pure NumPy (importing it imports no TensorFlow): pads a batch slice with zero sequences.
from pytest_rnnperf.backends.padding import padded_f32, padding_for

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import Case

# XLA on a GPU runs float32 matmuls in TF32 unless told otherwise: every trace is pinned to one of these.
_MATMUL_PRECISION = {"fp32": "highest", "tf32": "tensorfloat32"}
# XLA's CPU thread limit (a user's own, or the one stored runs of pytest-xdist workers carry): left out of the
# fingerprint, as it changes no GPU timing and a run with -n must match one without.
XLA_THREAD_FLAGS = ("--xla_cpu_multi_thread_eigen=", "intra_op_parallelism_threads=")


def given_xla_flags(value: str) -> str:
    """XLA_FLAGS without the CPU thread limit: what the fingerprint records."""
    return " ".join(flag for flag in value.split() if not flag.startswith(XLA_THREAD_FLAGS))


# jax's cuDNN LSTM reads its math type from `precision`: HIGHEST -> CUDNN_FMA_MATH (fp32), HIGH -> TF32.
_LSTM_PRECISION = {"fp32": "HIGHEST", "tf32": "HIGH"}

_LSTM_ONLY = ("jax.experimental.rnn has a cuDNN LSTM only (no GRU or plain RNN); the jax backend builds "
              "lstm cases")
_HALF = ("jax's cuDNN LSTM is float32 only: jaxlib gpu_rnn lowers float32/float64 outputs alone and its kernels fix "
         "CUDNN_DATA_FLOAT, so there is no {precision} cuDNN path to compare")

JAX_KEYS: tuple[str, ...] = (
    "jax.version", "jax.jaxlib_version", "jax.cuda_plugin", "jax.backend", "jax.devices", "jax.cuda_build",
    "jax.cuda_runtime", "jax.cudnn_build", "jax.cudnn_runtime", "jax.default_matmul_precision", "jax.enable_x64",
    "jax.preallocate", "jax.xla_flags", "jax.cudnn_library", "jax.cublas_library", "jax.cudart_library",
)

# Without XLA_PYTHON_CLIENT_PREALLOCATE=false JAX maps 75% of GPU memory at its first GPU op, and torch or
# TF cases of the same session would run out of memory; a process without it runs jax cases in a subprocess.
SPEC = BackendSpec(
    name="jax", title="JAX", module=__name__, cudnn_cells=("lstm",), cells=("lstm",),
    env={"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, compiles=True,
    distributions={"jax": ("jax",), "jaxlib": ("jaxlib",)},
    runtime_prefix="jax.",
    key_fields=("jax.cuda_build", "jax.cudnn_build", "jax.cudnn_runtime", "jax.default_matmul_precision",
                "jax.enable_x64", "jax.xla_flags"),
)


# ---------------------------------------------------------------------------------------------------------
# Weight packing (pure NumPy): canonical (PyTorch layout) <-> jax's flat cuDNN LSTM weight vector.
# ---------------------------------------------------------------------------------------------------------


def _pseudo_layer_shapes(
    input_size: int, hidden_size: int, num_layers: int, bidirectional: bool
) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(W_ih, W_hh) shapes per pseudo-layer l = layer * directions + direction, as jax's layout has them."""
    directions = 2 if bidirectional else 1
    gh = 4 * hidden_size
    return [((gh, input_size if layer == 0 else hidden_size * directions), (gh, hidden_size))
            for layer in range(num_layers) for _ in range(directions)]


def lstm_param_count(input_size: int, hidden_size: int, num_layers: int, bidirectional: bool) -> int:
    """Length of the flat weight vector (jax's ``get_num_params_in_lstm``)."""
    shapes = _pseudo_layer_shapes(input_size, hidden_size, num_layers, bidirectional)
    return sum(a * b + c * d + 2 * 4 * hidden_size for (a, b), (c, d) in shapes)


def pack_lstm(weights: "RNNWeights") -> np.ndarray:
    """Canonical LSTM weights as jax's flat cuDNN vector (dtype kept).

    Layout (``jax.experimental.rnn._get_params_shapes_in_lstm``): for each pseudo-layer l = layer * D +
    direction, W_ih (4H, in) then W_hh (4H, H) flattened row-major; then for each pseudo-layer b_ih then b_hh.
    Gate order i, f, g, o is PyTorch's in both layouts.
    """
    if weights.cell != "lstm":
        raise ValueError(f"jax's flat cuDNN layout is an LSTM's; got {weights.cell!r} weights")
    pseudo = [lw for dirs in weights.layers for lw in dirs]
    matrices = [np.ravel(a) for lw in pseudo for a in (lw.w_ih, lw.w_hh)]
    biases = [np.ravel(a) for lw in pseudo for a in (lw.b_ih, lw.b_hh)]
    return np.concatenate(matrices + biases)


def unpack_lstm(
    flat: np.ndarray, input_size: int, hidden_size: int, num_layers: int, bidirectional: bool
) -> "RNNWeights":
    """Inverse of :func:`pack_lstm`: a flat vector (weights or their gradient) as canonical float64 RNNWeights."""
    flat = np.asarray(flat, dtype=np.float64)
    expected = lstm_param_count(input_size, hidden_size, num_layers, bidirectional)
    if flat.shape != (expected,):
        raise ValueError(f"flat LSTM weights: shape {flat.shape}, expected ({expected},)")
    shapes = _pseudo_layer_shapes(input_size, hidden_size, num_layers, bidirectional)
    offset = 0

    def take(shape: tuple[int, ...]) -> np.ndarray:
        """The next ``shape`` elements of ``flat``."""
        nonlocal offset
        size = int(np.prod(shape))
        out = flat[offset: offset + size].reshape(shape).copy()
        offset += size
        return out

    mats = [(take(ih), take(hh)) for ih, hh in shapes]
    gh = (4 * hidden_size,)
    biases = [(take(gh), take(gh)) for _ in shapes]
    directions = 2 if bidirectional else 1
    pseudo = [LayerWeights(w_ih, w_hh, b_ih, b_hh) for (w_ih, w_hh), (b_ih, b_hh) in zip(mats, biases)]
    layers = tuple(tuple(pseudo[layer * directions: (layer + 1) * directions]) for layer in range(num_layers))
    return RNNWeights("lstm", input_size, hidden_size, num_layers, bidirectional, layers)


# ---------------------------------------------------------------------------------------------------------
# JAX plumbing.
# ---------------------------------------------------------------------------------------------------------


def _lstm_precision_args(rnn: Any, precision: str) -> tuple[Any, ...]:
    """The trailing ``precision`` argument of ``rnn.lstm`` for a precision mode (() where jax has none).

    jax >= 0.4.17 takes ``precision`` and maps HIGHEST to cuDNN's FMA math (TF32 off). An older jax gives no
    say over cuDNN's math type, so an fp32 case could not be pinned to fp32 there and is refused.
    """
    try:
        takes = "precision" in inspect.signature(rnn.lstm).parameters
    except (TypeError, ValueError):  # a wrapper without a readable signature
        takes = False
    if not takes:
        if precision == "fp32":
            raise BackendUnavailable("this jax's cuDNN LSTM has no precision argument, so an fp32 case cannot pin "
                                     "cuDNN's math to fp32 (jax >= 0.4.17 has it)")
        return ()
    return (getattr(import_jax().lax.Precision, _LSTM_PRECISION[precision]),)


@contextlib.contextmanager
def _matmul_precision(precision: str) -> Iterator[None]:
    """Trace under the precision mode's default matmul precision (XLA's GPU default for float32 is TF32)."""
    with import_jax().default_matmul_precision(_MATMUL_PRECISION[precision]):
        yield


@dataclass(frozen=True)
class _Dims:
    """The static arguments of both LSTMs."""

    input_size: int
    hidden_size: int
    num_layers: int
    bidirectional: bool

    @property
    def directions(self) -> int:
        """Number of directions (1 or 2)."""
        return 2 if self.bidirectional else 1


def _forward(rnn: Any, impl: str, dims: _Dims, precision_args: tuple[Any, ...]) -> Callable[..., Any]:
    """``forward(w, x, h0, c0, seq_lengths) -> (y, h_n, c_n)`` of one side, batch-major, from the flat weights."""
    i, h, layers, bidir = dims.input_size, dims.hidden_size, dims.num_layers, dims.bidirectional
    if impl == "cudnn":
        def cudnn_forward(w: Any, x: Any, h0: Any, c0: Any, seq: Any) -> Any:
            """jax's cuDNN LSTM custom call (custom_vjp: its backward is the cuDNN backward call)."""
            return rnn.lstm(x, h0, c0, w, seq, i, h, layers, 0.0, bidir, *precision_args)
        return cudnn_forward

    def generic_forward(w: Any, x: Any, h0: Any, c0: Any, seq: Any) -> Any:
        """jax's lax.scan LSTM on the same flat vector, unpacked in the trace so its gradient is flat too."""
        w_ih, w_hh, b_ih, b_hh = rnn.unpack_lstm_weights(w, i, h, layers, bidir)
        # Positional: lstm_ref is jitted with static_argnums 8-12 (sizes, dropout, bidirectional).
        return rnn.lstm_ref(x, h0, c0, w_ih, w_hh, b_ih, b_hh, seq, i, h, layers, 0.0, bidir)
    return generic_forward


def _step_function(forward: Callable[..., Any], train: bool) -> Callable[..., Any]:
    """The function a step runs: forward, plus the VJP of the parity loss in train mode.

    The loss <y, d_output> + <h_n, d_h_n> + <c_n, d_c_n> has exactly the upstream gradients as cotangents,
    so one ``jax.vjp`` pullback gives d_input and the flat weight gradient.
    """
    import jax

    if not train:
        return forward

    def train_step(w: Any, x: Any, h0: Any, c0: Any, seq: Any, dy: Any, dhn: Any, dcn: Any) -> Any:
        """Forward and backward; returns (y, h_n, c_n, d_x, d_w)."""
        outputs, pullback = jax.vjp(lambda w_, x_: forward(w_, x_, h0, c0, seq), w, x)
        d_w, d_x = pullback((dy, dhn, dcn))
        return (*outputs, d_x, d_w)
    return train_step


def _to_numpy(a: Any) -> np.ndarray:
    """Copy a device array to the host as float64."""
    return np.asarray(a, dtype=np.float64)


def _batch_major(a: np.ndarray, pad: int = 0) -> np.ndarray:
    """(T, B, F) canonical time-major to jax's batch-major (B + pad, T, F), float32, the last ``pad`` sequences zero."""
    return padded_f32(np.swapaxes(a, 0, 1), pad)


@dataclass
class JaxImpl:
    """One side of a jax pair: its jitted step, compiled once for the timing inputs, and those inputs on the device."""

    name: str
    case: "Case"
    device: Any  # a jax Device
    inputs: CaseInputs
    flat_weights: np.ndarray  # float32, jax's cuDNN layout
    rnn: Any = field(repr=False)
    precision_args: tuple[Any, ...] = ()
    _jit: Any = field(default=None, repr=False)
    _lowered: Any = field(default=None, repr=False)
    _compiled: Any = field(default=None, repr=False)
    _weights: Any = field(default=None, repr=False)
    _args: tuple[Any, ...] = field(default=(), repr=False)
    _last: Any = field(default=None, repr=False)
    compile_s: float = 0.0  # trace, lower and compile of the step (XLA, or its persistent cache)

    def __post_init__(self) -> None:
        """Put the weights and timing inputs on the device once, then trace, lower and compile the step once."""
        import jax

        forward = _forward(self.rnn, self.name, self._dims, self.precision_args)
        self._jit = jax.jit(_step_function(forward, self._train))
        self._weights = jax.device_put(self.flat_weights, self.device)
        self._args = self._device_args(self.inputs)
        started = time.perf_counter()
        with _matmul_precision(self.case.precision):
            self._lowered = self._jit.lower(*self._args)
        self._compiled = self._lowered.compile()
        self.compile_s = time.perf_counter() - started

    @property
    def _train(self) -> bool:
        """Whether a step includes backward."""
        return self.case.mode == "train"

    @property
    def _dims(self) -> _Dims:
        """The case's sizes, as both LSTMs take them."""
        s = self.case.shape
        return _Dims(s.input_size, s.hidden_size, s.num_layers, s.bidirectional)

    def _device_args(self, inputs: CaseInputs, pad: int = 0) -> tuple[Any, ...]:
        """The step's arguments on the device: weights, x, zero states, lengths (+ upstream gradients), each with
        ``pad`` zero sequences appended (on the host: a pad on the device would be an XLA compile of its own)."""
        import jax

        x = inputs.x
        seq_len, batch = x.shape[0], x.shape[1] + pad
        d = self._dims
        state = np.zeros((d.num_layers * d.directions, batch, d.hidden_size), np.float32)

        def put(a: np.ndarray) -> Any:
            """A host array on this side's device."""
            return jax.device_put(a, self.device)

        # Every sequence runs its full length: cuDNN's padded layout then holds no padding at all.
        args: tuple[Any, ...] = (self._weights, put(_batch_major(x, pad)), put(state), put(state),
                                 put(np.full((batch,), seq_len, np.int32)))
        if self._train:
            d_c_n = inputs.d_c_n if inputs.d_c_n is not None else np.zeros_like(inputs.d_h_n)
            args += (put(_batch_major(inputs.d_output, pad)), put(padded_f32(inputs.d_h_n, pad, axis=1)),
                     put(padded_f32(d_c_n, pad, axis=1)))
        return args

    def step(self) -> None:
        """One timed step: the compiled executable on device-resident inputs; nothing is copied to the host."""
        self._last = self._compiled(*self._args)

    def result(self, inputs: CaseInputs | None = None) -> ImplResult:
        """Outputs and gradients for ``inputs`` (default: the timing inputs) as float64 canonical arrays.

        The runner's batch slice runs through the timed executable, padded with zero sequences up to the
        timing batch (a compile per side saved, seconds on a GPU); inputs of any other shape run through the
        jitted function, which traces that shape once on its own. The timed executable is never replaced.
        """
        batch = None
        if inputs is None:
            out = self._compiled(*self._args)
        else:
            pad = padding_for(inputs, self.inputs)
            args = self._device_args(inputs, pad or 0)
            if [a.shape for a in args] == [a.shape for a in self._args]:
                out = self._compiled(*args)
                batch = inputs.x.shape[1] if pad else None
            else:
                with _matmul_precision(self.case.precision):
                    out = self._jit(*args)
        # Batch-major y and d_x have the batch first, the states second; weight gradients are sums over
        # sequences, and the zero sequences' upstream gradients add exactly zero to them: kept whole.
        keep = slice(None) if batch is None else slice(0, batch)
        y, h_n, c_n = _to_numpy(out[0])[keep], _to_numpy(out[1])[:, keep], _to_numpy(out[2])[:, keep]
        d_input = d_weights = None
        if self._train:
            d = self._dims
            d_input = np.swapaxes(_to_numpy(out[3])[keep], 0, 1)
            d_weights = unpack_lstm(_to_numpy(out[4]), d.input_size, d.hidden_size, d.num_layers, d.bidirectional)
        return ImplResult(output=np.swapaxes(y, 0, 1), h_n=h_n, c_n=c_n, d_input=d_input, d_weights=d_weights)

    def prove_path(self) -> PathProof:
        """Read the HLO of the executable ``step()`` runs: cuDNN must call cudnn_rnn (+ bwd), generic must loop."""
        return hlo_proof(self.name, self._lowered.as_text(), self._compiled.as_text(), self._train,
                         _LSTM_PRECISION[self.case.precision])


@dataclass
class JaxPair:
    """cuDNN and generic jax LSTMs with identical weights on one device."""

    cudnn: JaxImpl | None
    generic: JaxImpl | None
    device: str
    cold: ColdCost | None = None  # each side's first call after build; both sides' compile

    def sync(self) -> None:
        """Block until the last step of each side is done (block_until_ready: no copy to the host)."""
        import jax

        for side in (self.cudnn, self.generic):
            if side is not None and side._last is not None:
                jax.block_until_ready(side._last)

    def close(self) -> None:
        """Drop the sides; their device buffers go with the last reference."""
        self.cudnn = self.generic = None
        gc.collect()


def _plugin_version() -> str:
    """The installed jax CUDA plugin distribution and version, e.g. ``jax-cuda13-plugin 0.11.2``."""
    for name in ("jax-cuda13-plugin", "jax-cuda12-plugin", "jax-cuda11-plugin"):
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return unavailable("no jax CUDA plugin installed")


def _format_cuda(version: int) -> str:
    """CUDA's integer version as text: 12080 -> ``12.8``."""
    v = int(version)
    return f"{v // 1000}.{v % 1000 // 10}"


def _devices(jax: Any) -> str:
    """``1: NVIDIA H100 80GB HBM3 (cuda:0)``: the default backend's devices."""
    devices = jax.devices()
    kinds = Counter(f"{d.device_kind}" for d in devices)
    return f"{len(devices)}: " + ", ".join(f"{n} x {k}" if n > 1 else k for k, n in kinds.items())


def jax_runtime_info() -> dict[str, str]:
    """JAX's versions, devices, CUDA/cuDNN and precision/memory settings; imports JAX."""
    import_jax()
    return runtime_info("jax", JAX_KEYS, _jax_info)


def _cuda_versions() -> Any:
    """jaxlib's CUDA version module (None for a CPU-only jaxlib, or where the private module moved)."""
    try:
        from jax._src.lib import cuda_versions
    except Exception:  # private module: the fields that need it say "unavailable" instead
        return None
    return cuda_versions


def _jax_info(jax: Any) -> dict[str, str]:
    """The JAX_KEYS fields, each a value or "unavailable: <reason>"."""
    versions = _cuda_versions()
    no_cuda = unavailable("no jax CUDA plugin (CPU-only jaxlib)")

    def cuda(name: str, fmt: Callable[[Any], str]) -> str:
        """A cuda_versions reading, or why there is none."""
        if versions is None:
            return no_cuda
        return get_value(getattr(versions, name), fmt)

    preallocate = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")
    return {
        "jax.version": get_value(lambda: jax.__version__),
        "jax.jaxlib_version": get_value(lambda: metadata.version("jaxlib")),
        "jax.cuda_plugin": _plugin_version(),
        "jax.backend": get_value(jax.default_backend),
        "jax.devices": get_value(lambda: _devices(jax)),
        "jax.cuda_build": cuda("cuda_runtime_build_version", _format_cuda),
        "jax.cuda_runtime": cuda("cuda_runtime_get_version", _format_cuda),
        "jax.cudnn_build": cuda("cudnn_build_version", format_cudnn_version),
        # The cuDNN loaded at run time, which can differ from the one the plugin was built with.
        "jax.cudnn_runtime": cuda("cudnn_get_version", format_cudnn_version),
        # The process default; every case pins its own precision around its traces (see _MATMUL_PRECISION).
        "jax.default_matmul_precision": get_value(lambda: jax.config.jax_default_matmul_precision),
        "jax.enable_x64": get_value(lambda: jax.config.jax_enable_x64),
        "jax.preallocate": preallocate if preallocate is not None else "unset (jax default: true)",
        "jax.xla_flags": given_xla_flags(os.environ.get("XLA_FLAGS", "")) or "unset",
        **loaded_libraries("jax."),
    }


class JaxBackend(JaxFramework):
    """Builds jax LSTM pairs; says why it cannot (jax missing, no CUDA GPU, not an LSTM, half precision)."""

    name = "jax"

    def runtime_info(self) -> dict[str, str]:
        """jax/jaxlib versions, devices, CUDA/cuDNN and precision settings (imports JAX)."""
        return jax_runtime_info()

    def build(
        self, case: "Case", weights: "RNNWeights", inputs: CaseInputs, impls: tuple[str, ...] = IMPLS
    ) -> JaxPair:
        """Build the requested sides on the GPU (cuDNN needs one) or on the CPU for generic-only pairs."""
        reason = self.unavailable_reason()
        if reason:
            raise BackendUnavailable(reason)
        if case.cell != "lstm":
            raise BackendUnavailable(_LSTM_ONLY)
        if case.precision in ("fp16", "bf16"):
            raise BackendUnavailable(_HALF.format(precision=case.precision))
        if "cudnn" in impls:
            reason = self.gpu_unavailable_reason()
            if reason:
                raise BackendUnavailable(reason)
        jax = import_jax()
        rnn = _rnn()
        gpu = _cuda_device(jax)
        device = gpu if gpu is not None else jax.devices("cpu")[0]
        label = f"cuda:{device.id}" if gpu is not None else "cpu"
        # The precision argument only reaches the cuDNN call; the generic side is pinned by its trace context.
        precision_args = _lstm_precision_args(rnn, case.precision) if "cudnn" in impls else ()
        flat = pack_lstm(weights).astype(np.float32)
        warm_device(jax, device)
        try:
            sides, cache = with_cache_state(jax, lambda: {
                impl: JaxImpl(impl, case, device, inputs, flat, rnn, precision_args if impl == "cudnn" else ())
                for impl in impls})
            pair = JaxPair(cudnn=sides.get("cudnn"), generic=sides.get("generic"), device=label)
            # One untimed step per side: compilation happened in JaxImpl, allocation and cuDNN's workspace
            # happen here, so an out-of-memory case becomes a skip before any timing; it is the side's first call.
            pair.cold = ColdCost(first_calls(sides, pair.sync, case.id),
                                 compile_s=sum(side.compile_s for side in sides.values()), cache=cache,
                                 first=first_of_process("jax"))
            return pair
        except Exception as exc:
            why = oom_reason(exc)
            if why is None:
                raise
            sides = {}
            gc.collect()
            raise OutOfDeviceMemory(f"{case.id} does not fit in GPU memory: {why}") from None


def get_backend() -> JaxBackend:
    """The JAX backend (entry point used by ``load_backend``)."""
    return JaxBackend()


__all__ = ["SPEC", "JaxBackend", "JaxImpl", "JaxPair", "dot_precisions", "get_backend", "hlo_proof", "lstm_param_count", "pack_lstm",
           "unpack_lstm"]
