"""PyTorch backend: ``nn.LSTM/GRU/RNN`` on cuDNN versus the same module with cuDNN disabled (ATen).

torch is imported only when a pair is built or runtime info is read, never when this module loads.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

import numpy as np

from pytest_rnnperf.model.cases import CELLS
from pytest_rnnperf.backends.base import (format_cudnn_version, get_value, import_problem, loaded_libraries,
                                          runtime_info)
from pytest_rnnperf.model.flags import unavailable
from pytest_rnnperf.backends import (
    IMPLS, INJECT_ENV, INJECT_HOST_ENV, BackendSpec, BackendUnavailable, ModelError, ModelOptions, OutOfDeviceMemory,
    empty_input, parse_injection, require_usable,
)
from pytest_rnnperf.model.reference import CaseInputs
from pytest_rnnperf.model.results import ImplResult, PathProof

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import Case, ModelCase
    from pytest_rnnperf.model.reference import RNNWeights

# ATen op names each path dispatches. cuDNN: aten::_cudnn_rnn (+ its backward). The generic
# CUDA path runs per-timestep fused cells or plain matmuls; on the CPU oneDNN would take over, so the
# generic side also disables mkldnn to stay on the plain ATen loop.
_CUDNN_OPS = ("aten::_cudnn_rnn", "aten::_cudnn_rnn_backward")
_MKLDNN_OPS = ("aten::mkldnn_rnn_layer",)
# Intra-op threads of a CPU pair. The CPU cases are small correctness checks that gain nothing from a second
# thread, while every OpenMP region of torch's default pool (a thread per core) waits at its barrier for each
# worker: on a 2-core runner with one core busy elsewhere, a descheduled worker stalled 2 ms steps for up to
# 200 ms. GPU pairs are left as they are.
CPU_THREADS = 1

TORCH_KEYS: tuple[str, ...] = (
    "torch.version", "torch.cuda_build", "torch.cudnn_version", "torch.cudnn_available", "torch.cudnn_enabled",
    "torch.cuda_available", "torch.device_name", "torch.cudnn_allow_tf32", "torch.matmul_allow_tf32",
    "torch.float32_matmul_precision", "torch.cudnn_rnn_fp32_precision", "torch.matmul_fp32_precision",
    "torch.cudnn_benchmark", "torch.cudnn_deterministic", "torch.deterministic_algorithms",
    "torch.cudnn_library", "torch.cublas_library", "torch.cudart_library",
)

SPEC = BackendSpec(
    name="torch", title="PyTorch", module=__name__, cudnn_cells=CELLS,
    distributions={"torch": ("torch",)}, runtime_prefix="torch.",
    key_fields=("torch.cuda_build", "torch.cudnn_version", "torch.cudnn_allow_tf32", "torch.matmul_allow_tf32",
                "torch.float32_matmul_precision", "torch.cudnn_rnn_fp32_precision", "torch.cudnn_benchmark",
                "torch.cudnn_deterministic", "torch.deterministic_algorithms"),
    can_inject=True, model_modules=("torch",),
)


def import_torch() -> Any:
    """Import torch on first use."""
    import torch

    return torch


def torch_dtype(precision: str) -> Any:
    """Parameter/activation dtype of a precision mode."""
    torch = import_torch()
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)


@contextlib.contextmanager
def precision_flags(impl: str, precision: str, device: str = "cuda") -> Iterator[None]:
    """Pin cuDNN on/off and TF32 for cuDNN *and* matmul, so both sides run the declared precision mode.

    torch's cuDNN RNN allows TF32 by default while cuBLAS matmul does not, so without this pin the two
    paths differ by ~3e-4 relative for reasons unrelated to either implementation.
    """
    torch = import_torch()
    allow_tf32 = precision == "tf32"
    matmul = torch.backends.cuda.matmul
    saved_matmul = matmul.allow_tf32
    matmul.allow_tf32 = allow_tf32
    try:
        with torch.backends.cudnn.flags(
            enabled=(impl == "cudnn"), benchmark=False, deterministic=False, allow_tf32=allow_tf32
        ), (_no_onednn() if device == "cpu" else contextlib.nullcontext()):
            yield
    finally:
        matmul.allow_tf32 = saved_matmul


def injected_us(case_id: str, name: str = INJECT_ENV, environ: dict[str, str] | None = None) -> float:
    """Microseconds an injection variable adds to each cuDNN step of ``case_id`` (0 when none matches).

    The plugin checks the variable's form before the run, so a malformed value never gets this far.
    """
    import fnmatch

    try:
        parts = parse_injection((os.environ if environ is None else environ).get(name, ""), name)
    except ValueError as exc:
        raise BackendUnavailable(str(exc)) from None
    return next((us for pattern, us in parts if fnmatch.fnmatch(case_id, pattern)), 0.0)


def injected_cycles(case_id: str, environ: dict[str, str] | None = None) -> int:
    """GPU spin cycles to add to each cuDNN step of ``case_id`` per RNNPERF_INJECT_CUDNN_DELAY_US (device time)."""
    us = injected_us(case_id, INJECT_ENV, environ)
    if not us:
        return 0
    clock_mhz = 1500.0
    try:  # cycles per microsecond = SM clock in MHz; fall back to a typical datacenter clock
        clock_mhz = import_torch().cuda.get_device_properties(0).clock_rate / 1e3
    except Exception:
        pass
    return int(us * clock_mhz)


@contextlib.contextmanager
def _no_onednn() -> Iterator[None]:
    """oneDNN off (the CPU generic side must be the plain ATen loop), without torch's TF32 notice.

    Entering mkldnn.flags re-sets oneDNN's TF32 switch, and CPU builds warn on every step that TF32 on
    oneDNN needs an Intel GPU: noise about a feature no case uses.
    """
    torch = import_torch()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")
        with torch.backends.mkldnn.flags(enabled=False):
            yield


def _module_class(cell: str) -> tuple[Any, dict[str, Any]]:
    """nn class and extra constructor arguments for a canonical cell name."""
    nn = import_torch().nn
    return {
        "lstm": (nn.LSTM, {}),
        "gru": (nn.GRU, {}),
        "rnn_tanh": (nn.RNN, {"nonlinearity": "tanh"}),
        "rnn_relu": (nn.RNN, {"nonlinearity": "relu"}),
    }[cell]


def _param_names(num_layers: int, directions: int) -> list[str]:
    """Parameter names in PyTorch's flat-weight order, which is also the canonical ``flat()`` order."""
    names = []
    for layer in range(num_layers):
        for d in range(directions):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            names += [f"weight_ih{sfx}", f"weight_hh{sfx}", f"bias_ih{sfx}", f"bias_hh{sfx}"]
    return names


