"""The copies of a team's Keras model on each Keras backend: their steps, results, path proofs, and the pair.

One ``KerasModelSide`` per copy (cuDNN, generic, float64 reference). What a step is does not depend on the backend:
``train`` is a fit-like step (forward with training=True, the loss, gradients of every trainable weight, then the
optimizer's update when there is one) and ``infer`` is predict (forward with training=False); a team's own step
function replaces either. What differs is how a step is traced, differentiated and proven:

- TensorFlow: ``tf.function`` steps (no XLA: cuDNN ops are not XLA ops); proof by the traced graph's CudnnRNNV3
  (+ CudnnRNNBackpropV3) ops.
- torch: eager steps under ``torch.autograd``; proof by the ATen ops one step dispatches (aten::_cudnn_rnn).
- JAX: ``stateless_call`` inside one ``jax.jit``, as ``model.fit`` runs it; proof by the compiled HLO's cuDNN RNN
  custom calls. The float64 copy runs with 64-bit types enabled (JAX truncates float64 otherwise).

Parity results always come from the copy's weights as they were built (a timed step with an optimizer moves them).
"""

from __future__ import annotations

import contextlib
import gc
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from pytest_rnnperf.backends import IMPLS, ModelError, ModelOptions, OutOfDeviceMemory, empty_input
from pytest_rnnperf.backends.jax_common import JAX_MATMUL_PRECISION, cudnn_calls
from pytest_rnnperf.backends.keras_model import (
    FoundLayer, built_copy, capture_masks, case_framework, check_built, cudnn_units, description, find,
    flags_evidence, found_notes, host, judge_calls, leaves, loss_fn, loss_kind, loss_note, make_optimizer, merged,
    no_rnn, parity_batches, rebuilt, refusal, rnn_layers, upstream, without_dropout,
)
from pytest_rnnperf.backends.tf_common import graph_op_types
from pytest_rnnperf.backends.tf_common import precision_flags as tf_precision_flags
from pytest_rnnperf.backends.torch_common import precision_flags as torch_precision_flags
from pytest_rnnperf.backends.torch_common import dispatch_counts, torch_dtype
from pytest_rnnperf.model.results import PathProof

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import ModelCase

Named = dict[str, tuple[str, np.ndarray | None]]
# Float dtype of the compared copies per precision mode (TF32 is float32 with a math flag of the framework).
_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}


def _is_float(t: Any) -> bool:
    """Whether a tensor of any of the three frameworks holds floating-point values."""
    return "float" in str(getattr(t, "dtype", ""))


@dataclass
class Plan:
    """What every copy of one model shares: the case, the layers found, inputs, targets and upstream gradients."""

    case: "ModelCase"
    framework: str  # the Keras backend: tensorflow, torch or jax
    keras: Any
    found: list[FoundLayer]
    x: Any  # host structure of NumPy arrays
    y: Any
    d: list[np.ndarray]  # upstream gradients per float output (the "upstream" loss)
    loss: str  # "given", "compiled", "upstream" or "none" (infer)
    options: ModelOptions
    param_names: list[str]  # trainable weights' paths in the first build, the names parity compares by
    extra: list[Any] = field(default_factory=list)  # the parity_inputs= batches (host structures shaped like x)

    @property
    def train(self) -> bool:
        """Fit-like step (train) or predict (infer)."""
        return self.case.mode == "train"


