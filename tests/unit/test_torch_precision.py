"""How torch is told a case's precision: the per-operator fp32_precision API where torch has it, allow_tf32 where not."""

from __future__ import annotations

import contextlib
import sys
from types import SimpleNamespace
from typing import Any, Iterator

import pytest

from pytest_rnnperf.backends.torch_common import precision_flags, torch_info

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
