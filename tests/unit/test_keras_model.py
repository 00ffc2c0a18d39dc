"""A team's Keras model: which layers are found, why a layer cannot use cuDNN, and how a copy's path is judged."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest

from pytest_rnnperf.backends import ModelError, ModelOptions, keras_spec, model_backend_for
from pytest_rnnperf.backends.keras_model import (
    FoundLayer, LayerSettings, config_blockers, cudnn_units, flags_evidence, found_notes, judge_calls, leaves,
    loss_note, mask_blocker, mask_problem, parity_batches, rebuilt, refusal,
)
from pytest_rnnperf.measure.runner import RunConfig, run_model
from pytest_rnnperf.measure.subprocesses import model_payload
from pytest_rnnperf.model.cases import ModelCase
from pytest_rnnperf.model.parity import ParityRow, worst_over_batches
from pytest_rnnperf.model.timing import TimingConfig

# ------------------------------------------------------------------------------------ eligibility (pure)


@pytest.mark.parametrize(("settings", "reason"), [
    (LayerSettings("LSTM", 8, activation="relu"), "activation=relu (cuDNN needs tanh)"),
    (LayerSettings("GRU", 8, recurrent_activation="hard_sigmoid"), "recurrent_activation=hard_sigmoid (cuDNN needs sigmoid)"),
    (LayerSettings("LSTM", 8, recurrent_dropout=0.25), "recurrent_dropout=0.25 (cuDNN needs 0)"),
    (LayerSettings("GRU", 8, unroll=True), "unroll=True (cuDNN needs False)"),
    (LayerSettings("LSTM", 8, use_bias=False), "use_bias=False (cuDNN needs True)"),
    (LayerSettings("GRU", 8, reset_after=False), "reset_after=False (cuDNN's GRU needs True)"),
], ids=["activation", "recurrent_activation", "recurrent_dropout", "unroll", "use_bias", "reset_after"])
def test_each_setting_cudnn_cannot_take_is_named(settings: LayerSettings, reason: str) -> None:
    """Keras's own conditions for its cuDNN path, one reason each, on every backend."""
    for framework in ("tensorflow", "torch"):
        assert config_blockers(settings, framework) == (reason,)


def test_a_plain_lstm_or_gru_can_use_cudnn_and_reset_after_is_a_gru_matter() -> None:
    """Defaults qualify; an LSTM has no reset_after to hold against it."""
    assert config_blockers(LayerSettings("LSTM", 8), "tensorflow") == ()
    assert config_blockers(LayerSettings("GRU", 8), "torch") == ()
    assert config_blockers(LayerSettings("LSTM", 8, reset_after=False), "torch") == ()


def test_keras_on_jax_has_no_cudnn_gru() -> None:
    """jax.experimental.rnn has an LSTM only: a JAX GRU is generic whatever its settings."""
    assert config_blockers(LayerSettings("GRU", 8), "jax") == (
        "Keras on JAX has no cuDNN GRU (jax.experimental.rnn has an LSTM only)",)
    assert config_blockers(LayerSettings("LSTM", 8), "jax") == ()


def test_a_right_padded_mask_is_fine_a_left_padded_or_empty_one_is_named() -> None:
    """cuDNN takes sequence lengths: data first, padding after, and no empty sequence."""
    right = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=bool)
    assert mask_problem(right) is None
    left = np.array([[1, 1, 1, 1], [0, 0, 1, 1]], dtype=bool)
    assert mask_problem(left) == ("mask is not right-padded (sequence 1 has padding before data; cuDNN takes "
                                  "right padding only)")
    holes = np.array([[1, 0, 1, 0]], dtype=bool)
    assert "sequence 0 has padding before data" in str(mask_problem(holes))
    empty = np.array([[1, 1], [0, 0]], dtype=bool)
    assert mask_problem(empty) == "mask leaves sequence 1 empty (cuDNN rejects fully masked sequences)"