def build_module(case: "Case", weights: "RNNWeights", device: str) -> Any:
    """An nn.LSTM/GRU/RNN on ``device`` holding exactly the canonical ``weights`` (time-major)."""
    torch = import_torch()
    cls, extra = _module_class(case.cell)
    s = case.shape
    module = cls(
        s.input_size, s.hidden_size, num_layers=s.num_layers, bidirectional=s.bidirectional, **extra
    )
    names = _param_names(s.num_layers, s.directions)
    with torch.no_grad():
        for name, array in zip(names, weights.flat(), strict=True):
            getattr(module, name).copy_(torch.from_numpy(np.ascontiguousarray(array)))
    module = module.to(device=device, dtype=torch_dtype(case.precision))
    if device.startswith("cuda"):
        # A dtype cast leaves the weights outside cuDNN's single flat buffer; without this, cuDNN
        # compacts them on every call and the cuDNN side is billed for a copy it would not do in training.
        # (A no-op for bf16, which torch's cuDNN dtype list lacks: there the copy is what training pays too.)
        module.flatten_parameters()
    return module


def _to_numpy(t: Any) -> np.ndarray:
    """Detach, move to host and widen to float64."""
    return t.detach().to("cpu", dtype=import_torch().float64).numpy()


def torch_runtime_info() -> dict[str, str]:
    """torch's build and loaded CUDA/cuDNN, device and precision/determinism flags; imports torch."""
    return runtime_info("torch", TORCH_KEYS, torch_info)


