"""What every Keras 3 backend shares: canonical <-> Keras weights, the layer stack, its forward pass, flag checks.

Keras 3 runs the same ``keras.layers.LSTM/GRU(use_cudnn=...)`` on TensorFlow, torch and JAX; only how a step is
traced, differentiated and synchronized differs, so those live in ``tensorflow.py`` and ``keras.py``. Nothing
here imports Keras: the ``keras`` module is passed in by the backend that imported it under its own
``KERAS_BACKEND``. The weight converters are pure NumPy.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from pytest_rnnperf.backends import BackendUnavailable
from pytest_rnnperf.model.reference import LayerWeights, RNNWeights

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import Case

SIMPLE_RNN_NO_CUDNN = (
    "Keras SimpleRNN has no cuDNN path; compare it with torch's cuDNN RNN through the shared canonical weights"
)

# ---------------------------------------------------------------------------------------------------------
# Weight converters (pure NumPy): canonical (PyTorch layout) <-> Keras get_weights()/set_weights() arrays.
# ---------------------------------------------------------------------------------------------------------

# Canonical GRU gate blocks are r, z, n; Keras stores z, r, h (h is the candidate = canonical n).
_GRU_TO_KERAS = (1, 0, 2)  # Keras block k takes canonical block _GRU_TO_KERAS[k]
_GRU_FROM_KERAS = (1, 0, 2)  # canonical block k takes Keras block _GRU_FROM_KERAS[k] (the swap is its own inverse)


def _reorder_blocks(a: np.ndarray, order: Sequence[int], axis: int) -> np.ndarray:
    """Split ``a`` into len(order) equal gate blocks along ``axis`` and reassemble them in ``order``."""
    blocks = np.split(np.asarray(a), len(order), axis=axis)
    return np.concatenate([blocks[i] for i in order], axis=axis)


def _layer_to_keras(
    cell: str, w_ih: np.ndarray, w_hh: np.ndarray, b_ih: np.ndarray, b_hh: np.ndarray
) -> list[np.ndarray]:
    """One layer/direction in Keras order [kernel (in, G*H), recurrent_kernel (H, G*H), bias]."""
    kernel, recurrent = np.asarray(w_ih).T, np.asarray(w_hh).T
    if cell == "gru":
        # reset_after=True keeps two bias vectors, exactly the canonical b_ih and b_hh, stacked as rows.
        return [
            np.ascontiguousarray(_reorder_blocks(kernel, _GRU_TO_KERAS, axis=1)),
            np.ascontiguousarray(_reorder_blocks(recurrent, _GRU_TO_KERAS, axis=1)),
            np.stack([_reorder_blocks(b_ih, _GRU_TO_KERAS, 0), _reorder_blocks(b_hh, _GRU_TO_KERAS, 0)]),
        ]
    # LSTM (gate order i, f, c, o in both layouts) and SimpleRNN: one bias, which only ever appears as
    # the sum b_ih + b_hh in the cell's pre-activation.
    return [np.ascontiguousarray(kernel), np.ascontiguousarray(recurrent), np.asarray(b_ih) + np.asarray(b_hh)]


def to_keras(weights: "RNNWeights") -> list[list[list[np.ndarray]]]:
    """Canonical weights as ``[layer][direction] -> [kernel, recurrent_kernel, bias]`` in Keras layout.

    Per direction, the list is what ``layer.set_weights`` of a Keras LSTM/GRU(reset_after=True)/SimpleRNN
    expects; a ``Bidirectional`` wrapper takes the forward list followed by the backward list.
    """
    return [
        [_layer_to_keras(weights.cell, *lw.arrays()) for lw in dirs]
        for dirs in weights.layers
    ]


def _layer_from_keras(
    cell: str, kernel: np.ndarray, recurrent: np.ndarray, bias: np.ndarray, gradients: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One layer/direction back to canonical (w_ih, w_hh, b_ih, b_hh)."""
    if cell == "gru":
        bias = np.asarray(bias)
        return (
            np.ascontiguousarray(_reorder_blocks(np.asarray(kernel).T, _GRU_FROM_KERAS, axis=0)),
            np.ascontiguousarray(_reorder_blocks(np.asarray(recurrent).T, _GRU_FROM_KERAS, axis=0)),
            _reorder_blocks(bias[0], _GRU_FROM_KERAS, 0),
            _reorder_blocks(bias[1], _GRU_FROM_KERAS, 0),
        )
    bias = np.asarray(bias)
    # Weights: only the sum b_ih + b_hh is known, so the split is a convention (all of it in b_ih).
    # Gradients: dL/db_ih = dL/db_hh = dL/dbias, because both enter the pre-activation only through the sum.
    b_hh = bias.copy() if gradients else np.zeros_like(bias)
    w_ih = np.ascontiguousarray(np.asarray(kernel).T)
    return (w_ih, np.ascontiguousarray(np.asarray(recurrent).T), bias.copy(), b_hh)


