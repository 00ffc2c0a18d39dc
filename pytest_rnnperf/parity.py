"""Output/state/gradient comparison with a tolerance model per precision mode.

The error of one quantity is its normalized max error, max|a - b| / max|b|: RNN outputs live in [-1, 1]
but gradients scale with batch and sequence length, so a relative-to-scale figure is comparable across
shapes where a plain absolute tolerance is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .backends import ImplResult


@dataclass(frozen=True)
class Tolerance:
    """Largest acceptable normalized max error for forward quantities and for gradients."""

    forward: float
    gradient: float
    why: str


# Where the figures come from: FP32 keeps a 24-bit mantissa (~6e-8 per op); over T recurrent steps and
# the reductions of backward, errors of 1e-6..1e-5 against float64 are typical, so 5e-5 / 5e-4 leaves
# room without hiding a wrong gate (which shows up as O(1e-1)). TF32 keeps 10 bits (~5e-4 per op) in
# the matmuls; FP16 10 bits with a narrow range; BF16 only 7 bits (~4e-3 per op).
TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(5e-5, 5e-4, "IEEE float32 in cuDNN and matmul (TF32 off)"),
    "tf32": Tolerance(5e-3, 2e-2, "TF32 tensor-core matmuls: 10-bit mantissa inputs, float32 accumulation"),
    "fp16": Tolerance(1e-2, 5e-2, "float16 weights and activations, float32 accumulation"),
    "bf16": Tolerance(5e-2, 1.5e-1, "bfloat16 weights and activations (7-bit mantissa)"),
}


@dataclass(frozen=True)
class ParityRow:
    """One compared quantity of one comparison (e.g. d_weights, cudnn vs reference)."""

    comparison: str  # "cudnn vs generic", "cudnn vs reference", "generic vs reference"
    quantity: str  # "output", "h_n", "c_n", "d_input", "d_weights[w_hh_l0]" ...
    error: float  # normalized max error; inf when either side has NaN/Inf
    tolerance: float
    note: str = ""

    @property
    def ok(self) -> bool:
        """Within tolerance (and finite)."""
        return bool(np.isfinite(self.error)) and self.error <= self.tolerance

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON form (inf is written as a string so the JSON stays valid)."""
        return {
            "comparison": self.comparison,
            "quantity": self.quantity,
            "error": self.error if np.isfinite(self.error) else "inf",
            "tolerance": self.tolerance,
            "ok": self.ok,
            "note": self.note,
        }


@dataclass(frozen=True)
class ParityReport:
    """All compared quantities of a case, with the precision mode's tolerance."""

    precision: str
    rows: tuple[ParityRow, ...]

    @property
    def ok(self) -> bool:
        """Every row within tolerance."""
        return all(r.ok for r in self.rows)

    def worst(self, comparison: str | None = None) -> ParityRow | None:
        """The row with the largest error relative to its tolerance (optionally of one comparison)."""
        rows = [r for r in self.rows if comparison is None or r.comparison == comparison]
        if not rows:
            return None
        return max(rows, key=lambda r: (np.inf if not np.isfinite(r.error) else r.error / r.tolerance))

    def failures(self) -> list[ParityRow]:
        """Rows out of tolerance."""
        return [r for r in self.rows if not r.ok]

    def as_dict(self) -> dict[str, object]:
        """Plain-JSON form."""
        return {"precision": self.precision, "ok": self.ok, "rows": [r.as_dict() for r in self.rows]}


