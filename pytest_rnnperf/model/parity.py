"""Output/state/gradient comparison with a tolerance model per precision mode.

The error of one quantity is its normalized max error, max|a - b| / max|b|: RNN outputs live in [-1, 1]
but gradients scale with batch and sequence length, so a relative-to-scale figure is comparable across
shapes where a plain absolute tolerance is not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Mapping, Sequence, Union

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.results import ImplResult

# One compared quantity: its kind ("forward" or "gradient", which picks the tolerance) and its values.
# Names with a bracket ("d_weights[w_hh_l0]", "d_params[lstm.bias_hh_l0]") form a group that reports fold
# into one row naming the worst member.
Quantity = tuple[str, Union[np.ndarray, None]]
Quantities = Mapping[str, Quantity]


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


def normalized_error(a: np.ndarray, b: np.ndarray) -> tuple[float, str]:
    """max|a-b| / max|b| and a note; inf with the reason when shapes differ or a value is NaN/Inf."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf"), f"shape {a.shape} vs {b.shape}"
    for side, arr in (("first", a), ("second", b)):
        nan, inf = int(np.isnan(arr).sum()), int(np.isinf(arr).sum())
        if nan and inf:
            return float("inf"), f"NaN and Inf in {side} side ({nan} NaN, {inf} Inf of {arr.size} values)"
        if nan or inf:
            return float("inf"), f"{'NaN' if nan else 'Inf'} in {side} side ({nan or inf} of {arr.size} values)"
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


def quantities(result: "ImplResult | Quantities") -> dict[str, Quantity]:
    """Every compared quantity of a result, by name: an RNN case's outputs, states and gradients, or a model's."""
    if isinstance(result, Mapping):
        return dict(result)
    q: dict[str, Quantity] = {"output": ("forward", result.output), "h_n": ("forward", result.h_n)}
    if result.c_n is not None:
        q["c_n"] = ("forward", result.c_n)
    if result.d_input is not None:
        q["d_input"] = ("gradient", result.d_input)
    if result.d_weights is not None:
        names = weight_names(result.d_weights.num_layers, result.d_weights.directions)
        for name, w in zip(names, result.d_weights.flat(), strict=True):
            q[f"d_weights[{name}]"] = ("gradient", w)
    return q


def _group(quantity: str) -> str:
    """The group of a bracketed quantity ("d_weights[w_hh_l0]" -> "d_weights"); others are their own."""
    return quantity.split("[", 1)[0]


def compare_results(
    comparison: str, a: "ImplResult | Quantities", b: "ImplResult | Quantities", precision: str,
    collapse_weights: bool = True,
) -> list[ParityRow]:
    """Rows for every quantity of ``a`` against ``b`` (``b`` is the reference side of the comparison).

    A quantity one side has and the other lacks is a failing "missing on one side" row, never skipped.
    With ``collapse_weights`` each bracketed group (weight gradients per array) folds into one row that
    names its worst member, which keeps reports readable for deep stacks.
    """
    tol = TOLERANCES[precision]
    qa, qb = quantities(a), quantities(b)
    rows: list[ParityRow] = []
    for name in list(qa) + [n for n in qb if n not in qa]:
        kind = (qa.get(name) or qb[name])[0]
        va, vb = qa.get(name, (kind, None))[1], qb.get(name, (kind, None))[1]
        limit = tol.forward if kind == "forward" else tol.gradient
        if va is None or vb is None:
            rows.append(ParityRow(comparison, name, float("inf"), limit, "missing on one side"))
            continue
        err, note = normalized_error(va, vb)
        rows.append(ParityRow(comparison, name, err, limit, note))
    if not collapse_weights:
        return rows
    groups: dict[str, list[ParityRow]] = {}
    for row in rows:
        groups.setdefault(_group(row.quantity), []).append(row)
    out: list[ParityRow] = []
    for group, members in groups.items():
        if len(members) == 1 and members[0].quantity == group:
            out.append(members[0])
            continue
        worst = max(members, key=lambda r: r.error if np.isfinite(r.error) else np.inf)
        if all(r.note == "missing on one side" for r in members):
            note = "missing on one side"
        else:
            member = worst.quantity[len(group) + 1:-1]
            note = f"worst {member}" + (f"; {worst.note}" if worst.note else "")
        out.append(ParityRow(comparison, group, worst.error, worst.tolerance, note))
    return out


def _severity(row: ParityRow) -> float:
    """A row's error for ranking: NaN or Inf count as the worst."""
    return row.error if np.isfinite(row.error) else math.inf


def worst_over_batches(per_batch: Sequence[Sequence[ParityRow]]) -> list[ParityRow]:
    """One row per compared quantity: its worst error over the batches, the batch named where there are several.

    A fault that corrupts some batches only (tensorflow#60192: masked cuDNN LSTM/GRU outputs, now and then) is
    what one batch misses; the batches' rows of a quantity share comparison, quantity and tolerance.
    """
    if len(per_batch) <= 1:
        return list(per_batch[0]) if per_batch else []
    worst: dict[tuple[str, str], tuple[int, ParityRow]] = {}
    for batch, rows in enumerate(per_batch):
        for row in rows:
            key = (row.comparison, row.quantity)
            if key not in worst or _severity(row) > _severity(worst[key][1]):
                worst[key] = (batch, row)
    return [replace(row, note=f"worst of {len(per_batch)} batches: batch {batch}" + (f"; {row.note}" if row.note else ""))
            for batch, row in worst.values()]


def format_failures(report: ParityReport) -> str:
    """A small table of the failing rows: obtained, tolerance, note."""
    lines = [f"parity out of tolerance ({report.precision}: {TOLERANCES[report.precision].why}):",
             f"  {'comparison':<22} {'quantity':<12} {'error':>10} {'tolerance':>10}  note"]
    for r in report.failures():
        lines.append(f"  {r.comparison:<22} {r.quantity:<12} {r.error:>10.3g} {r.tolerance:>10.3g}  {r.note}")
    return "\n".join(lines)
