"""TensorFlow/Keras backend: weight converters (pure NumPy), generic-path parity on the CPU, path proof,
skip reasons, and cross-framework agreement with torch through the canonical weights."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from pytest_rnnperf.model import reference
from pytest_rnnperf.backends import BackendUnavailable
from pytest_rnnperf.backends.tensorflow import TFBackend, from_keras, to_keras
from pytest_rnnperf.model.cases import Case, Shape

T, B, I, H = 5, 3, 4, 6


def _err(a: np.ndarray, b: np.ndarray) -> float:
    """Normalized max error max|a - b| / max|b| (the parity module's measure)."""
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(float(np.abs(b).max()), 1e-30))


def _case(cell: str, num_layers: int = 1, bidirectional: bool = False, mode: str = "train", batch: int = B) -> Case:
    """A small tf case."""
    return Case("tf", cell, Shape(T, batch, I, H, num_layers, bidirectional), mode=mode)


# ---------------------------------------------------------------------------------------------------------
# Converters: pure NumPy, no TensorFlow needed.
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
def test_to_keras_shapes(cell: str) -> None:
    w = reference.init_weights(cell, I, H, num_layers=2, bidirectional=True, seed=1)
    kw = to_keras(w)
    g = w.gates
    assert len(kw) == 2 and all(len(dirs) == 2 for dirs in kw)
    for layer, dirs in enumerate(kw):
        in_size = I if layer == 0 else 2 * H
        for kernel, recurrent, bias in dirs:
            assert kernel.shape == (in_size, g * H)
            assert recurrent.shape == (H, g * H)
            assert bias.shape == ((2, 3 * H) if cell == "gru" else (g * H,))


def test_gru_round_trip_is_exact_and_reorders_gates() -> None:
    w = reference.init_weights("gru", I, H, num_layers=2, bidirectional=True, seed=2)
    kernel, recurrent, bias = to_keras(w)[0][0]
    lw = w.layers[0][0]
    # Keras blocks are z, r, h; canonical rows are r, z, n.
    np.testing.assert_array_equal(kernel[:, :H], lw.w_ih[H : 2 * H].T)  # z
    np.testing.assert_array_equal(kernel[:, H : 2 * H], lw.w_ih[:H].T)  # r
    np.testing.assert_array_equal(recurrent[:, 2 * H :], lw.w_hh[2 * H :].T)  # h == n
    np.testing.assert_array_equal(bias[0, :H], lw.b_ih[H : 2 * H])
    np.testing.assert_array_equal(bias[1, H : 2 * H], lw.b_hh[:H])
    back = from_keras("gru", I, H, 2, True, to_keras(w))
    assert back.max_abs_diff(w) == 0.0


@pytest.mark.parametrize("cell", ["lstm", "rnn_tanh", "rnn_relu"])
def test_single_bias_round_trip(cell: str) -> None:
    w = reference.init_weights(cell, I, H, num_layers=2, bidirectional=False, seed=3)
    kw = to_keras(w)
    np.testing.assert_allclose(kw[1][0][2], w.layers[1][0].b_ih + w.layers[1][0].b_hh)
    back = from_keras(cell, I, H, 2, False, kw)
    for got, want in zip(back.layers, w.layers):
        np.testing.assert_array_equal(got[0].w_ih, want[0].w_ih)
        np.testing.assert_array_equal(got[0].w_hh, want[0].w_hh)
        # The split is not recoverable: all of it lands in b_ih, b_hh is zero; the sum is kept.
        np.testing.assert_allclose(got[0].b_ih, want[0].b_ih + want[0].b_hh)
        assert not got[0].b_hh.any()
    x = np.random.default_rng(0).standard_normal((T, B, I))
    a, b = reference.forward(back, x), reference.forward(w, x)
    np.testing.assert_allclose(a.output, b.output, rtol=0, atol=1e-12)
    # Gradient arrays: the single bias gradient goes to both canonical biases.
    grads = from_keras(cell, I, H, 2, False, kw, gradients=True)
    np.testing.assert_array_equal(grads.layers[0][0].b_ih, grads.layers[0][0].b_hh)