def test_keras_on_torch_and_jax_run_any_mask_generic_tensorflow_only_a_bad_one() -> None:
    """Keras 3 on torch and JAX raise NotImplementedError for every mask in their cuDNN functions."""
    right = np.array([[1, 1, 0]], dtype=bool)
    assert mask_blocker("tensorflow", right) is None
    assert mask_blocker("tensorflow", None) is None
    assert mask_blocker("torch", right) == "masked input (Keras on torch runs masked sequences on its generic loop only)"
    assert mask_blocker("jax", right) is not None and mask_blocker("jax", None) is None
    assert mask_blocker("tensorflow", np.array([[0, 1]], dtype=bool)) is not None


def _found(path: str, asked: object = "auto", blockers: tuple[str, ...] = (), wrapper: str = "") -> FoundLayer:
    """A found layer, as find() makes it."""
    return FoundLayer(0, path, "GRU", 16, asked, wrapper, blockers)


def test_only_a_layer_that_asks_for_cudnn_and_cannot_have_it_is_refused() -> None:
    """use_cudnn="auto" falling back is named, not refused; use_cudnn=True falling back is refused with the way out."""
    auto = _found("gru", "auto", ("unroll=True (cuDNN needs False)",))
    assert refusal([auto], "torch") is None
    asked = _found("enc/gru", True, ("unroll=True (cuDNN needs False)",))
    assert refusal([auto, asked, _found("ok", True)], "torch") == (
        "use_cudnn=True where Keras on torch cannot use cuDNN: enc/gru GRU(16): unroll=True (cuDNN needs False) "
        "(pass allow_generic=True to accept the generic path there)")


def test_the_notes_name_every_layer_and_group_shared_reasons() -> None:
    """A masked stack says its reason once, after every layer it holds back."""
    masked = ("masked input (Keras on torch runs masked sequences on its generic loop only)",)
    found = [_found("a", blockers=masked), _found("b", blockers=masked), _found("c")]
    assert found_notes(found, "torch") == [
        "Keras on torch: 3 LSTM/GRU layer(s) found; on cuDNN in the cuDNN copy: c GRU(16)",
        f"generic in both copies: a GRU(16), b GRU(16): {masked[0]}"]
    assert found_notes([_found("off", asked=False)], "jax")[-1] == (
        "built with use_cudnn=False, set True in the cuDNN copy: off GRU(16)")


def test_a_bidirectional_pair_may_be_one_cudnn_call() -> None:
    """Keras fuses both directions into one call on torch and JAX: the lower bound counts the wrapper once."""
    found = [_found("bi/forward", wrapper="bi"), _found("bi/backward", wrapper="bi"), _found("top"),
             _found("off", blockers=("x",))]
    assert cudnn_units(found) == 2


@pytest.mark.parametrize(("impl", "forward", "backward", "train", "ok", "text"), [
    ("cudnn", 3, 3, True, True, "aten::_cudnn_rnn x3, backward x3 for 2 cuDNN-capable unit(s)"),
    ("cudnn", 1, 1, True, False, "1 of 2 cuDNN-capable layer(s) without a cuDNN call"),
    ("cudnn", 2, 0, True, False, "no backward cuDNN call"),
    ("cudnn", 2, 0, False, True, "aten::_cudnn_rnn x2 for 2"),
    ("generic", 0, 0, True, True, "no aten::_cudnn_rnn"),
    ("generic", 1, 0, False, False, "cuDNN calls in the generic copy: aten::_cudnn_rnn x1"),
])
def test_a_copy_is_judged_by_the_cudnn_calls_it_made(impl: str, forward: int, backward: int, train: bool, ok: bool,
                                                     text: str) -> None:
    """The cuDNN copy needs a call per eligible unit (a layer that fell back leaves one short); generic none."""
    got_ok, evidence = judge_calls(impl, forward, backward, train, 2, "aten::_cudnn_rnn")
    assert got_ok is ok and text in evidence


def test_a_layer_that_lost_its_flag_fails_the_flag_check() -> None:
    """A wrapper rebuilding a layer from its config would turn a False into "auto": named."""
    found = [_found("a"), _found("b")]
    assert flags_evidence(found, [True, False], [True, False]) == (True, "flags: use_cudnn=True on 1, False on 1 layer(s)")
    ok, evidence = flags_evidence(found, [True, "auto"], [True, False])
    assert not ok and "b use_cudnn='auto'" in evidence


