"""PyTorch backend: ``nn.LSTM/GRU/RNN`` on cuDNN versus the same module with cuDNN disabled (ATen).

torch is imported only when a pair is built or runtime info is read, never when this module loads.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_rnnperf.backends import (
    IMPLS, BackendSpec, BackendUnavailable, ModelError, ModelOptions, OutOfDeviceMemory, empty_input, require_usable,
)
from pytest_rnnperf.backends.cold import first_calls, first_of_process
from pytest_rnnperf.backends.torch_common import (  # the eager torch pieces every torch backend shares
    CPU_THREADS, TORCH_KEYS, OnDevice, TorchFramework, TorchImpl, build_module, build_on_device, dispatched_ops,
    import_torch, injected_no_tensor_op, precision_flags, prove_path, torch_dtype, torch_runtime_info, warm_cuda,
    _to_numpy,
)
from pytest_rnnperf.model.cases import CELLS
from pytest_rnnperf.model.cold import ColdCost
from pytest_rnnperf.model.reference import CaseInputs
from pytest_rnnperf.model.results import PathProof

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import Case, ModelCase
    from pytest_rnnperf.model.reference import RNNWeights

SPEC = BackendSpec(
    name="torch", title="PyTorch", module=__name__, cudnn_cells=CELLS,
    distributions={"torch": ("torch",)}, runtime_prefix="torch.",
    key_fields=("torch.cuda_build", "torch.cudnn_version", "torch.cudnn_allow_tf32", "torch.matmul_allow_tf32",
                "torch.float32_matmul_precision", "torch.cudnn_rnn_fp32_precision", "torch.cudnn_benchmark",
                "torch.cudnn_deterministic", "torch.deterministic_algorithms"),
    can_inject=True, model_modules=("torch",),
)


def _side_precision(case: "Case", impl: str, device: str) -> str:
    """The precision a side's math runs in: the case's, but IEEE float32 for the GPU cuDNN side of an fp16, bf16 or
    tf32 case that RNNPERF_INJECT_NO_TENSOR_OP names (its kernels then show no tensor-op math, as in a cuDNN bug)."""
    if impl == "cudnn" and device.startswith("cuda") and case.precision != "fp32" and injected_no_tensor_op(case.id):
        return "fp32"
    return case.precision


@dataclass
class TorchPair(OnDevice):
    """cuDNN and generic torch modules with identical weights on one device."""

    cudnn: TorchImpl | None
    generic: TorchImpl | None
    device: str
    restore_threads: int = 0  # torch's thread count before this CPU pair pinned it (0: untouched)
    cold: ColdCost | None = None  # each side's first call after build


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


class TorchBackend(TorchFramework):
    """Builds torch pairs; says why it cannot (torch missing, no CUDA GPU, no cuDNN)."""

    name = "torch"

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
                precision = _side_precision(case, impl, device)
                module = build_module(case, weights, device, precision)
                sides[impl] = TorchImpl(impl, case, module, device, inputs, weights, precision)
            pair = TorchPair(cudnn=sides.get("cudnn"), generic=sides.get("generic"), device=device,
                             restore_threads=restore)
            # One untimed step per side surfaces out-of-memory here, where it becomes a skip; it is the side's
            # first call, timed after this process's one-time CUDA costs were paid (warm_cuda).
            warm_cuda(device)
            pair.cold = ColdCost(first_calls(sides, pair.sync, case.id), first=first_of_process("torch"))
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


__all__ = ["CPU_THREADS", "SPEC", "TORCH_KEYS", "TorchBackend", "TorchImpl", "TorchModelPair", "TorchPair",
           "build_module", "dispatched_ops", "get_backend", "precision_flags", "prove_path", "torch_runtime_info"]
