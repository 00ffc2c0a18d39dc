"""Keras 3 on torch and JAX: flag checks, HLO proof parsing, and the generic paths against float64 in a worker."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_rnnperf.backends.keras import KERAS_JAX, KERAS_TORCH
from pytest_rnnperf.backends.keras_layers import flag_check, keras_backend_choice, keras_import_problem
from pytest_rnnperf.model.cases import Case, Shape
from pytest_rnnperf.model.timing import TimingConfig
from pytest_rnnperf.measure.runner import RunConfig
from pytest_rnnperf.measure.subprocesses import SubprocessPool

SMALL = Shape(8, 4, 8, 16, 1)
STACKED_BI = Shape(6, 3, 5, 12, 2, bidirectional=True)
# Two timed rounds: the worker tests check the proof and the parity, and that the timing came back at all.
QUICK = TimingConfig(rounds=2, min_rounds=1, warmup_steps=1, warmup_s=0.0, min_block_s=0.0, max_time_s=5.0)


def _rnn(flag: object) -> SimpleNamespace:
    """A stand-in recurrent layer with a use_cudnn flag."""
    return SimpleNamespace(use_cudnn=flag)


def test_a_bidirectional_wrapper_that_dropped_the_flag_fails_the_flag_check() -> None:
    """Forward keeps use_cudnn=True, backward came back as "auto": the check names the backward layer."""
    wrapper = SimpleNamespace(forward_layer=_rnn(True), backward_layer=_rnn("auto"))
    ok, evidence = flag_check([wrapper], "cudnn")
    assert not ok
    assert "SimpleNamespace backward use_cudnn='auto'" in evidence and "built with use_cudnn=True" in evidence


def test_layers_that_kept_their_flag_pass_and_are_counted() -> None:
    """Two stacked bidirectional layers on the generic side: four layers, all use_cudnn=False."""
    layers = [SimpleNamespace(forward_layer=_rnn(False), backward_layer=_rnn(False)) for _ in range(2)]
    assert flag_check(layers, "generic") == (
        True, "flags: 4 recurrent layer(s) use_cudnn=False (forward and backward of 2 Bidirectional)")


def test_a_generic_bidirectional_lstm_whose_backward_copy_lost_use_cudnn_false_fails_its_proof() -> None:
    """Bidirectional(LSTM(use_cudnn=False)) as the generic side (Keras on TensorFlow, CPU): the proof holds and says
    both directions of both layers were checked; the backward copy set back to "auto" (keras#21533) fails it."""
    if importlib.util.find_spec("keras") is None or importlib.util.find_spec("tensorflow") is None:
        pytest.skip("needs keras and tensorflow")
    from pytest_rnnperf.backends.tensorflow import TFBackend
    from pytest_rnnperf.model import reference

    case = Case("tf", "lstm", STACKED_BI, "infer")
    weights = reference.init_weights("lstm", STACKED_BI.input_size, STACKED_BI.hidden_size, 2, True, seed=1)
    pair = TFBackend().build(case, weights, reference.make_inputs(case, seed=2), impls=("generic",))
    try:
        side = pair.generic
        proof = side.prove_path()
        assert proof.ok and "flags: 4 recurrent layer(s) use_cudnn=False (forward and backward of 2 Bidirectional)" \
            in proof.evidence
        side.layers[1].backward_layer.use_cudnn = "auto"
        proof = side.prove_path()
        assert not proof.ok and "flags: Bidirectional backward use_cudnn='auto' (built with use_cudnn=False)" \
            in proof.evidence
    finally:
        pair.close()


def test_keras_specs_run_in_a_worker_unless_the_process_has_their_keras_backend() -> None:
    """KERAS_BACKEND=torch in this process: Keras-on-torch runs here; without it (or with jax), in a worker."""
    assert KERAS_TORCH.in_process({"KERAS_BACKEND": "torch"})
    assert not KERAS_TORCH.in_process({})
    assert not KERAS_JAX.in_process({"KERAS_BACKEND": "jax"})  # JAX's preallocation must be off too


@pytest.mark.parametrize(("spec", "module"), [(KERAS_TORCH, "torch"), (KERAS_JAX, "jax")], ids=["torch", "jax"])
def test_keras_generic_path_matches_float64_in_a_worker_process(spec: object, module: str, tmp_path: Path) -> None:
    """Every cell, stacked and bidirectional, train and infer: the generic path's proof holds and parity passes."""
    if importlib.util.find_spec("keras") is None or importlib.util.find_spec(module) is None:
        pytest.skip(f"Keras on {module} needs keras and {module} installed")
    pool = SubprocessPool(tmp_path)
    try:
        worker = pool.get(spec)  # type: ignore[arg-type]
        assert worker.call("unavailable_reason") is None
        config = RunConfig(timing=QUICK, energy_s=0.0, device_rounds=0)
        for cell in ("lstm", "gru", "rnn_tanh"):
            for shape, mode in ((SMALL, "train"), (STACKED_BI, "train"), (SMALL, "infer")):
                case = Case(spec.name, cell, shape, mode, "fp32")  # type: ignore[attr-defined]
                record = worker.call("run_case", case, config, ("generic",), None, False)
                assert [p.ok for p in record.proofs] == [True], record.proofs
                assert record.parity.rows and all(row.ok for row in record.parity.rows), case.id
                assert record.generic.median > 0
    finally:
        pool.close()


_SLICE_SCRIPT = """
import dataclasses, numpy as np
from pytest_rnnperf.backends.keras import jax_backend
from pytest_rnnperf.measure.runner import slice_batch
from pytest_rnnperf.model import reference
from pytest_rnnperf.model.cases import Case, Shape

case = Case("keras_jax", "lstm", Shape(5, 12, 4, 6, 2, bidirectional=True))
weights = reference.init_weights("lstm", 4, 6, 2, True, seed=3)
inputs = reference.make_inputs(case, seed=4)
side = jax_backend().build(case, weights, inputs, impls=("generic",)).generic
side.step()
small = slice_batch(inputs, 8)
got = side.result(small)
traces_after_slice = side._fn._cache_size()
want = reference.backward(weights, small.x, small.d_output, small.d_h_n, small.d_c_n)
err = lambda a, b: float(np.abs(a - b).max() / np.abs(b).max())
errors = [err(got.output, reference.forward(weights, small.x).output), err(got.d_input, want.d_input)]
errors += [err(a, b) for a, b in zip(got.d_weights.flat(), want.d_weights.flat())]
shorter = reference.make_inputs(dataclasses.replace(case, shape=dataclasses.replace(case.shape, seq_len=3)), seed=5)
side.result(shorter)
print(got.output.shape, got.h_n.shape, traces_after_slice, side._fn._cache_size(), max(errors) < 5e-5)
"""


def test_keras_on_jax_runs_a_batch_slice_padded_through_the_timed_trace(tmp_path: Path) -> None:
    """The parity slice (8 of 12 sequences) reuses the timed step's trace and matches float64; another length traces."""
    if importlib.util.find_spec("keras") is None or importlib.util.find_spec("jax") is None:
        pytest.skip("Keras on JAX needs keras and jax installed")
    env = {**os.environ, "KERAS_BACKEND": "jax", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    done = subprocess.run([sys.executable, "-c", _SLICE_SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "(5, 8, 12) (4, 8, 6) 1 2 True"


_LONGER_SCRIPT = """
import dataclasses, os
from pytest_rnnperf.backends.keras import torch_backend
from pytest_rnnperf.model import reference
from pytest_rnnperf.model.cases import Case, Shape

case = Case("keras_torch", "gru", Shape(12, 3, 4, 5, 2, bidirectional=True))
weights = reference.init_weights("gru", 4, 5, 2, True, seed=3)
inputs = reference.make_inputs(case, seed=4)
side = torch_backend().build(case, weights, inputs, impls=("generic",)).generic
os.environ["RNNPERF_INJECT_LONGER_STEP"] = "keras_torch-gru-*=10"
named = dataclasses.replace(side, name="cudnn")  # the side the injection names, its layers as built
named.step()
print(tuple(side._step_args[0].shape), tuple(named._step_args[0].shape), tuple(named._step_args[1].shape),
      named._step_args[2] is named._args[2], tuple(named.result().output.shape))
"""


def test_the_longer_step_injection_lengthens_a_keras_on_torch_step_along_its_time_axis(tmp_path: Path) -> None:
    """RNNPERF_INJECT_LONGER_STEP names a Keras-on-torch case: its cuDNN side's timed step runs 2 more timesteps of
    12 (batch-major), the layers take the longer sequence, and the result is still the case's own 12 timesteps."""
    if importlib.util.find_spec("keras") is None or importlib.util.find_spec("torch") is None:
        pytest.skip("Keras on torch needs keras and torch installed")
    env = {**os.environ, "KERAS_BACKEND": "torch"}
    done = subprocess.run([sys.executable, "-c", _LONGER_SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "(3, 12, 4) (3, 14, 4) (3, 14, 10) True (12, 3, 10)"


def test_importing_the_keras_backends_imports_no_framework() -> None:
    """The module loads without Keras, torch or JAX being imported."""
    code = ("import sys, pytest_rnnperf.backends.keras, pytest_rnnperf.backends.keras_layers; "
            "print([m for m in ('keras', 'torch', 'jax', 'tensorflow') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.fixture
def importable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """``importable(*absent)``: those modules cannot be found (as on a runner without them); Keras not imported yet,
    no KERAS_BACKEND, and a Keras home of the test's own (no keras.json until the test writes one)."""
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.delitem(sys.modules, "keras", raising=False)

    def hide(*absent: str) -> None:
        for name in absent:
            monkeypatch.setitem(sys.modules, name, None)  # find_spec says None, import raises ImportError

    return hide


@pytest.mark.parametrize("absent, chosen", [(("tensorflow",), "torch"), (("tensorflow", "torch"), "jax")])
def test_keras_without_tensorflow_runs_on_the_installed_backend_torch_first(importable: Any, absent: tuple[str, ...],
                                                                             chosen: str) -> None:
    """Keras installed for torch or JAX alone would fail at ``import keras`` on its TensorFlow default."""
    importable(*absent)
    backend, line = keras_backend_choice({"KERAS_HOME": os.environ["KERAS_HOME"]})
    assert backend == chosen
    assert line == f"rnnperf: Keras runs on {chosen} here (KERAS_BACKEND unset, tensorflow not installed)"


def test_keras_with_none_of_its_backends_is_told_in_one_line_to_set_keras_backend(importable: Any) -> None:
    importable("tensorflow", "torch", "jax")
    assert keras_backend_choice({}) == (None, "rnnperf: keras is installed without tensorflow, torch or jax: install "
                                              "one and set KERAS_BACKEND to it")


def test_the_keras_json_that_keras_writes_with_tensorflow_does_not_stop_the_choice_and_another_backend_there_does(
        importable: Any, tmp_path: Path) -> None:
    """Keras writes "tensorflow" into a new keras.json on its first import, even one that fails; "jax" is a choice."""
    importable("tensorflow")
    (tmp_path / "keras.json").write_text('{"backend": "tensorflow"}')
    assert keras_backend_choice({"KERAS_HOME": str(tmp_path)})[0] == "torch"
    (tmp_path / "keras.json").write_text('{"backend": "jax"}')
    assert keras_backend_choice({"KERAS_HOME": str(tmp_path)}) == (None, "")


@pytest.mark.parametrize("environ", [{"KERAS_BACKEND": "jax"}, {}])
def test_keras_backend_is_left_alone_where_it_is_set_or_tensorflow_is_installed(importable: Any,
                                                                                environ: dict[str, str]) -> None:
    if environ:
        importable("tensorflow")
    assert keras_backend_choice(environ) == (None, "")


@pytest.mark.parametrize("absent, setting, reason", [
    (("keras",), "", "need keras (pip install 'pytest-rnnperf[tf]')"),
    (("tensorflow",), "", "need tensorflow for Keras's default backend (pip install 'pytest-rnnperf[tf]'); or set "
                          "KERAS_BACKEND=torch or jax"),
    (("torch",), "torch", "need torch for Keras's torch backend (set in KERAS_BACKEND or keras.json)"),
    (("torch",), "jax", None),
])
def test_a_keras_skip_reason_names_what_is_really_missing(importable: Any, monkeypatch: pytest.MonkeyPatch,
                                                          absent: tuple[str, ...], setting: str,
                                                          reason: str | None) -> None:
    """Keras installed without TensorFlow is not "need keras": it needs its backend, or KERAS_BACKEND."""
    importable(*absent)
    if setting:
        monkeypatch.setenv("KERAS_BACKEND", setting)
    assert keras_import_problem() == reason