def torch_info(torch: Any) -> dict[str, str]:
    cudnn, cuda = torch.backends.cudnn, torch.backends.cuda
    cuda_ok = get_value(torch.cuda.is_available)
    return {
        "torch.version": get_value(lambda: torch.__version__),
        "torch.cuda_build": get_value(lambda: torch.version.cuda or "none (CPU build)"),
        # The cuDNN loaded at run time, which can differ from the one torch was built with.
        "torch.cudnn_version": get_value(cudnn.version, format_cudnn_version),
        "torch.cudnn_available": get_value(cudnn.is_available),
        "torch.cudnn_enabled": get_value(lambda: cudnn.enabled),
        "torch.cuda_available": cuda_ok,
        "torch.device_name": (get_value(lambda: torch.cuda.get_device_name(0)) if cuda_ok == "True"
                              else unavailable("no CUDA device")),
        "torch.cudnn_allow_tf32": get_value(lambda: cudnn.allow_tf32),
        "torch.matmul_allow_tf32": get_value(lambda: cuda.matmul.allow_tf32),
        "torch.float32_matmul_precision": get_value(torch.get_float32_matmul_precision),
        # torch >= 2.9 spells precision per backend and operator; older torch lacks these (unavailable).
        "torch.cudnn_rnn_fp32_precision": get_value(lambda: cudnn.rnn.fp32_precision),
        "torch.matmul_fp32_precision": get_value(lambda: cuda.matmul.fp32_precision),
        "torch.cudnn_benchmark": get_value(lambda: cudnn.benchmark),
        "torch.cudnn_deterministic": get_value(lambda: cudnn.deterministic),
        "torch.deterministic_algorithms": get_value(torch.are_deterministic_algorithms_enabled),
        # The copies the loader found (LD_LIBRARY_PATH can put a system cuDNN before the wheel's), with paths.
        **loaded_libraries("torch."),
    }


def dispatched_ops(step: Any, device: str) -> set[str]:
    """Names ("aten::_cudnn_rnn", ...) of every ATen op that one ``step`` dispatched, backward included."""
    return set(dispatch_counts(step, device))


