"""PyTorch backend: ``nn.LSTM/GRU/RNN`` on cuDNN versus the same module with cuDNN disabled (ATen).

torch is imported only when a pair is built or runtime info is read, never when this module loads.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from . import IMPLS, BackendUnavailable, CaseInputs, ImplResult, OutOfDeviceMemory, PathProof

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ..cases import Case
    from ..reference import RNNWeights

# Op names the profiler shows for each path. cuDNN: aten::_cudnn_rnn (+ its backward). The generic
# CUDA path runs per-timestep fused cells or plain matmuls; on the CPU oneDNN would take over, so the
# generic side also disables mkldnn to stay on the plain ATen loop.
_CUDNN_OPS = ("aten::_cudnn_rnn", "aten::_cudnn_rnn_backward")
_MKLDNN_OPS = ("aten::mkldnn_rnn_layer",)


def _torch() -> Any:
    """Import torch on first use."""
    import torch

    return torch


def _dtype(precision: str) -> Any:
    """Parameter/activation dtype of a precision mode."""
    torch = _torch()
    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)


@contextlib.contextmanager
def precision_flags(impl: str, precision: str, device: str = "cuda") -> Iterator[None]:
    """Pin cuDNN on/off and TF32 for cuDNN *and* matmul, so both sides run the declared precision mode.

    torch's cuDNN RNN allows TF32 by default while cuBLAS matmul does not, so without this pin the two
    paths differ by ~3e-4 relative for reasons unrelated to either implementation.
    """
    torch = _torch()
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


def injected_cycles(case_id: str, environ: dict[str, str] | None = None) -> int:
    """GPU spin cycles to add to each cuDNN step of ``case_id`` per RNNPERF_INJECT_CUDNN_DELAY_US.

    The value is ``<case-id glob>=<microseconds>`` (comma-separated for several). It exists to prove the
    regression detector on real hardware: the delay is device time (a spin kernel), and the variable
    shows up in the environment fingerprint, so the report names it as the cause.
    """
    import fnmatch

    from ..session import INJECT_ENV

    spec = (os.environ if environ is None else environ).get(INJECT_ENV, "")
    for part in filter(None, (p.strip() for p in spec.split(","))):
        pattern, _, micros = part.rpartition("=")
        if pattern and fnmatch.fnmatch(case_id, pattern):
            try:
                us = float(micros)
            except ValueError:
                raise BackendUnavailable(f"{INJECT_ENV}: {part!r} is not <glob>=<microseconds>") from None
            clock_mhz = 1500.0
            try:  # cycles per microsecond = SM clock in MHz; fall back to a typical datacenter clock
                clock_mhz = _torch().cuda.get_device_properties(0).clock_rate / 1e3
            except Exception:
                pass
            return int(us * clock_mhz)
    return 0


@contextlib.contextmanager
def _no_onednn() -> Iterator[None]:
    """oneDNN off (the CPU generic side must be the plain ATen loop), without torch's TF32 notice.

    Entering mkldnn.flags re-sets oneDNN's TF32 switch, and CPU builds warn on every step that TF32 on
    oneDNN needs an Intel GPU: noise about a feature no case uses.
    """
    torch = _torch()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")
        with torch.backends.mkldnn.flags(enabled=False):
            yield


def _module_class(cell: str) -> tuple[Any, dict[str, Any]]:
    """nn class and extra constructor arguments for a canonical cell name."""
    nn = _torch().nn
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
    torch = _torch()
    cls, extra = _module_class(case.cell)
    s = case.shape
    module = cls(
        s.input_size, s.hidden_size, num_layers=s.num_layers, bidirectional=s.bidirectional, **extra
    )
    names = _param_names(s.num_layers, s.directions)
    with torch.no_grad():
        for name, array in zip(names, weights.flat(), strict=True):
            getattr(module, name).copy_(torch.from_numpy(np.ascontiguousarray(array)))
    module = module.to(device=device, dtype=_dtype(case.precision))
    if device.startswith("cuda"):
        # A dtype cast leaves the weights outside cuDNN's single flat buffer; without this, cuDNN
        # compacts them on every call and the cuDNN side is billed for a copy it would not do in training.
        # (A no-op for bf16, which torch's cuDNN dtype list lacks: there the copy is what training pays too.)
        module.flatten_parameters()
    return module


def _to_numpy(t: Any) -> np.ndarray:
    """Detach, move to host and widen to float64."""
    return t.detach().to("cpu", dtype=_torch().float64).numpy()


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

    def __post_init__(self) -> None:
        """Move the timing inputs to the device once, so no step copies from the host."""
        self._x, self._grads = self._device_inputs(self.inputs)
        if self.name == "cudnn" and self.device.startswith("cuda"):
            self._inject_cycles = injected_cycles(self.case.id)

    def _device_inputs(self, inputs: CaseInputs) -> tuple[Any, tuple[Any, ...]]:
        """Input and upstream gradients as device tensors of the case's dtype."""
        torch = _torch()
        dt = _dtype(self.case.precision)

        def dev(a: np.ndarray) -> Any:
            return torch.from_numpy(np.ascontiguousarray(a)).to(self.device, dtype=dt)

        x = dev(inputs.x).requires_grad_(self.case.mode == "train")
        grads: tuple[Any, ...] = (dev(inputs.d_output), dev(inputs.d_h_n))
        if inputs.d_c_n is not None:
            grads += (dev(inputs.d_c_n),)
        return x, grads

    def _run(self, x: Any, grads: tuple[Any, ...], want_grads: bool) -> tuple[Any, Any, Any, tuple[Any, ...]]:
        """Forward (+ backward via autograd.grad, which returns gradients instead of accumulating them)."""
        torch = _torch()
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
            _torch().cuda._sleep(self._inject_cycles)  # injected device-side delay (testing the detector)

    def result(self, inputs: CaseInputs | None = None) -> ImplResult:
        """Outputs and gradients for ``inputs`` (default: the timing inputs) as float64 canonical arrays."""
        from ..reference import RNNWeights

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
        torch = _torch()
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.device.startswith("cuda"):
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "profiler clears events at the end of each cycle"
            with torch.profiler.profile(activities=activities) as prof:
                self.step()
                if self.device.startswith("cuda"):
                    torch.cuda.synchronize()
        names = {e.name for e in prof.events()}
        cudnn_ops = sorted(n for n in names if n in _CUDNN_OPS)
        # cuDNN's RNN kernels are named RNN_* / *rnn* / cudnn*; count them as supporting evidence only.
        kernels = sorted(n for n in names if not n.startswith(("aten::", "autograd::", "cuda", "Activity"))
                         and ("rnn" in n.lower() or "cudnn" in n.lower()))
        onednn = sorted(n for n in names if n in _MKLDNN_OPS)
        if self.name == "cudnn":
            ok = bool(cudnn_ops)
            evidence = (f"ops {', '.join(cudnn_ops)}" if cudnn_ops else "no aten::_cudnn_rnn op ran")
        else:
            ok = not cudnn_ops and not onednn
            generic = sorted(n for n in names if n.startswith("aten::_thnn_fused") or n in (
                "aten::lstm_cell", "aten::gru_cell", "aten::rnn_tanh_cell", "aten::rnn_relu_cell", "aten::addmm"))
            evidence = ("cuDNN ops ran: " + ", ".join(cudnn_ops + onednn)) if not ok else (
                "no cuDNN op; generic ops " + (", ".join(generic[:4]) or "(matmul loop)"))
        if kernels:
            evidence += f"; {len(kernels)} RNN kernel name(s), e.g. {kernels[0][:60]}"
        return PathProof(impl=self.name, ok=ok, evidence=evidence)


