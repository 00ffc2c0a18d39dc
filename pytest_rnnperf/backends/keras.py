"""Keras 3 on the torch and JAX backends: ``LSTM/GRU(use_cudnn=True)`` against ``use_cudnn=False``.

Keras picks its backend once per process from ``KERAS_BACKEND``, so these specs carry that variable in their
``env`` and a session whose process lacks it runs their cases in a subprocess started with it (see
``measure/subprocesses.py``). Layers, weights and the forward pass are shared with the TensorFlow backend
(``keras_layers.py``); what differs per framework is how a step is differentiated, synchronized and proven:

- torch: eager layers, gradients with ``torch.autograd.grad``; proof by the ATen ops a step dispatches
  (``aten::_cudnn_rnn`` and its backward on the cuDNN side, neither on the generic side).
- JAX: ``layer.stateless_call`` inside one ``jax.jit`` with ``jax.vjp``, as ``model.fit`` runs it; proof by the
  cuDNN RNN custom calls of the compiled step's HLO. Keras 3.15 has a cuDNN path for LSTM only on JAX (its GRU
  raises with ``use_cudnn=True``), so GRU and SimpleRNN run generic there.

Keras, torch and JAX are imported only when a pair is built or runtime info is read.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from pytest_rnnperf.backends import IMPLS, BackendSpec, BackendUnavailable, ModelOptions, OutOfDeviceMemory, require_usable
from pytest_rnnperf.backends.base import FrameworkBackend, get_value, loaded_libraries
from pytest_rnnperf.backends.cold import first_calls, first_of_process
from pytest_rnnperf.backends.compile_cache import configure_jax
from pytest_rnnperf.backends.jax_common import (
    JAX_MATMUL_PRECISION, JaxFramework, hlo_proof, import_jax, oom_reason, warm_device, with_cache_state,
)
from pytest_rnnperf.backends.keras_layers import (
    SIMPLE_RNN_NO_CUDNN, build_stack, flag_check, forward, from_keras, keras3_problem, keras_backend_setting,
    layer_variables, split_states, to_batch_major,
)
from pytest_rnnperf.backends.keras_model_steps import build_pair
from pytest_rnnperf.backends.padding import padded_f32, padding_for
from pytest_rnnperf.backends.torch_common import (
    TorchFramework, build_on_device, dispatched_ops, import_torch, injected_cycles, lengthened, longer_steps,
    precision_flags, restore_thread_count, torch_dtype, torch_runtime_info, warm_cuda,
)
from pytest_rnnperf.model.cold import ColdCost
from pytest_rnnperf.model.reference import CaseInputs
from pytest_rnnperf.model.results import ImplResult, PathProof

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import Case, ModelCase
    from pytest_rnnperf.model.reference import RNNWeights

_KERAS = {"keras": ("keras",)}
KERAS_TORCH = BackendSpec(
    name="keras_torch", title="Keras 3 on PyTorch", module=f"{__name__}:torch_backend", cudnn_cells=("lstm", "gru"),
    distributions={**_KERAS, "torch": ("torch",)}, runtime_prefix="keras_torch.",
    key_fields=("keras_torch.cudnn_version", "keras_torch.cudnn_allow_tf32", "keras_torch.matmul_allow_tf32"),
    env={"KERAS_BACKEND": "torch"}, can_inject=True, keras_backend="torch",
)
# JAX preallocates 75% of the GPU at its first use; the suite's other frameworks share the card.
KERAS_JAX = BackendSpec(
    name="keras_jax", title="Keras 3 on JAX", module=f"{__name__}:jax_backend", cudnn_cells=("lstm",),
    distributions={**_KERAS, "jax": ("jax",), "jaxlib": ("jaxlib",)}, runtime_prefix="keras_jax.",
    key_fields=("keras_jax.jax_version", "keras_jax.default_matmul_precision"),
    env={"KERAS_BACKEND": "jax", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, keras_backend="jax", compiles=True,
)


def _keras(framework: str) -> Any:
    """Import Keras, refusing when this process was set up for another Keras backend."""
    setting = keras_backend_setting() or "tensorflow"
    if setting != framework:
        raise BackendUnavailable(f"this process runs Keras on {setting!r}; Keras on {framework} needs "
                                 f"KERAS_BACKEND={framework} (the session starts a subprocess for it)")
    if framework == "jax":  # Keras imports JAX itself: its cache is set before Keras compiles anything
        configure_jax()
    import keras

    return keras


class KerasFramework(FrameworkBackend):
    """Whether Keras 3 runs on ``keras_framework`` in this process (nothing is imported to tell)."""

    keras_framework = ""  # the Keras backend, as Keras names it: "torch" or "jax"

    def __init__(self) -> None:
        """The modules Keras on this framework needs, each named when missing."""
        self.requires = (("keras", "keras is not installed (pip install 'keras>=3.15')"),
                         (self.keras_framework, f"{self.keras_framework} is not installed "
                                                f"(Keras on {self.keras_framework} needs it)"))

    def setup_problem(self) -> str | None:
        """Keras 3, and this process set up for Keras on this framework (Keras picks its backend once)."""
        framework = self.keras_framework
        if problem := keras3_problem(f"Keras on {framework}"):
            return problem
        setting = keras_backend_setting() or "tensorflow"
        if setting != framework:
            return f"this process runs Keras on {setting!r}; Keras on {framework} needs KERAS_BACKEND={framework}"
        return None


def _canonical_grads(case: "Case", grads: list[list[list[Any]]], to_numpy: Callable[[Any], np.ndarray]) -> "RNNWeights":
    """Keras variable gradients ``[layer][direction][kernel, recurrent, bias]`` as canonical weight gradients."""
    s = case.shape
    arrays = [[[to_numpy(g) for g in direction] for direction in layer] for layer in grads]
    return from_keras(case.cell, s.input_size, s.hidden_size, s.num_layers, s.bidirectional, arrays, gradients=True)


# ---------------------------------------------------------------------------------------------------------
# Keras on torch.
# ---------------------------------------------------------------------------------------------------------


def _torch_numpy(t: Any) -> np.ndarray:
    """A torch tensor on the host as float64."""
    return np.asarray(t.detach().float().cpu().numpy(), dtype=np.float64)


@dataclass
class KerasTorchImpl:
    """One side: a Keras layer stack on the torch backend, its inputs on the device."""

    name: str
    case: "Case"
    layers: list[Any]
    device: str
    inputs: CaseInputs
    _args: tuple[Any, ...] = field(default=(), repr=False)
    _variables: list[list[list[Any]]] = field(default_factory=list, repr=False)
    _inject_cycles: int = 0  # RNNPERF_INJECT_CUDNN_DELAY_US: a device spin after each cuDNN step
    # The timed step's inputs: the timing inputs, or a longer sequence where RNNPERF_INJECT_LONGER_STEP names the case.
    _step_args: tuple[Any, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        """Move the timing inputs to the device once, so no step copies from the host."""
        self._variables = [layer_variables(layer, self.case.shape.directions) for layer in self.layers]
        self._args = self._step_args = self._device_inputs(self.inputs)
        if self.name == "cudnn" and self.device.startswith("cuda"):
            self._inject_cycles = injected_cycles(self.case.id)
        x, d_out, d_h, d_c = self._args
        if self.name == "cudnn" and (extra := longer_steps(self.case.id, int(x.shape[1]))):
            x_long, (d_out_long,) = lengthened(x, (d_out,), extra, dim=1)  # batch-major: time is axis 1
            self._step_args = (x_long, d_out_long, d_h, d_c)

    @property
    def _train(self) -> bool:
        """Forward + backward (train) or forward only (infer)."""
        return self.case.mode == "train"

    def _device_inputs(self, inputs: CaseInputs) -> tuple[Any, ...]:
        """Batch-major input and upstream gradients as device tensors of the case's dtype."""
        torch = import_torch()
        dt = torch_dtype(self.case.precision)

        def dev(a: np.ndarray) -> Any:
            """A host array as a device tensor of the case's dtype."""
            return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(self.device, dtype=dt)

        x = dev(to_batch_major(inputs.x)).requires_grad_(self._train)
        d_h = tuple(dev(inputs.d_h_n[k]) for k in range(inputs.d_h_n.shape[0]))
        d_c = () if inputs.d_c_n is None else tuple(dev(inputs.d_c_n[k]) for k in range(inputs.d_c_n.shape[0]))
        return (x, dev(to_batch_major(inputs.d_output)), d_h, d_c)

    def _run(self, args: tuple[Any, ...], want_grads: bool) -> tuple[Any, list[Any], list[Any], Any, list[Any]]:
        """Forward (+ gradients of x and every variable for the upstream gradients)."""
        torch = import_torch()
        x, d_out, d_h, d_c = args
        # cuDNN stays enabled on both sides: only the Keras flag may decide the path, else a generic side
        # that ignored use_cudnn=False would still pass. TF32 is pinned for cuDNN and matmuls alike.
        with precision_flags("cudnn", self.case.precision, self.device):
            if not want_grads:
                with torch.no_grad():
                    y, h, c = forward(self.layers, self.case.cell, x)
                return y, h, c, None, []
            y, h, c = forward(self.layers, self.case.cell, x)
            flat = [v.value for layer in self._variables for direction in layer for v in direction]
            grads = torch.autograd.grad([y, *h, *c], [x, *flat], [d_out, *d_h[: len(h)], *d_c[: len(c)]],
                                        allow_unused=True)
            return y, h, c, grads[0], list(grads[1:])

    def step(self) -> None:
        """One timed step; nothing is copied to the host and the device is not synchronized here."""
        self._run(self._step_args, want_grads=self._train)
        if self._inject_cycles:
            import_torch().cuda._sleep(self._inject_cycles)  # injected device-side delay (testing the detector)

    def result(self, inputs: CaseInputs | None = None) -> ImplResult:
        """Outputs and gradients for ``inputs`` (default: the timing inputs) as float64 canonical arrays."""
        args = self._args if inputs is None else self._device_inputs(inputs)
        y, h, c, d_x, d_vars = self._run(args, want_grads=self._train)
        d_weights = None
        if self._train:
            it = iter(d_vars)
            nested = [[[next(it) for _ in direction] for direction in layer] for layer in self._variables]
            d_weights = _canonical_grads(self.case, nested, _torch_numpy)
        return ImplResult(
            output=np.swapaxes(_torch_numpy(y), 0, 1),
            h_n=np.stack([_torch_numpy(t) for t in h]),
            c_n=np.stack([_torch_numpy(t) for t in c]) if c else None,
            d_input=None if d_x is None else np.swapaxes(_torch_numpy(d_x), 0, 1),
            d_weights=d_weights,
        )

    def prove_path(self) -> PathProof:
        """The ATen ops of one step: cuDNN needs aten::_cudnn_rnn (+ backward when training), generic neither."""
        names = dispatched_ops(self.step, self.device)
        cudnn = sorted(n for n in names if n.startswith("aten::_cudnn_rnn"))
        if self.name == "cudnn":
            wanted = ["aten::_cudnn_rnn"] + (["aten::_cudnn_rnn_backward"] if self._train else [])
            missing = [op for op in wanted if op not in names]
            ok = not missing
            evidence = f"ops {', '.join(cudnn) or 'none of cuDNN'}" + (f"; missing {', '.join(missing)}" if missing else "")
        else:
            ok = not cudnn
            evidence = "no cuDNN op; Keras's own loop" if ok else f"cuDNN ops on the generic side: {', '.join(cudnn)}"
        flags_ok, flags = flag_check(self.layers, self.name)
        return PathProof(impl=self.name, ok=ok and flags_ok, evidence=f"{evidence}; {flags}")


