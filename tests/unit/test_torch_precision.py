"""How torch is told a case's precision (the per-operator fp32_precision API where torch has it, allow_tf32 where not),
and the fault injection that runs a cuDNN side without tensor-op math."""

from __future__ import annotations

import contextlib
import sys
from types import SimpleNamespace
from typing import Any, Iterator

import pytest

from pytest_rnnperf.backends import INJECT_ENVS, INJECT_NO_TENSOR_OP_ENV, parse_injection
from pytest_rnnperf.backends.torch import _side_precision
from pytest_rnnperf.backends.torch_common import TorchImpl, build_module, precision_flags, torch_info
from pytest_rnnperf.model import reference
from pytest_rnnperf.model.cases import Case, Shape

MIXED = "a mix of the legacy and new APIs"  # what torch >= 2.9 raises when the legacy switches are read after the new


class NewCudnn:
    """torch >= 2.9's cudnn module as far as the pin goes: per-operator precision; the legacy switches raise."""

    def __init__(self) -> None:
        self.enabled, self.benchmark, self.deterministic = True, True, True
        self.rnn = SimpleNamespace(fp32_precision="tf32")
        self.version, self.is_available = (lambda: 91900), (lambda: True)

    @property
    def allow_tf32(self) -> bool:
        """Raises, as torch does once cuDNN's RNN and convolutions have different precisions."""
        raise RuntimeError(MIXED)

    def flags(self, **kwargs: Any) -> Any:
        """Raises: cudnn.flags() reads the legacy switch first."""
        raise RuntimeError(MIXED)


class NewMatmul:
    """torch >= 2.9's cuda.matmul: fp32_precision, and a legacy switch the pin must not touch."""

    def __init__(self) -> None:
        self.fp32_precision = "none"

    @property
    def allow_tf32(self) -> bool:
        """Raises: the new API's pin reads and writes fp32_precision only."""
        raise RuntimeError(MIXED)


class LegacyCudnn:
    """An older torch's cudnn module: allow_tf32 and the flags() context manager, no per-operator precision."""

    def __init__(self) -> None:
        self.enabled, self.benchmark, self.deterministic, self.allow_tf32 = True, True, True, True
        self.rnn = SimpleNamespace()  # the module exists (dropout state helpers), without fp32_precision
        self.version, self.is_available = (lambda: 8902), (lambda: True)
        self.calls: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def flags(self, **kwargs: Any) -> Iterator[None]:
        """Note what the block was pinned to."""
        self.calls.append(kwargs)
        yield


def fake_torch(cudnn: Any, matmul: Any) -> SimpleNamespace:
    """A torch with these backends, enough for the pin and torch_info."""
    return SimpleNamespace(backends=SimpleNamespace(cudnn=cudnn, cuda=SimpleNamespace(matmul=matmul)),
                           __version__="2.13.0", version=SimpleNamespace(cuda="13.0"),
                           cuda=SimpleNamespace(is_available=lambda: False),
                           get_float32_matmul_precision=lambda: "highest",
                           are_deterministic_algorithms_enabled=lambda: False)


@pytest.mark.parametrize("precision, math", [("fp32", "ieee"), ("tf32", "tf32"), ("fp16", "ieee")])
def test_a_torch_with_fp32_precision_is_pinned_through_it_alone_and_put_back(
        monkeypatch: pytest.MonkeyPatch, precision: str, math: str) -> None:
    """cuDNN's RNN and matmul get the mode's precision by the new API; the legacy switch, which would raise, is
    never read; everything is as it was after the block."""
    cudnn, matmul = NewCudnn(), NewMatmul()
    monkeypatch.setitem(sys.modules, "torch", fake_torch(cudnn, matmul))
    with precision_flags("generic", precision):
        assert (cudnn.rnn.fp32_precision, matmul.fp32_precision) == (math, math)
        assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic) == (False, False, False)
    assert (cudnn.rnn.fp32_precision, matmul.fp32_precision, cudnn.enabled, cudnn.benchmark) == ("tf32", "none", True, True)


