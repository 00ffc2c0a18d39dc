"""torch at the edge, shared by every backend that runs on torch (eager, compiled, Keras on torch).

Importing torch, its dtypes and precision pins, the modules built from canonical weights, one eager side of a
pair, the ops a step dispatched, the device and thread count a pair runs on, torch's runtime fields and whether
torch (and its GPU) can be used. No backend module is imported here, so the backends that share it stay apart.
torch is imported only when one of these is called, never when this module loads.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

import numpy as np

from pytest_rnnperf.backends import (INJECT_ENV, INJECT_HOST_ENV, INJECT_LONGER_ENV, INJECT_NO_TENSOR_OP_ENV,
                                     INJECT_SERIALIZE_ENV, BackendUnavailable, injection_for)
from pytest_rnnperf.backends.cold import once_per_process
from pytest_rnnperf.backends.base import (FrameworkBackend, format_cudnn_version, get_value, loaded_libraries,
                                          runtime_info)
from pytest_rnnperf.model.flags import unavailable
from pytest_rnnperf.model.reference import CaseInputs, RNNWeights
from pytest_rnnperf.model.results import ImplResult, PathProof

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import Case

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
    "torch.precision_api", "torch.cudnn_benchmark", "torch.cudnn_deterministic", "torch.deterministic_algorithms",
    "torch.cudnn_library", "torch.cublas_library", "torch.cudart_library",
)


def import_torch() -> Any:
    """Import torch on first use."""
    import torch

    return torch


def torch_dtype(precision: str) -> Any:
    """Parameter/activation dtype of a precision mode."""
    torch = import_torch()
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)


# How a case's precision is pinned: torch's per-operator API (cudnn.rnn.fp32_precision, cuda.matmul.fp32_precision,
# torch >= 2.9) where it has one, else the legacy allow_tf32 switches; never both, since once the new API sets
# cuDNN's RNN apart from its convolutions, reading the legacy cudnn.allow_tf32 (as cudnn.flags() does) raises.
FP32_PRECISION_API, ALLOW_TF32_API = "fp32_precision", "allow_tf32"


def precision_api(torch: Any) -> str:
    """Which API pins precision in this torch: ``fp32_precision`` where it has both per-operator switches."""
    cudnn_rnn = getattr(torch.backends.cudnn, "rnn", None)
    new = hasattr(cudnn_rnn, "fp32_precision") and hasattr(torch.backends.cuda.matmul, "fp32_precision")
    return FP32_PRECISION_API if new else ALLOW_TF32_API


@contextlib.contextmanager
def _pinned(*settings: tuple[Any, str, Any]) -> Iterator[None]:
    """Each ``(owner, attribute, value)`` set for the block and put back after it, last set first restored."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in settings]
    try:
        for owner, name, value in settings:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


@contextlib.contextmanager
def precision_flags(impl: str, precision: str, device: str = "cuda") -> Iterator[None]:
    """Pin cuDNN on/off and TF32 for cuDNN's RNN *and* matmul, so both sides run the declared precision mode.

    torch's cuDNN RNN allows TF32 by default while cuBLAS matmul does not, so without this pin the two
    paths differ by ~3e-4 relative for reasons unrelated to either implementation.
    """
    torch = import_torch()
    tf32 = precision == "tf32"
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    with contextlib.ExitStack() as stack:
        if precision_api(torch) == FP32_PRECISION_API:
            math = "tf32" if tf32 else "ieee"
            stack.enter_context(_pinned(
                (cudnn, "enabled", impl == "cudnn"), (cudnn, "benchmark", False), (cudnn, "deterministic", False),
                (cudnn.rnn, "fp32_precision", math), (matmul, "fp32_precision", math)))
        else:
            stack.enter_context(_pinned((matmul, "allow_tf32", tf32)))
            stack.enter_context(cudnn.flags(enabled=(impl == "cudnn"), benchmark=False, deterministic=False,
                                            allow_tf32=tf32))
        if device == "cpu":
            stack.enter_context(_no_onednn())
        yield


def injected_us(case_id: str, name: str = INJECT_ENV, environ: dict[str, str] | None = None) -> float:
    """Microseconds an injection variable adds to each cuDNN step of ``case_id`` (0 when none matches)."""
    return injection_for(case_id, name, environ) or 0.0