def test_from_keras_rejects_wrong_structure() -> None:
    w = reference.init_weights("lstm", I, H, num_layers=2, bidirectional=True, seed=4)
    with pytest.raises(ValueError, match="layers x 2 directions"):
        from_keras("lstm", I, H, 2, True, to_keras(w)[:1])


def test_module_import_does_not_import_tensorflow() -> None:
    code = "import sys, pytest_rnnperf.backends.tensorflow; assert 'tensorflow' not in sys.modules, 'tf imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unavailable_reason_other_keras_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("keras")
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    reason = TFBackend().unavailable_reason()
    assert reason is not None and "'jax'" in reason and "tensorflow" in reason


@pytest.mark.parametrize("absent", ["tensorflow", "keras"])
def test_unavailable_reason_names_the_one_not_installed(monkeypatch: pytest.MonkeyPatch, absent: str) -> None:
    """Keras installed for torch or JAX lacks tensorflow alone; a TensorFlow without Keras 3 lacks keras."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == absent else real(name, *a))
    assert TFBackend().unavailable_reason() == f"{absent} is not installed (pip install 'pytest-rnnperf[tf]')"


# ---------------------------------------------------------------------------------------------------------
# With TensorFlow, on the CPU: the generic side against the float64 reference.
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tf_backend() -> TFBackend:
    """The backend, with TensorFlow importable and set to the tensorflow Keras backend."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("keras")
    backend = TFBackend()
    reason = backend.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return backend


@pytest.mark.parametrize(
    ("cell", "num_layers", "bidirectional"),
    [("lstm", 2, True), ("gru", 2, True), ("rnn_tanh", 1, False), ("rnn_relu", 2, False)],
)
def test_generic_matches_reference(tf_backend: TFBackend, cell: str, num_layers: int, bidirectional: bool) -> None:
    case = _case(cell, num_layers, bidirectional)
    weights = reference.init_weights(cell, I, H, num_layers, bidirectional, seed=5)
    inputs = reference.make_inputs(case, seed=6)
    pair = tf_backend.build(case, weights, inputs, impls=("generic",))
    try:
        assert pair.cudnn is None and pair.generic is not None
        got = pair.generic.result()
        fwd = reference.forward(weights, inputs.x)
        grads = reference.backward(weights, inputs.x, inputs.d_output, inputs.d_h_n, inputs.d_c_n)
        assert got.output.shape == fwd.output.shape and got.h_n.shape == fwd.h_n.shape
        assert _err(got.output, fwd.output) < 1e-4
        assert _err(got.h_n, fwd.h_n) < 1e-4
        if cell == "lstm":
            assert got.c_n is not None and fwd.c_n is not None and _err(got.c_n, fwd.c_n) < 1e-4
        else:
            assert got.c_n is None
        assert got.d_input is not None and _err(got.d_input, grads.d_input) < 1e-4
        assert got.d_weights is not None
        # LSTM/SimpleRNN: Keras' single bias gradient was put into both canonical bias gradients, which
        # the reference computes separately (they are equal there, too).
        for name, a, b in zip(grads.d_weights.flat_names(), got.d_weights.flat(), grads.d_weights.flat()):
            assert _err(a, b) < 1e-4, name

        proof = pair.generic.prove_path()
        assert proof.ok and proof.impl == "generic"
        assert "no CudnnRNNV3" in proof.evidence and "While" in proof.evidence

        # A batch slice runs padded through the timed trace; another shape gets a trace of its own. Either
        # way the timed step keeps its single trace.
        small_case = dataclasses.replace(case, shape=dataclasses.replace(case.shape, batch=2))
        small = reference.make_inputs(small_case, seed=7)
        got_small = pair.generic.result(small)
        want = reference.backward(weights, small.x, small.d_output, small.d_h_n, small.d_c_n)
        assert got_small.output.shape[1] == 2 and got_small.h_n.shape[1] == 2
        assert _err(got_small.output, reference.forward(weights, small.x).output) < 1e-4
        assert got_small.d_input is not None and _err(got_small.d_input, want.d_input) < 1e-4
        assert got_small.d_weights is not None
        for name, a, b in zip(want.d_weights.flat_names(), got_small.d_weights.flat(), want.d_weights.flat()):
            assert _err(a, b) < 1e-4, name
        assert pair.generic._parity_fn.experimental_get_tracing_count() == 0
        # Padded on the device, the slice is bit for bit what the timed trace gives for it padded on the host.
        host_padded = dataclasses.replace(inputs, **{
            f: np.concatenate([getattr(small, f), np.zeros_like(getattr(inputs, f)[:, 2:])], axis=1)
            for f in ("x", "d_output", "d_h_n", "d_c_n") if getattr(inputs, f) is not None})
        whole = pair.generic.result(host_padded)  # the timing shapes themselves: the timed trace, nothing cut
        assert whole.output.shape == inputs.x.shape[:2] + (got_small.output.shape[2],)
        np.testing.assert_array_equal(got_small.output, whole.output[:, :2])
        np.testing.assert_array_equal(got_small.h_n, whole.h_n[:, :2])
        assert got_small.d_input is not None and whole.d_input is not None and whole.d_weights is not None
        np.testing.assert_array_equal(got_small.d_input, whole.d_input[:, :2])
        for a, b in zip(got_small.d_weights.flat(), whole.d_weights.flat()):
            np.testing.assert_array_equal(a, b)
        assert pair.generic._parity_fn.experimental_get_tracing_count() == 0
        shorter_case = dataclasses.replace(case, shape=dataclasses.replace(case.shape, seq_len=3, batch=2))
        shorter = reference.make_inputs(shorter_case, seed=8)
        assert _err(pair.generic.result(shorter).output, reference.forward(weights, shorter.x).output) < 1e-4
        assert pair.generic._parity_fn.experimental_get_tracing_count() == 1
        pair.generic.step()
        pair.sync()
        assert pair.generic._step_fn.experimental_get_tracing_count() == 1
    finally:
        pair.close()


