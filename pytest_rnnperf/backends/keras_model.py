"""A team's own Keras 3 model, checked cuDNN against generic on the Keras backend it was built on.

Keras has no way to copy an arbitrary model (a subclassed one has no config), so ``rnnperf.model()`` calls the
team's build function once per copy and gives every copy the first one's weights. The copies differ only in the
``use_cudnn`` flag of each LSTM and GRU layer: ``True`` on the cuDNN copy where the layer can use cuDNN, ``False``
everywhere else and on the float64 reference copy. What decides whether a layer can use cuDNN is Keras's own rule
for each backend (``config_blockers`` and ``mask_blocker``), named before anything is timed, and proven afterwards
by the ops each copy ran. The framework-specific steps live in ``keras_model_steps.py``.

Nothing here imports Keras at module level: the ``keras`` module is handed in by the backend that imported it.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from pytest_rnnperf.backends import ModelError, ModelOptions

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import ModelCase

# The Keras backends, as Keras names them.
FRAMEWORKS: tuple[str, ...] = ("tensorflow", "torch", "jax")
WHERE = "inside Bidirectional, TimeDistributed, nested models and custom layers"


# ---------------------------------------------------------------------------------------------------------
# What can use cuDNN (pure: no Keras needed).
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerSettings:
    """What of an LSTM/GRU layer decides whether Keras can run it on cuDNN."""

    kind: str  # "LSTM" or "GRU"
    units: int
    activation: str = "tanh"
    recurrent_activation: str = "sigmoid"
    use_bias: bool = True
    unroll: bool = False
    recurrent_dropout: float = 0.0
    reset_after: bool = True  # GRU only
    use_cudnn: object = "auto"  # what the model asked for: True, False or "auto"


def config_blockers(s: LayerSettings, framework: str) -> tuple[str, ...]:
    """Why Keras on ``framework`` cannot run a layer with these settings on cuDNN (empty: it can).

    Keras 3 takes the cuDNN path only for tanh/sigmoid, no recurrent dropout, no unroll, a bias, and for a GRU
    reset_after=True; on JAX only the LSTM has a cuDNN kernel (jax.experimental.rnn), its GRU is a lax.scan.
    """
    reasons = []
    if framework == "jax" and s.kind == "GRU":
        reasons.append("Keras on JAX has no cuDNN GRU (jax.experimental.rnn has an LSTM only)")
    if s.activation != "tanh":
        reasons.append(f"activation={s.activation} (cuDNN needs tanh)")
    if s.recurrent_activation != "sigmoid":
        reasons.append(f"recurrent_activation={s.recurrent_activation} (cuDNN needs sigmoid)")
    if s.recurrent_dropout:
        reasons.append(f"recurrent_dropout={s.recurrent_dropout:g} (cuDNN needs 0)")
    if s.unroll:
        reasons.append("unroll=True (cuDNN needs False)")
    if not s.use_bias:
        reasons.append("use_bias=False (cuDNN needs True)")
    if s.kind == "GRU" and not s.reset_after:
        reasons.append("reset_after=False (cuDNN's GRU needs True)")
    return tuple(reasons)


def mask_problem(mask: np.ndarray) -> str | None:
    """Why cuDNN cannot take a (batch, time) mask: not right-padded, or a sequence with no step; None when it can."""
    m = np.asarray(mask, dtype=bool)
    if m.ndim != 2:
        m = m.reshape(m.shape[0], -1) if m.ndim > 2 else m.reshape(1, -1)
    lengths = m.sum(axis=1)
    right = np.arange(m.shape[1])[None, :] < lengths[:, None]
    bad = np.flatnonzero(~np.all(m == right, axis=1))
    if bad.size:
        return (f"mask is not right-padded (sequence {int(bad[0])} has padding before data; cuDNN takes "
                f"right padding only)")
    empty = np.flatnonzero(lengths == 0)
    if empty.size:
        return f"mask leaves sequence {int(empty[0])} empty (cuDNN rejects fully masked sequences)"
    return None


def mask_blocker(framework: str, mask: np.ndarray | None) -> str | None:
    """Why a layer that receives ``mask`` cannot run on cuDNN under Keras on ``framework``; None when it can.

    Keras 3 on TensorFlow hands a right-padded mask to cuDNN as sequence lengths; on torch and JAX every masked
    call goes to the generic loop (their backend functions raise NotImplementedError for any mask).
    """
    if mask is None:
        return None
    if framework in ("torch", "jax"):
        return f"masked input (Keras on {framework} runs masked sequences on its generic loop only)"
    return mask_problem(mask)


@dataclass(frozen=True)
class FoundLayer:
    """One LSTM/GRU layer of the model, with why it cannot use cuDNN (empty when it can)."""

    index: int  # position among the model's LSTM/GRU layers: the same in every build of one function
    path: str  # e.g. "bidirectional/forward_gru"
    kind: str
    units: int
    asked: object  # the use_cudnn the model was built with
    wrapper: str = ""  # path of the Bidirectional holding it: cuDNN may run both directions in one call
    blockers: tuple[str, ...] = ()

    @property
    def eligible(self) -> bool:
        """Whether the cuDNN copy runs this layer on cuDNN."""
        return not self.blockers

    @property
    def label(self) -> str:
        """e.g. ``bidirectional/forward_gru GRU(64)``."""
        return f"{self.path} {self.kind}({self.units})"


def cudnn_units(found: Sequence[FoundLayer]) -> int:
    """The fewest cuDNN RNN calls one forward pass of the cuDNN copy makes: one per eligible layer, where a
    Bidirectional whose directions are both eligible may be one fused call."""
    return len({f.wrapper or f.path for f in found if f.eligible})


def refusal(found: Sequence[FoundLayer], framework: str) -> str | None:
    """The failure for layers that ask for cuDNN (use_cudnn=True) and cannot have it here, or None."""
    refused = [f for f in found if f.asked is True and f.blockers]
    if not refused:
        return None
    named = "; ".join(f"{f.label}: {', '.join(f.blockers)}" for f in refused)
    return (f"use_cudnn=True where Keras on {framework} cannot use cuDNN: {named} (pass allow_generic=True "
            f"to accept the generic path there)")


def found_notes(found: Sequence[FoundLayer], framework: str) -> list[str]:
    """What the check found: every LSTM/GRU layer and, for each that cannot use cuDNN, why."""
    on = [f.label for f in found if f.eligible]
    off = [f for f in found if not f.eligible]
    notes = [f"Keras on {framework}: {len(found)} LSTM/GRU layer(s) found; on cuDNN in the cuDNN copy: "
             + (", ".join(on) if on else "none")]
    by_reason: dict[tuple[str, ...], list[str]] = {}
    for f in off:  # layers that share their reasons are named together: a masked stack says it once
        by_reason.setdefault(f.blockers, []).append(f.label)
    if off:
        notes.append("generic in both copies: " + "; ".join(f"{', '.join(labels)}: {', '.join(reasons)}"
                                                           for reasons, labels in by_reason.items()))
    declined = [f.label for f in found if f.asked is False and f.eligible]
    if declined:  # the model as written runs these generic; the comparison shows what cuDNN would give it
        notes.append(f"built with use_cudnn=False, set True in the cuDNN copy: {', '.join(declined)}")
    return notes


def judge_calls(impl: str, forward: int, backward: int, train: bool, units: int, what: str) -> tuple[bool, str]:
    """Whether a copy ran the cuDNN RNN calls it should: the cuDNN copy ``units`` forward calls at least (and a
    backward one when training), the generic copy none; (ok, evidence). ``what`` names the calls, e.g. "aten::_cudnn_rnn"."""
    seen = f"{what} x{forward}" + (f", backward x{backward}" if train else "")
    if impl == "cudnn":
        missing = []
        if forward < units:
            missing.append(f"{units - forward} of {units} cuDNN-capable layer(s) without a cuDNN call")
        if train and not backward:
            missing.append("no backward cuDNN call")
        return not missing, seen + (f"; {'; '.join(missing)}" if missing else f" for {units} cuDNN-capable unit(s)")
    if forward or backward:
        return False, f"cuDNN calls in the generic copy: {seen}"
    return True, f"no {what}"


def flags_evidence(found: Sequence[FoundLayer], flags: Sequence[object], wanted: Sequence[bool]) -> tuple[bool, str]:
    """Whether every layer of a copy kept the use_cudnn it was given (a wrapper may rebuild a layer from config)."""
    wrong = [f"{f.path} use_cudnn={flag!r}" for f, flag, want in zip(found, flags, wanted) if flag is not want]
    if wrong:
        return False, f"flags: {', '.join(wrong)} (set to {', '.join(repr(w) for w in wanted)})"
    on = sum(1 for w in wanted if w)
    return True, f"flags: use_cudnn=True on {on}, False on {len(wanted) - on} layer(s)"


# ---------------------------------------------------------------------------------------------------------
# Structures of arrays (a model's x, y and outputs: an array, a list/tuple or a dict of them).
# ---------------------------------------------------------------------------------------------------------


def leaves(structure: Any, name: str) -> list[tuple[str, Any]]:
    """The arrays of a nested list/tuple/dict, named by their path, e.g. ``output[1]``, ``output[logits]``."""
    if isinstance(structure, (list, tuple)):
        return [leaf for i, item in enumerate(structure) for leaf in leaves(item, f"{name}[{i}]")]
    if isinstance(structure, dict):
        return [leaf for key, item in structure.items() for leaf in leaves(item, f"{name}[{key}]")]
    if structure is None:
        return []
    return [(name, structure)]


def rebuilt(structure: Any, values: Iterator[Any]) -> Any:
    """``structure`` with its leaves replaced, in ``leaves`` order, by the next of ``values``."""
    if isinstance(structure, (list, tuple)):
        return type(structure)(rebuilt(item, values) for item in structure) if isinstance(structure, list) \
            else tuple(rebuilt(item, values) for item in structure)
    if isinstance(structure, dict):
        return {key: rebuilt(item, values) for key, item in structure.items()}
    if structure is None:
        return None
    return next(values)


def host(structure: Any, keras: Any, what: str) -> Any:
    """``structure`` (or what a callable returns) with every leaf a NumPy array; ModelError for anything else."""
    value = structure() if callable(structure) else structure
    named = leaves(value, what)
    if not named:
        raise ModelError(f"{what} must be arrays (NumPy or the framework's), a list/tuple/dict of them, or a "
                         f"callable returning them; got {type(value).__name__}")
    out = []
    for name, leaf in named:
        try:
            out.append(np.asarray(keras.ops.convert_to_numpy(leaf)))
        except Exception as exc:  # noqa: BLE001 - whatever the framework raises, the input is not an array
            raise ModelError(f"{name} is no array ({type(leaf).__name__}): {type(exc).__name__}") from None
    return rebuilt(value, iter(out))


def parity_batches(keras: Any, x: Any, given: Any) -> list[Any]:
    """The ``parity_inputs=`` batches on the host, each shaped like the inputs ``x``; ModelError naming one that is not."""
    if given is None:
        return []
    value = given() if callable(given) else given
    if not isinstance(value, (list, tuple)) or not value:
        raise ModelError(f"parity_inputs= takes a non-empty list of batches shaped like inputs (or a callable "
                         f"returning one), got {type(value).__name__}")
    want = [(name, a.shape) for name, a in leaves(x, "inputs")]
    batches = []
    for index, batch in enumerate(value):
        hosted = host(batch, keras, f"parity_inputs[{index}]")
        got = [(name, a.shape) for name, a in leaves(hosted, "inputs")]
        if got != want:  # the timed step is traced for one shape; parity reuses that trace
            raise ModelError(f"parity_inputs[{index}] is {', '.join(f'{n} {s}' for n, s in got)} where inputs are "
                             f"{', '.join(f'{n} {s}' for n, s in want)}: each parity batch must match inputs")
        batches.append(hosted)
    return batches


def merged(per_batch: Sequence[Sequence[FoundLayer]]) -> list[FoundLayer]:
    """Each layer with the reasons of every batch it saw: it runs cuDNN only where no batch keeps it off."""
    return [replace(f, blockers=tuple(dict.fromkeys(r for found in per_batch for r in found[i].blockers)))
            for i, f in enumerate(per_batch[0])]


def upstream(outputs: list[tuple[str, np.ndarray]], seed: int) -> list[np.ndarray]:
    """Fixed random upstream gradients, one per float output, scaled so each sums to about one."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(a.shape) / math.sqrt(max(a.size, 1)) for _, a in outputs]