def injected_no_tensor_op(case_id: str, environ: dict[str, str] | None = None) -> bool:
    """RNNPERF_INJECT_NO_TENSOR_OP names ``case_id``: its cuDNN side is to run IEEE float32 math."""
    return injection_for(case_id, INJECT_NO_TENSOR_OP_ENV, environ) is not None


def injected_serial(case_id: str, environ: dict[str, str] | None = None) -> bool:
    """``case_id`` matches RNNPERF_INJECT_SERIALIZE_BIDIRECTIONAL: its cuDNN side runs its directions one by one."""
    return injection_for(case_id, INJECT_SERIALIZE_ENV, environ) is not None


def longer_steps(case_id: str, steps: int, environ: dict[str, str] | None = None) -> int:
    """Timesteps RNNPERF_INJECT_LONGER_STEP adds to each timed cuDNN step of ``case_id`` (0: none; at least one where
    it names the case)."""
    percent = injection_for(case_id, INJECT_LONGER_ENV, environ)
    return 0 if not percent else max(1, math.ceil(steps * percent / 100))


def lengthened(x: Any, grads: tuple[Any, ...], extra: int, dim: int = 0) -> tuple[Any, tuple[Any, ...]]:
    """``x`` and its upstream output gradient (``grads[0]``) with their last ``extra`` timesteps (along ``dim``: 0
    time-major, 1 batch-major) again, the final states' gradients as they are: one more stretch of the same sequence
    for the same kernels."""
    torch = import_torch()

    def longer(t: Any) -> Any:
        return torch.cat([t, t.narrow(dim, t.shape[dim] - extra, extra)], dim=dim)

    x_long = longer(x.detach()).requires_grad_(x.requires_grad)
    return x_long, (longer(grads[0]), *grads[1:])