def test_infer_mode_has_no_gradients(tf_backend: TFBackend) -> None:
    case = _case("lstm", mode="infer")
    weights = reference.init_weights("lstm", I, H, seed=8)
    inputs = reference.make_inputs(case, seed=9)
    pair = tf_backend.build(case, weights, inputs, impls=("generic",))
    try:
        got = pair.generic.result()
        assert got.d_input is None and got.d_weights is None
        assert _err(got.output, reference.forward(weights, inputs.x).output) < 1e-4
        assert pair.generic.prove_path().ok
    finally:
        pair.close()


def test_precision_flags_pin_and_restore(tf_backend: TFBackend) -> None:
    import tensorflow as tf

    from pytest_rnnperf.backends.tensorflow import precision_flags

    saved = tf.config.experimental.tensor_float_32_execution_enabled()
    for precision, want in (("fp32", False), ("tf32", True)):
        with precision_flags(precision):
            assert tf.config.experimental.tensor_float_32_execution_enabled() is want
        assert tf.config.experimental.tensor_float_32_execution_enabled() is saved


def test_build_refusals_without_gpu(tf_backend: TFBackend) -> None:
    weights = reference.init_weights("lstm", I, H, seed=10)
    case = _case("lstm")
    inputs = reference.make_inputs(case)
    gpu_reason = tf_backend.gpu_unavailable_reason()
    if gpu_reason is None:
        pytest.skip("a GPU is visible to TensorFlow; the CPU refusals do not apply")
    assert "GPU" in gpu_reason or "CUDA" in gpu_reason
    with pytest.raises(BackendUnavailable, match="GPU|CUDA") as exc:
        tf_backend.build(case, weights, inputs, impls=("cudnn", "generic"))
    assert str(exc.value) == gpu_reason
    with pytest.raises(BackendUnavailable, match="need a CUDA GPU"):
        tf_backend.build(dataclasses.replace(case, precision="bf16"), weights, inputs, impls=("generic",))


def test_simple_rnn_has_no_cudnn_side(tf_backend: TFBackend) -> None:
    weights = reference.init_weights("rnn_tanh", I, H, seed=11)
    case = _case("rnn_tanh")
    with pytest.raises(BackendUnavailable, match="SimpleRNN has no cuDNN path"):
        tf_backend.build(case, weights, reference.make_inputs(case), impls=("cudnn",))


def test_runtime_info_reports_memory_growth(tf_backend: TFBackend) -> None:
    """The backend's runtime fields include how TF's memory growth was set up."""
    info = tf_backend.runtime_info()
    assert "tf.memory_growth_setup" in info and "tf.version" in info