class KerasModelSide:
    """One copy of the model on the device: its timed step, its results and its path proof."""

    what = ""  # the cuDNN calls the proof counts, e.g. "CudnnRNNV3"

    def __init__(self, name: str, model: Any, plan: Plan, wanted: list[bool], optimizer: Any, dtype: str,
                 device: str) -> None:
        """Bind the copy, move its inputs to the device and set up its steps."""
        self.name = name  # "cudnn", "generic" or "reference"
        self.model = model
        self.plan = plan
        self.wanted = wanted
        self.optimizer = optimizer
        self.dtype = dtype
        self.device = device
        self.layers = rnn_layers(plan.keras, model)
        self.last: Any = None  # what the last step returned (JAX syncs on it)
        self._given_loss = loss_fn(plan.keras, plan.options) if plan.loss == "given" else None
        with self.context():
            self.x = self._tensors(plan.x)
            self.batches = [self.x] + [self._tensors(batch) for batch in plan.extra]  # parity's batches
            self.y = None if plan.y is None else self._tensors(plan.y)
            self.d = [self.tensor(a) for a in plan.d]
            self._setup()

    # Framework parts ---------------------------------------------------------------------------------

    def context(self) -> Any:
        """What every computation of this copy runs inside (JAX's float64 copy: 64-bit types on)."""
        return contextlib.nullcontext()

    def tensor(self, a: np.ndarray) -> Any:
        """A host array as a device tensor: floats in this copy's dtype, integers as they are."""
        raise NotImplementedError

    def numpy(self, t: Any) -> np.ndarray:
        """A device tensor on the host as float64."""
        raise NotImplementedError

    def _setup(self) -> None:
        """Trace or prepare the steps."""

    def seen_forward(self) -> Callable[[Any], tuple[Any, list[Any]]]:
        """A function of a batch: the copy's inference forward on it, and the mask each RNN layer got (eager here)."""

        def forward(x: Any) -> tuple[Any, list[Any]]:
            """The forward, each layer's mask recorded as it is called."""
            masks, undo = capture_masks(self.layers)
            try:
                return self.model(x, training=False), list(masks)
            finally:
                undo()

        return forward

    def _timed(self) -> Any:
        """The plugin's own step: fit-like (train) or predict (infer)."""
        raise NotImplementedError

    def _outputs_and_grads(self) -> tuple[Any, list[Any], list[Any]]:
        """From the built weights: outputs, gradients of the trainable weights and of the float inputs (train)."""
        raise NotImplementedError

    def _calls(self) -> tuple[int, int, str]:
        """cuDNN RNN calls of one timed step: forward, backward, and what else the evidence should say."""
        raise NotImplementedError

    # Shared -------------------------------------------------------------------------------------------

    def _tensors(self, structure: Any) -> Any:
        """A host structure as device tensors."""
        return rebuilt(structure, iter(self.tensor(a) for _, a in leaves(structure, "x")))

    def loss_value(self, x: Any, y: Any, outputs: Any, d: list[Any]) -> Any:
        """The train step's loss of ``outputs``: the given loss, the compiled one, or <outputs, upstream gradients>."""
        ops = self.plan.keras.ops
        if self.plan.loss == "given":
            assert self._given_loss is not None
            return self._given_loss(y, outputs)
        if self.plan.loss == "compiled":
            return self.model.compute_loss(x=x, y=y, y_pred=outputs, training=True)
        floats = [t for _, t in leaves(outputs, "output") if _is_float(t)]
        return sum(ops.sum(o * ops.cast(g, o.dtype)) for o, g in zip(floats, d))

    def step(self) -> None:
        """One timed step; nothing is copied to the host and the device is not synchronized here."""
        with self.context():
            user = self.plan.options.step
            self.last = user(self.model, self.x, self.y) if user is not None else self._timed()

    def result(self, batch: int = 0) -> Named:
        """Every float output and, in train mode, every gradient, as float64 host arrays by name, for parity batch
        ``batch`` (0: the timed inputs)."""
        timed = self.x
        with self.context():
            self.x = self.batches[batch]
            try:
                outputs, d_params, d_inputs = self._outputs_and_grads()
            finally:
                self.x = timed
            named: Named = {n: ("forward", self.numpy(t)) for n, t in leaves(outputs, "output") if _is_float(t)}
            named.update({f"d_params[{n}]": ("gradient", self.numpy(g)) for n, g in zip(self.plan.param_names, d_params)})
            float_inputs = [n for n, a in leaves(self.plan.x, "input") if np.issubdtype(a.dtype, np.floating)]
            named.update({f"d_{n}": ("gradient", self.numpy(g)) for n, g in zip(float_inputs, d_inputs)})
        return named

    def prove_path(self) -> PathProof:
        """The cuDNN copy must make a cuDNN RNN call per eligible layer (+ backward when training), the generic
        copy none; every layer must have kept the use_cudnn flag it was given."""
        impl = "cudnn" if self.name == "cudnn" else "generic"
        with self.context():
            forward, backward, extra = self._calls()
        ok, evidence = judge_calls(impl, forward, backward, self.plan.train, cudnn_units(self.plan.found), self.what)
        flags_ok, flags = flags_evidence(self.plan.found, [layer.use_cudnn for layer in self.layers], self.wanted)
        return PathProof(impl=impl, ok=ok and flags_ok, evidence=f"{evidence}{extra}; {flags}")


