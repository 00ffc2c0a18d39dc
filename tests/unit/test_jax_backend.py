"""JAX backend: the flat cuDNN weight layout against jax's own unpacker, the generic LSTM against the float64
reference through the runner on the CPU, its HLO path proof, and the refusals (no GPU, not an LSTM, half
precision)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from pytest_rnnperf.model import reference
from pytest_rnnperf.backends import BackendUnavailable
from pytest_rnnperf.backends.jax import (
    SPEC, JaxBackend, dot_precisions, hlo_proof, lstm_param_count, pack_lstm, unpack_lstm,
)
from pytest_rnnperf.model.cases import Case, Shape
from pytest_rnnperf.model.timing import TimingConfig

SMOKE_SHAPES = (Shape(8, 4, 8, 16, 1), Shape(6, 3, 5, 12, 2, bidirectional=True))
# A few short rounds: these tests are about parity and the path proof, not about the timings.
QUICK = TimingConfig(rounds=2, min_rounds=1, warmup_steps=1, warmup_s=0.0, min_block_s=0.0, max_time_s=5.0)


def _err(a: np.ndarray, b: np.ndarray) -> float:
    """Normalized max error max|a - b| / max|b| (the parity module's measure)."""
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(float(np.abs(b).max()), 1e-30))


# ---------------------------------------------------------------------------------------------------------
# Without JAX: the module, the spec and the HLO reading.
# ---------------------------------------------------------------------------------------------------------


def test_importing_the_module_does_not_import_jax() -> None:
    code = "import sys, pytest_rnnperf.backends.jax; assert 'jax' not in sys.modules, 'jax imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_spec_declares_an_lstm_only_backend_without_preallocation() -> None:
    assert SPEC.name == "jax" and SPEC.cells == ("lstm",) and SPEC.cudnn_cells == ("lstm",)
    assert SPEC.env == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    assert all(key.startswith(SPEC.runtime_prefix) for key in SPEC.key_fields)
    assert SPEC.model_modules == ()


def test_a_missing_jax_is_a_one_line_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a))
    assert JaxBackend().unavailable_reason() == "jax is not installed (pip install 'pytest-rnnperf[jax]')"


def test_pack_and_unpack_are_inverse_and_keep_every_value() -> None:
    w = reference.init_weights("lstm", 5, 7, num_layers=3, bidirectional=True, seed=1)
    flat = pack_lstm(w)
    assert flat.shape == (lstm_param_count(5, 7, 3, True),) and flat.dtype == np.float64
    assert unpack_lstm(flat, 5, 7, 3, True).max_abs_diff(w) == 0.0
    with pytest.raises(ValueError, match="expected"):
        unpack_lstm(flat[:-1], 5, 7, 3, True)
    with pytest.raises(ValueError, match="LSTM"):
        pack_lstm(reference.init_weights("gru", 5, 7))


_CUDNN_TRAIN_HLO = """
  %custom-call.1 = (f32[4,8,16]{2,1,0}, f32[1,4,16]{2,1,0}) custom-call(%p0), custom_call_target="cudnn_rnn_ffi"
  %custom-call.2 = (f32[4,8,8]{2,1,0}) custom-call(%p1), custom_call_target="cudnn_rnn_bwd_ffi"
  %custom-call.3 = f32[8]{0} custom-call(%p2), custom_call_target="__cublas$gemm"
"""
_GENERIC_HLO = """
  %while.12 = (s32[], f32[4,16]{1,0}) while(%tuple.3), condition=%cond, body=%body
"""