def dispatch_counts(step: Any, device: str) -> Counter[str]:
    """How often one ``step`` dispatched each ATen op ("aten::_cudnn_rnn": 2, ...), backward included.

    A dispatch mode sees each op below autograd, after aten::lstm chose its implementation, so it names the
    kernel family that ran; it costs a Python call per op, where the profiler cost ~1-2 s per case.
    """
    torch = import_torch()
    from torch.utils._python_dispatch import TorchDispatchMode

    names: Counter[str] = Counter()

    class _Record(TorchDispatchMode):
        """Counts op names and runs each op unchanged."""

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            """Note the op, then run it."""
            names["aten::" + func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    with _Record():
        step()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return names


def prove_path(impl: str, step: Any, device: str) -> PathProof:
    """Record the ops one ``step`` dispatched; cuDNN must show aten::_cudnn_rnn, generic neither it nor oneDNN's RNN."""
    names = dispatched_ops(step, device)
    cudnn_ops = sorted(n for n in names if n in _CUDNN_OPS)
    onednn = sorted(n for n in names if n in _MKLDNN_OPS)
    if impl == "cudnn":
        ok = bool(cudnn_ops)
        evidence = (f"ops {', '.join(cudnn_ops)}" if cudnn_ops else "no aten::_cudnn_rnn op ran")
    else:
        ok = not cudnn_ops and not onednn
        generic = sorted(n for n in names if n.startswith("aten::_thnn_fused") or n in (
            "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell", "aten::addmm",
            "aten::mm"))
        evidence = ("cuDNN ops ran: " + ", ".join(cudnn_ops + onednn)) if not ok else (
            "no cuDNN op; generic ops " + (", ".join(generic[:4]) or "(matmul loop)"))
    return PathProof(impl=impl, ok=ok, evidence=evidence)


@dataclass
class TorchImpl:
    """One side of a torch pair: a module, its inputs on the device, and the precision pin."""

    name: str
    case: "Case"
    module: Any
    device: str
    inputs: CaseInputs
    weights: "RNNWeights"
    _x: Any = field(default=None, repr=False)
    _grads: tuple[Any, ...] = field(default=(), repr=False)
    _inject_cycles: int = 0
    _inject_host_s: float = 0.0

    def __post_init__(self) -> None:
        """Move the timing inputs to the device once, so no step copies from the host."""
        self._x, self._grads = self._device_inputs(self.inputs)
        if self.name == "cudnn" and self.device.startswith("cuda"):
            self._inject_cycles = injected_cycles(self.case.id)
            self._inject_host_s = injected_us(self.case.id, INJECT_HOST_ENV) / 1e6

    def _device_inputs(self, inputs: CaseInputs) -> tuple[Any, tuple[Any, ...]]:
        """Input and upstream gradients as device tensors of the case's dtype."""
        torch = import_torch()
        dt = torch_dtype(self.case.precision)

        def dev(a: np.ndarray) -> Any:
            return torch.from_numpy(np.ascontiguousarray(a)).to(self.device, dtype=dt)

        x = dev(inputs.x).requires_grad_(self.case.mode == "train")
        grads: tuple[Any, ...] = (dev(inputs.d_output), dev(inputs.d_h_n))
        if inputs.d_c_n is not None:
            grads += (dev(inputs.d_c_n),)
        return x, grads

    def _run(self, x: Any, grads: tuple[Any, ...], want_grads: bool) -> tuple[Any, Any, Any, tuple[Any, ...]]:
        """Forward (+ backward via autograd.grad, which returns gradients instead of accumulating them)."""
        torch = import_torch()
        with precision_flags(self.name, self.case.precision, self.device):
            if not want_grads:
                with torch.no_grad():
                    out, state = self.module(x)
                return out, state, None, ()
            out, state = self.module(x)
            h_n, c_n = state if isinstance(state, tuple) else (state, None)
            outputs = [out, h_n] + ([c_n] if c_n is not None else [])
            params = list(self.module.parameters())
            g = torch.autograd.grad(outputs, [x] + params, list(grads[: len(outputs)]))
            return out, state, g[0], tuple(g[1:])

    def step(self) -> None:
        """One timed step; nothing is copied to the host and the device is not synchronized here."""
        self._run(self._x, self._grads, want_grads=self.case.mode == "train")
        if self._inject_cycles:
            import_torch().cuda._sleep(self._inject_cycles)  # injected device-side delay (testing the detector)
        if self._inject_host_s:  # injected host-side delay: a busy wait, as slower dispatch would be
            end = time.perf_counter() + self._inject_host_s
            while time.perf_counter() < end:
                pass

    def result(self, inputs: CaseInputs | None = None) -> ImplResult:
        """Outputs and gradients for ``inputs`` (default: the timing inputs) as float64 canonical arrays."""
        from pytest_rnnperf.model.reference import RNNWeights

        x, grads = (self._x, self._grads) if inputs is None else self._device_inputs(inputs)
        train = self.case.mode == "train"
        out, state, d_x, d_params = self._run(x, grads, want_grads=train)
        h_n, c_n = state if isinstance(state, tuple) else (state, None)
        d_weights = None
        if train:
            s = self.case.shape
            d_weights = RNNWeights.from_flat(
                self.case.cell, s.input_size, s.hidden_size, s.num_layers, s.bidirectional,
                [_to_numpy(p) for p in d_params],
            )
        return ImplResult(
            output=_to_numpy(out),
            h_n=_to_numpy(h_n),
            c_n=None if c_n is None else _to_numpy(c_n),
            d_input=None if d_x is None else _to_numpy(d_x),
            d_weights=d_weights,
        )

    def prove_path(self) -> PathProof:
        """Profile one step and name the ops that ran; cuDNN must show aten::_cudnn_rnn, generic must not."""
        return prove_path(self.name, self.step, self.device)


def _pin_cpu_threads(device: str) -> int:
    """For a CPU pair, set torch's intra-op threads to CPU_THREADS; the count to restore on close (0: none)."""
    torch = import_torch()
    if device != "cpu" or torch.get_num_threads() == CPU_THREADS:
        return 0
    before = torch.get_num_threads()
    torch.set_num_threads(CPU_THREADS)
    return int(before)


def restore_thread_count(count: int) -> None:
    """Give torch back the intra-op thread count a CPU pair replaced."""
    if count:
        import_torch().set_num_threads(count)


_Built = TypeVar("_Built")


def build_on_device(precision: str, build: Callable[[str, int], _Built], what: str = "RNNs") -> _Built:
    """``build(device, restore)`` on CUDA when torch sees a GPU, else on the CPU with its threads pinned.

    Half precision has no CPU path to compare (BackendUnavailable). ``restore`` is the thread count the pair
    gives back on close; when ``build`` raises no pair will be closed, so the pin is undone here.
    """
    device = "cuda" if import_torch().cuda.is_available() else "cpu"
    if precision in ("fp16", "bf16") and device == "cpu":
        raise BackendUnavailable(f"{precision} {what} need a CUDA GPU (no half-precision CPU path is compared)")
    restore = _pin_cpu_threads(device)
    try:
        return build(device, restore)
    except BaseException:
        restore_thread_count(restore)
        raise


class OnDevice:
    """sync and close of a pair whose sides live on ``device`` (a dataclass with these fields)."""

    cudnn: Any
    generic: Any
    device: str
    restore_threads: int

    def sync(self) -> None:
        """Wait for queued CUDA work; a no-op on the CPU."""
        if self.device.startswith("cuda"):
            import_torch().cuda.synchronize()

    def close(self) -> None:
        """Drop the sides and return cached blocks to the driver, so the next case starts clean."""
        self.cudnn = self.generic = None
        if self.device.startswith("cuda"):
            import_torch().cuda.empty_cache()
        restore_thread_count(self.restore_threads)
        self.restore_threads = 0


@dataclass
class TorchPair(OnDevice):
    """cuDNN and generic torch modules with identical weights on one device."""

    cudnn: TorchImpl | None
    generic: TorchImpl | None
    device: str
    restore_threads: int = 0  # torch's thread count before this CPU pair pinned it (0: untouched)


def _leaves(obj: Any, name: str) -> list[tuple[str, Any]]:
    """The tensors of a nested tuple/list/dict output, named by their path, e.g. ``output[1][0]``."""
    torch = import_torch()
    if isinstance(obj, torch.Tensor):
        return [(name, obj)]
    if isinstance(obj, torch.nn.utils.rnn.PackedSequence):  # its values; the sizes and order are the input's
        return [(name, obj.data)]
    if isinstance(obj, (tuple, list)):
        return [leaf for i, item in enumerate(obj) for leaf in _leaves(item, f"{name}[{i}]")]
    if isinstance(obj, dict):
        return [leaf for key, item in obj.items() for leaf in _leaves(item, f"{name}[{key}]")]
    return []


@dataclass
class TorchModelImpl:
    """One copy of a team's model on the device: the cuDNN side, the generic side or the float64 reference."""

    name: str  # "cudnn", "generic" or "reference"
    module: Any
    device: str
    precision: str
    train: bool
    inputs: tuple[Any, ...]
    d_outputs: list[Any] = field(default_factory=list)  # upstream gradient per float output, in leaf order

    @property
    def _impl(self) -> str:
        """The path this copy must take: the reference runs the generic path in float64."""
        return "cudnn" if self.name == "cudnn" else "generic"

    def _run(self, want_grads: bool) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        """Forward (+ gradients of <outputs, d_outputs> w.r.t. float inputs and parameters)."""
        torch = import_torch()
        with precision_flags(self._impl, self.precision, self.device):
            if not want_grads:
                with torch.no_grad():
                    return _leaves(self.module(*self.inputs), "output"), []
            outputs = [(n, t) for n, t in _leaves(self.module(*self.inputs), "output") if t.is_floating_point()]
            wrt = [(f"d_input[{i}]", x) for i, x in enumerate(map(_values, self.inputs)) if x.requires_grad]
            wrt += [(f"d_params[{n}]", p) for n, p in self.module.named_parameters() if p.requires_grad]
            grads = torch.autograd.grad([t for _, t in outputs], [t for _, t in wrt],
                                        self.d_outputs[: len(outputs)], allow_unused=True)
            # A parameter the outputs do not depend on has gradient zero (autograd says None).
            return outputs, [(n, torch.zeros_like(t) if g is None else g) for (n, t), g in zip(wrt, grads)]

    def step(self) -> None:
        """One timed step; nothing is copied to the host and the device is not synchronized here."""
        self._run(want_grads=self.train)

    def result(self) -> dict[str, tuple[str, np.ndarray | None]]:
        """Every output and gradient as float64 host arrays, by name (an unused parameter's gradient is 0)."""
        outputs, grads = self._run(want_grads=self.train)
        named: dict[str, tuple[str, np.ndarray | None]] = {n: ("forward", _to_numpy(t)) for n, t in outputs}
        named.update({n: ("gradient", _to_numpy(g)) for n, g in grads})
        return named

    def prove_path(self) -> PathProof:
        """Profile one step: the cuDNN copy must run aten::_cudnn_rnn, the others must not."""
        return prove_path(self._impl, self.step, self.device)


@dataclass
class TorchModelPair(OnDevice):
    """cuDNN, generic and float64 copies of one model with identical weights, on one device."""

    cudnn: TorchModelImpl | None
    generic: TorchModelImpl | None
    reference_copy: TorchModelImpl
    device: str
    description: str = ""
    notes: tuple[str, ...] = ()
    restore_threads: int = 0  # torch's thread count before this CPU pair pinned it (0: untouched)

    def reference(self) -> dict[str, tuple[str, np.ndarray | None]]:
        """Outputs and gradients of the float64 copy on the generic path."""
        return self.reference_copy.result()


def _describe(model: Any) -> tuple[str, list[Any]]:
    """"Encoder: 1.20M parameters; lstm=LSTM(128, 256, num_layers=2)" and the model's RNN modules."""
    nn = import_torch().nn
    rnns = [(name or type(model).__name__, m) for name, m in model.named_modules() if isinstance(m, nn.RNNBase)]
    params = sum(p.numel() for p in model.parameters())
    text = f"{type(model).__name__}: {params / 1e6:.2f}M parameters; " + ", ".join(f"{n}={m!r}" for n, m in rnns)
    return text, [m for _, m in rnns]


def _without_dropout(model: Any) -> list[str]:
    """Set every dropout of ``model`` (a copy) to 0, so the sides compute the same function; what was changed."""
    nn = import_torch().nn
    changed = []
    for name, m in model.named_modules():
        if isinstance(m, nn.RNNBase) and m.dropout:
            changed.append(f"{name or 'model'} ({m.dropout:g})")
            m.dropout = 0.0
        elif isinstance(m, nn.modules.dropout._DropoutNd) and m.p:
            changed.append(f"{name or 'model'} ({m.p:g})")
            m.p = 0.0
    return changed


def _model_inputs(inputs: Any, batch_first: bool) -> tuple[Any, ...]:
    """The model's positional inputs: tensors or PackedSequences, one or a tuple/list, or a callable returning them.

    ``batch_first``: the model's RNNs take batch-major inputs, which says which axis is the batch.
    """
    torch = import_torch()
    packed = torch.nn.utils.rnn.PackedSequence
    value = inputs() if callable(inputs) else inputs
    # A PackedSequence is a tuple too, but one input (its fields are not the model's arguments).
    value = tuple(value) if isinstance(value, (tuple, list)) and not isinstance(value, packed) else (value,)
    bad = [type(v).__name__ for v in value if not isinstance(v, (torch.Tensor, packed))]
    if bad or not value:
        raise ModelError(f"inputs must be torch tensors or PackedSequences (or a callable returning them), "
                         f"got {bad or 'nothing'}")
    # A packed sequence holds no empty sequence (torch refuses length 0 when packing).
    shapes = [(f"input[{i}]", tuple(v.shape)) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
    if (why := empty_input(shapes, batch_axis=0 if batch_first else 1)) is not None:
        raise ModelError(why)
    return value


def _values(x: Any) -> Any:
    """The tensor of an input that carries its values (a packed sequence's data, with its gradient)."""
    return x.data if isinstance(x, import_torch().nn.utils.rnn.PackedSequence) else x


def _input_copy(x: Any, device: str, dtype: Any, train: bool) -> Any:
    """An input on ``device``: floating-point values in ``dtype`` and, in train mode, asking for their gradient.

    A packed sequence moves as a whole: its data (and sort indices) to ``device``, batch_sizes stays on the CPU
    where torch's RNNs want it.
    """
    floating = _values(x).is_floating_point()
    moved = x.to(device=device, dtype=dtype if floating else _values(x).dtype)
    _values(moved).requires_grad_(train and floating)
    return moved


def _nothing_to_compare(name: str, outputs: list[tuple[str, Any]]) -> str:
    """Why a model whose outputs hold no floating-point tensor cannot be checked: parity would compare nothing."""
    dtypes = ", ".join(f"{n} {str(t.dtype).replace('torch.', '')}" for n, t in outputs)
    got = f"only integer tensors ({dtypes})" if outputs else "no tensor"
    return (f"{name}.forward returned {got}: nothing floating-point to compare (return what a loss is computed "
            f"from, e.g. logits or hidden states)")


class TorchBackend:
    """Builds torch pairs; says why it cannot (torch missing, no CUDA GPU, no cuDNN)."""

    name = "torch"

    def unavailable_reason(self) -> str | None:
        """None when torch is importable, else a one-line reason."""
        return import_problem("torch", import_torch, "pip install 'pytest-rnnperf[torch]'")

    def gpu_unavailable_reason(self) -> str | None:
        """None when torch sees a CUDA GPU with cuDNN, else a one-line reason."""
        reason = self.unavailable_reason()
        if reason:
            return reason
        torch = import_torch()
        if not torch.cuda.is_available():
            built = torch.version.cuda or "none (CPU build)"
            return f"no CUDA GPU visible to torch {torch.__version__} (built for CUDA {built})"
        if not torch.backends.cudnn.is_available():
            return f"torch {torch.__version__} sees a GPU but cuDNN is not available"
        return None

    def runtime_info(self) -> dict[str, str]:
        """torch version, CUDA/cuDNN and precision flags (imports torch)."""
        return torch_runtime_info()

    def build(
        self, case: "Case", weights: "RNNWeights", inputs: CaseInputs, impls: tuple[str, ...] = IMPLS
    ) -> TorchPair:
        """Build the requested sides on the GPU (cuDNN needs one) or on the CPU for generic-only pairs."""
        reason = self.unavailable_reason()
        if reason:
            raise BackendUnavailable(reason)
        if "cudnn" in impls:
            reason = self.gpu_unavailable_reason()
            if reason:
                raise BackendUnavailable(reason)
        return build_on_device(case.precision,
                               lambda device, restore: self._build(case, weights, inputs, impls, device, restore))

    def _build(self, case: "Case", weights: "RNNWeights", inputs: CaseInputs, impls: tuple[str, ...], device: str,
               restore: int) -> TorchPair:
        """build's work, once the device and its thread count are settled."""
        torch = import_torch()
        try:
            sides = {}
            for impl in impls:
                # One module per side, built from the same canonical weights: cuDNN keeps a flattened
                # weight buffer of its own, and neither side should see the other's state.
                module = build_module(case, weights, device)
                sides[impl] = TorchImpl(impl, case, module, device, inputs, weights)
            pair = TorchPair(cudnn=sides.get("cudnn"), generic=sides.get("generic"), device=device,
                             restore_threads=restore)
            # One untimed step per side surfaces out-of-memory here, where it becomes a skip.
            for side in sides.values():
                side.step()
            pair.sync()
            return pair
        except torch.cuda.OutOfMemoryError as exc:
            torch.cuda.empty_cache()
            first = str(exc).splitlines()[0][:160]
            raise OutOfDeviceMemory(f"{case.id} does not fit in GPU memory: {first}") from None


    def build_model(self, case: "ModelCase", model: Any, inputs: Any, impls: tuple[str, ...] = IMPLS,
                    seed: int = 0, *, build: Any = None, options: ModelOptions | None = None) -> TorchModelPair:
        """Copies of ``model`` for each side and a float64 reference copy, with the same inputs and upstream grads."""
        given = options.given() if options is not None else []
        if given:  # a torch module is copied and timed as a forward + backward of its own: nothing to choose
            raise ModelError(f"{', '.join(f'{g}=' for g in given)}: only a Keras model takes these; a torch "
                             f"nn.Module is timed as forward + backward with fixed upstream gradients")
        require_usable(self, impls)
        torch = import_torch()
        if not isinstance(model, torch.nn.Module):
            raise ModelError(f"the model must be a torch.nn.Module, got {type(model).__name__}")
        description, rnns = _describe(model)
        if not rnns:
            raise ModelError(f"{type(model).__name__} has no nn.LSTM, nn.GRU or nn.RNN: nothing in it runs on cuDNN")
        return build_on_device(case.precision, lambda device, restore: self._build_model(
            case, model, inputs, impls, seed, device, description, restore), what="models")

    def _build_model(self, case: "ModelCase", model: Any, inputs: Any, impls: tuple[str, ...], seed: int,
                     device: str, description: str, restore: int) -> TorchModelPair:
        """build_model's work, once the device and its thread count are settled."""
        import copy

        torch = import_torch()
        torch.manual_seed(seed)
        rnns = [m for m in model.modules() if isinstance(m, torch.nn.RNNBase)]
        host_inputs = _model_inputs(inputs, batch_first=rnns[0].batch_first)
        train = case.mode == "train"
        template = copy.deepcopy(model)
        dropped = _without_dropout(template)

        def copy_for(name: str, dtype: Any) -> TorchModelImpl:
            module = copy.deepcopy(template).to(device=device, dtype=dtype)
            module.train(train)
            if device == "cuda":
                for m in module.modules():
                    if isinstance(m, torch.nn.RNNBase):
                        m.flatten_parameters()
            xs = tuple(_input_copy(x, device, dtype, train) for x in host_inputs)
            return TorchModelImpl(name, module, device, case.precision, train, xs)

        try:
            reference = copy_for("reference", torch.float64)
            outputs, _ = reference._run(want_grads=False)
            if not any(t.is_floating_point() for _, t in outputs):
                raise ModelError(_nothing_to_compare(type(model).__name__, outputs))
            rng = np.random.default_rng(seed)
            d_host = [rng.standard_normal(tuple(t.shape)) / np.sqrt(max(t.numel(), 1))
                      for _, t in outputs if t.is_floating_point()]
            sides: dict[str, TorchModelImpl] = {}
            for impl in impls:
                sides[impl] = copy_for(impl, torch_dtype(case.precision))
            for side in [reference, *sides.values()]:
                dtype = torch.float64 if side is reference else torch_dtype(case.precision)
                side.d_outputs = [torch.from_numpy(d).to(device=device, dtype=dtype) for d in d_host]
            for side in sides.values():  # surfaces out-of-memory and shape errors here, before timing
                side.step()
            pair = TorchModelPair(cudnn=sides.get("cudnn"), generic=sides.get("generic"), reference_copy=reference,
                                  device=device, description=description, restore_threads=restore,
                                  notes=(f"dropout set to 0 in the compared copies: {', '.join(dropped)}",)
                                  if dropped else ())
            pair.sync()
            return pair
        except torch.cuda.OutOfMemoryError as exc:
            torch.cuda.empty_cache()
            raise OutOfDeviceMemory(f"{case.id} does not fit in GPU memory: {str(exc).splitlines()[0][:160]}") from None
        except ModelError:
            raise
        except (RuntimeError, TypeError, ValueError) as exc:  # the model rejected its inputs, say
            raise ModelError(f"{type(model).__name__} failed on its inputs: {type(exc).__name__}: "
                             f"{str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}") from None


def get_backend() -> TorchBackend:
    """The torch backend (entry point used by ``load_backend``)."""
    return TorchBackend()


__all__ = ["SPEC", "TorchBackend", "TorchImpl", "TorchModelPair", "TorchPair", "build_module", "get_backend",
           "precision_flags"]