def from_keras(
    cell: str,
    input_size: int,
    hidden_size: int,
    num_layers: int,
    bidirectional: bool,
    keras_weights: Sequence[Sequence[Sequence[np.ndarray]]],
    *,
    gradients: bool = False,
) -> "RNNWeights":
    """Inverse of :func:`to_keras`: ``[layer][direction] -> [kernel, recurrent_kernel, bias]`` to canonical.

    LSTM and SimpleRNN keep one bias (= b_ih + b_hh), so the canonical split is not recoverable: weights come
    back with b_ih = bias and b_hh = 0 (same forward function). With ``gradients=True`` the arrays are
    gradients, and the single bias gradient goes into both b_ih and b_hh, since each of them receives
    exactly dL/dbias. GRU(reset_after=True) has both biases and round-trips exactly.
    """
    directions = 2 if bidirectional else 1
    if len(keras_weights) != num_layers or any(len(d) != directions for d in keras_weights):
        raise ValueError(f"expected {num_layers} layers x {directions} directions of Keras weights")
    layers = tuple(
        tuple(LayerWeights(*_layer_from_keras(cell, arrays[0], arrays[1], arrays[2], gradients=gradients))
              for arrays in dirs)
        for dirs in keras_weights
    )
    return RNNWeights(cell, input_size, hidden_size, num_layers, bidirectional, layers)


# ---------------------------------------------------------------------------------------------------------
# The layer stack (any Keras backend).
# ---------------------------------------------------------------------------------------------------------


def keras_dtype(precision: str) -> str:
    """Keras dtype policy name of a precision mode (TF32 is float32 with a math flag of the framework)."""
    return {"fp16": "float16", "bf16": "bfloat16"}.get(precision, "float32")


def make_layer(keras: Any, cell: str, hidden_size: int, impl: str, dtype: str, bidirectional: bool) -> Any:
    """One Keras recurrent layer (wrapped in Bidirectional when asked) for a canonical cell and side."""
    common: dict[str, Any] = dict(
        units=hidden_size,
        return_sequences=True,
        return_state=True,
        dtype=dtype,
        # The weights are overwritten from the canonical arrays; zeros skip an orthogonal init (a QR).
        kernel_initializer="zeros",
        recurrent_initializer="zeros",
        bias_initializer="zeros",
    )
    if cell == "lstm":
        layer = keras.layers.LSTM(use_cudnn=(impl == "cudnn"), unit_forget_bias=False, **common)
    elif cell == "gru":
        layer = keras.layers.GRU(use_cudnn=(impl == "cudnn"), reset_after=True, **common)
    else:
        if impl == "cudnn":
            raise BackendUnavailable(SIMPLE_RNN_NO_CUDNN)
        layer = keras.layers.SimpleRNN(activation="tanh" if cell == "rnn_tanh" else "relu", **common)
    if bidirectional:
        # Returns [output, *forward_states, *backward_states]; the backward output is flipped back to time order.
        layer = keras.layers.Bidirectional(layer, merge_mode="concat", dtype=dtype)
    return layer


def build_stack(keras: Any, case: "Case", weights: "RNNWeights", impl: str) -> list[Any]:
    """``num_layers`` built Keras layers holding exactly the canonical ``weights`` (in the caller's device scope)."""
    s = case.shape
    dtype = keras_dtype(case.precision)
    keras_weights = to_keras(weights)
    layers = []
    for index in range(s.num_layers):
        layer = make_layer(keras, case.cell, s.hidden_size, impl, dtype, s.bidirectional)
        layer.build((None, None, weights.layer_input_size(index)))
        # Bidirectional.set_weights takes the forward arrays, then the backward ones.
        arrays = [a for direction in keras_weights[index] for a in direction]
        # float32 on the host; assign() rounds to the variable's dtype (bf16/fp16), as torch's .to(dtype) does.
        layer.set_weights([np.asarray(a, dtype=np.float32) for a in arrays])
        layers.append(layer)
    return layers


def layer_variables(layer: Any, directions: int) -> list[list[Any]]:
    """Trainable variables of one stacked layer as ``[direction] -> [kernel, recurrent_kernel, bias]``."""
    subs = [layer.forward_layer, layer.backward_layer] if directions == 2 else [layer]
    return [list(sub.trainable_weights) for sub in subs]


def split_states(cell: str, outputs: Sequence[Any]) -> tuple[Any, list[Any], list[Any]]:
    """A layer's ``[output, *states]`` as (output, h per direction, c per direction; empty unless LSTM)."""
    y, *states = outputs
    per_direction = 2 if cell == "lstm" else 1
    h = [states[d] for d in range(0, len(states), per_direction)]
    c = [states[d + 1] for d in range(0, len(states), per_direction)] if cell == "lstm" else []
    return y, h, c


def forward(layers: Sequence[Any], cell: str, x: Any) -> tuple[Any, list[Any], list[Any]]:
    """Run the stack; (batch-major output, h per layer*D+direction, c likewise for LSTM), canonical order."""
    h_list: list[Any] = []
    c_list: list[Any] = []
    y = x
    for layer in layers:
        y, h, c = split_states(cell, layer(y))
        h_list += h
        c_list += c
    return y, h_list, c_list