# ---------------------------------------------------------------------------------------------------------
# Finding the layers and making the copies (Keras passed in).
# ---------------------------------------------------------------------------------------------------------


def _fn_name(fn: Any) -> str:
    """An activation's name as Keras serializes it ("tanh", "sigmoid", "relu", "<lambda>")."""
    return str(getattr(fn, "__name__", type(fn).__name__))


def rnn_layers(keras: Any, model: Any) -> list[Any]:
    """Every LSTM and GRU layer of ``model`` (wrapped, nested and custom-held ones included), in a fixed order."""
    # Layer._flatten_layers walks every tracked sublayer: Bidirectional's forward and backward layers,
    # TimeDistributed's layer, nested models and a custom layer's attributes. Keras 3 has no public twin of it.
    found: list[Any] = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, (keras.layers.LSTM, keras.layers.GRU)) and not any(layer is f for f in found):
            found.append(layer)
    return found


def settings_of(keras: Any, layer: Any) -> LayerSettings:
    """The cuDNN-relevant settings of a built or unbuilt LSTM/GRU layer."""
    cell = layer.cell
    return LayerSettings(
        kind="LSTM" if isinstance(layer, keras.layers.LSTM) else "GRU", units=int(cell.units),
        activation=_fn_name(cell.activation), recurrent_activation=_fn_name(cell.recurrent_activation),
        use_bias=bool(cell.use_bias), unroll=bool(layer.unroll), recurrent_dropout=float(cell.recurrent_dropout),
        reset_after=bool(getattr(cell, "reset_after", True)), use_cudnn=layer.use_cudnn)