def test_the_hlo_proof_wants_cudnn_calls_and_no_loop_on_the_cudnn_side() -> None:
    lowered = "%0:3 = stablehlo.custom_call @cudnn_rnn_ffi(%arg0) {api_version = 4 : i32}"
    proof = hlo_proof("cudnn", lowered, _CUDNN_TRAIN_HLO, train=True)
    assert proof.ok, proof.evidence
    assert proof.evidence == "HLO: custom_call cudnn_rnn_bwd_ffi x1, cudnn_rnn_ffi x1; no while loop"
    # Legacy (pre-FFI) target names count too.
    assert hlo_proof("cudnn", "", 'custom_call_target="cudnn_rnn"', train=False).ok
    # Train mode without the backward call, or a loop next to the calls, is not the cuDNN path.
    forward_only = _CUDNN_TRAIN_HLO.replace("cudnn_rnn_bwd_ffi", "something_else")
    no_bwd = hlo_proof("cudnn", lowered, forward_only, train=True)
    assert not no_bwd.ok and "missing cudnn_rnn_bwd" in no_bwd.evidence
    looped = hlo_proof("cudnn", lowered + "\n %1 = stablehlo.while(%a)", _CUDNN_TRAIN_HLO, train=True)
    assert not looped.ok and "while loop x1" in looped.evidence
    assert not hlo_proof("cudnn", "", _GENERIC_HLO, train=False).ok


def test_the_hlo_proof_wants_a_loop_and_no_cudnn_call_on_the_generic_side() -> None:
    lowered = ("%5:2 = stablehlo.while(%iterArg = %c) : tensor<i32>\n"
               "%6 = stablehlo.dot_general %a, %b, precision = [#stablehlo<precision HIGHEST>, "
               "#stablehlo<precision HIGHEST>]")
    proof = hlo_proof("generic", lowered, _GENERIC_HLO, train=False, dot_precision="HIGHEST")
    assert proof.ok, proof.evidence
    assert proof.evidence == ("HLO: no cuDNN RNN custom call; while loop x1 (lax.scan), x1 after XLA; "
                              "dot precision HIGHEST x1")
    cudnn = hlo_proof("generic", lowered, _CUDNN_TRAIN_HLO, train=True)
    assert not cudnn.ok and "cudnn_rnn_ffi x1" in cudnn.evidence
    assert not hlo_proof("generic", "", "", train=False).ok


def test_an_fp32_step_with_a_matmul_below_highest_precision_fails_its_proof() -> None:
    """XLA runs a float32 dot without HIGHEST precision in TF32 on a GPU: that is no fp32 step."""
    lowered = ("%5:2 = stablehlo.while(%iterArg = %c) : tensor<i32>\n"
               "%6 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST]\n"
               "%7 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<3x5xf32>)")
    assert dot_precisions(lowered) == {"HIGHEST": 1, "DEFAULT": 1}
    proof = hlo_proof("generic", lowered, _GENERIC_HLO, train=False, dot_precision="HIGHEST")
    assert not proof.ok and proof.evidence.endswith("dot precision DEFAULT x1, HIGHEST x1 (expected HIGHEST only)")
    assert hlo_proof("generic", lowered, _GENERIC_HLO, train=False).ok  # no expectation: reported only


# ---------------------------------------------------------------------------------------------------------
# With JAX, on the CPU.
# ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def jax_backend() -> JaxBackend:
    """The backend, with JAX importable."""
    pytest.importorskip("jax")
    return JaxBackend()


@pytest.mark.parametrize(("num_layers", "bidirectional"), [(1, False), (2, True)])
def test_the_packed_vector_unpacks_through_jax_to_the_canonical_arrays(
    jax_backend: JaxBackend, num_layers: int, bidirectional: bool
) -> None:
    from jax.experimental import rnn

    i, h = 5, 6
    w = reference.init_weights("lstm", i, h, num_layers, bidirectional, seed=2)
    flat = pack_lstm(w)
    assert flat.shape == (rnn.get_num_params_in_lstm(i, h, num_layers, bidirectional),)
    # NumPy in, NumPy out: jax's unpacker only slices and reshapes, so the float64 values come back exactly.
    w_ih, w_hh, b_ih, b_hh = rnn.unpack_lstm_weights(flat, i, h, num_layers, bidirectional)
    directions = 2 if bidirectional else 1
    for layer, dirs in enumerate(w.layers):
        for direction, lw in enumerate(dirs):
            pseudo = layer * directions + direction
            for got, want in ((w_ih, lw.w_ih), (w_hh, lw.w_hh), (b_ih, lw.b_ih), (b_hh, lw.b_hh)):
                np.testing.assert_array_equal(np.asarray(got[pseudo]), want)


