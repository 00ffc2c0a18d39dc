"""Teams' own Keras models end to end on a machine without a GPU: every Keras backend from one run, and every
mistake a test can make with one answered in one line."""

from __future__ import annotations

import pytest

from conftest import needs_a_cpu_machine_with, run, whole_lines


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The summary's widest: these tests match what its lines say (test_terminal_e2e.py checks the fit)."""
    monkeypatch.setenv("COLUMNS", "200")

# Models of every shape the check takes, each on TensorFlow (this process), torch and JAX (subprocesses).
MODELS = '''
import keras
import numpy as np
import pytest

BACKENDS = ["tensorflow", "torch", "jax"]


def build_seq2seq():
    """Two inputs (one masked), an encoder whose states start the decoder, two outputs."""
    source = keras.Input(shape=(7, 3), name="source")
    target = keras.Input(shape=(5, 4), name="target")
    masked = keras.layers.Masking(mask_value=0.0)(source)
    encoded, h, c = keras.layers.LSTM(6, return_state=True)(masked)
    decoded = keras.layers.LSTM(6, return_sequences=True)(target, initial_state=[h, c])
    steps = keras.layers.TimeDistributed(keras.layers.Dense(2), name="steps")(decoded)
    summary = keras.layers.Dense(1, name="summary")(encoded)
    return keras.Model({"source": source, "target": target}, [steps, summary])


def seq2seq_inputs():
    rng = np.random.default_rng(0)
    source = rng.standard_normal((4, 7, 3)).astype("float32")
    source[1, 5:] = 0.0
    source[3, 3:] = 0.0
    return {"source": source, "target": rng.standard_normal((4, 5, 4)).astype("float32")}


def seq2seq_targets():
    rng = np.random.default_rng(1)
    return [rng.standard_normal((4, 5, 2)).astype("float32"), rng.standard_normal((4, 1)).astype("float32")]


class Chunks(keras.layers.Layer):
    """A custom layer that holds a GRU."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rnn = keras.layers.GRU(5, return_sequences=True)

    def call(self, x):
        return self.rnn(x)


class Reader(keras.Model):
    """A subclassed model: an LSTM per chunk (TimeDistributed), a custom layer with a GRU over the chunks."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.per_chunk = keras.layers.TimeDistributed(keras.layers.LSTM(4))
        self.chunks = Chunks()
        self.head = keras.layers.Dense(3)

    def call(self, x):
        return self.head(self.chunks(self.per_chunk(x)))


def build_reader():
    model = Reader()
    model(np.zeros((1, 3, 6, 2), dtype="float32"))
    return model


READER_X = np.random.default_rng(2).standard_normal((4, 3, 6, 2)).astype("float32")


def fit_step(model, x, y):
    """A step of the team's own: a forward in training mode."""
    return model(x, training=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_seq2seq(rnnperf, backend):
    rnnperf.check(rnnperf.model(build_seq2seq, inputs=seq2seq_inputs, targets=seq2seq_targets, loss="mse",
                                optimizer="sgd", backend=backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_reader_predicts(rnnperf, backend):
    rnnperf.check(rnnperf.model(build_reader, inputs=READER_X, mode="infer", backend=backend))


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])  # an eager step of Keras on JAX takes seconds
def test_reader_own_step(rnnperf, backend):
    rnnperf.check(rnnperf.model(build_reader, inputs=READER_X, step=fit_step, backend=backend))
'''