@pytest.mark.parametrize(
    ("cell", "num_layers", "bidirectional"), [("lstm", 2, True), ("gru", 1, False), ("rnn_relu", 1, True)]
)
def test_same_canonical_weights_same_outputs_as_torch(
    tf_backend: TFBackend, cell: str, num_layers: int, bidirectional: bool
) -> None:
    pytest.importorskip("torch")
    from pytest_rnnperf.backends.torch import TorchBackend

    case = _case(cell, num_layers, bidirectional)
    weights = reference.init_weights(cell, I, H, num_layers, bidirectional, seed=12)
    inputs = reference.make_inputs(case, seed=13)
    tf_pair = tf_backend.build(case, weights, inputs, impls=("generic",))
    torch_pair = TorchBackend().build(dataclasses.replace(case, framework="torch"), weights, inputs, impls=("generic",))
    try:
        a, b = tf_pair.generic.result(), torch_pair.generic.result()
        assert _err(a.output, b.output) < 1e-5
        assert _err(a.h_n, b.h_n) < 1e-5
        if cell == "lstm":
            assert _err(a.c_n, b.c_n) < 1e-5
        assert _err(a.d_input, b.d_input) < 1e-5
    finally:
        tf_pair.close()
        torch_pair.close()


@pytest.mark.parametrize("cell", ["gru", "rnn_tanh"])
def test_run_cross_compares_every_quantity_across_frameworks(tf_backend: TFBackend, cell: str) -> None:
    """run_cross on the CPU: torch and Keras generic sides agree on outputs, states and every gradient."""
    pytest.importorskip("torch")
    from pytest_rnnperf.backends.torch import TorchBackend
    from pytest_rnnperf.measure.runner import run_cross

    case = dataclasses.replace(_case(cell, 2, True), framework="torch")
    result = run_cross(case, (("torch", TorchBackend(), "generic"), ("tf", tf_backend, "generic")))
    assert result.id == f"torch-vs-tf-{cell}-train-fp32-T5-B3-I4-H6-L2-bi"
    assert result.sides == ("torch generic", "tf generic")
    assert [p.impl for p in result.proofs] == ["generic", "generic"] and result.paths_ok
    assert [r.quantity for r in result.parity.rows] == ["output", "h_n", "d_input", "d_weights"]
    assert result.parity.ok, result.parity.failures()


def test_cudnn_internal_error_with_logged_oom_becomes_a_skip(
    tf_backend: TFBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU, a cuDNN RNN that cannot get its workspace raises InternalError; only TF's log says OOM."""
    import os

    import tensorflow as tf

    from pytest_rnnperf.backends import OutOfDeviceMemory
    from pytest_rnnperf.backends.tensorflow import TFImpl

    def failing_step(self: TFImpl) -> None:
        os.write(2, b"E0000 00:00:1.0 1 dnn.cc:933] OOM when allocating tensor with shape[5120000064] and type "
                    b"float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n")
        raise tf.errors.InternalError(None, None, "Failed to call DoRnnForward with model config: ...")

    case = _case("lstm")
    weights = reference.init_weights("lstm", I, H, seed=14)
    monkeypatch.setattr(TFImpl, "step", failing_step)
    with pytest.raises(OutOfDeviceMemory) as exc:
        tf_backend.build(case, weights, reference.make_inputs(case), impls=("generic",))
    assert str(exc.value) == (
        f"{case.id} does not fit in GPU memory: OOM when allocating tensor with shape[5120000064] and type float"
    )

    def other_error(self: TFImpl) -> None:
        raise tf.errors.InternalError(None, None, "Failed to call DoRnnForward with model config: ...")

    monkeypatch.setattr(TFImpl, "step", other_error)
    with pytest.raises(tf.errors.InternalError):  # no OOM in the log: a real failure, not a skip
        tf_backend.build(case, weights, reference.make_inputs(case), impls=("generic",))

    def exhausted(self: TFImpl) -> None:
        raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[3,5] and type float")

    monkeypatch.setattr(TFImpl, "step", exhausted)
    with pytest.raises(OutOfDeviceMemory, match="OOM when allocating tensor with shape\\[3,5\\]"):
        tf_backend.build(case, weights, reference.make_inputs(case), impls=("generic",))
