"""The case spec (one name per concept: a case id is the key everywhere) and the case matrices.

A ``Case`` is one point of the ready suite's matrix (framework x cell x shape x mode x precision); a
``ModelCase`` is a team's own model checked through ``rnnperf.model()``, keyed by its test's id. Frameworks
are not listed here: the backend registry (``pytest_rnnperf.backends``) knows them.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Union

CELLS: tuple[str, ...] = ("lstm", "gru", "rnn_tanh", "rnn_relu")
MODES: tuple[str, ...] = ("train", "infer")
# fp32: IEEE float32 everywhere (TF32 off). tf32: TF32 tensor-core math allowed in cuDNN and matmul.
# fp16/bf16: half-precision weights and activations (cuDNN supports them on Ampere and later).
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "fp16", "bf16")
SCALES: tuple[str, ...] = ("smoke", "nightly", "full")

GATES: dict[str, int] = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


@dataclass(frozen=True)
class Shape:
    """Sequence length T, batch B, input size I, hidden size H, stacked layers and direction."""

    seq_len: int
    batch: int
    input_size: int
    hidden_size: int
    num_layers: int = 1
    bidirectional: bool = False

    @property
    def id(self) -> str:
        """Stable, readable shape id, e.g. ``T28-B128-I28-H128-L1`` (``-bi`` when bidirectional)."""
        s = f"T{self.seq_len}-B{self.batch}-I{self.input_size}-H{self.hidden_size}-L{self.num_layers}"
        return s + ("-bi" if self.bidirectional else "")

    @property
    def directions(self) -> int:
        """Number of directions (1 or 2)."""
        return 2 if self.bidirectional else 1


@dataclass(frozen=True)
class Case:
    """One benchmark case: framework x cell x shape x mode x precision, with its speedup floor."""

    framework: str
    cell: str
    shape: Shape
    mode: str = "train"
    precision: str = "fp32"
    # Minimum cuDNN-over-generic speedup; where it comes from is documented in suites/floors.py.
    floor: float = 1.0
    tags: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        """Reject unknown vocabulary early, with the allowed values in the message."""
        if not self.framework or not isinstance(self.framework, str):
            raise ValueError(f"framework must be a backend name such as 'torch', got {self.framework!r}")
        for name, value, allowed in (
            ("cell", self.cell, CELLS),
            ("mode", self.mode, MODES),
            ("precision", self.precision, PRECISIONS),
        ):
            if value not in allowed:
                raise ValueError(f"unknown {name} {value!r}; expected one of {', '.join(allowed)}")

    @property
    def id(self) -> str:
        """Stable case id used as test id, benchmark group and baseline key."""
        return f"{self.framework}-{self.cell}-{self.mode}-{self.precision}-{self.shape.id}"

    def flops_per_step(self) -> float | None:
        """GEMM FLOPs of one step (forward; x3 for forward+backward), the convention cuDNN papers use."""
        s = self.shape
        g = GATES[self.cell]
        total = 0.0
        for layer in range(s.num_layers):
            in_size = s.input_size if layer == 0 else s.hidden_size * s.directions
            # 2 FLOPs per multiply-add: input projection + recurrent projection, per direction.
            total += s.directions * 2.0 * s.seq_len * s.batch * g * s.hidden_size * (in_size + s.hidden_size)
        return total * (3.0 if self.mode == "train" else 1.0)


@dataclass(frozen=True)
class ModelCase:
    """A team's own model, checked cuDNN against generic like a matrix case; its id is the test's id."""

    id: str
    framework: str
    mode: str = "train"
    precision: str = "fp32"
    floor: float = 1.0
    description: str = ""  # e.g. "Encoder: 1.2M parameters; LSTM(128, 256, num_layers=2)"

    def __post_init__(self) -> None:
        """Reject unknown vocabulary early, with the allowed values in the message."""
        for name, value, allowed in (("mode", self.mode, MODES), ("precision", self.precision, PRECISIONS)):
            if value not in allowed:
                raise ValueError(f"unknown {name} {value!r}; expected one of {', '.join(allowed)}")
        floor = self.floor
        if isinstance(floor, bool) or not isinstance(floor, numbers.Real) or not 0 < floor < math.inf:
            raise ValueError(f"floor must be a finite speedup > 0 such as 2.0, got {floor!r}")
        object.__setattr__(self, "floor", float(floor))  # a numpy scalar too: records are written as JSON

    def flops_per_step(self) -> float | None:
        """Unknown for an arbitrary model (the summary shows '-')."""
        return None


Subject = Union[Case, ModelCase]  # what a measured record is about


def cross_id(case: Case, other: str) -> str:
    """Id of the cross-framework check of ``case`` against framework ``other``, e.g. ``torch-vs-tf-lstm-...``."""
    return f"{case.framework}-vs-{other}-" + case.id.split("-", 1)[1]


def param_id(name: str) -> str:
    """The parameter id a test's name or node id ends with (``test_x[torch-lstm-...]`` -> ``torch-lstm-...``), else
    "": the ready suite names each matrix test by its case."""
    _, bracket, param = name.partition("[")
    return param[:-1] if bracket and param.endswith("]") else ""