def flag_check(layers: Sequence[Any], impl: str) -> tuple[bool, str]:
    """Whether every recurrent layer of the stack, wrapped ones included, kept the ``use_cudnn`` it was given.

    A wrapper such as ``Bidirectional`` rebuilds its backward layer from the forward one's config; a flag that
    config drops would quietly change the path of half the model (keras#21533), so each direction is checked and
    the evidence says both were.
    """
    wanted = impl == "cudnn"
    seen: list[tuple[str, Any]] = []
    wrapped = 0
    for layer in layers:
        subs = ([("forward", layer.forward_layer), ("backward", layer.backward_layer)]
                if hasattr(layer, "forward_layer") else [("", layer)])
        wrapped += len(subs) == 2 and all(hasattr(sub, "use_cudnn") for _, sub in subs)
        for where, sub in subs:
            if hasattr(sub, "use_cudnn"):
                seen.append((f"{type(layer).__name__} {where}".strip() if where else type(sub).__name__,
                             sub.use_cudnn))
    wrong = [f"{name} use_cudnn={flag!r}" for name, flag in seen if flag is not wanted]
    if wrong:
        return False, f"flags: {', '.join(wrong)} (built with use_cudnn={wanted})"
    if not seen:
        return True, "flags: no use_cudnn layer"
    both = f" (forward and backward of {wrapped} Bidirectional)" if wrapped else ""
    return True, f"flags: {len(seen)} recurrent layer(s) use_cudnn={wanted}{both}"


def to_batch_major(a: np.ndarray) -> np.ndarray:
    """(T, B, F) canonical time-major to Keras batch-major (B, T, F)."""
    return np.ascontiguousarray(np.swapaxes(a, 0, 1))


def keras_backend_setting() -> str | None:
    """The Keras backend this process will use: KERAS_BACKEND, else keras.json, else None (= tensorflow)."""
    env = os.environ.get("KERAS_BACKEND")
    if env:
        return env
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend") and hasattr(keras.backend, "backend"):
        try:
            return str(keras.backend.backend())
        except Exception:  # noqa: BLE001 - a half-imported keras must not break the skip reason
            pass
    return _keras_json_backend(os.environ)


def _keras_json_backend(environ: Mapping[str, str]) -> str | None:
    """The backend keras.json names (Keras writes "tensorflow" into a new one on its first import), or None."""
    home = Path(environ.get("KERAS_HOME", Path.home() / ".keras"))
    try:
        return json.loads((home / "keras.json").read_text()).get("backend")
    except (OSError, ValueError, AttributeError):
        return None


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported as far as the finders know (a None in sys.modules reads as absent)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails, or a half-set sys.modules entry
        return False


def keras_backend_choice(environ: Mapping[str, str]) -> tuple[str | None, str]:
    """The installed backend to put in KERAS_BACKEND where Keras would fail on its TensorFlow default, and the line
    that says so (or that asks for KERAS_BACKEND); ``(None, "")`` where Keras can import as it is set up.

    Keras takes TensorFlow unless KERAS_BACKEND or keras.json names another, so with Keras installed for torch or JAX
    alone (``pytest-rnnperf[jax]``) ``import keras`` fails in every test module that does it.
    """
    if environ.get("KERAS_BACKEND") or "keras" in sys.modules or not _installed("keras"):
        return None, ""
    if (_keras_json_backend(environ) or "tensorflow") != "tensorflow" or _installed("tensorflow"):
        return None, ""
    for backend in ("torch", "jax"):
        if _installed(backend):
            return backend, f"rnnperf: Keras runs on {backend} here (KERAS_BACKEND unset, tensorflow not installed)"
    return None, ("rnnperf: keras is installed without tensorflow, torch or jax: install one and set KERAS_BACKEND "
                  "to it")


def keras3_problem(needs: str) -> str | None:
    """Why the installed Keras is not Keras 3, naming what ``needs`` it (e.g. "the tf backend"), or None."""
    try:
        version = importlib.metadata.version("keras")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    major = version.split(".")[0]
    if not major.isdigit() or int(major) < 3:
        return f"keras {version} is installed; {needs} needs Keras 3 (pip install 'keras>=3.15')"
    return None


def keras_import_problem() -> str | None:
    """What ``import keras`` lacks in this process, as a skip reason's end ("need ..."), or None where it has it."""
    if not _installed("keras"):
        return "need keras (pip install 'pytest-rnnperf[tf]')"
    backend = keras_backend_setting() or "tensorflow"
    if backend not in ("tensorflow", "torch", "jax") or _installed(backend):  # numpy, openvino: Keras says itself
        return None
    if backend == "tensorflow" and not os.environ.get("KERAS_BACKEND"):
        return ("need tensorflow for Keras's default backend (pip install 'pytest-rnnperf[tf]'); "
                "or set KERAS_BACKEND=torch or jax")
    return f"need {backend} for Keras's {backend} backend (set in KERAS_BACKEND or keras.json)"