@pytest.mark.parametrize("mode", ["train", "infer"])
@pytest.mark.parametrize("shape", SMOKE_SHAPES, ids=lambda s: s.id)
def test_the_generic_side_passes_parity_and_proves_its_path_through_the_runner(
    jax_backend: JaxBackend, shape: Shape, mode: str
) -> None:
    from pytest_rnnperf.measure.runner import RunConfig, run_case

    case = Case("jax", "lstm", shape, mode)
    record = run_case(case, jax_backend, RunConfig(timing=QUICK), impls=("generic",))
    assert record.cudnn is None and record.generic is not None
    assert [p.impl for p in record.proofs] == ["generic"] and record.paths_ok, record.proofs
    evidence = record.proofs[0].evidence
    assert evidence.startswith("HLO: no cuDNN RNN custom call; while loop x"), evidence
    # fp32 means IEEE float32 matmuls: every dot of the step was traced at HIGHEST precision.
    assert "; dot precision HIGHEST x" in evidence and "," not in evidence.split("dot precision")[1], evidence
    quantities = [r.quantity for r in record.parity.rows]
    want = ["output", "h_n", "c_n"] + (["d_input", "d_weights"] if mode == "train" else [])
    assert quantities == want
    assert {r.comparison for r in record.parity.rows} == {"generic vs reference"}
    assert record.parity.ok, record.parity.failures()
    # Cold costs: the side's compile (trace, lower, XLA) and its first call after build, each timed on its own.
    assert record.cold is not None and record.cold.compile_s is not None and record.cold.compile_s > 0
    assert set(record.cold.first_call_s) == {"generic"} and record.cold.first_call_s["generic"] > 0


def test_a_smaller_batch_runs_padded_and_another_length_traces_apart_from_the_timed_step(
    jax_backend: JaxBackend,
) -> None:
    case = Case("jax", "lstm", Shape(5, 3, 4, 6, 2, bidirectional=True))
    weights = reference.init_weights("lstm", 4, 6, 2, True, seed=3)
    inputs = reference.make_inputs(case, seed=4)
    pair = jax_backend.build(case, weights, inputs, impls=("generic",))
    try:
        assert pair.cudnn is None and pair.generic is not None
        assert pair.device == ("cpu" if jax_backend.gpu_unavailable_reason() else "cuda:0")
        compiled = pair.generic._compiled
        traces = getattr(pair.generic._jit, "_cache_size", None)  # jax's private count of a jit's traces
        for seq_len, batch in ((5, 2), (3, 2)):  # the timed executable padded, then a trace of its own
            other = dataclasses.replace(case, shape=dataclasses.replace(case.shape, seq_len=seq_len, batch=batch))
            small = reference.make_inputs(other, seed=5)
            got = pair.generic.result(small)
            want = reference.backward(weights, small.x, small.d_output, small.d_h_n, small.d_c_n)
            assert got.output.shape == (seq_len, 2, 12) and got.h_n.shape == got.c_n.shape == (4, 2, 6)
            assert _err(got.output, reference.forward(weights, small.x).output) < 5e-5
            assert got.c_n is not None and _err(got.c_n, reference.forward(weights, small.x).c_n) < 5e-5
            assert got.d_input is not None and got.d_input.shape == small.x.shape
            assert _err(got.d_input, want.d_input) < 5e-4
            assert got.d_weights is not None
            for name, a, b in zip(want.d_weights.flat_names(), got.d_weights.flat(), want.d_weights.flat()):
                assert _err(a, b) < 5e-4, name
            if callable(traces):
                assert traces() == (0 if seq_len == 5 else 1)
        pair.generic.step()
        pair.sync()
        assert pair.generic._compiled is compiled  # the timed step kept its one executable
    finally:
        pair.close()