def serialized_forward(module: Any, x: Any, passes: dict[tuple[int, str], Any] | None = None) -> tuple[Any, Any]:
    """A bidirectional ``module`` run as one unidirectional pass per layer and direction, one after the other.

    What RNNPERF_INJECT_SERIALIZE_BIDIRECTIONAL emulates: a release that no longer runs the two directions
    concurrently. Each pass is a one-layer module of the same class called with the bidirectional module's own
    weights (the reverse direction on the time-flipped input), so outputs, states and gradients are the module's.
    ``passes`` keeps those modules between steps: built on the meta device (only their code runs), each keeps the
    weights it was first called with, so cuDNN packs them once, not at every step.
    """
    torch = import_torch()
    passes = {} if passes is None else passes
    weights = dict(module.named_parameters())
    extra = {"nonlinearity": module.nonlinearity} if hasattr(module, "nonlinearity") else {}
    layer_in, states = x, []
    for layer in range(module.num_layers):
        outs = []
        for suffix in ("", "_reverse"):
            if (layer, suffix) not in passes:
                passes[layer, suffix] = type(module)(layer_in.shape[-1], module.hidden_size, bias=module.bias,
                                                     device="meta", **extra)
            one = passes[layer, suffix]
            own = {f"{w}_l0": weights[f"{w}_l{layer}{suffix}"] for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
            out, state = torch.func.functional_call(one, own, (layer_in.flip(0) if suffix else layer_in,))
            outs.append(out.flip(0) if suffix else out)
            states.append(state if isinstance(state, tuple) else (state,))
        layer_in = torch.cat(outs, dim=-1)
    joined = tuple(torch.cat(parts, dim=0) for parts in zip(*states))
    return layer_in, joined if len(joined) > 1 else joined[0]


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


def build_module(case: "Case", weights: "RNNWeights", device: str, precision: str = "") -> Any:
    """An nn.LSTM/GRU/RNN on ``device`` holding exactly the canonical ``weights`` (time-major), in the dtype of
    ``precision`` (default: the case's)."""
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
    module = module.to(device=device, dtype=torch_dtype(precision or case.precision))
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
        # The API this run pins each case's precision with (``precision_flags``).
        "torch.precision_api": get_value(lambda: precision_api(torch)),
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
    precision: str = ""  # the precision its math runs in where not the case's (a fault injection)
    _x: Any = field(default=None, repr=False)
    _grads: tuple[Any, ...] = field(default=(), repr=False)
    _inject_cycles: int = 0
    _inject_host_s: float = 0.0
    _inject_serial: bool = False
    _passes: dict[tuple[int, str], Any] = field(default_factory=dict, repr=False)  # the serialized fault's modules
    # The timed step's inputs: the timing inputs, or a longer sequence where RNNPERF_INJECT_LONGER_STEP names the case.
    _step_x: Any = field(default=None, repr=False)
    _step_grads: tuple[Any, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        """Move the timing inputs to the device once, so no step copies from the host."""
        self._x, self._grads = self._device_inputs(self.inputs)
        self._step_x, self._step_grads = self._x, self._grads
        if self.name == "cudnn" and self.device.startswith("cuda"):
            self._inject_cycles = injected_cycles(self.case.id)
            self._inject_host_s = injected_us(self.case.id, INJECT_HOST_ENV) / 1e6
            self._inject_serial = self.case.shape.bidirectional and injected_serial(self.case.id)
        if self.name == "cudnn" and (extra := longer_steps(self.case.id, int(self._x.shape[0]))):
            self._step_x, self._step_grads = lengthened(self._x, self._grads, extra)

    def _forward(self, x: Any) -> tuple[Any, Any]:
        """The module on ``x``: at once, or direction by direction where the serializing fault is injected."""
        return serialized_forward(self.module, x, self._passes) if self._inject_serial else self.module(x)

    @property
    def math_precision(self) -> str:
        """The precision its math runs in: ``precision`` where given, else the case's."""
        return self.precision or self.case.precision

    def _device_inputs(self, inputs: CaseInputs) -> tuple[Any, tuple[Any, ...]]:
        """Input and upstream gradients as device tensors of the dtype its math runs in."""
        torch = import_torch()
        dt = torch_dtype(self.math_precision)

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
        with precision_flags(self.name, self.math_precision, self.device):
            if not want_grads:
                with torch.no_grad():
                    out, state = self._forward(x)
                return out, state, None, ()
            out, state = self._forward(x)
            h_n, c_n = state if isinstance(state, tuple) else (state, None)
            outputs = [out, h_n] + ([c_n] if c_n is not None else [])
            params = list(self.module.parameters())
            g = torch.autograd.grad(outputs, [x] + params, list(grads[: len(outputs)]))
            return out, state, g[0], tuple(g[1:])

    def step(self) -> None:
        """One timed step; nothing is copied to the host and the device is not synchronized here."""
        self._run(self._step_x, self._step_grads, want_grads=self.case.mode == "train")
        if self._inject_cycles:
            import_torch().cuda._sleep(self._inject_cycles)  # injected device-side delay (testing the detector)
        if self._inject_host_s:  # injected host-side delay: a busy wait, as slower dispatch would be
            end = time.perf_counter() + self._inject_host_s
            while time.perf_counter() < end:
                pass

    def result(self, inputs: CaseInputs | None = None) -> ImplResult:
        """Outputs and gradients for ``inputs`` (default: the timing inputs) as float64 canonical arrays."""
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


def warm_cuda(device: str) -> None:
    """Pay this process's one-time CUDA costs on ``device`` once: cuDNN and cuBLAS loaded, their handles made.

    Run before a case's first call is timed, so that call does not depend on whether an earlier case paid them.
    """
    if not device.startswith("cuda"):
        return

    def warm() -> None:
        """A tiny cuDNN LSTM forward and backward, and cuBLAS matmuls in fp32 and fp16."""
        torch = import_torch()
        x = torch.ones(2, 2, 8, device=device, requires_grad=True)
        out, _ = torch.nn.LSTM(8, 8).to(device)(x)
        out.sum().backward()
        for dtype in (torch.float32, torch.float16):
            a = torch.ones(8, 8, device=device, dtype=dtype)
            a @ a
        torch.cuda.synchronize()

    once_per_process(f"torch:{device}", warm)


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


class TorchFramework(FrameworkBackend):
    """Whether torch can be imported here, and whether it sees a CUDA GPU with cuDNN."""

    framework = "torch"
    install = "pip install 'pytest-rnnperf[torch]'"

    def load_framework(self) -> Any:
        """Import torch."""
        return import_torch()

    def device_problem(self) -> str | None:
        """None when torch sees a CUDA GPU with cuDNN, else a one-line reason."""
        torch = import_torch()
        if not torch.cuda.is_available():
            built = torch.version.cuda or "none (CPU build)"
            return f"no CUDA GPU visible to torch {torch.__version__} (built for CUDA {built})"
        if not torch.backends.cudnn.is_available():
            return f"torch {torch.__version__} sees a GPU but cuDNN is not available"
        return None