def test_structures_are_named_and_rebuilt_in_one_order() -> None:
    """Inputs and outputs may be an array, a list/tuple or a dict of them (as model.fit takes them)."""
    structure = {"tokens": 1, "extra": [2, (3, 4)]}
    assert leaves(structure, "x") == [("x[tokens]", 1), ("x[extra][0]", 2), ("x[extra][1][0]", 3), ("x[extra][1][1]", 4)]
    assert rebuilt(structure, iter("abcd")) == {"tokens": "a", "extra": ["b", ("c", "d")]}
    assert leaves(5, "output") == [("output", 5)]


# ------------------------------------------------------------------------------ with Keras (TensorFlow here)


@pytest.fixture(scope="module")
def keras() -> Any:
    """Keras 3 on this process's backend (TensorFlow unless KERAS_BACKEND says otherwise)."""
    if importlib.util.find_spec("keras") is None or importlib.util.find_spec("tensorflow") is None:
        pytest.skip("needs keras and tensorflow")
    import keras

    return keras


def _custom_and_subclassed(keras: Any) -> Any:
    """A subclassed model holding a custom layer that holds a GRU, and a TimeDistributed LSTM."""

    class Encoder(keras.layers.Layer):
        """A custom layer with a GRU attribute."""

        def __init__(self) -> None:
            super().__init__()
            self.rnn = keras.layers.GRU(6, return_sequences=True, unroll=True)

        def call(self, x: Any) -> Any:
            return self.rnn(x)

    class Tagger(keras.Model):
        """A subclassed model."""

        def __init__(self) -> None:
            super().__init__()
            self.per_chunk = keras.layers.TimeDistributed(keras.layers.LSTM(4))
            self.encoder = Encoder()
            self.head = keras.layers.Dense(2)

        def call(self, x: Any) -> Any:
            return self.head(self.encoder(self.per_chunk(x)))

    model = Tagger()
    model(np.zeros((2, 3, 5, 7), dtype="float32"))
    return model


def test_layers_are_found_in_wrappers_nested_models_and_custom_layers(keras: Any) -> None:
    """Bidirectional's two directions, TimeDistributed's layer, a nested model's and a custom layer's."""
    from pytest_rnnperf.backends.keras_model import find

    inner = keras.Sequential([keras.Input((None, 8)), keras.layers.Bidirectional(keras.layers.LSTM(5, return_sequences=True))])
    outer = keras.Sequential([keras.Input((None, 8)), inner, keras.layers.GRU(3, reset_after=False, use_cudnn=True)])
    found = find(keras, outer, "tensorflow", [])
    assert sorted((f.kind, f.units, bool(f.wrapper)) for f in found) == [("GRU", 3, False), ("LSTM", 5, True), ("LSTM", 5, True)]
    gru = next(f for f in found if f.kind == "GRU")
    assert gru.asked is True and gru.blockers == ("reset_after=False (cuDNN's GRU needs True)",)
    assert cudnn_units(found) == 1  # the bidirectional LSTM; the GRU cannot
    assert "reset_after=False" in str(refusal(found, "tensorflow"))

    found = find(keras, _custom_and_subclassed(keras), "jax", [])
    assert sorted(f.label.split()[-1] for f in found) == ["GRU(6)", "LSTM(4)"]
    assert next(f for f in found if f.kind == "GRU").blockers == (
        "Keras on JAX has no cuDNN GRU (jax.experimental.rnn has an LSTM only)", "unroll=True (cuDNN needs False)")


def test_dropout_is_zeroed_in_a_copy_and_named(keras: Any) -> None:
    """Random masks would make the copies differ; recurrent dropout goes too (the layer stays blocked by it)."""
    from pytest_rnnperf.backends.keras_model import rnn_layers, without_dropout

    model = keras.Sequential([keras.Input((4, 3)), keras.layers.LSTM(5, dropout=0.2, recurrent_dropout=0.1),
                              keras.layers.Dropout(0.5)])
    changed = without_dropout(keras, model)
    assert len(changed) == 2 and "(dropout 0.2, recurrent_dropout 0.1)" in changed[0] and "(0.5)" in changed[1]
    lstm = rnn_layers(keras, model)[0]
    assert lstm.dropout == 0 and lstm.recurrent_dropout == 0 and model.layers[-1].rate == 0
    assert without_dropout(keras, model) == []


