"""The torch.compile backend on the CPU: the compiled side's plumbing, dynamo's evidence, and the GPU requirement.

cuDNN needs a GPU, so the compiled side is built on the CPU here with a cheap compiler ("aot_eager": dynamo's
graph through AOT autograd, which decomposes a traced LSTM into its per-timestep loop as Inductor would, run
by ATen ops); Inductor itself spends ~30 s on a 4-step LSTM on a CPU.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections import Counter
from typing import Any, Iterator

import numpy as np
import pytest

from pytest_rnnperf.model import reference
from pytest_rnnperf.backends import BackendUnavailable
from pytest_rnnperf.model.results import ImplResult
from pytest_rnnperf.model.cases import Case, Shape
from pytest_rnnperf.measure.runner import slice_batch

torch = pytest.importorskip("torch")
from pytest_rnnperf.backends.torch import TorchImpl, build_module  # noqa: E402
import pytest_rnnperf.backends.torch_compile as torch_compile  # noqa: E402
from pytest_rnnperf.backends.torch_compile import (  # noqa: E402
    SPEC, SPEC_RNN, CompiledPair, DynamoLog, TorchCompileBackend, compile_side, compiled_proof, get_backend,
    get_rnn_backend,
)

CHEAP = "aot_eager"  # the compiler the CPU tests use in Inductor's place


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """torch on the CPU (even where a GPU is seen), one thread, without oneDNN's TF32 notice; dynamo reset after."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")
        yield
    torch.set_num_threads(before)
    torch._dynamo.reset()


def _case(cell: str, mode: str = "train", batch: int = 3) -> tuple[Case, Any, Any]:
    """A 4-step case (allow_rnn unrolls the sequence, so short keeps compiling fast), its weights and inputs."""
    case = Case("torch_compile", cell, Shape(4, batch, 3, 5), mode=mode)
    return case, reference.init_weights(cell, 3, 5, 1, False), reference.make_inputs(case)


def _max_diff(a: ImplResult, b: ImplResult) -> float:
    """Largest absolute difference over outputs, states and (in train mode) gradients."""
    pairs = [(a.output, b.output), (a.h_n, b.h_n)]
    pairs += [(a.c_n, b.c_n)] if a.c_n is not None else []
    if a.d_input is not None:
        assert b.d_input is not None and a.d_weights is not None and b.d_weights is not None
        pairs += [(a.d_input, b.d_input), *zip(a.d_weights.flat(), b.d_weights.flat())]
    assert all(x.shape == y.shape for x, y in pairs)
    return max(float(np.abs(x - y).max()) for x, y in pairs)


