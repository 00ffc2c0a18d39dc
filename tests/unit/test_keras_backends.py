"""Keras 3 on torch and JAX: flag checks, HLO proof parsing, and the generic paths against float64 in a worker."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_rnnperf.backends.keras import KERAS_JAX, KERAS_TORCH
from pytest_rnnperf.backends.keras_layers import flag_check
from pytest_rnnperf.model.cases import Case, Shape
from pytest_rnnperf.measure.runner import RunConfig
from pytest_rnnperf.measure.subprocesses import SubprocessPool

SMALL = Shape(8, 4, 8, 16, 1)
STACKED_BI = Shape(6, 3, 5, 12, 2, bidirectional=True)


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
    assert flag_check(layers, "generic") == (True, "flags: 4 recurrent layer(s) use_cudnn=False")


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
        config = RunConfig(energy_s=0.0, device_rounds=0)
        for cell in ("lstm", "gru", "rnn_tanh"):
            for shape, mode in ((SMALL, "train"), (STACKED_BI, "train"), (SMALL, "infer")):
                case = Case(spec.name, cell, shape, mode, "fp32")  # type: ignore[attr-defined]
                record = worker.call("run_case", case, config, ("generic",), None, False)
                assert [p.ok for p in record.proofs] == [True], record.proofs
                assert record.parity.rows and all(row.ok for row in record.parity.rows), case.id
                assert record.generic.median > 0
    finally:
        pool.close()


def test_importing_the_keras_backends_imports_no_framework() -> None:
    """The module loads without Keras, torch or JAX being imported."""
    code = ("import sys, pytest_rnnperf.backends.keras, pytest_rnnperf.backends.keras_layers; "
            "print([m for m in ('keras', 'torch', 'jax', 'tensorflow') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
