"""The claims suite's torch lab: build, train, evaluate and time one model on the cuDNN or the generic path.

A model is ``head(LSTM(embed(x)))``; ``task`` picks the head: "classify" (last step -> class scores),
"regress" (last step -> one value), "lm" (every step -> next-character scores). The generic path is the same
module run under ``torch.backends.cudnn.flags(enabled=False)``, so both sides hold the very same weights.
"""

from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from pytest_rnnperf.backends.torch import dispatched_ops

PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16")


def _torch() -> Any:
    import torch

    return torch


@dataclass
class Model:
    """One side: the module, its optimizer, where and how it runs."""

    net: Any
    opt: Any
    task: str
    impl: str
    device: str
    precision: str
    scaler: Any = None


class TorchLab:
    """Models for the claims on torch (``nn.LSTM``: cuDNN, or ATen's generic LSTM with cuDNN disabled)."""

    name = "torch"
    precisions = ("fp32", "tf32", "bf16", "fp16")  # bf16/fp16 through autocast; the weights stay float32

    def gpu_reason(self) -> str | None:
        """Why there is no cuDNN here, or None."""
        torch = _torch()
        if not torch.cuda.is_available():
            return "no CUDA GPU visible to torch"
        if not torch.backends.cudnn.is_available():
            return "torch has no cuDNN"
        return None

    def gpu_device(self) -> str:
        """The device of the cuDNN side and of generic-on-GPU."""
        return "cuda"

    def cpu_threads(self) -> int:
        """Threads the CPU side runs on."""
        return int(_torch().get_num_threads())

    def build(self, task: str, inputs: int, hidden: int, layers: int, outputs: int, impl: str, device: str,
              precision: str = "fp32", seed: int = 0, like: Model | None = None, lr: float = 3e-3) -> Model:
        """A fresh model (weights from ``seed``, or copied from ``like``) with an Adam optimizer."""
        torch = _torch()
        nn = torch.nn

        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = nn.Embedding(outputs, inputs) if task == "lm" else None
                self.rnn = nn.LSTM(inputs, hidden, num_layers=layers, batch_first=True)
                self.head = nn.Linear(hidden, outputs)

            def forward(self, x: Any) -> Any:
                if self.embed is not None:
                    x = self.embed(x)
                y, _ = self.rnn(x)
                return self.head(y if task == "lm" else y[:, -1])

        if like is not None:
            net = copy.deepcopy(like.net)
        else:
            torch.manual_seed(seed)  # built on the CPU: the same seed gives the same weights on every device
            net = Net()
        net = net.to(device=device, dtype=torch.float64 if precision == "fp64" else torch.float32)
        scaler = torch.amp.GradScaler("cuda") if precision == "fp16" and device.startswith("cuda") else None
        return Model(net, torch.optim.Adam(net.parameters(), lr=lr), task, impl, device, precision, scaler)

    @contextlib.contextmanager
    def _path(self, m: Model, forward: bool = True) -> Iterator[None]:
        """Run on ``m``'s path and precision: cuDNN on or off, TF32 pinned; autocast (bf16/fp16) for the forward only."""
        torch = _torch()
        tf32 = m.precision == "tf32"
        saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(m.precision)
        cast = (torch.autocast(device_type=m.device.split(":")[0], dtype=dtype) if dtype is not None and forward
                else contextlib.nullcontext())
        try:
            with torch.backends.cudnn.flags(enabled=m.impl == "cudnn", allow_tf32=tf32), cast:
                yield
        finally:
            torch.backends.cuda.matmul.allow_tf32 = saved

    def tensors(self, m: Model, x: np.ndarray, y: np.ndarray) -> tuple[Any, Any]:
        """The task's arrays on ``m``'s device in its dtype (ids stay integers)."""
        torch = _torch()
        dtype = torch.float64 if m.precision == "fp64" else torch.float32
        tx = torch.as_tensor(x, device=m.device)
        tx = tx.long() if m.task == "lm" else tx.to(dtype)
        ty = torch.as_tensor(y, device=m.device)
        ty = ty.long() if m.task in ("lm", "classify") else ty.to(dtype)
        return tx, ty

    def _loss(self, m: Model, out: Any, y: Any) -> Any:
        f = _torch().nn.functional
        if m.task == "classify":
            return f.cross_entropy(out.float(), y)
        if m.task == "lm":
            return f.cross_entropy(out.float().reshape(-1, out.shape[-1]), y.reshape(-1))
        return f.mse_loss(out.to(y.dtype), y)

    def fit(self, m: Model, data: tuple[Any, Any], order: np.ndarray, batch: int) -> float:
        """One epoch over ``data`` in ``order``, ``batch`` rows a step; the mean loss (read at the end: one sync)."""
        torch = _torch()
        x, y = data
        idx = torch.as_tensor(order, device=m.device)
        total = torch.zeros((), device=m.device, dtype=torch.float64)
        steps = 0
        m.net.train()
        for start in range(0, len(order), batch):
            rows = idx[start:start + batch]
            with self._path(m):
                loss = self._loss(m, m.net(x[rows]), y[rows])
            m.opt.zero_grad(set_to_none=True)
            with self._path(m, forward=False):
                if m.scaler is not None:  # fp16: scaled loss, or small gradients underflow
                    m.scaler.scale(loss).backward()
                    m.scaler.step(m.opt)
                    m.scaler.update()
                else:
                    loss.backward()
                    m.opt.step()
            total += loss.detach().double()
            steps += 1
        return float(total.item()) / max(steps, 1)

    def outputs(self, m: Model, x: Any, batch: int = 1024) -> np.ndarray:
        """The model's outputs on ``x`` as float64 (no gradients)."""
        torch = _torch()
        m.net.eval()
        parts = []
        with torch.no_grad(), self._path(m):
            for start in range(0, x.shape[0], batch):
                parts.append(m.net(x[start:start + batch]).double().cpu().numpy())
        return np.concatenate(parts)

    def loss_on(self, m: Model, data: tuple[Any, Any], batch: int = 256) -> float:
        """Mean loss over ``data`` (no gradients)."""
        torch = _torch()
        x, y = data
        m.net.eval()
        total, n = 0.0, 0
        with torch.no_grad(), self._path(m):
            for start in range(0, x.shape[0], batch):
                rows = slice(start, start + batch)
                total += float(self._loss(m, m.net(x[rows]), y[rows])) * len(y[rows])
                n += len(y[rows])
        return total / max(n, 1)

    def predict(self, m: Model, x: Any, batch: int) -> None:
        """Inference over ``x`` in batches, synchronized at the end (what predict() costs)."""
        torch = _torch()
        m.net.eval()
        with torch.no_grad(), self._path(m):
            for start in range(0, x.shape[0], batch):
                m.net(x[start:start + batch])
        self.sync(m)

    def sync(self, m: Model) -> None:
        """Wait for the device."""
        if m.device.startswith("cuda"):
            _torch().cuda.synchronize()

    def prove(self, m: Model, data: tuple[Any, Any]) -> tuple[bool, str]:
        """Which ATen ops a training step dispatched: aten::_cudnn_rnn on cuDNN, none of it on generic."""
        x, y = data

        def step() -> None:
            with self._path(m):
                loss = self._loss(m, m.net(x[:8]), y[:8])
            with self._path(m, forward=False):
                loss.backward()
            m.net.zero_grad(set_to_none=True)

        names = dispatched_ops(step, m.device)
        cudnn = sorted(n for n in names if "cudnn_rnn" in n)
        ok = bool(cudnn) if m.impl == "cudnn" else not cudnn
        return ok, ", ".join(cudnn) if cudnn else "no aten::_cudnn_rnn op"

    def memory_reset(self, m: Model) -> None:
        """Start counting peak device memory."""
        if m.device.startswith("cuda"):
            torch = _torch()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()

    def memory_peak(self, m: Model) -> int | None:
        """Peak device memory allocated since ``memory_reset`` (bytes), None on the CPU."""
        return int(_torch().cuda.max_memory_allocated()) if m.device.startswith("cuda") else None

    def generate(self, m: Model, prompt: list[int], n: int) -> list[int]:
        """``n`` characters after ``prompt``, greedy (deterministic), feeding the whole window each step."""
        torch = _torch()
        ids = list(prompt)
        m.net.eval()
        with torch.no_grad(), self._path(m):
            for _ in range(n):
                x = torch.as_tensor([ids[-64:]], device=m.device)
                ids.append(int(m.net(x)[0, -1].argmax()))
        return ids[len(prompt):]

    def timed(self, m: Model, fn: Any) -> float:
        """Seconds ``fn`` took, the device synchronized before and after."""
        self.sync(m)
        t0 = time.perf_counter()
        fn()
        self.sync(m)
        return time.perf_counter() - t0