# Each test gets one thing wrong (or right where a layer falls back), on Keras on TensorFlow in this process.
MISTAKES = '''
import keras
import numpy as np
import pytest

X = np.zeros((2, 5, 3), dtype="float32")


def lstm_layer():
    return keras.layers.LSTM(4)


def dense_only():
    return keras.Sequential([keras.Input((5, 3)), keras.layers.Flatten(), keras.layers.Dense(2)])


def unrolled_on_cudnn():
    return keras.Sequential([keras.Input((5, 3)), keras.layers.GRU(4, unroll=True, use_cudnn=True)])


def relu_auto():
    return keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4, activation="relu"), keras.layers.Dense(2)])


def test_layer(rnnperf):
    rnnperf.model(lstm_layer, inputs=X)


def test_no_rnn(rnnperf):
    rnnperf.model(dense_only, inputs=X)


def test_bad_backend(rnnperf):
    rnnperf.model(dense_only, inputs=X, backend="pytorch")


def test_lambda_for_subprocess(rnnperf):
    rnnperf.model(lambda: relu_auto(), inputs=X, backend="torch")


def test_asked_for_cudnn(rnnperf):
    rnnperf.model(unrolled_on_cudnn, inputs=X)


def test_asked_for_cudnn_allowed(rnnperf):
    rnnperf.check(rnnperf.model(unrolled_on_cudnn, inputs=X, allow_generic=True))


def test_auto_falls_back_named(rnnperf):
    rnnperf.check(rnnperf.model(relu_auto, inputs=X))


def test_wrong_inputs(rnnperf):
    rnnperf.model(relu_auto, inputs=np.zeros((2, 5, 4), dtype="float32"))


def test_instance(rnnperf):
    rnnperf.model(relu_auto(), inputs=X)


def test_loss_without_targets(rnnperf):
    rnnperf.model(relu_auto, inputs=X, loss="mse")


def test_targets_without_loss(rnnperf):
    rnnperf.model(relu_auto, inputs=X, targets=np.zeros((2, 2)))
'''


def _run(pytester: pytest.Pytester, name: str, source: str) -> pytest.RunResult:
    """Run one test file in a subprocess, with one timed round (--benchmark-disable) and no report files."""
    pytester.makepyfile(**{name: source})
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", "--rnnperf-report-dir=none",
                                         "--rnnperf-rounds=3", "--rnnperf-energy-s=0", "--benchmark-disable")


def test_keras_models_of_every_shape_are_checked_on_every_keras_backend(pytester: pytest.Pytester) -> None:
    """Several inputs and outputs, Masking, return_state feeding initial_state, a subclassed model with a custom
    layer and TimeDistributed, predict and a team's own step: the generic copies match float64 everywhere, and each
    layer a backend cannot run on cuDNN is named with its reason."""
    needs_a_cpu_machine_with(("keras", "tensorflow", "torch", "jax"), "Keras on every backend")
    result = _run(pytester, "test_shapes", MODELS)
    result.assert_outcomes(passed=8)
    out = result.stdout.str()
    for backend in ("tensorflow", "torch", "jax"):
        assert f"test_shapes.py::test_seq2seq[{backend}] " in out
    result.stdout.fnmatch_lines([
        "note: test_shapes.py::test_seq2seq[[]tensorflow[]]: Keras on tensorflow: 2 LSTM/GRU layer(s) found; on cuDNN "
        "in the cuDNN copy: lstm* LSTM(6), lstm* LSTM(6)",
        "note: test_shapes.py::test_seq2seq[[]torch[]]: generic in both copies: lstm* LSTM(6): masked input (Keras on "
        "torch runs masked sequences on its generic loop only)",
        "note: test_shapes.py::test_seq2seq[[]jax[]]: train step: forward, gradients of the loss= given, then SGD "
        "updates the weights",
        "note: test_shapes.py::test_reader_predicts[[]jax[]]: generic in both copies: reader*/chunks*/gru* GRU(5): "
        "Keras on JAX has no cuDNN GRU*",
        "note: test_shapes.py::test_reader_own_step[[]torch[]]: train step: the step= function given",
    ])
    assert out.count("cuDNN side not run: cuDNN case needs a GPU") == 8


