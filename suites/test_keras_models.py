"""Whole Keras models through rnnperf.model(), on every Keras backend from one run.

A token tagger as teams write it: Embedding(mask_zero=True) over right-padded batches, two bidirectional GRU
layers, a per-step projection. Keras on TensorFlow hands the right-padded mask to cuDNN as sequence lengths; Keras
3.15 on torch and on JAX has no cuDNN path for a masked sequence (and JAX none for a GRU), so there the check names
every layer as generic and compares the generic copy with float64. Without a GPU every backend's generic copy is
checked against float64. ``-k tensorflow`` (or ``torch``, ``jax``) picks one backend.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from pytest_rnnperf.backends.keras_layers import keras_import_problem
from pytest_rnnperf.plugin.fixtures import RnnperfFixture
from .keras_inputs import batches, padded_tokens

if (missing := keras_import_problem()) is not None:  # "need tensorflow for Keras's default backend..." or "need keras"
    pytest.skip(f"the Keras model checks {missing}", allow_module_level=True)
# Keras is imported where a model is built, not at collection: its default backend imports TensorFlow, which
# would cost every pytest process that collects (torch-only xdist workers too) seconds and TF's CUDA runtime.

# (vocabulary, embedding, hidden units, batch, steps) per scale: the nightly size is a small production tagger.
SIZES = {"smoke": (50, 8, 8, 4, 12), "nightly": (5000, 64, 128, 64, 100), "full": (20000, 128, 256, 128, 200)}


def build_tagger(vocab: int, embed: int, hidden: int) -> Any:
    """Embedding with a padding mask, two bidirectional GRU layers, per-step logits."""
    import keras

    tokens = keras.Input(shape=(None,), dtype="int32")
    x = keras.layers.Embedding(vocab, embed, mask_zero=True)(tokens)
    x = keras.layers.Bidirectional(keras.layers.GRU(hidden, return_sequences=True))(x)
    x = keras.layers.Bidirectional(keras.layers.GRU(hidden, return_sequences=True))(x)
    return keras.Model(tokens, keras.layers.Dense(16)(x))


def tagger(scale: str, backend: str) -> dict[str, Any]:
    """The tagger's check at ``scale`` on Keras ``backend`` (declared, so that a first night compiles it ahead)."""
    vocab, embed, hidden, batch, steps = SIZES[scale]
    make = partial(padded_tokens, vocab, batch, steps)
    # Only Keras on TensorFlow hands the mask to cuDNN, whose masked outputs were corrupted now and then
    # (tensorflow#60192): there parity runs on three batches and keeps the worst error.
    more = partial(batches, make, (1, 2)) if backend == "tensorflow" else None
    # partial() of module-level functions: another Keras backend's subprocess imports them by name.
    return dict(build=partial(build_tagger, vocab, embed, hidden), inputs=make, parity_inputs=more, backend=backend)


@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
@pytest.mark.rnnperf_ahead(model=tagger)
def test_masked_bigru_tagger_trains(rnnperf: RnnperfFixture, scale: str, backend: str) -> None:
    """Train step of the masked two-layer bidirectional GRU: the layers found, the paths proven, parity, speedup."""
    rnnperf.check(rnnperf.model(**tagger(scale, backend)))