def test_a_keras_model_goes_to_the_spec_of_its_keras_backend(keras: Any) -> None:
    """Built on TensorFlow: the tf spec; backend names map to specs, and a wrong one says which exist."""
    model = keras.Sequential([keras.Input((4, 3)), keras.layers.LSTM(5)])
    assert model_backend_for(model).name == "tf"
    assert keras_spec("torch").name == "keras_torch" and keras_spec("jax").name == "keras_jax"
    with pytest.raises(ModelError, match=r"backend='pytorch' is no Keras backend; expected one of jax, tensorflow, torch"):
        keras_spec("pytorch")


def test_what_a_subprocess_cannot_import_is_refused_in_one_line() -> None:
    """Functions travel by name: a lambda or a nested function cannot; NumPy arrays and module-level ones can."""
    def nested() -> None:
        """Defined inside a test."""

    with pytest.raises(ModelError, match=r"backend='jax': build must be importable in the Keras-on-jax subprocess: "
                                         r"define it at module level \(got a lambda"):
        model_payload(lambda: None, np.zeros(3), ModelOptions(), "jax")
    with pytest.raises(ModelError, match=r"inputs must be importable .* \(got a function defined inside another"):
        model_payload(np.ones, nested, ModelOptions(), "torch")
    with pytest.raises(ModelError, match=r"parity_inputs must be importable .* \(got a lambda"):
        model_payload(np.ones, np.zeros(3), ModelOptions(parity_inputs=lambda: [np.zeros(3)]), "jax")
    assert model_payload(np.ones, np.zeros(3), ModelOptions(loss="mse"), "torch")


def test_a_keras_backend_whose_framework_is_missing_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """rnnperf.model(..., backend="jax") on a machine without JAX skips with this line (asked in the subprocess)."""
    import importlib.util as util

    from pytest_rnnperf.backends import keras as keras_backends

    real = util.find_spec
    monkeypatch.setattr(keras_backends.importlib.util, "find_spec",
                        lambda name, *a: None if name == "jax" else real(name, *a))
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert keras_backends.jax_backend().unavailable_reason() == "jax is not installed (Keras on jax needs it)"


def test_the_train_step_is_described_as_it_runs() -> None:
    """The compiled loss is only used with targets: a compiled model without them says so."""
    assert loss_note("compiled", None) == "train step: forward, gradients of the compiled loss, no optimizer update"
    assert "(the compiled loss needs targets=)" in loss_note("upstream", None, compiled=True)
    assert "(no loss= and no compiled loss)" in loss_note("upstream", None)


# ------------------------------------------------------------------------------ parity batches, dropout (TensorFlow)

QUICK = TimingConfig(rounds=2, min_rounds=1, warmup_steps=1, warmup_s=0.0, min_block_s=0.0, max_time_s=5.0)


def _masked_lstm() -> Any:
    """Embedding(mask_zero=True) -> LSTM -> Dense, built on this process's Keras."""
    import keras

    tokens = keras.Input(shape=(None,), dtype="int32")
    x = keras.layers.Embedding(20, 4, mask_zero=True)(tokens)
    return keras.Model(tokens, keras.layers.Dense(2)(keras.layers.LSTM(3, return_sequences=True)(x)))


def _dropout_lstm() -> Any:
    """An LSTM with input dropout, built on this process's Keras."""
    import keras

    return keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4, dropout=0.25, return_sequences=True)])


RIGHT_PADDED = np.array([[1, 2, 3, 4], [5, 6, 0, 0]])
EMPTY_ROW = np.array([[7, 8, 9, 1], [0, 0, 0, 0]])