def test_an_older_torch_is_pinned_through_allow_tf32() -> None:
    """Without fp32_precision the legacy switches pin TF32 on for tf32 only, and matmul's is put back."""
    cudnn, matmul = LegacyCudnn(), SimpleNamespace(allow_tf32=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "torch", fake_torch(cudnn, matmul))
        for precision in ("tf32", "fp32"):
            with precision_flags("cudnn", precision):
                assert matmul.allow_tf32 is (precision == "tf32")
            assert matmul.allow_tf32 is False
    assert cudnn.calls == [dict(enabled=True, benchmark=False, deterministic=False, allow_tf32=tf32)
                           for tf32 in (True, False)]


def test_the_fingerprint_says_which_precision_api_pinned_the_cases() -> None:
    """The environment names the API: fp32_precision on a new torch, allow_tf32 on an older one."""
    new = torch_info(fake_torch(NewCudnn(), NewMatmul()))
    old = torch_info(fake_torch(LegacyCudnn(), SimpleNamespace(allow_tf32=False)))
    assert (new["torch.precision_api"], old["torch.precision_api"]) == ("fp32_precision", "allow_tf32")


def test_the_installed_torch_is_pinned_without_mixing_the_two_apis() -> None:
    """On the installed torch the pin runs, and its legacy switch reads again afterwards (no mix left behind)."""
    torch = pytest.importorskip("torch")
    before = torch.backends.cudnn.allow_tf32
    with precision_flags("cudnn", "fp32", "cpu"):
        if hasattr(torch.backends.cudnn.rnn, "fp32_precision"):
            assert torch.backends.cudnn.rnn.fp32_precision == "ieee"
    assert torch.backends.cudnn.allow_tf32 == before


@pytest.mark.parametrize("case_id, impl, device, precision, runs", [
    ("torch-lstm-train-fp16-T50-B512-I512-H1024-L1", "cudnn", "cuda:0", "fp16", "fp32"),
    ("torch-lstm-train-fp16-T50-B512-I512-H1024-L1", "generic", "cuda:0", "fp16", "fp16"),
    ("torch-lstm-train-tf32-T50-B512-I512-H1024-L1", "cudnn", "cuda:0", "tf32", "fp32"),
    ("torch-gru-train-fp16-T50-B512-I512-H1024-L1", "cudnn", "cuda:0", "fp16", "fp16"),  # not named
    ("torch-lstm-train-fp16-T50-B512-I512-H1024-L1", "cudnn", "cpu", "fp16", "fp16"),
])
def test_the_no_tensor_op_injection_runs_only_the_named_gpu_cudnn_sides_in_fp32(
        monkeypatch: pytest.MonkeyPatch, case_id: str, impl: str, device: str, precision: str, runs: str) -> None:
    """RNNPERF_INJECT_NO_TENSOR_OP turns the math of a named case's GPU cuDNN side to IEEE fp32; the rest keep theirs."""
    monkeypatch.setenv(INJECT_NO_TENSOR_OP_ENV, "torch-lstm-*fp16*, torch-lstm-*tf32*")
    case = SimpleNamespace(id=case_id, precision=precision)
    assert _side_precision(case, impl, device) == runs  # type: ignore[arg-type]


def test_the_no_tensor_op_injection_takes_globs_and_refuses_an_amount() -> None:
    """Its value is case-id globs; "glob=5" is one line naming the variable, as the delays' malformed values are."""
    assert parse_injection("torch-lstm-*fp16*,torch-gru-*", INJECT_NO_TENSOR_OP_ENV) == [
        ("torch-lstm-*fp16*", 0.0), ("torch-gru-*", 0.0)]
    with pytest.raises(ValueError, match=f"^{INJECT_NO_TENSOR_OP_ENV}: 'torch-\\*=5' is not a <case-id glob>"):
        parse_injection("torch-*=5", INJECT_NO_TENSOR_OP_ENV)
    assert INJECT_NO_TENSOR_OP_ENV in INJECT_ENVS


def test_a_torch_side_runs_in_the_precision_it_is_given_not_its_cases() -> None:
    """The cuDNN side of an fp16 case given fp32 holds fp32 weights and inputs and pins IEEE math."""
    torch = pytest.importorskip("torch")
    case = Case("torch", "lstm", Shape(3, 2, 3, 4), precision="fp16")
    weights = reference.init_weights("lstm", 3, 4)
    inputs = reference.make_inputs(case)
    side = TorchImpl("cudnn", case, build_module(case, weights, "cpu", "fp32"), "cpu", inputs, weights, "fp32")
    assert side._x.dtype == torch.float32 and next(side.module.parameters()).dtype == torch.float32
    side.step()
