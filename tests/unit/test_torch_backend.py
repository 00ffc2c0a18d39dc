"""The torch backend on the CPU: thread pinning of CPU pairs, a team's model copied per side, the serializing fault."""

from __future__ import annotations

import warnings

import pytest

from pytest_rnnperf.model import reference
from pytest_rnnperf.backends import INJECT_SERIALIZE_ENV, ModelError, parse_injection
from pytest_rnnperf.model.cases import Case, ModelCase, Shape

torch = pytest.importorskip("torch")
from pytest_rnnperf.backends.torch import CPU_THREADS, TorchBackend  # noqa: E402
from pytest_rnnperf.backends.torch_common import build_module, injected_serial, serialized_forward  # noqa: E402


@pytest.fixture
def two_threads(monkeypatch: pytest.MonkeyPatch) -> object:
    """torch on the CPU (even where a GPU is seen) with two intra-op threads, a 2-core runner's default."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_a_cpu_pair_runs_on_one_thread_and_gives_the_count_back(two_threads: object) -> None:
    """CPU pairs pin torch to CPU_THREADS while they live (a shared core stalls a 2-thread pool), then restore it."""
    case = Case("torch", "lstm", Shape(4, 2, 3, 5))
    weights = reference.init_weights("lstm", 3, 5, 1, False)
    pair = TorchBackend().build(case, weights, reference.make_inputs(case), impls=("generic",))
    try:
        assert pair.device == "cpu" and torch.get_num_threads() == CPU_THREADS == 1
    finally:
        pair.close()
    assert torch.get_num_threads() == 2


def test_a_failed_cpu_build_gives_the_thread_count_back(two_threads: object) -> None:
    """A model that rejects its inputs fails with a one-line ModelError and leaves the thread count as it was."""
    with pytest.raises(ModelError, match="LSTM failed on its inputs: RuntimeError"):
        TorchBackend().build_model(ModelCase("m", "torch"), torch.nn.LSTM(3, 5), torch.randn(4, 2, 7),
                                   impls=("generic",))
    assert torch.get_num_threads() == 2


class _Tagger(torch.nn.Module):
    """Embedding, GRU with dropout between layers, a dropout layer and a head: ints in, logits out."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(20, 6)
        self.gru = torch.nn.GRU(6, 8, num_layers=2, dropout=0.3, batch_first=True)
        self.drop = torch.nn.Dropout(0.5)
        self.head = torch.nn.Linear(8, 4)
        self.unused = torch.nn.Linear(3, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        y, _ = self.gru(self.embed(tokens))
        return self.head(self.drop(y))


def test_a_models_copies_compute_the_same_function_as_its_float64_copy(two_threads: object) -> None:
    """Dropout is set to 0 in the copies (and said so), integer inputs stay integers, unused parameters get 0 grads."""
    pair = TorchBackend().build_model(ModelCase("m", "torch"), _Tagger(), lambda: torch.randint(0, 20, (3, 7)),
                                      impls=("generic",))
    try:
        assert pair.notes == ("dropout set to 0 in the compared copies: gru (0.3), drop (0.5)",)
        assert pair.description.startswith("_Tagger: 0.00M parameters; gru=GRU(6, 8, num_layers=2")
        mine, ref = pair.generic.result(), pair.reference()  # type: ignore[union-attr]
        assert set(mine) == set(ref) and "d_input[0]" not in mine  # token ids have no gradient
        assert mine["d_params[unused.weight]"][1].shape == (3, 3) and not mine["d_params[unused.weight]"][1].any()
        from pytest_rnnperf.model.parity import compare_results

        rows = compare_results("generic vs reference", mine, ref, "fp32")
        assert [r.quantity for r in rows] == ["output", "d_params"] and all(r.ok for r in rows)
    finally:
        pair.close()


def test_a_model_without_an_rnn_is_refused_in_one_line(two_threads: object) -> None:
    """Nothing in a Linear runs on cuDNN: say so rather than time it."""
    with pytest.raises(ModelError, match="Linear has no nn.LSTM, nn.GRU or nn.RNN"):
        TorchBackend().build_model(ModelCase("m", "torch"), torch.nn.Linear(3, 3), torch.randn(2, 3),
                                   impls=("generic",))


def test_the_path_proof_names_the_rnn_op_that_really_ran(two_threads: object) -> None:
    from pytest_rnnperf.backends.torch import prove_path

    lstm = torch.nn.LSTM(8, 16)
    x = torch.randn(5, 3, 8)

    def step(onednn: bool) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "TF32 acceleration on top of oneDNN ..."
            with torch.backends.mkldnn.flags(enabled=onednn):
                out, _ = lstm(x)
                out.sum().backward()

    plain = prove_path("generic", lambda: step(False), "cpu")
    assert plain.ok and "aten::mm" in plain.evidence
    # oneDNN's fused RNN is not the generic loop, and nothing here ran cuDNN: both proofs must fail.
    fused = prove_path("generic", lambda: step(True), "cpu")
    assert not fused.ok and "aten::mkldnn_rnn_layer" in fused.evidence
    assert not prove_path("cudnn", lambda: step(False), "cpu").ok


def test_a_packed_batch_is_one_input_compared_on_its_data(two_threads: object) -> None:
    """Defect 23: a PackedSequence was split into its fields ("got ['NoneType', 'NoneType']"); its data is compared."""
    from torch.nn.utils.rnn import pack_padded_sequence

    from pytest_rnnperf.model.parity import compare_results

    batch = pack_padded_sequence(torch.randn(6, 3, 3), torch.tensor([4, 6, 2]), enforce_sorted=False)
    pair = TorchBackend().build_model(ModelCase("m", "torch"), torch.nn.LSTM(3, 5), batch, impls=("generic",))
    try:
        mine, ref = pair.generic.result(), pair.reference()  # type: ignore[union-attr]
        # The packed output is its data (12 = 4 + 6 + 2 steps); batch_sizes and the sort order are the input's.
        assert mine["output[0]"][1].shape == (12, 5) and mine["d_input[0]"][1].shape == (12, 3)
        assert mine["d_input[0]"][1].any()
        rows = compare_results("generic vs reference", mine, ref, "fp32")
        assert [r.quantity for r in rows] == ["output", "d_input", "d_params"] and all(r.ok for r in rows)
    finally:
        pair.close()


def test_a_timing_only_run_skips_parity_but_still_proves_and_times(two_threads: object) -> None:
    """RunConfig(parity=False), the extra processes of a recording: no parity rows, a proof and a timing."""
    from pytest_rnnperf.measure.runner import RunConfig, run_case
    from pytest_rnnperf.model.timing import TimingConfig

    case = Case("torch", "lstm", Shape(5, 3, 4, 6, 1), "train")
    quick = TimingConfig(rounds=5, warmup_steps=1, warmup_s=0.0, min_block_s=0.0)
    checked = run_case(case, TorchBackend(), RunConfig(timing=quick, energy_s=0.0), impls=("generic",))
    timed = run_case(case, TorchBackend(), RunConfig(timing=quick, energy_s=0.0, parity=False), impls=("generic",))
    assert checked.parity.rows and not timed.parity.rows
    assert timed.paths_ok and timed.generic is not None and len(timed.generic.samples) == 5


def test_an_installed_torch_that_fails_to_import_is_a_skip_reason_naming_the_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken install (find_spec finds torch, importing it raises) failed every case with a traceback."""
    import pytest_rnnperf.backends.torch as torch_backend
    from pytest_rnnperf.backends import torch_common

    def broken() -> None:
        raise ImportError("libcudnn.so.9: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(torch_common, "import_torch", broken)
    reason = torch_backend.TorchBackend().unavailable_reason()
    assert reason == ("torch is installed but cannot be imported (ImportError: libcudnn.so.9: cannot open shared object "
                      "file: No such file or directory); reinstall it (pip install 'pytest-rnnperf[torch]')")
    assert torch_backend.TorchBackend().gpu_unavailable_reason() == reason


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn_relu"])
def test_the_serialized_directions_compute_what_the_bidirectional_module_computes(cell: str) -> None:
    """RNNPERF_INJECT_SERIALIZE_BIDIRECTIONAL's passes: the module's outputs, final states and gradients, on the CPU."""
    case = Case("torch", cell, Shape(6, 3, 4, 5, num_layers=2, bidirectional=True))
    module = build_module(case, reference.init_weights(cell, 4, 5, 2, True), "cpu")
    x = torch.randn(6, 3, 4, requires_grad=True)
    passes: dict = {}
    serialized_forward(module, x, passes)  # a step before: the passes are kept and called again
    whole, serial = module(x), serialized_forward(module, x, passes)
    assert len(passes) == 4
    flat = [t for side in (whole, serial) for t in (side[0], *(side[1] if cell == "lstm" else (side[1],)))]
    half = len(flat) // 2
    for a, b in zip(flat[:half], flat[half:], strict=True):
        torch.testing.assert_close(b, a)
    params = list(module.parameters())
    upstream = [torch.randn_like(t) for t in flat[:half]]
    g_whole = torch.autograd.grad(flat[:half], [x, *params], upstream)
    g_serial = torch.autograd.grad(flat[half:], [x, *params], upstream)
    for a, b in zip(g_whole, g_serial, strict=True):
        torch.testing.assert_close(b, a)


def test_the_serializing_fault_takes_case_id_globs_alone() -> None:
    """Its value names cases (like the delays' globs, without a value); a glob=value part is refused in one line."""
    env = {INJECT_SERIALIZE_ENV: "torch-*-bi, jax-lstm-*"}
    assert injected_serial("torch-lstm-train-fp32-T50-B64-I64-H256-L2-bi", env)
    assert not injected_serial("torch-lstm-train-fp32-T28-B128-I28-H128-L1", env)
    with pytest.raises(ValueError, match="'torch-\\*=1' is not a <case-id glob>"):
        parse_injection("torch-*=1", INJECT_SERIALIZE_ENV)


def test_the_longer_step_injection_lengthens_only_the_named_cudnn_sides_timed_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """RNNPERF_INJECT_LONGER_STEP='torch-lstm-*=10': the cuDNN side's timed step runs 10% more timesteps (the last
    ones again, at least one), its parity inputs stay the case's own, and the generic side is untouched."""
    from pytest_rnnperf.backends import INJECT_ENVS, INJECT_LONGER_ENV
    from pytest_rnnperf.backends.torch_common import TorchImpl, longer_steps

    monkeypatch.setenv(INJECT_LONGER_ENV, "torch-lstm-*=10")
    case = Case("torch", "lstm", Shape(12, 2, 3, 4))
    weights = reference.init_weights("lstm", 3, 4)
    inputs = reference.make_inputs(case)
    sides = {impl: TorchImpl(impl, case, build_module(case, weights, "cpu"), "cpu", inputs, weights)
             for impl in ("cudnn", "generic")}
    cudnn, generic = sides["cudnn"], sides["generic"]
    assert cudnn._step_x.shape[0] == 14 and cudnn._step_grads[0].shape[0] == 14  # ceil(12 * 10%) = 2 more
    torch.testing.assert_close(cudnn._step_x[12:], cudnn._x[10:])
    assert cudnn._step_grads[1] is cudnn._grads[1]  # the final state's gradient keeps its shape
    assert generic._step_x is generic._x and cudnn._x.shape[0] == 12
    cudnn.step()
    torch.testing.assert_close(cudnn.result().output, generic.result().output)  # parity: the case's own inputs
    assert longer_steps("torch-gru-train", 12) == 0 and longer_steps("torch-lstm-x", 50) == 5
    assert longer_steps("torch-lstm-x", 3, {INJECT_LONGER_ENV: "torch-*=1"}) == 1  # at least one timestep
    assert INJECT_LONGER_ENV in INJECT_ENVS
    with pytest.raises(ValueError, match="percent is more than 100"):
        parse_injection("torch-*=150", INJECT_LONGER_ENV)


def test_a_batch_major_sequence_is_lengthened_along_its_time_axis() -> None:
    """Keras on torch keeps its inputs batch-major: the longer step repeats the last timesteps along axis 1, and
    the final states' gradients stay as they are."""
    from pytest_rnnperf.backends.torch_common import lengthened

    x = torch.arange(2 * 5 * 3, dtype=torch.float32).reshape(2, 5, 3)
    d_out, d_h = torch.ones(2, 5, 4), torch.zeros(2, 4)
    x_long, (d_out_long, d_h_same) = lengthened(x, (d_out, d_h), 2, dim=1)
    assert x_long.shape == (2, 7, 3) and d_out_long.shape == (2, 7, 4) and d_h_same is d_h
    torch.testing.assert_close(x_long[:, 5:], x[:, 3:])
