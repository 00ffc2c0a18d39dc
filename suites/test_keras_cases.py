"""Keras 3 settings that once sent a model off cuDNN or broke it, each on every Keras backend from one run.

- An LSTM with input dropout (recurrent_dropout 0): Keras 3.0-3.2 sent it to the generic loop (keras#19644); 3.15
  applies the dropout mask to the sequence and keeps cuDNN on TensorFlow, torch and JAX. The case is inference:
  Keras decided that fallback from the layer's config, so predict shows it, and predict runs without dropout, so
  the copies compute one function. A training comparison would need the same random mask in the cuDNN, generic
  and float64 copies, which three backends' seed generators and dtypes do not give.
- A masked batch holding a sequence with no step (an all-padding row). cuDNN rejects it: Keras 3.15 on TensorFlow
  checks it with a tf.Assert in its cuDNN path (_assert_valid_mask: an eager call falls back, a traced step raises)
  and JAX's cuDNN RNN failed on it (jax#17966); Keras 3.15 on torch and JAX runs every masked call on its generic
  loop. So each check names why the layer is generic (the empty sequence on TensorFlow, the mask itself on torch
  and JAX) and holds the generic masked loop against float64 on three such batches.
- A masked LSTM on Keras-on-TensorFlow, whose right-padded mask goes to cuDNN as sequence lengths: parity runs on
  three batches and keeps the worst error, since masked cuDNN LSTM/GRU outputs were corrupted now and then
  (tensorflow#60192), which one batch can miss.

Bidirectional layers whose generic side is ``Bidirectional(LSTM(use_cudnn=False))`` are the matrix's ``-bi`` cases
(suites/test_cudnn.py): their proofs check the flag of each direction (keras#21533).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest

from pytest_rnnperf.backends.keras_layers import keras_import_problem
from pytest_rnnperf.plugin.fixtures import RnnperfFixture
from .floors import model_floor
from .keras_inputs import batches, padded_tokens

if (missing := keras_import_problem()) is not None:
    pytest.skip(f"the Keras case checks {missing}", allow_module_level=True)
# Keras is imported where a model is built, not at collection: its default backend imports TensorFlow, which
# would cost every pytest process that collects (torch-only xdist workers too) seconds and TF's CUDA runtime.

BACKENDS = ["tensorflow", "torch", "jax"]
# (steps, batch, vocabulary, hidden units) per scale: small, so that each case's step is well under a second on an
# H100 and the nightly keeps its length.
SIZES = {"smoke": (10, 4, 12, 8), "nightly": (50, 64, 1000, 128), "full": (100, 128, 5000, 256)}
FEATURES = 32  # the dropout LSTM's input width
DROPOUT = 0.25


def build_dropout_lstm(features: int, hidden: int) -> Any:
    """An LSTM with input dropout and no recurrent dropout (what cuDNN can take), and a per-step projection."""
    import keras

    x = keras.Input(shape=(None, features))
    y = keras.layers.LSTM(hidden, dropout=DROPOUT, return_sequences=True)(x)
    return keras.Model(x, keras.layers.Dense(8)(y))


def build_masked_lstm(vocab: int, hidden: int) -> Any:
    """Embedding with a padding mask, an LSTM, per-sequence logits from its last real step.

    Per-sequence, not per-step: at padded steps Keras 3.15's cuDNN LSTM on TensorFlow and its generic loop write
    different outputs (docs/known-issues.md), which no masked loss reads; a corrupted real step still reaches the
    last state, its logits and every gradient.
    """
    import keras

    tokens = keras.Input(shape=(None,), dtype="int32")
    x = keras.layers.Embedding(vocab, 32, mask_zero=True)(tokens)
    x = keras.layers.LSTM(hidden)(x)
    return keras.Model(tokens, keras.layers.Dense(8)(x))


def features(batch: int, steps: int, width: int) -> np.ndarray:
    """Random float features (batch, steps, width)."""
    return np.random.default_rng(0).standard_normal((batch, steps, width)).astype("float32")


# Each test's rnnperf.model() arguments, declared (rnnperf_ahead) so that a first night compiles the Keras-on-JAX
# models ahead of their turn, behind the other cases.
def dropout_lstm(scale: str, backend: str) -> dict[str, Any]:
    """The dropout LSTM's check at ``scale`` on Keras ``backend``: inference on random features."""
    steps, batch, _, hidden = SIZES[scale]
    return dict(build=partial(build_dropout_lstm, FEATURES, hidden), inputs=partial(features, batch, steps, FEATURES),
                mode="infer", backend=backend, floor=model_floor(backend))


def masked_lstm(scale: str, backend: str, empty: bool = False) -> dict[str, Any]:
    """The masked LSTM's check at ``scale`` on Keras ``backend``: training on three padded batches, the first
    sequence of each all padding where ``empty``."""
    steps, batch, vocab, hidden = SIZES[scale]
    make = partial(padded_tokens, vocab, batch, steps, shortest=1, empty=empty)
    return dict(build=partial(build_masked_lstm, vocab, hidden), inputs=make,
                parity_inputs=partial(batches, make, (1, 2)), backend=backend, floor=model_floor(backend))


def masked_lstm_with_an_empty_row(scale: str, backend: str) -> dict[str, Any]:
    """``masked_lstm`` whose batches each hold a sequence with no step."""
    return masked_lstm(scale, backend, empty=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.rnnperf_ahead(model=dropout_lstm)
def test_lstm_with_dropout_predicts_on_cudnn(rnnperf: RnnperfFixture, scale: str, backend: str) -> None:
    """dropout > 0 keeps the LSTM on cuDNN (a cuDNN call proven in the cuDNN copy), matches generic and float64."""
    rnnperf.check(rnnperf.model(**dropout_lstm(scale, backend)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.rnnperf_ahead(model=masked_lstm_with_an_empty_row)
def test_masked_lstm_with_an_empty_row_trains(rnnperf: RnnperfFixture, scale: str, backend: str) -> None:
    """A batch whose first sequence is all padding: named as why the LSTM is generic, the generic loop matches
    float64 on it, on three such batches."""
    rnnperf.check(rnnperf.model(**masked_lstm_with_an_empty_row(scale, backend)))


@pytest.mark.parametrize("backend", ["tensorflow"])
@pytest.mark.rnnperf_ahead(model=masked_lstm)
def test_masked_lstm_parity_holds_on_every_batch(rnnperf: RnnperfFixture, scale: str, backend: str) -> None:
    """Keras on TensorFlow: the right-padded masked LSTM on cuDNN matches generic and float64 on three batches."""
    rnnperf.check(rnnperf.model(**masked_lstm(scale, backend)))