@dataclass
class TorchPair:
    """cuDNN and generic torch modules with identical weights on one device."""

    cudnn: TorchImpl | None
    generic: TorchImpl | None
    device: str

    def sync(self) -> None:
        """Wait for queued CUDA work; a no-op on the CPU."""
        if self.device.startswith("cuda"):
            _torch().cuda.synchronize()

    def close(self) -> None:
        """Drop the modules and return cached blocks to the driver, so the next case starts clean."""
        self.cudnn = self.generic = None
        if self.device.startswith("cuda"):
            _torch().cuda.empty_cache()


class TorchBackend:
    """Builds torch pairs; says why it cannot (torch missing, no CUDA GPU, no cuDNN)."""

    name = "torch"

    def unavailable_reason(self) -> str | None:
        """None when torch is importable, else a one-line reason."""
        if importlib.util.find_spec("torch") is None:
            return "torch is not installed (pip install 'pytest-rnnperf[torch]')"
        return None

    def gpu_unavailable_reason(self) -> str | None:
        """None when torch sees a CUDA GPU with cuDNN, else a one-line reason."""
        reason = self.unavailable_reason()
        if reason:
            return reason
        torch = _torch()
        if not torch.cuda.is_available():
            built = torch.version.cuda or "none (CPU build)"
            return f"no CUDA GPU visible to torch {torch.__version__} (built for CUDA {built})"
        if not torch.backends.cudnn.is_available():
            return f"torch {torch.__version__} sees a GPU but cuDNN is not available"
        return None

    def runtime_info(self) -> dict[str, str]:
        """torch version, CUDA/cuDNN and precision flags (imports torch)."""
        from ..environment import torch_runtime_info

        return torch_runtime_info()

    def build(
        self, case: "Case", weights: "RNNWeights", inputs: CaseInputs, impls: tuple[str, ...] = IMPLS
    ) -> TorchPair:
        """Build the requested sides on the GPU (cuDNN needs one) or on the CPU for generic-only pairs."""
        reason = self.unavailable_reason()
        if reason:
            raise BackendUnavailable(reason)
        torch = _torch()
        if "cudnn" in impls:
            reason = self.gpu_unavailable_reason()
            if reason:
                raise BackendUnavailable(reason)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        if case.precision in ("fp16", "bf16") and device == "cpu":
            raise BackendUnavailable(f"{case.precision} RNNs need a CUDA GPU (no half-precision CPU path is compared)")
        try:
            sides = {}
            for impl in impls:
                # One module per side, built from the same canonical weights: cuDNN keeps a flattened
                # weight buffer of its own, and neither side should see the other's state.
                module = build_module(case, weights, device)
                sides[impl] = TorchImpl(impl, case, module, device, inputs, weights)
            pair = TorchPair(cudnn=sides.get("cudnn"), generic=sides.get("generic"), device=device)
            # One untimed step per side surfaces out-of-memory here, where it becomes a skip.
            for side in sides.values():
                side.step()
            pair.sync()
            return pair
        except torch.cuda.OutOfMemoryError as exc:
            torch.cuda.empty_cache()
            first = str(exc).splitlines()[0][:160]
            raise OutOfDeviceMemory(f"{case.id} does not fit in GPU memory: {first}") from None


def get_backend() -> TorchBackend:
    """The torch backend (entry point used by ``load_backend``)."""
    return TorchBackend()


__all__ = ["TorchBackend", "TorchImpl", "TorchPair", "build_module", "get_backend", "precision_flags"]