def test_out_of_device_memory_on_the_warm_step_becomes_a_one_line_skip(
    jax_backend: JaxBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XLA's RESOURCE_EXHAUSTED (as seen on an H100) is a skip; any other runtime error stays a failure."""
    from pytest_rnnperf.backends import OutOfDeviceMemory
    from pytest_rnnperf.backends.jax import JaxImpl

    def exhausted(self: JaxImpl) -> None:
        raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 394.50GiB with allocator "
                           "GPU_0_bfc on device 0. [tf-allocator-allocation-error=''] [executable_name='jit_f']\n"
                           "more lines")

    case = Case("jax", "lstm", SMOKE_SHAPES[0])
    weights = reference.init_weights("lstm", 8, 16)
    monkeypatch.setattr(JaxImpl, "step", exhausted)
    with pytest.raises(OutOfDeviceMemory) as exc:
        jax_backend.build(case, weights, reference.make_inputs(case), impls=("generic",))
    assert str(exc.value) == (f"{case.id} does not fit in GPU memory: RESOURCE_EXHAUSTED: Out of memory while "
                              "trying to allocate 394.50GiB with allocator GPU_0_bfc on device 0.")

    def broken(self: JaxImpl) -> None:
        raise RuntimeError("INTERNAL: cudnn status CUDNN_STATUS_BAD_PARAM")

    monkeypatch.setattr(JaxImpl, "step", broken)
    with pytest.raises(RuntimeError, match="BAD_PARAM"):
        jax_backend.build(case, weights, reference.make_inputs(case), impls=("generic",))


def test_a_cudnn_side_without_a_gpu_is_refused_naming_the_gpu(jax_backend: JaxBackend) -> None:
    reason = jax_backend.gpu_unavailable_reason()
    if reason is None:
        pytest.skip("jax sees a CUDA GPU; the CPU refusal does not apply")
    import jax

    assert "no CUDA GPU visible to jax" in reason and jax.__version__ in reason
    case = Case("jax", "lstm", SMOKE_SHAPES[0])
    weights = reference.init_weights("lstm", 8, 16)
    for impls in (("cudnn", "generic"), ("cudnn",)):
        with pytest.raises(BackendUnavailable) as exc:
            jax_backend.build(case, weights, reference.make_inputs(case), impls=impls)
        assert str(exc.value) == reason


def test_a_gru_case_is_refused_because_jax_has_only_an_lstm(jax_backend: JaxBackend) -> None:
    case = Case("jax", "gru", SMOKE_SHAPES[0])
    weights = reference.init_weights("gru", 8, 16)
    for impls in (("cudnn", "generic"), ("generic",)):
        with pytest.raises(BackendUnavailable, match="cuDNN LSTM only"):
            jax_backend.build(case, weights, reference.make_inputs(case), impls=impls)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_half_precision_is_refused_because_jax_s_cudnn_lstm_is_float32_only(
    jax_backend: JaxBackend, precision: str
) -> None:
    case = Case("jax", "lstm", SMOKE_SHAPES[0], precision=precision)
    weights = reference.init_weights("lstm", 8, 16)
    with pytest.raises(BackendUnavailable, match=f"float32 only.*no {precision} cuDNN path"):
        jax_backend.build(case, weights, reference.make_inputs(case), impls=("generic",))


def test_runtime_info_has_only_jax_keys_and_says_what_it_cannot_read(jax_backend: JaxBackend) -> None:
    info = jax_backend.runtime_info()
    assert info and all(key.startswith("jax.") for key in info)
    assert set(SPEC.key_fields) <= set(info)
    import jax

    assert info["jax.version"] == jax.__version__
    assert info["jax.backend"] in ("cpu", "gpu", "cuda")
    assert all(value for value in info.values())


def test_an_installed_jax_that_fails_to_import_is_a_skip_reason_naming_the_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """jaxlib of another version than jax (installed, raising on import) errored every case with a traceback."""
    import pytest_rnnperf.backends.jax as jax_backend
    from pytest_rnnperf.backends import jax_common

    def broken() -> None:
        raise RuntimeError("jaxlib version 0.4.1 is older than jax's minimum 0.10.0")

    monkeypatch.setattr(jax_common, "import_jax", broken)
    assert jax_backend.JaxBackend().unavailable_reason() == (
        "jax is installed but cannot be imported (RuntimeError: jaxlib version 0.4.1 is older than jax's minimum "
        "0.10.0); reinstall it (pip install 'pytest-rnnperf[jax]')")