def test_every_mistake_with_a_keras_model_is_one_line(pytester: pytest.Pytester) -> None:
    """Not a model, no RNN, a wrong backend name, a lambda for a subprocess, use_cudnn=True where cuDNN cannot
    run, inputs of the wrong shape, a built model, a loss without targets and targets without a loss: one line
    each, no traceback; allow_generic=True and use_cudnn="auto" pass with the fallback named."""
    needs_a_cpu_machine_with(("keras", "tensorflow"), "Keras on TensorFlow")
    result = _run(pytester, "test_bad", MISTAKES)
    result.assert_outcomes(failed=9, passed=2)
    result.stdout.fnmatch_lines_random([
        "test_bad.py::test_layer: build() returned a Keras LSTM layer, not a Keras model (wrap it: *",
        "test_bad.py::test_no_rnn: Sequential '*' has no Keras LSTM or GRU layer (looked inside Bidirectional, "
        "TimeDistributed, nested models and custom layers): nothing in it runs on cuDNN",
        "test_bad.py::test_bad_backend: backend='pytorch' is no Keras backend; expected one of jax, tensorflow, torch",
        "test_bad.py::test_lambda_for_subprocess: backend='torch': build must be importable in the Keras-on-torch "
        "subprocess: define it at module level (got a lambda, *)",
        "test_bad.py::test_asked_for_cudnn: use_cudnn=True where Keras on tensorflow cannot use cuDNN: */gru GRU(4): "
        "unroll=True (cuDNN needs False) (pass allow_generic=True to accept the generic path there)",
        "test_bad.py::test_wrong_inputs: Sequential '*' failed on its inputs: InvalidArgumentError: Matrix "
        "size-incompatible: *",
        "test_bad.py::test_instance: rnnperf.model(): got a built Keras Sequential; pass the function that builds it: *",
        "test_bad.py::test_loss_without_targets: loss= needs targets= (the y of model.fit)",
        "test_bad.py::test_targets_without_loss: targets= given, but no loss: pass loss= or compile the model with one "
        "in build()",
        "note: test_bad.py::test_asked_for_cudnn_allowed: generic in both copies: */gru* GRU(4): unroll=True (cuDNN "
        "needs False)",
        "note: test_bad.py::test_auto_falls_back_named: generic in both copies: */lstm* LSTM(4): activation=relu "
        "(cuDNN needs tanh)",
    ])
    assert "Traceback" not in result.stdout.str()


def test_a_test_module_importing_keras_runs_where_keras_has_torch_but_no_tensorflow(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keras's TensorFlow default is missing: the run picks torch for this process and says so in the header."""
    needs_a_cpu_machine_with(("keras", "torch"), "Keras on torch")
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(pytester.path / "keras-home"))  # no keras.json that names a backend
    # Loaded with -p before the plugin reads what is installed: this runner has no TensorFlow.
    pytester.makepyfile(no_tensorflow="import sys\nsys.modules['tensorflow'] = None\n")
    pytester.makepyfile(test_team="import keras\n\ndef test_keras_backend():\n"
                                  "    assert keras.backend.backend() == 'torch'\n")
    result = pytester.runpytest_subprocess("-p", "no_tensorflow", "-p", "no:cacheprovider", "--rnnperf-report-dir=none",
                                           "test_team.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["rnnperf: Keras runs on torch here (KERAS_BACKEND unset, tensorflow not installed)"])


DECLARED = """
import numpy as np
import pytest


def build():
    import keras

    x = keras.Input(shape=(5, 3))
    return keras.Model(x, keras.layers.LSTM(4)(x))


def inputs():
    return np.random.default_rng(0).standard_normal((2, 5, 3)).astype("float32")


def lstm(scale):
    return dict(build=build, inputs=inputs, backend="jax")


@pytest.mark.rnnperf_ahead(model=lstm)
def test_declared(rnnperf):
    rnnperf.check(rnnperf.model(**lstm("smoke")))
"""


def test_a_first_night_compiles_a_declared_keras_on_jax_model_ahead_and_its_test_waits_for_it(
        project: pytest.Pytester) -> None:
    """rnnperf_ahead(model=...) on an empty compile cache: a compile-ahead process for the models of Keras on JAX
    builds and checks the model (its log names it), the summary counts it, and the test passes as without it."""
    needs_a_cpu_machine_with(("keras", "jax"), "Keras on JAX")
    project.makepyfile(test_declared=DECLARED)
    result = run(project, "--rnnperf-report-dir=out", "-k", "declared")
    result.assert_outcomes(passed=1)
    whole_lines(result).fnmatch_lines(["compiled ahead: 1 of 1 case(s) (keras_jax models 1) in * s behind the other "
                                       "cases, paused while any case was timed; cases waited * s for theirs"])
    log = (project.path / "out" / "ahead-keras_jax-models.log").read_text()
    assert "ahead: test_declared.py::test_declared built in" in log, log