def test_parity_keeps_each_quantity_worst_error_over_the_batches_and_names_the_batch() -> None:
    """A corruption in one batch of three is what the comparison reports, with that batch's number."""
    rows = [[ParityRow("cudnn vs generic", "output", error, 1e-5), ParityRow("cudnn vs generic", "h_n", 1e-7, 1e-5)]
            for error in (1e-7, 3e-2, 2e-7)]
    worst = worst_over_batches(rows)
    assert [(r.quantity, r.error, r.note) for r in worst] == [
        ("output", 3e-2, "worst of 3 batches: batch 1"), ("h_n", 1e-7, "worst of 3 batches: batch 0")]
    nan = [[ParityRow("a", "output", 0.5, 1.0)], [ParityRow("a", "output", float("nan"), 1.0, "NaN in a")]]
    assert worst_over_batches(nan)[0].note == "worst of 2 batches: batch 1; NaN in a"
    assert worst_over_batches(rows[:1]) == rows[0]  # one batch: its rows as they are


def test_a_parity_batch_of_another_shape_is_refused_in_one_line(keras: Any) -> None:
    """The timed step is traced for the inputs' shape; a parity batch must have it."""
    with pytest.raises(ModelError, match=r"parity_inputs\[1\] is inputs \(2, 3\) where inputs are inputs \(2, 4\): "
                                         r"each parity batch must match inputs"):
        parity_batches(keras, RIGHT_PADDED, [RIGHT_PADDED, RIGHT_PADDED[:, :3]])
    with pytest.raises(ModelError, match=r"parity_inputs= takes a non-empty list of batches"):
        parity_batches(keras, RIGHT_PADDED, lambda: RIGHT_PADDED)
    assert len(parity_batches(keras, RIGHT_PADDED, lambda: [EMPTY_ROW, RIGHT_PADDED])) == 2


def test_parity_runs_on_every_batch_and_a_batch_with_an_empty_row_keeps_the_layer_off_cudnn(keras: Any) -> None:
    """The second batch's all-padding row is named (cuDNN would assert on it), and parity holds on both batches."""
    from pytest_rnnperf.backends.tensorflow import TFBackend

    model = _masked_lstm()
    options = ModelOptions(parity_inputs=[EMPTY_ROW])
    pair = TFBackend().build_model(ModelCase("m", "tf"), model, RIGHT_PADDED, impls=("generic",), build=_masked_lstm,
                                   options=options)
    try:
        assert pair.parity_batches == 2
        assert any("mask leaves sequence 1 empty (cuDNN rejects fully masked sequences)" in n for n in pair.notes)
        first, second = pair.generic.result(), pair.generic.result(1)
        assert not np.allclose(first["output"][1][1], second["output"][1][1])  # (kind, array): sequence 1 differs
        assert np.allclose(pair.reference(1)["output"][1], second["output"][1], atol=1e-5)
    finally:
        pair.close()
    record = run_model(ModelCase("m", "tf"), TFBackend(), _masked_lstm(), RIGHT_PADDED, RunConfig(timing=QUICK,
                       energy_s=0.0, device_rounds=0), impls=("generic",), build=_masked_lstm, options=options)
    assert record.parity.ok and record.parity.rows
    assert all(r.note.startswith("worst of 2 batches: batch ") for r in record.parity.rows)


@pytest.mark.parametrize(("mode", "kept"), [("infer", 0.25), ("train", 0.0)])
def test_predict_keeps_the_model_dropout_and_training_compares_without_it(keras: Any, mode: str, kept: float) -> None:
    """Predict runs the path Keras picks for the layer as written (dropout on); a train step's random masks cannot
    be compared, so training zeroes them and says so."""
    from pytest_rnnperf.backends.keras_model import rnn_layers
    from pytest_rnnperf.backends.tensorflow import TFBackend

    x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype("float32")
    pair = TFBackend().build_model(ModelCase("m", "tf", mode=mode), _dropout_lstm(), x, impls=("generic",),
                                   build=_dropout_lstm)
    try:
        assert rnn_layers(keras, pair.generic.model)[0].dropout == kept
        assert any("dropout set to 0" in n for n in pair.notes) == (mode == "train")
    finally:
        pair.close()