def test_importing_the_module_does_not_import_torch() -> None:
    code = ("import sys, pytest_rnnperf.backends.torch_compile as m; "
            "assert m.SPEC.name == 'torch_compile'; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_two_specs_load_their_own_backend_and_fingerprint_allow_rnn() -> None:
    assert (SPEC.module, SPEC_RNN.module) == ("pytest_rnnperf.backends.torch_compile:get_backend",
                                              "pytest_rnnperf.backends.torch_compile:get_rnn_backend")
    for spec, allow in ((SPEC, "False"), (SPEC_RNN, "True")):
        assert spec.cells == spec.cudnn_cells == ("lstm", "gru") and not spec.reference and not spec.cross
        assert f"{spec.name}.dynamo_allow_rnn" in spec.key_fields and f"{spec.name}.cudnn_version" in spec.key_fields
        backend = spec.load()
        assert backend.name == spec.name and backend.unavailable_reason() is None
        info = backend.runtime_info()
        assert all(key.startswith(spec.runtime_prefix) for key in info)
        assert set(spec.key_fields) <= set(info)
        assert info[f"{spec.name}.dynamo_allow_rnn"] == allow  # torch 2.13's default is False
        assert info[f"{spec.name}.torch_version"] == torch.__version__


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("allow_rnn", [None, True], ids=["default", "allow_rnn"])
def test_the_compiled_side_matches_eager_generic_and_says_what_dynamo_did(cell: str, allow_rnn: bool | None) -> None:
    """Same results as eager generic (full batch, and a smaller batch through the same graph); honest evidence."""
    case, weights, inputs = _case(cell)
    compiled, notes = compile_side(case, weights, inputs, "cpu", allow_rnn, CHEAP)
    generic = TorchImpl("generic", case, build_module(case, weights, "cpu"), "cpu", inputs, weights)
    assert len(notes) == 1 and notes[0].startswith("compiled in ") and "forward and backward" in notes[0]
    assert _max_diff(compiled.result(), generic.result()) <= 1e-6
    small = slice_batch(inputs, 2)  # the runner's float64 check runs a batch slice: no second compile
    assert _max_diff(compiled.result(small), generic.result(small)) <= 1e-6

    proof = compiled.prove_path()
    assert not proof.ok and "no aten::_cudnn_rnn op" in proof.evidence  # nothing runs cuDNN on a CPU
    if allow_rnn is None:  # dynamo refuses to wrap the module: no graph, the RNN runs eagerly
        assert "0 graph(s); graph break 'Attempted to wrap RNN, GRU, or LSTM' x1 (the RNN module ran eagerly)" in \
            proof.evidence
        assert "no compiled region ran" in proof.evidence and f"RNN ops aten::{cell}" in proof.evidence
    else:  # dynamo traced it and AOT autograd unrolled it: matmuls per timestep, no RNN op left
        assert f"1 graph(s) calling torch.{cell} (dynamo traced the RNN); no graph break" in proof.evidence
        assert "compiled region ran 1x" in proof.evidence and "no RNN op; matmul ops aten::" in proof.evidence
    # The proof ran the compiled graph as it was: nothing compiled again, allow_rnn restored afterwards.
    assert compiled.dynamo is not None and compiled.dynamo.compiled_after_build == 0
    assert torch._dynamo.config.allow_rnn is False


RNN_BREAK = "Attempted to wrap RNN, GRU, or LSTM"


def test_a_graph_break_at_the_rnn_or_no_graph_at_all_fails_the_compiled_proof_naming_it() -> None:
    """Asked to trace the RNN (allow_rnn), torch.compile compiled nothing around it: the compiled side's timing is
    eager's. Under dynamo's default config that break is the documented behaviour: named, not failed."""
    ran = Counter({"aten::_cudnn_rnn": 1, "Torch-Compiled Region: 0/0": 1})
    broke = compiled_proof(ran, DynamoLog("inductor", graphs=[["linear"]], breaks={RNN_BREAK: 1}, traces_rnn=True), 4)
    assert not broke.ok and broke.evidence.startswith(f"torch.compile broke the graph at the RNN ('{RNN_BREAK}')")
    nothing = compiled_proof(ran, DynamoLog("inductor", traces_rnn=True), 4)
    assert not nothing.ok and nothing.evidence.startswith("torch.compile compiled 0 graphs: the module ran eagerly")
    assert compiled_proof(ran, DynamoLog("inductor", graphs=[["lstm"]], traces_rnn=True), 4).ok
    default = compiled_proof(ran, DynamoLog("inductor", breaks={RNN_BREAK: 1}), 4)
    assert default.ok and "graph break" in default.evidence


def test_dynamos_graph_break_counter_during_the_first_call_reaches_the_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake graph-break counter that grows by an RNN break while the first call compiles: the proof names it."""
    counts = iter([Counter(), Counter({f"{RNN_BREAK}\n  at nn.LSTM.forward": 1})])
    monkeypatch.setattr(torch_compile, "_graph_breaks", lambda: next(counts))
    case, weights, inputs = _case("lstm")
    compiled, _ = compile_side(case, weights, inputs, "cpu", True, "eager")
    assert compiled.dynamo is not None and compiled.dynamo.breaks == {RNN_BREAK: 1}
    assert compiled.dynamo.compile_s is not None and compiled.dynamo.compile_s > 0
    proof = compiled.prove_path()
    assert not proof.ok and proof.evidence.startswith(f"torch.compile broke the graph at the RNN ('{RNN_BREAK}')")


def test_inference_compiles_the_forward_only() -> None:
    case, weights, inputs = _case("lstm", mode="infer")
    compiled, notes = compile_side(case, weights, inputs, "cpu", True, CHEAP)
    generic = TorchImpl("generic", case, build_module(case, weights, "cpu"), "cpu", inputs, weights)
    assert "(first call, forward;" in notes[0]
    got = compiled.result(slice_batch(inputs, 1))
    assert got.d_weights is None and _max_diff(got, generic.result(slice_batch(inputs, 1))) <= 1e-6


def test_inputs_the_graph_was_not_compiled_for_are_refused_not_compiled() -> None:
    case, weights, inputs = _case("gru", batch=2)
    compiled, _ = compile_side(case, weights, inputs, "cpu", True, "eager")
    longer = reference.make_inputs(Case("torch_compile", "gru", Shape(5, 2, 3, 5)))
    with pytest.raises(ValueError, match="would compile again"):
        compiled.result(longer)


def test_a_step_that_compiled_again_fails_the_pairs_sync() -> None:
    """If the compiled graph is lost (another reset, a guard failure), the timed steps would time a compile."""
    case, weights, inputs = _case("lstm")
    compiled, _ = compile_side(case, weights, inputs, "cpu", True, "eager")
    pair = CompiledPair(cudnn=compiled, generic=None, device="cpu")
    pair.sync()
    torch._dynamo.reset()
    compiled.step()
    with pytest.raises(RuntimeError, match="compiled 1 graph.s. after build"):
        pair.sync()


def test_building_a_cudnn_side_without_a_gpu_is_a_one_line_skip() -> None:
    case, weights, inputs = _case("lstm")
    for backend in (get_backend(), get_rnn_backend()):
        with pytest.raises(BackendUnavailable) as info:
            backend.build(case, weights, inputs, impls=("cudnn", "generic"))
        assert "no CUDA GPU visible to torch" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(BackendUnavailable, match="lstm, gru only, not rnn_tanh"):
        get_backend().build(Case("torch_compile", "rnn_tanh", Shape(4, 3, 3, 5)), weights, inputs)


def test_the_runner_drives_a_pair_end_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """build, proofs, parity against each other and float64, timed steps: the CPU standing in for the GPU."""
    from pytest_rnnperf.measure.runner import RunConfig, run_case
    from pytest_rnnperf.model.timing import TimingConfig

    backend = TorchCompileBackend(SPEC_RNN, allow_rnn=True, compile_backend=CHEAP)
    monkeypatch.setattr(backend, "gpu_unavailable_reason", lambda: None)
    case = Case("torch_compile_rnn", "lstm", Shape(4, 12, 3, 5))
    timing = TimingConfig(rounds=3, min_rounds=1, warmup_steps=1, warmup_s=0.0, min_block_s=0.0)
    threads = torch.get_num_threads()
    record = run_case(case, backend, RunConfig(timing=timing, energy_s=0.0, device_rounds=0))
    assert record.device == "cpu" and record.parity.ok
    compared = {r.comparison for r in record.parity.rows}
    assert compared == {"cudnn vs generic", "cudnn vs reference", "generic vs reference"}
    compiled_proof, generic_proof = record.proofs
    assert "dynamo traced the RNN" in compiled_proof.evidence and not compiled_proof.ok  # no cuDNN on a CPU
    assert generic_proof.ok
    assert record.cudnn is not None and record.cudnn.samples and record.generic.samples
    # The compile stands for the compiled side's first call; the eager generic side's first call is its own.
    assert record.cold is not None and record.cold.compile_s is not None and record.cold.compile_s > 0
    assert set(record.cold.first_call_s) == {"generic"} and record.cold.first_call_s["generic"] > 0
    assert torch.get_num_threads() == threads and torch._dynamo.config.allow_rnn is False