# ---------------------------------------------------------------------------------------------------------
# TensorFlow.
# ---------------------------------------------------------------------------------------------------------


class TFModelSide(KerasModelSide):
    """A copy on Keras's TensorFlow backend: tf.function steps, proven by the traced graph."""

    what = "CudnnRNNV3"

    def tensor(self, a: np.ndarray) -> Any:
        """A host array as a tensor on this copy's device."""
        import tensorflow as tf

        with tf.device(self.device):
            t = tf.constant(a)
            return tf.cast(t, self.dtype) if np.issubdtype(a.dtype, np.floating) else t

    def numpy(self, t: Any) -> np.ndarray:
        """A tensor on the host as float64 (an embedding's sparse gradient made dense)."""
        import tensorflow as tf

        t = tf.cast(tf.convert_to_tensor(t), tf.float64)
        return np.asarray(t.numpy(), dtype=np.float64)

    def _setup(self) -> None:
        """Three tf.functions (timed train step, parity gradients, predict) and the built weights' values."""
        import tensorflow as tf

        self._initial = [v.numpy() for v in self.model.variables]
        if self.plan.loss == "compiled":  # builds the compiled loss outside any trace (it creates metric state)
            self.model.compute_loss(x=self.x, y=self.y, y_pred=self.model(self.x, training=True), training=True)
        if self.optimizer is not None:
            self.optimizer.build(self.model.trainable_variables)
        # No XLA (cuDNN RNN ops have no XLA kernel), as Keras itself turns jit_compile off for cuDNN layers.
        self._fit = tf.function(self._fit_step, reduce_retracing=True)
        self._grads = tf.function(self._grad_step, reduce_retracing=True)
        self._predict = tf.function(lambda x: self.model(x, training=False), reduce_retracing=True)

    def seen_forward(self) -> Callable[[Any], tuple[Any, list[Any]]]:
        """Traced once for every batch, the masks among its outputs: eager, a float64 bidirectional GRU's loop took
        seconds a batch."""
        import tensorflow as tf

        eager = super().seen_forward()
        traced = tf.function(eager, autograph=False)

        def forward(x: Any) -> tuple[Any, list[Any]]:
            """The traced forward; where tracing fails (inputs of the wrong shape), the eager one, which says why in
            the model's terms rather than a graph node's."""
            try:
                return tuple(traced(x))  # type: ignore[return-value]
            except Exception:  # noqa: BLE001 - re-raised by the eager call, or not an error of the model at all
                return eager(x)

        return forward

    def _flags(self) -> Any:
        """TF32 on (tf32) or off, for this step."""
        return tf_precision_flags(self.plan.case.precision)

    def _fit_step(self, x: Any, y: Any, d: list[Any]) -> Any:
        """Forward, loss, gradients of the trainable weights, the optimizer's update: what model.fit runs."""
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = self.loss_value(x, y, self.model(x, training=True), d)
        weights = self.model.trainable_variables
        grads = tape.gradient(loss, weights, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        if self.optimizer is not None:
            self.optimizer.apply(grads, weights)
        # Returned, so that the traced function keeps them: TF prunes every op no output or state depends on.
        return loss, grads

    def _grad_step(self, x: Any, y: Any, d: list[Any]) -> tuple[Any, list[Any]]:
        """Outputs and the gradients of the trainable weights and the float inputs."""
        import tensorflow as tf

        floats = [t for _, t in leaves(x, "x") if _is_float(t)]
        with tf.GradientTape() as tape:
            tape.watch(floats)
            outputs = self.model(x, training=True)
            loss = self.loss_value(x, y, outputs, d)
        grads = tape.gradient(loss, [*self.model.trainable_variables, *floats],
                              unconnected_gradients=tf.UnconnectedGradients.ZERO)
        return outputs, grads

    def _timed(self) -> Any:
        """The traced train step or predict."""
        with self._flags():
            return self._fit(self.x, self.y, self.d) if self.plan.train else self._predict(self.x)

    def _outputs_and_grads(self) -> tuple[Any, list[Any], list[Any]]:
        """From the built weights (restored first: a timed optimizer step moves them)."""
        for variable, value in zip(self.model.variables, self._initial):
            variable.assign(value)
        with self._flags():
            if not self.plan.train:
                return self._predict(self.x), [], []
            outputs, grads = self._grads(self.x, self.y, self.d)
        n = len(self.model.trainable_variables)
        return outputs, list(grads[:n]), list(grads[n:])

    def _calls(self) -> tuple[int, int, str]:
        """Count the cuDNN ops of the traced timed step (a team's step: the plugin's own, same model path)."""
        fn, args = (self._fit, (self.x, self.y, self.d)) if self.plan.train else (self._predict, (self.x,))
        ops = graph_op_types(fn.get_concrete_function(*args))
        forward = sum(1 for op in ops if op == "CudnnRNNV3")
        backward = sum(1 for op in ops if op == "CudnnRNNBackpropV3")
        other = sum(1 for op in ops if op.startswith("CudnnRNN")) - forward - backward
        loops = sum(1 for op in ops if op in ("While", "StatelessWhile"))
        return forward + other, backward, f" (graph: {len(ops)} ops, While x{loops})"


# ---------------------------------------------------------------------------------------------------------
# torch.
# ---------------------------------------------------------------------------------------------------------


class TorchModelSide(KerasModelSide):
    """A copy on Keras's torch backend: eager steps, proven by the ATen ops one step dispatches."""

    what = "aten::_cudnn_rnn"

    def tensor(self, a: np.ndarray) -> Any:
        """A host array as a tensor on this copy's device."""
        import torch

        t = torch.from_numpy(np.ascontiguousarray(a)).to(self.device)
        if not np.issubdtype(a.dtype, np.floating):
            return t
        return t.to(torch.float64 if self.dtype == "float64" else torch_dtype(
            {"float16": "fp16", "bfloat16": "bf16"}.get(self.dtype, "fp32")))

    def numpy(self, t: Any) -> np.ndarray:
        """A tensor on the host as float64."""
        import torch

        return t.detach().to("cpu", dtype=torch.float64).numpy()

    def _setup(self) -> None:
        """Keep the built weights' values; build the optimizer (and the compiled loss) outside the timed steps."""
        self._initial = [v.numpy() for v in self.model.variables]
        if self.optimizer is not None:
            self.optimizer.build(self.model.trainable_variables)

    def _flags(self) -> Any:
        """cuDNN enabled on every copy (only the Keras flag may decide the path) and TF32 pinned to the mode."""
        return torch_precision_flags("cudnn", self.plan.case.precision, self.device)

    def _grads(self, wrt_inputs: bool) -> tuple[Any, list[Any], list[Any]]:
        """Forward with training=True, loss, gradients of the trainable weights (and of the float inputs)."""
        import torch

        x = self.x
        floats: list[Any] = []
        if wrt_inputs:
            x = rebuilt(self.x, iter(t.detach().clone().requires_grad_(True) if t.is_floating_point() else t
                                     for _, t in leaves(self.x, "x")))
            floats = [t for _, t in leaves(x, "x") if t.is_floating_point()]
        outputs = self.model(x, training=True)
        loss = self.loss_value(x, self.y, outputs, self.d)
        weights = [v.value for v in self.model.trainable_variables]
        grads = torch.autograd.grad(loss, [*weights, *floats], allow_unused=True)
        grads = tuple(torch.zeros_like(t) if g is None else g for t, g in zip([*weights, *floats], grads))
        return outputs, list(grads[:len(weights)]), list(grads[len(weights):])

    def _timed(self) -> Any:
        """Forward, loss, gradients and the optimizer's update (train), or forward under no_grad (infer)."""
        import torch

        with self._flags():
            if not self.plan.train:
                with torch.no_grad():
                    return self.model(self.x, training=False)
            _, grads, _ = self._grads(wrt_inputs=False)
            if self.optimizer is not None:
                with torch.no_grad():  # as Keras's torch trainer applies it
                    self.optimizer.apply(grads, self.model.trainable_variables)
            return None

    def _outputs_and_grads(self) -> tuple[Any, list[Any], list[Any]]:
        """From the built weights (restored first: a timed optimizer step moves them)."""
        import torch

        for variable, value in zip(self.model.variables, self._initial):
            variable.assign(value)
        with self._flags():
            if not self.plan.train:
                with torch.no_grad():
                    return self.model(self.x, training=False), [], []
            return self._grads(wrt_inputs=True)

    def _calls(self) -> tuple[int, int, str]:
        """Count the cuDNN ops one timed step dispatches (a team's own step included: it is what runs)."""
        ops = dispatch_counts(self.step, self.device)
        return ops["aten::_cudnn_rnn"], ops["aten::_cudnn_rnn_backward"], ""


# ---------------------------------------------------------------------------------------------------------
# JAX.
# ---------------------------------------------------------------------------------------------------------


class JaxModelSide(KerasModelSide):
    """A copy on Keras's JAX backend: stateless steps in one jax.jit, proven by the compiled HLO."""

    what = "cuDNN RNN custom call"

    def context(self) -> Any:
        """The float64 copy runs with 64-bit types on (JAX would truncate its arrays to float32)."""
        import jax

        return jax.enable_x64(True) if self.dtype == "float64" else contextlib.nullcontext()

    def tensor(self, a: np.ndarray) -> Any:
        """A host array as a device array."""
        import jax.numpy as jnp

        return jnp.asarray(a, dtype=self.dtype) if np.issubdtype(a.dtype, np.floating) else jnp.asarray(a)

    def numpy(self, t: Any) -> np.ndarray:
        """An array on the host as float64."""
        return np.asarray(np.asarray(t, dtype=np.float32) if "bfloat16" in str(t.dtype) else np.asarray(t),
                          dtype=np.float64)

    def _setup(self) -> None:
        """The built weights' values (and the optimizer's), and the jitted steps."""
        import jax

        model = self.model
        self._trainable = [v.value for v in model.trainable_variables]
        self._fixed = [v.value for v in model.non_trainable_variables]
        if self.plan.loss == "compiled":  # builds the compiled loss outside any trace (it creates metric state)
            model.compute_loss(x=self.x, y=self.y, y_pred=model(self.x, training=True), training=True)
        self._metrics = [v.value for v in model.metrics_variables]
        self._opt: list[Any] = []
        if self.optimizer is not None:
            self.optimizer.build(model.trainable_variables)
            self._opt = [v.value for v in self.optimizer.variables]
        self._state: tuple[Any, ...] = (self._trainable, self._fixed, self._opt)
        self._fit = jax.jit(self._fit_step)
        self._grads = jax.jit(self._grad_step)
        self._predict = jax.jit(lambda trainable, fixed, x: model.stateless_call(
            trainable, fixed, x, **self._training(False))[0])

    def _training(self, value: bool) -> dict[str, bool]:
        """``training=value`` where the model's call takes it: stateless_call passes keywords on unfiltered (Keras's
        own JAX trainer asks the same private flag)."""
        return {"training": value} if getattr(self.model, "_call_has_training_arg", True) else {}

    def _precision(self) -> Any:
        """The matmul precision of the mode: XLA runs float32 matmuls as TF32 on a GPU unless told "highest"."""
        import jax

        return jax.default_matmul_precision(JAX_MATMUL_PRECISION.get(self.plan.case.precision, "highest"))

    def _loss(self, trainable: list[Any], fixed: list[Any], x: Any) -> tuple[Any, tuple[Any, Any]]:
        """The loss of a forward with training=True, with (outputs, updated non-trainable values)."""
        outputs, fixed = self.model.stateless_call(trainable, fixed, x, **self._training(True))
        if self.plan.loss == "compiled":
            loss, _ = self.model.stateless_compute_loss(trainable, fixed, self._metrics, x=x, y=self.y, y_pred=outputs,
                                                        training=True)
        else:
            loss = self.loss_value(x, self.y, outputs, self.d)
        return loss, (outputs, fixed)

    def _fit_step(self, trainable: list[Any], fixed: list[Any], opt: list[Any], x: Any) -> tuple[Any, ...]:
        """Forward, loss, gradients and the optimizer's update, statelessly: what model.fit jits."""
        import jax

        with self._precision():
            (loss, (_, fixed)), grads = jax.value_and_grad(self._loss, has_aux=True)(trainable, fixed, x)
            if self.optimizer is not None:
                trainable, opt = self.optimizer.stateless_apply(opt, grads, trainable)
            # The gradients are returned: XLA drops every computation no output depends on, and without an
            # optimizer nothing else would need them.
            return trainable, fixed, opt, loss, grads

    def _grad_step(self, trainable: list[Any], fixed: list[Any], x: Any) -> tuple[Any, list[Any], list[Any]]:
        """Outputs and the gradients of the trainable weights and the float inputs."""
        import jax

        named = leaves(x, "x")
        floats = [t for _, t in named if _is_float(t)]

        def loss(trainable: list[Any], floats: list[Any]) -> tuple[Any, Any]:
            """The loss with the float inputs as an argument, so they get a gradient."""
            it = iter(floats)
            whole = rebuilt(x, iter(next(it) if _is_float(t) else t for _, t in named))
            value, (outputs, _) = self._loss(trainable, fixed, whole)
            return value, outputs

        with self._precision():
            (_, outputs), (d_trainable, d_floats) = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(
                trainable, floats)
        return outputs, list(d_trainable), list(d_floats)

    def _timed(self) -> Any:
        """The jitted train step (its new state kept, as fit does) or predict, asynchronously."""
        if not self.plan.train:
            with self._precision():
                return self._predict(self._trainable, self._fixed, self.x)
        out = self._fit(*self._state, self.x)
        self._state = out[:3]
        return out

    def _outputs_and_grads(self) -> tuple[Any, list[Any], list[Any]]:
        """From the built weights."""
        if not self.plan.train:
            with self._precision():
                return self._predict(self._trainable, self._fixed, self.x), [], []
        return self._grads(self._trainable, self._fixed, self.x)

    def _calls(self) -> tuple[int, int, str]:
        """Count the cuDNN custom calls of the compiled timed step (a team's step: the plugin's own)."""
        if self.plan.train:
            lowered = self._fit.lower(*self._state, self.x)
        else:
            lowered = self._predict.lower(self._trainable, self._fixed, self.x)
        forward, backward, traced = cudnn_calls(lowered.as_text(), lowered.compile().as_text() or "")
        if self.name != "cudnn" and traced > forward + backward:  # asked for in the trace, dropped by XLA
            forward = traced
        return forward, backward, ""


# ---------------------------------------------------------------------------------------------------------
# The pair.
# ---------------------------------------------------------------------------------------------------------


SIDES: dict[str, type[KerasModelSide]] = {"tensorflow": TFModelSide, "torch": TorchModelSide, "jax": JaxModelSide}


@dataclass
class KerasModelPair:
    """cuDNN, generic and float64 copies of one Keras model with identical weights."""

    cudnn: KerasModelSide | None
    generic: KerasModelSide | None
    reference_copy: KerasModelSide
    device: str
    description: str = ""
    notes: tuple[str, ...] = ()
    restore_threads: int = 0  # torch's thread count before this CPU pair pinned it (0: untouched)
    _close: Callable[[int], None] = field(default=lambda restore: None, repr=False)

    def sync(self) -> None:
        """Block until the queued device work of every copy is done (nothing is copied to the host)."""
        side = self.cudnn or self.generic
        if side is None:
            return
        if isinstance(side, TFModelSide):
            import tensorflow as tf

            tf.test.experimental.sync_devices()
        elif isinstance(side, TorchModelSide):
            if self.device.startswith("cuda"):
                import torch

                torch.cuda.synchronize()
        else:
            import jax

            for s in (self.cudnn, self.generic):
                if s is not None and s.last is not None:
                    jax.block_until_ready(s.last)

    @property
    def parity_batches(self) -> int:
        """How many batches parity runs on: the timed inputs and the parity_inputs= batches."""
        return len(self.reference_copy.batches)

    def reference(self, batch: int = 0) -> dict[str, tuple[str, np.ndarray | None]]:
        """Outputs and gradients of the float64 copy on the generic path, for parity batch ``batch``."""
        return self.reference_copy.result(batch)

    def close(self) -> None:
        """Drop the copies; the framework frees their device memory once nothing refers to them."""
        self.cudnn = self.generic = None
        gc.collect()
        self._close(self.restore_threads)
        self.restore_threads = 0


@contextlib.contextmanager
def _x64(framework: str) -> Iterator[None]:
    """64-bit types on while the JAX float64 copy is built (elsewhere nothing to do)."""
    if framework != "jax":
        yield
        return
    import jax

    with jax.enable_x64(True):
        yield


def build_pair(case: "ModelCase", keras: Any, model: Any, build: Callable[[], Any] | None, inputs: Any,
               impls: tuple[str, ...] = IMPLS, seed: int = 0, options: ModelOptions | None = None, *,
               device: str, oom: Callable[[BaseException], str | None] = lambda exc: None,
               close: Callable[[int], None] = lambda restore: None, restore: int = 0) -> KerasModelPair:
    """The copies of ``model`` for each side and a float64 reference copy, with the layers found and named.

    Fails (ModelError) before anything is timed when a layer asks for cuDNN where it cannot have it, unless
    ``options.allow_generic``; leaves the cuDNN side out when no layer can use cuDNN here.
    """
    options = options or ModelOptions()
    framework = case_framework(case)
    check_built(keras, model)
    if not rnn_layers(keras, model):
        raise no_rnn(model)
    if build is None:
        raise ModelError("a Keras model is checked through the function that builds it (rnnperf.model(build, ...))")
    x = host(inputs, keras, "inputs")
    if (why := empty_input((name, a.shape) for name, a in leaves(x, "inputs"))) is not None:
        raise ModelError(why)
    y = None if options.targets is None else host(options.targets, keras, "targets")
    extra = parity_batches(keras, x, options.parity_inputs)
    kind = loss_kind(model, options, case.mode == "train")
    notes: list[str] = []
    try:
        reference = built_copy(keras, build, model, "float64", wrap=lambda: _x64(framework))
        # Training draws a random dropout mask per copy, so the copies compare without dropout. Predict runs without
        # it anyway: there the copies keep it, so the path timed is the one Keras picks for the model as written
        # (Keras 3.0-3.2 sent any LSTM/GRU with dropout > 0 to its generic loop, keras#19644).
        train = case.mode == "train"
        dropped = without_dropout(keras, reference) if train else []
        layers = rnn_layers(keras, reference)
        for layer in layers:
            layer.use_cudnn = False
        narrow = sorted({str(w.dtype) for w in reference.trainable_weights if "float" in str(w.dtype)} - {"float64"})
        if narrow:
            notes.append(f"the float64 copy kept {', '.join(narrow)} weights (layers built with an explicit dtype)")
        plan = Plan(case, framework, keras, [], x, y, [], kind, options,
                    [str(v.path) for v in model.trainable_variables], extra)
        probe = SIDES[framework]("reference", reference, plan, [False] * len(layers), None, "float64", device)

        forward = probe.seen_forward()

        def seen(batch: Any) -> tuple[list[FoundLayer], list[tuple[str, np.ndarray]]]:
            """The reference's forward pass on ``batch``: each layer with the mask it gets (cuDNN needs right padding
            and no empty sequence, and Keras on torch/JAX takes no mask at all), and the float outputs."""
            with probe.context():
                result, masks = forward(batch)
                outputs = [(n, probe.numpy(t)) for n, t in leaves(result, "output") if _is_float(t)]
            return find(keras, model, framework, [None if m is None else probe.numpy(m) > 0.5 for m in masks]), outputs

        found, outputs = seen(probe.x)
        if not outputs:
            raise ModelError(f"{type(model).__name__} {model.name!r} returned no floating-point output: nothing to "
                             f"compare (return what a loss is computed from, e.g. logits)")
        plan.found = merged([found] + [seen(batch)[0] for batch in probe.batches[1:]])
        if not options.allow_generic and (refused := refusal(plan.found, framework)):
            raise ModelError(refused)
        notes += found_notes(plan.found, framework)
        if "cudnn" in impls and not any(f.eligible for f in plan.found):
            impls = tuple(i for i in impls if i != "cudnn")
            notes.append(f"cuDNN side not run: no LSTM/GRU layer of the model can use cuDNN on Keras on {framework}")
        plan.d = upstream(outputs, seed) if kind == "upstream" else []
        with probe.context():  # the probe is the reference copy from now on, with the upstream gradients
            probe.d = [probe.tensor(a) for a in plan.d]
        if train:
            compiled = bool(getattr(model, "compiled", False)) and getattr(model, "loss", None) is not None
            notes.append(loss_note(kind, make_optimizer(keras, model, options), compiled) if options.step is None
                         else "train step: the step= function given")
        if dropped:
            notes.append(f"dropout set to 0 in the compared copies: {', '.join(dropped)}")
        sides: dict[str, KerasModelSide] = {}
        for impl in impls:
            copy = built_copy(keras, build, model, _DTYPES.get(case.precision))
            if train:
                without_dropout(keras, copy)
            wanted = [impl == "cudnn" and f.eligible for f in plan.found]
            copy_layers = rnn_layers(keras, copy)
            if len(copy_layers) != len(wanted):
                raise ModelError("build() returned models with different LSTM/GRU layers on two calls; it must build "
                                 "the same model every time")
            for layer, flag in zip(copy_layers, wanted):
                layer.use_cudnn = flag
            optimizer = make_optimizer(keras, copy, options) if train else None
            sides[impl] = SIDES[framework](impl, copy, plan, wanted, optimizer,
                                           _DTYPES.get(case.precision, "float32"), device)
        pair = KerasModelPair(cudnn=sides.get("cudnn"), generic=sides.get("generic"), reference_copy=probe,
                              device=device, description=description(model, plan.found), notes=tuple(notes),
                              restore_threads=restore, _close=close)
        for side in sides.values():  # surfaces out-of-memory and shape errors here, before anything is timed
            side.step()
        pair.sync()
        return pair
    except (ModelError, OutOfDeviceMemory):
        raise
    except Exception as exc:  # noqa: BLE001 - the framework's error, or the team's model failing on its inputs
        reason = oom(exc)
        if reason is not None:
            raise OutOfDeviceMemory(f"{case.id} does not fit in GPU memory: {reason}") from None
        raise ModelError(f"{type(model).__name__} {model.name!r} failed on its inputs: {type(exc).__name__}: "
                         f"{first_line(exc)}") from None


def first_line(exc: BaseException) -> str:
    """The line of an exception that says what went wrong (Keras opens with "Exception encountered when calling")."""
    # Keras prints in bold (ANSI escapes) and TF opens with the failing node ("{{function_node ...}}").
    text = re.sub(r"\x1b\[[0-9;]*m|\{\{function_node [^}]*\}\}\s*", "", str(exc))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    told = [ln for ln in lines if not ln.startswith("Exception encountered when calling")]
    return (told or lines or [""])[0][:200]


__all__ = ["JaxModelSide", "KerasModelPair", "KerasModelSide", "TFModelSide", "TorchModelSide", "build_pair"]
