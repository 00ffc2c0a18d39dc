"""torch.compile backend: does a compiled module holding ``nn.LSTM``/``nn.GRU`` still run cuDNN, and how fast is it?

Two specs share this module. ``torch_compile`` compiles with dynamo's default config: in torch 2.13
``torch._dynamo.config.allow_rnn`` is False, dynamo refuses to wrap RNN modules (a graph break) and they run
eagerly, on cuDNN. ``torch_compile_rnn`` compiles with ``allow_rnn=True``: dynamo traces into the RNN and AOT
autograd's decomposition turns ``aten.lstm``/``aten.gru`` into a per-timestep cell loop that Inductor compiles
(pytorch#140845), so no cuDNN RNN runs unless a later torch keeps one.

A pair's "cudnn" side is the compiled module (cuDNN enabled, precision pinned as the torch backend pins it);
its "generic" side is the torch backend's eager module with cuDNN disabled; both hold the same canonical weights.
Compilation and its first call happen in ``build`` and are timed into ``pair.notes``, so a timed step only
ever runs graphs already compiled; a step that would compile again is caught (see ``CompiledPair.sync``).

Each spec runs in a subprocess of its own (its ``env`` marks it), and each build calls ``torch._dynamo.reset()`` first, which also drops graphs compiled by anything else in the
process: dynamo keeps its caches and "skip this frame" marks per code object, shared by every ``nn.LSTM``.
Without a reset an earlier default-config case makes a later ``allow_rnn`` case run eagerly (seen on torch
2.13), a second shape is compiled with dynamic sizes (automatic dynamic shapes), and enough cases reach the
recompile limit (``cache_size_limit``, 8), past which dynamo runs the module eagerly. One graph per build
stays far from it.

torch is imported only when a pair is built or runtime info is read, never when this module loads.
"""

from __future__ import annotations