@dataclass
class KerasTorchPair:
    """cuDNN and generic Keras stacks (torch backend) with identical weights on one device."""

    cudnn: KerasTorchImpl | None
    generic: KerasTorchImpl | None
    device: str
    restore_threads: int = 0
    cold: ColdCost | None = None  # each side's first call after build

    def sync(self) -> None:
        """Wait for queued CUDA work; a no-op on the CPU."""
        if self.device.startswith("cuda"):
            import_torch().cuda.synchronize()

    def close(self) -> None:
        """Drop the layers and return cached blocks to the driver."""
        self.cudnn = self.generic = None
        gc.collect()
        if self.device.startswith("cuda"):
            import_torch().cuda.empty_cache()
        restore_thread_count(self.restore_threads)


class KerasTorchBackend(KerasFramework):
    """Builds Keras-on-torch pairs; says why it cannot (Keras or torch missing, another Keras backend, no GPU)."""

    name = "keras_torch"
    keras_framework = "torch"

    def device_problem(self) -> str | None:
        """None when torch sees a CUDA GPU with cuDNN, else a one-line reason."""
        return TorchFramework().gpu_unavailable_reason()

    def runtime_info(self) -> dict[str, str]:
        """Keras version and backend, and the torch fields (CUDA, cuDNN, TF32 flags) this process runs with."""
        keras = _keras("torch")
        info = {f"keras_torch.{k.split('.', 1)[1]}": v for k, v in torch_runtime_info().items()}
        info["keras_torch.keras_version"] = get_value(lambda: keras.__version__)
        info["keras_torch.backend"] = get_value(keras.backend.backend)
        return info

    def build(self, case: "Case", weights: "RNNWeights", inputs: CaseInputs,
              impls: tuple[str, ...] = IMPLS) -> KerasTorchPair:
        """Build the requested sides on the GPU (cuDNN needs one), or generic-only on the CPU."""
        reason = self.unavailable_reason()
        if reason:
            raise BackendUnavailable(reason)
        if "cudnn" in impls and case.cell.startswith("rnn_"):
            raise BackendUnavailable(SIMPLE_RNN_NO_CUDNN)
        if "cudnn" in impls and (reason := self.gpu_unavailable_reason()):
            raise BackendUnavailable(reason)
        keras = _keras("torch")

        def build(device: str, restore: int) -> KerasTorchPair:
            """Both stacks on ``device``; an out-of-memory here is a skip."""
            torch = import_torch()
            pair = KerasTorchPair(cudnn=None, generic=None, device=device, restore_threads=restore)
            try:
                with keras.device(device):
                    for impl in impls:
                        setattr(pair, impl, KerasTorchImpl(impl, case, build_stack(keras, case, weights, impl),
                                                           device, inputs))
                    # The first call builds Keras's state and surfaces out-of-memory here; timed after this
                    # process's one-time CUDA costs were paid (warm_cuda).
                    warm_cuda(device)
                    pair.cold = ColdCost(first_calls({impl: getattr(pair, impl) for impl in impls}, pair.sync,
                                                     case.id), first=first_of_process("keras"))
            except torch.cuda.OutOfMemoryError as exc:
                pair.close()
                raise OutOfDeviceMemory(f"{case.id} does not fit in GPU memory: {str(exc).splitlines()[0][:160]}") from None
            return pair

        return build_on_device(case.precision, build)


    def build_model(self, case: "ModelCase", model: Any, inputs: Any, impls: tuple[str, ...] = IMPLS, seed: int = 0,
                    *, build: Any = None, options: ModelOptions | None = None) -> Any:
        """Copies of a Keras model built on torch for each side and a float64 copy (keras_model_steps.py)."""
        require_usable(self, impls)
        keras = _keras("torch")
        torch = import_torch()

        def oom(exc: BaseException) -> str | None:
            """A one-line reason when ``exc`` is torch running out of device memory."""
            return str(exc).splitlines()[0][:160] if isinstance(exc, torch.cuda.OutOfMemoryError) else None

        return build_on_device(case.precision, lambda device, restore: build_pair(
            case, keras, model, build, inputs, impls, seed, options, device=device, oom=oom,
            close=restore_thread_count, restore=restore), what="models")