def normalized_error(a: np.ndarray, b: np.ndarray) -> tuple[float, str]:
    """max|a-b| / max|b| and a note; inf with the reason when shapes differ or a value is NaN/Inf."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf"), f"shape {a.shape} vs {b.shape}"
    for side, arr in (("first", a), ("second", b)):
        bad = ~np.isfinite(arr)
        if bad.any():
            kind = "NaN" if np.isnan(arr).any() else "Inf"
            return float("inf"), f"{kind} in {side} side ({int(bad.sum())} of {arr.size} values)"
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    diff = float(np.max(np.abs(a - b))) if a.size else 0.0
    # An all-zero reference (e.g. relu units that never fire) falls back to the absolute error.
    return (diff / scale if scale > 0 else diff), ""


def weight_names(num_layers: int, directions: int) -> list[str]:
    """Names of the canonical arrays in ``flat()`` order, e.g. ``w_hh_l1_reverse``."""
    return [
        f"{kind}_l{layer}" + ("_reverse" if d else "")
        for layer in range(num_layers)
        for d in range(directions)
        for kind in ("w_ih", "w_hh", "b_ih", "b_hh")
    ]


def _pairs(a: "ImplResult", b: "ImplResult") -> Iterable[tuple[str, str, np.ndarray | None, np.ndarray | None]]:
    """(kind, quantity, a, b) for every quantity both results carry; kind is forward or gradient."""
    yield "forward", "output", a.output, b.output
    yield "forward", "h_n", a.h_n, b.h_n
    if a.c_n is not None or b.c_n is not None:
        yield "forward", "c_n", a.c_n, b.c_n
    if a.d_input is not None or b.d_input is not None:
        yield "gradient", "d_input", a.d_input, b.d_input
    if a.d_weights is not None and b.d_weights is not None:
        names = weight_names(a.d_weights.num_layers, a.d_weights.directions)
        for name, wa, wb in zip(names, a.d_weights.flat(), b.d_weights.flat(), strict=True):
            yield "gradient", f"d_weights[{name}]", wa, wb
    elif a.d_weights is not None or b.d_weights is not None:
        # One side has no weight gradients: reported as missing; the other side goes as one flat array.
        def flat(w: Any) -> np.ndarray | None:
            return None if w is None else np.concatenate([np.ravel(x) for x in w.flat()])
        yield "gradient", "d_weights", flat(a.d_weights), flat(b.d_weights)


def compare_results(
    comparison: str, a: "ImplResult", b: "ImplResult", precision: str, collapse_weights: bool = True
) -> list[ParityRow]:
    """Rows for every quantity of ``a`` against ``b`` (``b`` is the reference side of the comparison).

    With ``collapse_weights`` the per-array weight-gradient rows fold into one ``d_weights`` row that
    names the worst array, which keeps reports readable for deep stacks.
    """
    tol = TOLERANCES[precision]
    rows: list[ParityRow] = []
    weight_rows: list[ParityRow] = []
    for kind, quantity, qa, qb in _pairs(a, b):
        limit = tol.forward if kind == "forward" else tol.gradient
        if qa is None or qb is None:
            rows.append(ParityRow(comparison, quantity, float("inf"), limit, "missing on one side"))
            continue
        err, note = normalized_error(qa, qb)
        row = ParityRow(comparison, quantity, err, limit, note)
        (weight_rows if quantity.startswith("d_weights[") else rows).append(row)
    if weight_rows:
        if collapse_weights:
            worst = max(weight_rows, key=lambda r: r.error if np.isfinite(r.error) else np.inf)
            name = worst.quantity[len("d_weights["):-1]
            note = f"worst {name}" + (f"; {worst.note}" if worst.note else "")
            rows.append(ParityRow(comparison, "d_weights", worst.error, worst.tolerance, note))
        else:
            rows.extend(weight_rows)
    return rows


def format_failures(report: ParityReport) -> str:
    """A small table of the failing rows: obtained, tolerance, note."""
    lines = [f"parity out of tolerance ({report.precision}: {TOLERANCES[report.precision].why}):",
             f"  {'comparison':<22} {'quantity':<12} {'error':>10} {'tolerance':>10}  note"]
    for r in report.failures():
        lines.append(f"  {r.comparison:<22} {r.quantity:<12} {r.error:>10.3g} {r.tolerance:>10.3g}  {r.note}")
    return "\n".join(lines)