import contextlib
import importlib
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from pytest_rnnperf.backends import IMPLS, BackendSpec, BackendUnavailable, OutOfDeviceMemory, require_usable
from pytest_rnnperf.backends.base import get_value, runtime_info
from pytest_rnnperf.backends.cold import cold_delay_s, first_calls, first_of_process, once_per_process
from pytest_rnnperf.backends.compile_cache import configure_inductor
from pytest_rnnperf.model.cold import ColdCost, cache_state
from pytest_rnnperf.model.reference import CaseInputs
from pytest_rnnperf.model.results import ImplResult, PathProof
from pytest_rnnperf.backends.torch_common import (
    TORCH_KEYS, OnDevice, TorchFramework, TorchImpl, build_module, build_on_device, import_torch, torch_info,
    warm_cuda,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import Case
    from pytest_rnnperf.model.reference import RNNWeights

COMPILED_CELLS: tuple[str, ...] = ("lstm", "gru")
# Inductor is what torch.compile runs by default; tests choose "eager" or "aot_eager" (the same dynamo graph,
# run by ATen ops), because Inductor spends ~30 s compiling even a 4-step LSTM on a CPU.
DEFAULT_COMPILE_BACKEND = "inductor"
# The eager cuDNN figure of the notes: a few synchronized steps after a warm-up, median (reported, never judged).
EAGER_WARMUP = 3
EAGER_STEPS = 10
_CUDNN_OPS = ("aten::_cudnn_rnn", "aten::_cudnn_rnn_backward")
_RNN_OPS = ("aten::lstm", "aten::gru", "aten::mkldnn_rnn_layer", "aten::mkldnn_rnn_layer_backward")
_MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::matmul")
# Fields copied from the torch backend's runtime info that make compiled timings comparable (under our prefix).
_TORCH_KEY_FIELDS: tuple[str, ...] = (
    "cuda_build", "cudnn_version", "cudnn_allow_tf32", "matmul_allow_tf32", "float32_matmul_precision",
    "cudnn_rnn_fp32_precision", "cudnn_benchmark", "cudnn_deterministic", "deterministic_algorithms",
)
_COMPILE_FIELDS: tuple[str, ...] = ("dynamo_allow_rnn", "compile_backend", "triton_version", "torch_version")


def _spec(name: str, title: str, factory: str) -> BackendSpec:
    """One of the two specs: they differ in name, title, factory and runtime prefix only."""
    prefix = f"{name}."
    return BackendSpec(
        name=name, title=title, module=f"{__name__}:{factory}", cudnn_cells=COMPILED_CELLS,
        distributions={"torch": ("torch",)}, runtime_prefix=prefix,
        key_fields=tuple(prefix + k for k in ("dynamo_allow_rnn", "compile_backend", "triton_version",
                                              *_TORCH_KEY_FIELDS)),
        cross=False, cells=COMPILED_CELLS, reference=False,
        # A process of its own: dynamo's resets, caches and the profiler of the proof never touch eager cases.
        env={"RNNPERF_SUBPROCESS": name}, compiles=True,
    )


SPEC = _spec("torch_compile", "PyTorch torch.compile", "get_backend")
SPEC_RNN = _spec("torch_compile_rnn", "PyTorch torch.compile (allow_rnn)", "get_rnn_backend")


def _dynamo() -> Any:
    """torch._dynamo, imported on first use (it pulls in much of torch's compiler stack), Inductor's cache set first."""
    configure_inductor()
    return importlib.import_module("torch._dynamo")


def _triton_version() -> str:
    """The installed Triton distribution's version (Inductor's GPU code generator), from its metadata."""
    for dist in ("triton", "pytorch-triton"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    raise LookupError("triton is not installed")


def compile_runtime_info(prefix: str, allow_rnn: bool | None, compile_backend: str) -> dict[str, str]:
    """The torch fields of the torch backend under ``prefix``, plus dynamo's allow_rnn, the compiler and Triton."""
    keys = tuple(prefix + k.split(".", 1)[1] for k in TORCH_KEYS) + tuple(prefix + k for k in _COMPILE_FIELDS)

    def read(torch: Any) -> dict[str, str]:
        """torch's own fields re-keyed, then the compile fields."""
        info = {prefix + k.split(".", 1)[1]: v for k, v in torch_info(torch).items()}
        info[prefix + "dynamo_allow_rnn"] = get_value(
            lambda: allow_rnn if allow_rnn is not None else _dynamo().config.allow_rnn)
        info[prefix + "compile_backend"] = compile_backend
        info[prefix + "triton_version"] = get_value(_triton_version)
        info[prefix + "torch_version"] = get_value(lambda: torch.__version__)
        return info

    return runtime_info("torch", keys, read)


@dataclass
class DynamoLog:
    """What dynamo did while compiling one module: the graphs it handed the compiler and its graph breaks."""

    compile_backend: str
    graphs: list[list[str]] = field(default_factory=list)  # per FX graph: the functions it calls
    breaks: dict[str, int] = field(default_factory=dict)  # first line of each graph-break reason -> count
    compiled_after_build: int = 0  # graphs compiled after build finished (must stay 0: see CompiledPair.sync)
    built: bool = False
    compile_s: float | None = None  # the first call, which compiled (None until it ran)
    # The spec asked dynamo to trace into the RNN (allow_rnn): a break at it, or no graph, means nothing was compiled.
    # Under dynamo's default config that break is the documented behaviour (docs/known-issues.md), named, not failed.
    traces_rnn: bool = False
    cache: str = ""  # how the compile caches served it (model.cold: "hit", "miss", "" for none)

    def backend(self) -> Any:
        """A torch.compile backend that records each FX graph, then hands it to the real compiler unchanged."""
        compiler = _dynamo().lookup_backend(self.compile_backend)

        def record(gm: Any, example_inputs: Any) -> Any:
            """Note the graph's called functions (torch.lstm when dynamo traced the RNN) and compile it."""
            if self.built:
                self.compiled_after_build += 1
            self.graphs.append([getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes
                                if n.op == "call_function"])
            return compiler(gm, example_inputs)

        return record

    def summary(self) -> str:
        """E.g. "dynamo: 0 graphs; graph break 'Attempted to wrap RNN, GRU, or LSTM' x1 (the RNN ran eagerly)"."""
        rnn_calls = sorted({f"torch.{name}" for g in self.graphs for name in g if name in ("lstm", "gru")})
        text = f"dynamo ({self.compile_backend}): {len(self.graphs)} graph(s)"
        if rnn_calls:
            text += f" calling {', '.join(rnn_calls)} (dynamo traced the RNN)"
        if not self.breaks:
            return text + "; no graph break"
        reasons = "; ".join(f"'{reason}' x{count}" for reason, count in self.breaks.items())
        rnn_break = any("RNN" in reason or "LSTM" in reason for reason in self.breaks)
        return text + f"; graph break {reasons}" + (" (the RNN module ran eagerly)" if rnn_break else "")

    def problem(self) -> str | None:
        """Why nothing was compiled around the RNN (no graph, or a graph break at it), from dynamo's counters; else None.

        Either way the "compiled" side ran the RNN eagerly: its timing says nothing about torch.compile.
        """
        if not self.traces_rnn:
            return None
        rnn_breaks = [reason for reason in self.breaks if any(word in reason for word in ("RNN", "LSTM", "GRU"))]
        if rnn_breaks:
            return f"torch.compile broke the graph at the RNN ('{rnn_breaks[0]}'): the RNN ran eagerly, uncompiled"
        if not self.graphs:
            return "torch.compile compiled 0 graphs: the module ran eagerly, uncompiled"
        return None


def _graph_breaks() -> Counter[str]:
    """Dynamo's graph-break counter (reason -> count), copied."""
    from torch._dynamo.utils import counters

    return Counter(counters["graph_break"])


def _cache_counts() -> tuple[int, int]:
    """Hits and misses of the compile caches (AOT autograd, Inductor's FX graph cache) so far in this process."""
    from torch._dynamo.utils import counters

    hits = misses = 0
    for group in counters.values():
        for key, count in group.items():
            hits += count if key.endswith("cache_hit") else 0
            misses += count if key.endswith("cache_miss") else 0
    return hits, misses


@contextlib.contextmanager
def _no_recompile() -> Iterator[None]:
    """Raise rather than compile again: a result or proof must come from the graph the timed steps run."""
    with import_torch().compiler.set_stance("fail_on_recompile"):
        yield


@dataclass
class CompiledImpl(TorchImpl):
    """The compiled side: ``module`` is the ``torch.compile`` wrapper of an nn.LSTM/GRU, run on the cuDNN flags."""

    dynamo: DynamoLog | None = None
    # Dynamo reads allow_rnn when it traces; the patch is entered around every call (a patch object made
    # once costs ~8 us to enter, one made per call ~130 us, which the timed step would pay).
    _config: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """Move the timing inputs to the device once; no injected faults (the spec says can_inject=False)."""
        self._x, self._grads = self._device_inputs(self.inputs)
        self._step_x, self._step_grads = self._x, self._grads  # a longer step would compile again

    def _run(self, x: Any, grads: tuple[Any, ...], want_grads: bool) -> tuple[Any, Any, Any, tuple[Any, ...]]:
        """The torch backend's forward (+ backward) under this side's dynamo config."""
        with self._config if self._config is not None else contextlib.nullcontext():
            return super()._run(x, grads, want_grads)

    def result(self, inputs: CaseInputs | None = None) -> ImplResult:
        """Outputs and gradients for ``inputs``, run through the compiled graph of the timing inputs' shape.

        A smaller batch would make dynamo compile again (a dynamic-batch graph that later steps might pick),
        so it is padded with the timing inputs' other sequences under zero upstream gradients: sequences are
        independent, the padding adds exact zeros to the weight gradients, and the sliced rows are the answer.
        """
        with _no_recompile():
            if inputs is None:
                return super().result()
            n, full = inputs.x.shape[1], self.inputs.x.shape[1]
            if inputs.x.shape[0] != self.inputs.x.shape[0] or inputs.x.shape[2:] != self.inputs.x.shape[2:] or n > full:
                raise ValueError(f"compiled for inputs of shape {self.inputs.x.shape}; {inputs.x.shape} would "
                                 "compile again (same length, at most as many sequences)")
            got = super().result(_padded(inputs, self.inputs) if n < full else inputs)
        return ImplResult(
            output=got.output[:, :n], h_n=got.h_n[:, :n], c_n=None if got.c_n is None else got.c_n[:, :n],
            d_input=None if got.d_input is None else got.d_input[:, :n], d_weights=got.d_weights,
        )

    def prove_path(self) -> PathProof:
        """Profile one step of the compiled module and combine the ops that ran with what dynamo reported.

        Not the torch backend's dispatch-mode recorder: dynamo skips frames while a TorchDispatchMode is active
        and marks them to be skipped from then on, so the recorder would see (and leave behind) an eager module.
        """
        with _no_recompile():
            names = profiled_ops(self.step, self.device)
        return compiled_proof(names, self.dynamo, self.case.shape.seq_len)


def _padded(small: CaseInputs, full: CaseInputs) -> CaseInputs:
    """``small``'s sequences, then ``full``'s remaining ones under zero upstream gradients (``full``'s batch)."""
    n = small.x.shape[1]

    def pad(a: np.ndarray, rest: np.ndarray, zero: bool) -> np.ndarray:
        """``a`` followed by ``rest``'s sequences from ``n`` on, or zeros of their shape."""
        return np.concatenate([a, np.zeros_like(rest[:, n:]) if zero else rest[:, n:]], axis=1)

    return CaseInputs(
        x=pad(small.x, full.x, zero=False), d_output=pad(small.d_output, full.d_output, zero=True),
        d_h_n=pad(small.d_h_n, full.d_h_n, zero=True),
        d_c_n=None if small.d_c_n is None or full.d_c_n is None else pad(small.d_c_n, full.d_c_n, zero=True),
    )


def profiled_ops(step: Any, device: str) -> Counter[str]:
    """How often each profiler event (ATen ops, "Torch-Compiled Region ...", ...) occurred in one ``step``.

    The profiler sees the ATen ops a compiled graph calls (its extern kernels such as mm, or an RNN op left
    eager) but not the code Inductor generated itself (fused pointwise kernels are no ATen ops).
    """
    torch = import_torch()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    return Counter(event.name for event in prof.events())


def compiled_proof(names: Counter[str], dynamo: DynamoLog | None, seq_len: int) -> PathProof:
    """ok when a cuDNN RNN op ran; the evidence says what dynamo compiled and which RNN ops the step ran."""
    cudnn = sorted(n for n in names if n in _CUDNN_OPS)
    regions = sum(c for n, c in names.items() if n.startswith("Torch-Compiled Region"))
    parts = [dynamo.summary()] if dynamo is not None else []
    parts.append(f"compiled region ran {regions}x in the step" if regions else "no compiled region ran in the step")
    if cudnn:
        parts.append(f"ops {', '.join(cudnn)}")
    else:
        rnn = sorted(n for n in names if n in _RNN_OPS)
        matmuls = ", ".join(f"{n} x{names[n]}" for n in sorted(names) if n in _MATMUL_OPS)
        parts.append("no aten::_cudnn_rnn op" + (f"; RNN ops {', '.join(rnn)}" if rnn else "; no RNN op")
                     + (f"; matmul ops {matmuls} (T={seq_len})" if matmuls and not rnn else ""))
    if dynamo is not None and dynamo.compiled_after_build:
        parts.append(f"{dynamo.compiled_after_build} graph(s) compiled after build")
    problem = dynamo.problem() if dynamo is not None else None
    if problem:
        parts.insert(0, problem)
    return PathProof(impl="cudnn", ok=bool(cudnn) and problem is None, evidence="; ".join(parts))


def _median_step_s(run: Any, device: str) -> float:
    """Median seconds of EAGER_STEPS synchronized calls of ``run`` after EAGER_WARMUP unmeasured ones."""
    torch = import_torch()
    times = []
    for i in range(EAGER_WARMUP + EAGER_STEPS):
        started = time.perf_counter()
        run()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if i >= EAGER_WARMUP:
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def compile_side(case: "Case", weights: "RNNWeights", inputs: CaseInputs, device: str, allow_rnn: bool | None,
                 compile_backend: str = DEFAULT_COMPILE_BACKEND) -> tuple[CompiledImpl, tuple[str, ...]]:
    """The compiled side on ``device`` (a CPU too: tests put it where cuDNN would be) and its notes.

    ``allow_rnn`` None keeps dynamo's own setting (the default config); True or False is patched in around
    the compile and every call. The first call (forward and, in train mode, backward) compiles and is timed.
    """
    torch = import_torch()
    dynamo = _dynamo()
    # The compiler stack's one-time costs (its imports, Triton's driver, Inductor's compile workers) go to a tiny
    # function first, so no case's compile time depends on whether it was the first of its process.
    once_per_process(f"compile:{compile_backend}:{device}", lambda: torch.compile(
        lambda a: torch.sin(a) * 2, backend=compile_backend)(torch.ones(8, device=device)))
    dynamo.reset()  # see the module docstring: caches and skip marks are per code object, shared by all LSTMs
    log = DynamoLog(compile_backend, traces_rnn=bool(allow_rnn if allow_rnn is not None else dynamo.config.allow_rnn))
    config = dynamo.config.patch(allow_rnn=allow_rnn) if allow_rnn is not None else None
    module = build_module(case, weights, device)
    with config if config is not None else contextlib.nullcontext():
        compiled = torch.compile(module, backend=log.backend())
    impl = CompiledImpl("cudnn", case, compiled, device, inputs, weights, dynamo=log, _config=config)
    warm_cuda(device)  # this process's one-time CUDA costs are no part of the compile time
    breaks, caches = _graph_breaks(), _cache_counts()
    delay = cold_delay_s(case.id)
    started = time.perf_counter()
    impl.step()
    if delay:
        time.sleep(delay)  # RNNPERF_INJECT_COLD_DELAY_MS: inside the first call only
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    log.breaks = {reason.strip().splitlines()[0]: count for reason, count in (_graph_breaks() - breaks).items()}
    log.built = True
    hits, misses = (now - before for now, before in zip(_cache_counts(), caches))
    log.compile_s, log.cache = seconds, cache_state(hits, misses)
    what = "forward and backward" if case.mode == "train" else "forward"
    notes = [f"compiled in {seconds:.2f} s (first call, {what}; {len(log.graphs)} dynamo graph(s), "
             f"compile caches {hits} hit(s), {misses} miss(es))"]
    if device.startswith("cuda"):
        # The same module uncompiled, on the same flags: what torch.compile adds or saves against eager cuDNN.
        eager = TorchImpl("cudnn", case, compiled._orig_mod, device, inputs, weights)
        train = case.mode == "train"
        eager_s = _median_step_s(lambda: eager._run(eager._x, eager._grads, train), device)
        compiled_s = _median_step_s(lambda: impl._run(impl._x, impl._grads, train), device)
        notes.append(f"eager cuDNN {eager_s * 1e3:.3g} ms per step, compiled {compiled_s * 1e3:.3g} ms "
                     f"(same module, median of {EAGER_STEPS} synchronized steps; the timing compares compiled "
                     "with generic)")
    if log.compiled_after_build:
        raise RuntimeError(f"{case.id}: dynamo compiled again after the first call")
    return impl, tuple(notes)


@dataclass
class CompiledPair(OnDevice):
    """The compiled module (cuDNN flags) and the eager generic module, with identical weights, on one device."""

    cudnn: CompiledImpl | None
    generic: TorchImpl | None
    device: str
    notes: tuple[str, ...] = ()
    restore_threads: int = 0  # torch's thread count before this CPU pair pinned it (0: untouched)
    # The compile (the compiled side's first call) and the generic side's first call; the compile stands for
    # the compiled side's first call, which it is.
    cold: ColdCost | None = None

    def sync(self) -> None:
        """Wait for queued CUDA work; fail if the compiled side compiled anything since build (timed a compile)."""
        super().sync()
        if self.cudnn is not None and self.cudnn.dynamo is not None and self.cudnn.dynamo.compiled_after_build:
            raise RuntimeError(f"{self.cudnn.case.id}: dynamo compiled {self.cudnn.dynamo.compiled_after_build} "
                               "graph(s) after build, so a timed step included compilation")

    def close(self) -> None:
        """Drop the sides and dynamo's compiled graphs (they hold the module), then free cached GPU memory."""
        self.cudnn = self.generic = None
        _dynamo().reset()
        super().close()


class TorchCompileBackend(TorchFramework):
    """Builds compiled-versus-generic torch pairs; says why it cannot (torch, dynamo, Triton, GPU)."""

    def __init__(self, spec: BackendSpec, allow_rnn: bool | None,
                 compile_backend: str = DEFAULT_COMPILE_BACKEND) -> None:
        """One of the two specs, its allow_rnn setting (None: dynamo's default) and the compiler to use."""
        self.spec = spec
        self.name = spec.name
        self.allow_rnn = allow_rnn  # None: dynamo's own setting
        self.compile_backend = compile_backend

    def usable_problem(self) -> str | None:
        """None when torch.compile can be used with the imported torch, else a one-line reason."""
        torch = import_torch()
        check = getattr(importlib.import_module("torch._dynamo.eval_frame"), "check_if_dynamo_supported", None)
        try:
            if check is not None:
                check()
        except Exception as exc:  # e.g. a Python version this torch's dynamo does not support yet
            return f"torch.compile is not usable with torch {torch.__version__}: {str(exc).strip()[:160]}"
        if self.compile_backend == "inductor" and torch.cuda.is_available():
            from torch.utils._triton import has_triton

            if not has_triton():
                return (f"torch.compile's Inductor needs Triton for CUDA and torch {torch.__version__} finds none "
                        "usable (torch.utils._triton.has_triton() is False)")
        return None

    def runtime_info(self) -> dict[str, str]:
        """torch's CUDA/cuDNN and precision fields under this spec's prefix, plus allow_rnn, compiler and Triton."""
        return compile_runtime_info(self.spec.runtime_prefix, self.allow_rnn, self.compile_backend)

    def build(self, case: "Case", weights: "RNNWeights", inputs: CaseInputs,
              impls: tuple[str, ...] = IMPLS) -> CompiledPair:
        """Compile the cuDNN side (timed, into the notes) and build the eager generic side, on the GPU."""
        if case.cell not in COMPILED_CELLS:
            raise BackendUnavailable(f"{self.name} checks {', '.join(COMPILED_CELLS)} only, not {case.cell}")
        require_usable(self, impls)
        return build_on_device(case.precision,
                               lambda device, restore: self._build(case, weights, inputs, impls, device, restore))

    def _build(self, case: "Case", weights: "RNNWeights", inputs: CaseInputs, impls: tuple[str, ...], device: str,
               restore: int) -> CompiledPair:
        """build's work, once the device and its thread count are settled."""
        torch = import_torch()
        try:
            compiled, notes = (compile_side(case, weights, inputs, device, self.allow_rnn, self.compile_backend)
                               if "cudnn" in impls else (None, ()))
            generic = None
            if "generic" in impls:
                generic = TorchImpl("generic", case, build_module(case, weights, device), device, inputs, weights)
            pair = CompiledPair(cudnn=compiled, generic=generic, device=device, notes=notes, restore_threads=restore)
            # The generic side's first call surfaces out-of-memory here, where it becomes a skip.
            calls = first_calls({"generic": generic}, pair.sync, case.id)
            log = compiled.dynamo if compiled is not None else None
            first = first_of_process("torch_compile")
            pair.cold = (ColdCost(calls, log.compile_s, log.cache, first) if log is not None
                         else ColdCost(calls, first=first))
            pair.sync()
            return pair
        except torch.cuda.OutOfMemoryError as exc:
            torch.cuda.empty_cache()
            raise OutOfDeviceMemory(f"{case.id} does not fit in GPU memory: {str(exc).splitlines()[0][:160]}") from None


def get_backend() -> TorchCompileBackend:
    """torch.compile with dynamo's default config (entry point of SPEC)."""
    return TorchCompileBackend(SPEC, allow_rnn=None)


def get_rnn_backend() -> TorchCompileBackend:
    """torch.compile with ``allow_rnn=True`` while compiling and running the module (entry point of SPEC_RNN)."""
    return TorchCompileBackend(SPEC_RNN, allow_rnn=True)


__all__ = ["CompiledImpl", "CompiledPair", "DynamoLog", "SPEC", "SPEC_RNN", "TorchCompileBackend", "compile_side",
           "compiled_proof", "get_backend", "get_rnn_backend", "profiled_ops"]