# ---------------------------------------------------------------------------------------------------------
# Keras on JAX.
# ---------------------------------------------------------------------------------------------------------


def _jax_numpy(a: Any) -> np.ndarray:
    """A JAX array on the host as float64."""
    return np.asarray(np.asarray(a, dtype=np.float32), dtype=np.float64)


def _on_gpu_jax() -> bool:
    """Whether JAX's default backend is a GPU."""
    return bool(import_jax().default_backend() == "gpu")


@dataclass
class KerasJaxImpl:
    """One side: a Keras layer stack on JAX, run statelessly inside one jitted step."""

    name: str
    case: "Case"
    layers: list[Any]
    inputs: CaseInputs
    last: Any = field(default=None, repr=False)  # outputs of the last step (what sync waits for)
    _args: tuple[Any, ...] = field(default=(), repr=False)
    _trainable: list[list[Any]] = field(default_factory=list, repr=False)
    _fixed: list[list[Any]] = field(default_factory=list, repr=False)
    _fn: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """Take the variables' values, move the timing inputs to the device, and jit the step once."""
        jax = import_jax()
        self._trainable = [[v.value for v in layer.trainable_variables] for layer in self.layers]
        self._fixed = [[v.value for v in layer.non_trainable_variables] for layer in self.layers]
        self._args = self._device_inputs(self.inputs)
        self._fn = jax.jit(self._compute)

    @property
    def _train(self) -> bool:
        """Forward + backward (train) or forward only (infer)."""
        return self.case.mode == "train"

    def _device_inputs(self, inputs: CaseInputs, pad: int = 0) -> tuple[Any, ...]:
        """Batch-major input and upstream gradients as device arrays of the case's dtype, each with ``pad`` zero
        sequences appended (on the host: see ``padding``)."""
        jnp = import_jax().numpy
        dtype = {"fp16": jnp.float16, "bf16": jnp.bfloat16}.get(self.case.precision, jnp.float32)

        def dev(a: np.ndarray) -> Any:
            """A host array (batch first) as a device array of the case's dtype, ``pad`` zero sequences longer."""
            return jnp.asarray(padded_f32(a, pad), dtype=dtype)

        d_h = tuple(dev(inputs.d_h_n[k]) for k in range(inputs.d_h_n.shape[0]))
        d_c = () if inputs.d_c_n is None else tuple(dev(inputs.d_c_n[k]) for k in range(inputs.d_c_n.shape[0]))
        return (dev(np.swapaxes(inputs.x, 0, 1)), dev(np.swapaxes(inputs.d_output, 0, 1)), d_h, d_c)

    def _forward(self, trainable: list[list[Any]], x: Any) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
        """The stack as a pure function of its trainable values (non-trainable ones are fixed)."""
        h_list: list[Any] = []
        c_list: list[Any] = []
        y = x
        for layer, values, fixed in zip(self.layers, trainable, self._fixed):
            outputs, _ = layer.stateless_call(values, fixed, y)
            y, h, c = split_states(self.case.cell, outputs)
            h_list += h
            c_list += c
        return y, tuple(h_list), tuple(c_list)

    def _compute(self, trainable: list[list[Any]], x: Any, d_out: Any, d_h: tuple[Any, ...],
                 d_c: tuple[Any, ...]) -> tuple[Any, ...]:
        """Forward, plus in train mode the gradients of x and every trainable value (one vjp)."""
        jax = import_jax()
        with jax.default_matmul_precision(JAX_MATMUL_PRECISION.get(self.case.precision, "highest")):
            if not self._train:
                return self._forward(trainable, x)
            (y, h, c), pullback = jax.vjp(self._forward, trainable, x)
            d_trainable, d_x = pullback((d_out, d_h[: len(h)], d_c[: len(c)]))
            return y, h, c, d_x, d_trainable

    def step(self) -> None:
        """One timed step: the jitted function, asynchronously; nothing is copied to the host."""
        self.last = self._fn(self._trainable, *self._args)

    def result(self, inputs: CaseInputs | None = None) -> ImplResult:
        """Outputs and gradients for ``inputs`` (default: the timing inputs) as float64 canonical arrays."""
        # A batch slice runs padded through the timed step's trace (a trace and an XLA compile per side saved);
        # inputs of any other shape trace once more. The zero sequences add nothing to the weight gradients.
        pad = None if inputs is None else padding_for(inputs, self.inputs)
        args = self._args if inputs is None else self._device_inputs(inputs, pad or 0)
        res = self._fn(self._trainable, *args)
        keep = slice(0, inputs.x.shape[1]) if inputs is not None and pad else slice(None)

        def host(a: Any) -> np.ndarray:
            """A batch-first result on the host as float64, without the padded sequences."""
            return _jax_numpy(a)[keep]

        y, h, c = res[:3]
        d_input = d_weights = None
        if self._train:
            d_input = np.swapaxes(host(res[3]), 0, 1)
            directions = self.case.shape.directions
            # Each stacked layer's trainable list is its directions' [kernel, recurrent, bias] in turn.
            nested = [[list(layer[3 * d:3 * d + 3]) for d in range(directions)] for layer in res[4]]
            d_weights = _canonical_grads(self.case, nested, _jax_numpy)
        return ImplResult(
            output=np.swapaxes(host(y), 0, 1),
            h_n=np.stack([host(t) for t in h]),
            c_n=np.stack([host(t) for t in c]) if c else None,
            d_input=d_input,
            d_weights=d_weights,
        )

    def prove_path(self) -> PathProof:
        """The compiled step's HLO (as for native JAX): cuDNN's RNN custom calls and no loop, or a loop and no call."""
        lowered = self._fn.lower(self._trainable, *self._args)
        proof = hlo_proof(self.name, lowered.as_text(), lowered.compile().as_text(), self._train)
        ok, evidence = proof.ok, proof.evidence
        flags_ok, flags = flag_check(self.layers, self.name)
        return PathProof(impl=self.name, ok=ok and flags_ok, evidence=f"{evidence}; {flags}")