def wrappers(keras: Any, model: Any) -> dict[int, str]:
    """id of each layer a Bidirectional holds -> that wrapper's path."""
    out = {}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.Bidirectional):
            out[id(layer.forward_layer)] = out[id(layer.backward_layer)] = layer.path
    return out


def without_dropout(keras: Any, model: Any) -> list[str]:
    """Set every dropout of ``model`` (a copy) to 0, so the copies compute one function; what was changed.

    Recurrent dropout is zeroed too (the layer still counts as unable to use cuDNN: the team's model has it).
    """
    changed = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if hasattr(layer, "get_dropout_mask") and hasattr(layer, "recurrent_dropout"):  # an RNN cell
            rates = [f"{a} {getattr(layer, a):g}" for a in ("dropout", "recurrent_dropout") if getattr(layer, a)]
            if rates:
                changed.append(f"{layer.path.rsplit('/', 1)[0]} ({', '.join(rates)})")
                layer.dropout = layer.recurrent_dropout = 0.0
        elif "Dropout" in type(layer).__name__ and isinstance(getattr(layer, "rate", None), (int, float)) \
                and layer.rate:
            changed.append(f"{layer.path} ({layer.rate:g})")
            layer.rate = 0.0
    return changed


@contextlib.contextmanager
def dtype_policy(keras: Any, name: str | None) -> Iterator[None]:
    """Build under Keras dtype policy ``name`` (float64 also as floatx, which keras.Input defaults to)."""
    if name is None:
        yield
        return
    policy, floatx = keras.config.dtype_policy(), keras.config.floatx()
    keras.config.set_dtype_policy(name)
    if name == "float64":
        keras.config.set_floatx(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(policy)
        keras.config.set_floatx(floatx)


def built_copy(keras: Any, build: Callable[[], Any], template: Any, policy: str | None,
               wrap: Callable[[], Any] = contextlib.nullcontext) -> Any:
    """Another model from ``build`` under ``policy``, holding ``template``'s weights; ModelError when it cannot."""
    with wrap(), dtype_policy(keras, policy):
        try:
            model = build()
        except Exception as exc:  # noqa: BLE001 - the team's code: say where it failed, in one line
            raise ModelError(f"build() failed on its second call ({type(exc).__name__}: "
                             f"{str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ''}); rnnperf.model "
                             f"calls it once per copy") from None
        if not isinstance(model, keras.Model) or type(model) is not type(template):
            raise ModelError(f"build() returned {type(model).__name__} on its second call and "
                             f"{type(template).__name__} on its first; it must build the same model every time")
        shapes = [tuple(w.shape) for w in template.weights]
        if [tuple(w.shape) for w in model.weights] != shapes:
            raise ModelError("build() returned models with different weights on two calls; it must build the same "
                             "model every time (a built model: call it on an input or give keras.Input shapes)")
        model.set_weights(template.get_weights())
    return model


def check_built(keras: Any, model: Any) -> None:
    """ModelError unless ``model`` is a Keras model with built weights."""
    if not isinstance(model, keras.Model):
        what = f"a Keras {type(model).__name__} layer" if isinstance(model, keras.layers.Layer) else type(model).__name__
        raise ModelError(f"build() returned {what}, not a Keras model (wrap it: keras.Sequential([keras.Input(...), "
                         f"layer]))")
    if not model.built or not model.weights:
        raise ModelError(f"{type(model).__name__} {model.name!r} is not built: give it keras.Input shapes or call "
                         f"it once on an input in build()")


def find(keras: Any, model: Any, framework: str, masks: Sequence[np.ndarray | None]) -> list[FoundLayer]:
    """The model's LSTM/GRU layers with why each cannot use cuDNN here (its settings, the mask it receives)."""
    layers = rnn_layers(keras, model)
    wrapped = wrappers(keras, model)
    found = []
    for index, layer in enumerate(layers):
        s = settings_of(keras, layer)
        mask = masks[index] if index < len(masks) else None
        blocked = config_blockers(s, framework) + tuple(filter(None, [mask_blocker(framework, mask)]))
        found.append(FoundLayer(index, str(layer.path), s.kind, s.units, s.use_cudnn, wrapped.get(id(layer), ""),
                                blocked))
    return found


def no_rnn(model: Any) -> ModelError:
    """The error for a model without an LSTM or GRU layer."""
    return ModelError(f"{type(model).__name__} {model.name!r} has no Keras LSTM or GRU layer (looked {WHERE}): "
                      f"nothing in it runs on cuDNN")


def capture_masks(layers: Sequence[Any]) -> tuple[list[Any], Callable[[], None]]:
    """Record the mask each of ``layers`` receives at its next call; (the list filled per layer, undo)."""
    seen: list[Any] = [None] * len(layers)

    def spy(index: int, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call`` that notes its mask argument first."""
        def recording(*args: Any, **kwargs: Any) -> Any:
            mask = kwargs.get("mask")
            if mask is not None and seen[index] is None:
                seen[index] = mask
            return call(*args, **kwargs)
        return recording

    for index, layer in enumerate(layers):
        # An instance attribute shadows the class's call for this copy only; Layer.__call__ looks it up per call.
        layer.call = spy(index, layer.call)

    def undo() -> None:
        """Give the layers their class's call back."""
        for layer in layers:
            vars(layer).pop("call", None)

    return seen, undo


def description(model: Any, found: Sequence[FoundLayer]) -> str:
    """e.g. ``Functional 'tagger': 0.12M parameters; bidirectional/forward_gru GRU(64), ...``."""
    return (f"{type(model).__name__} {model.name!r}: {model.count_params() / 1e6:.2f}M parameters; "
            + ", ".join(f.label for f in found))


def loss_kind(model: Any, options: ModelOptions, train: bool) -> str:
    """Which loss the train step computes: "given" (loss=), "compiled" (model.compile's) or "upstream"."""
    if not train:
        if options.loss is not None or options.optimizer is not None:
            raise ModelError("loss= and optimizer= belong to mode='train'; mode='infer' times predict")
        return "none"
    compiled = bool(getattr(model, "compiled", False)) and getattr(model, "loss", None) is not None
    if options.loss is not None:
        if options.targets is None:
            raise ModelError("loss= needs targets= (the y of model.fit)")
        return "given"
    if compiled and options.targets is not None:
        return "compiled"
    if options.targets is not None:
        raise ModelError("targets= given, but no loss: pass loss= or compile the model with one in build()")
    return "upstream"


def loss_note(kind: str, optimizer: Any, compiled: bool = False) -> str:
    """What the timed train step is, for the record's notes (``compiled``: the model has a compiled loss)."""
    why = "the compiled loss needs targets=" if compiled else "no loss= and no compiled loss"
    loss = {"given": "the loss= given", "compiled": "the compiled loss",
            "upstream": f"a fixed random projection of the outputs ({why})"}[kind]
    opt = f"then {type(optimizer).__name__} updates the weights" if optimizer is not None else "no optimizer update"
    return f"train step: forward, gradients of {loss}, {opt}"


def make_optimizer(keras: Any, model: Any, options: ModelOptions) -> Any:
    """This copy's optimizer: a new one from optimizer=, else the one it was compiled with, else None."""
    given = options.optimizer
    if given is None:
        return getattr(model, "optimizer", None) if getattr(model, "compiled", False) else None
    if isinstance(given, keras.optimizers.Optimizer):
        raise ModelError("optimizer=: pass a name such as 'adam' or a function returning a new optimizer; one "
                         "optimizer instance cannot serve two copies of the model")
    made = keras.optimizers.get(given) if isinstance(given, (str, dict)) else given()
    if not isinstance(made, keras.optimizers.Optimizer):
        raise ModelError(f"optimizer= made a {type(made).__name__}, not a Keras optimizer")
    return made


def loss_fn(keras: Any, options: ModelOptions) -> Callable[[Any, Any], Any]:
    """``options.loss`` as a function of (y_true, y_pred) giving a scalar, summed over paired outputs."""
    try:
        fn = keras.losses.get(options.loss)
    except (ValueError, TypeError) as exc:
        raise ModelError(f"loss={options.loss!r}: {str(exc).splitlines()[0][:160]}") from None
    if fn is None:
        raise ModelError(f"loss={options.loss!r} is no Keras loss")

    def total(y_true: Any, y_pred: Any) -> Any:
        """The loss of each output against its target, each averaged, summed."""
        trues, preds = [a for _, a in leaves(y_true, "y")], [a for _, a in leaves(y_pred, "output")]
        if len(trues) != len(preds):
            raise ModelError(f"targets= has {len(trues)} array(s) for {len(preds)} output(s)")
        return sum(keras.ops.mean(fn(t, p)) for t, p in zip(trues, preds))

    return total


def case_framework(case: "ModelCase") -> str:
    """The Keras backend name of a model case's spec (tf -> tensorflow, keras_torch -> torch, ...)."""
    return {"tf": "tensorflow", "keras_torch": "torch", "keras_jax": "jax"}.get(case.framework, case.framework)


__all__ = [
    "FRAMEWORKS", "FoundLayer", "LayerSettings", "config_blockers", "cudnn_units", "find", "flags_evidence",
    "judge_calls", "mask_blocker", "mask_problem", "merged", "parity_batches", "refusal", "rnn_layers",
]