@dataclass
class KerasJaxPair:
    """cuDNN and generic Keras stacks (JAX backend) with identical weights."""

    cudnn: KerasJaxImpl | None
    generic: KerasJaxImpl | None
    device: str
    cold: ColdCost | None = None  # each side's first call after build, which compiles (XLA, or its cache)

    def sync(self) -> None:
        """Block until the last step of each side is computed (no copy to the host)."""
        jax = import_jax()
        for side in (self.cudnn, self.generic):
            if side is not None and side.last is not None:
                jax.block_until_ready(side.last)

    def close(self) -> None:
        """Drop the layers and arrays; JAX frees device buffers when nothing refers to them."""
        self.cudnn = self.generic = None
        gc.collect()


class KerasJaxBackend(KerasFramework):
    """Builds Keras-on-JAX pairs (cuDNN for LSTM only); says why it cannot."""

    name = "keras_jax"
    keras_framework = "jax"

    def device_problem(self) -> str | None:
        """None when JAX sees a CUDA GPU with its cuDNN RNN kernels (as for native JAX), else a one-line reason."""
        return JaxFramework().gpu_unavailable_reason()

    def runtime_info(self) -> dict[str, str]:
        """Keras version and backend, JAX/jaxlib versions, devices and the default matmul precision."""
        keras = _keras("jax")
        jax = import_jax()
        return {
            "keras_jax.keras_version": get_value(lambda: keras.__version__),
            "keras_jax.backend": get_value(keras.backend.backend),
            "keras_jax.jax_version": get_value(lambda: jax.__version__),
            "keras_jax.jaxlib_version": get_value(lambda: importlib.metadata.version("jaxlib")),
            "keras_jax.devices": get_value(lambda: ", ".join(sorted({d.device_kind for d in jax.devices()}))),
            "keras_jax.default_matmul_precision": get_value(lambda: jax.config.jax_default_matmul_precision),
            "keras_jax.preallocate": os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "unset (JAX preallocates 75%)"),
            **loaded_libraries("keras_jax."),
        }

    def build(self, case: "Case", weights: "RNNWeights", inputs: CaseInputs,
              impls: tuple[str, ...] = IMPLS) -> KerasJaxPair:
        """Build and compile the requested sides (cuDNN needs a GPU; generic runs where JAX runs)."""
        reason = self.unavailable_reason()
        if reason:
            raise BackendUnavailable(reason)
        if "cudnn" in impls and case.cell not in KERAS_JAX.cudnn_cells:
            raise BackendUnavailable(f"Keras on JAX has no cuDNN {case.cell.upper()} (use_cudnn=True raises there)"
                                     if case.cell == "gru" else SIMPLE_RNN_NO_CUDNN)
        if "cudnn" in impls and (reason := self.gpu_unavailable_reason()):
            raise BackendUnavailable(reason)
        keras = _keras("jax")
        on_gpu = _on_gpu_jax()
        if case.precision in ("fp16", "bf16") and not on_gpu:
            raise BackendUnavailable(f"{case.precision} RNNs need a CUDA GPU (no half-precision CPU path is compared)")
        pair = KerasJaxPair(cudnn=None, generic=None, device="cuda:0" if on_gpu else "cpu")
        jax = import_jax()
        warm_device(jax, jax.devices()[0])  # this process's one-time costs are no case's first call
        try:
            for impl in impls:
                setattr(pair, impl, KerasJaxImpl(impl, case, build_stack(keras, case, weights, impl), inputs))
            # The first call compiles the step and surfaces out-of-memory here: its cache state keys its cold cost.
            calls, cache = with_cache_state(jax, lambda: first_calls({impl: getattr(pair, impl) for impl in impls},
                                                                     pair.sync, case.id))
            pair.cold = ColdCost(calls, cache=cache, first=first_of_process("keras"))
        except Exception as exc:
            oom = oom_reason(exc)
            if oom is None:
                raise
            pair.close()
            raise OutOfDeviceMemory(f"{case.id} does not fit in GPU memory: {oom}") from None
        return pair


    def build_model(self, case: "ModelCase", model: Any, inputs: Any, impls: tuple[str, ...] = IMPLS, seed: int = 0,
                    *, build: Any = None, options: ModelOptions | None = None) -> Any:
        """Copies of a Keras model built on JAX for each side and a float64 copy (keras_model_steps.py)."""
        require_usable(self, impls)
        keras = _keras("jax")
        on_gpu = _on_gpu_jax()
        if case.precision in ("fp16", "bf16") and not on_gpu:
            raise BackendUnavailable(f"{case.precision} models need a CUDA GPU (no half-precision CPU path is compared)")
        return build_pair(case, keras, model, build, inputs, impls, seed, options,
                          device="cuda:0" if on_gpu else "cpu", oom=oom_reason)


def torch_backend() -> KerasTorchBackend:
    """Keras 3 on torch (the factory ``KERAS_TORCH.module`` names)."""
    return KerasTorchBackend()


def jax_backend() -> KerasJaxBackend:
    """Keras 3 on JAX (the factory ``KERAS_JAX.module`` names)."""
    return KerasJaxBackend()


__all__ = ["JAX_MATMUL_PRECISION", "KERAS_JAX", "KERAS_TORCH", "KerasJaxBackend", "KerasTorchBackend", "jax_backend",
           "torch_backend"]
