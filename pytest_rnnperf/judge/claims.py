"""The classic cuDNN-RNN claims, what was reported then and on which hardware, and verdicts on what this GPU measures.

Pure logic: no pytest, no framework. The claims suite (``suites/claims``) measures; this module says what a
measurement means against the folklore, renders the claims table (terminal, Markdown) and carries each row
as plain data through the JSON report and pytest-xdist.

Verdict words, for a ratio claim "cuDNN is R times better at X" measured with a 95% interval [lo, hi]:

- ``confirmed``: lo >= R; ``consistent``: R lies in the interval (the effect is there and as large);
- ``weaker here``: 1 < lo and hi < R (the effect is real but smaller than reported);
- ``undecided (noise)``: the interval spans no effect (1x); the claim neither holds nor fails on this run;
- ``reversed``: hi < 1, the opposite of the claim.

Only promises fail a test (both paths train to the same accuracy; cuDNN is not slower than generic on a GPU);
every other row is reported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence


@dataclass(frozen=True)
class Seed:
    """One piece of folklore: what was claimed, the figure reported, and the hardware it came from."""

    id: str
    claim: str
    reported: str
    hardware: str
    source: str
    figure: float | None = None  # the reported ratio a measurement is held against (None: no figure given)
    promise: bool = False  # the product promises this: a row that breaks it fails its test


# The figures as their authors reported them; "hardware" is only what they said they ran on.
SEEDS: tuple[Seed, ...] = (
    Seed("train-speed", "cuDNN LSTM trains several times faster than the generic LSTM (wall time per epoch)",
         "7.5x, 12.5x; 15x", "K80, P100 (Keras CuDNNLSTM); RTX 2070 + i7-9700K",
         "Keras CuDNNLSTM benchmarks; stackoverflow 'CuDNNLSTM vs LSTM in Keras'", figure=7.5),
    Seed("train-accuracy", "... with equal or better accuracy",
         "equal or better; val acc 0.6469 vs 0.6234", "K80, P100; RTX 2070",
         "Keras CuDNNLSTM benchmarks; stackoverflow 'CuDNNLSTM vs LSTM in Keras'", promise=True),
    Seed("regression-accuracy", "cuDNN and generic reach the same loss on a regression task",
         "loss got worse only with the batch size", "4x P100",
         "stackoverflow 'Why is Keras LSTM on CPU three times faster than GPU?'", promise=True),
    Seed("predict-speed", "evaluate()/predict() are substantially faster on cuDNN too",
         "'substantially' (no figure)", "RTX 2070 + i7-9700K", "stackoverflow 'CuDNNLSTM vs LSTM in Keras'"),
    Seed("charlm-train", "char-RNN (2-layer LSTM) trains 5x faster on cuDNN", "5x",
         "Titan Xp (TCC), cuDNN 7.4.1, MyCaffe", "signalpop.com 2018-11-29", figure=5.0),
    Seed("charlm-curve", "... learning the same thing (same loss curve)", "(implied)",
         "Titan Xp, MyCaffe", "signalpop.com 2018-11-29", promise=True),
    Seed("charlm-load", "67% faster model load (build + first step)", "1.67x",
         "Titan Xp, MyCaffe", "signalpop.com 2018-11-29", figure=1.67),
    Seed("charlm-memory", "33% less GPU memory (generic peak / cuDNN peak)", "1.5x (33% less)",
         "Titan Xp, MyCaffe", "signalpop.com 2018-11-29", figure=1.5),
    Seed("charlm-utilization", "twice the GPU utilization while training", "2x",
         "Titan Xp, MyCaffe (SignalPop Universal Miner)", "signalpop.com 2018-11-29", figure=2.0),
    Seed("cpu-vs-gpu", "the generic LSTM is slower on a GPU than on the CPU (CPU speedup over GPU generic)", "3x",
         "not stated (a Keras user's GPU)", "stackoverflow 'Why is Keras LSTM on CPU three times faster than GPU?'",
         figure=3.0),
    Seed("cudnn-vs-generic-gpu", "cuDNN is far faster than the generic LSTM on the same GPU", "26x; 34x",
         "not stated; 4x P100 (13500 s -> 400 s per epoch)",
         "stackoverflow 'Why is Keras LSTM on CPU three times faster than GPU?'", figure=26.0),
    Seed("batch-size", "batch 500 -> 4700 makes an epoch another 3x faster, at a worse loss", "3x",
         "4x P100 (400 s -> 130 s per epoch)",
         "stackoverflow 'Why is Keras LSTM on CPU three times faster than GPU?'", figure=3.0),
    Seed("precision", "accuracy dropped when switching to cuDNN (about 3% lower)", "-3%",
         "not stated", "stackoverflow 'Why is Keras LSTM on CPU three times faster than GPU?'"),
)
SEED_BY_ID = {s.id: s for s in SEEDS}

CONFIRMED, CONSISTENT, WEAKER, UNDECIDED, REVERSED = (
    "confirmed", "consistent", "weaker here", "undecided (noise)", "reversed")
NOT_RUN = "not measured"


def ratio_verdict(figure: float | None, lo: float, hi: float) -> str:
    """Verdict on a ratio claim ("cuDNN is ``figure`` times better") from the measured 95% interval [lo, hi]."""
    if hi < 1.0:
        return REVERSED
    if lo <= 1.0:
        return UNDECIDED
    if figure is None:
        return CONFIRMED  # no figure was given: the effect being there is the claim
    if lo >= figure:
        return CONFIRMED
    if hi >= figure:
        return CONSISTENT
    return WEAKER


def equal_verdict(a: float, b: float, tol: float, higher_is_better: bool = True) -> tuple[str, bool]:
    """Whether ``a`` (cuDNN) matches ``b`` (generic) within ``tol``: (verdict, holds), "better" counting as holding."""
    diff = (a - b) if higher_is_better else (b - a)
    if abs(a - b) <= tol:
        return f"equal (|diff| {abs(a - b):.3g} <= {tol:.3g})", True
    if diff > 0:
        return f"better ({a - b:+.3g}, tolerance {tol:.3g})", True
    return f"worse ({a - b:+.3g}, tolerance {tol:.3g})", False


@dataclass(frozen=True)
class ClaimRow:
    """One row of the claims table: a seed, measured by one framework on this machine."""

    seed: str
    framework: str
    measured: str  # what this GPU measures now, in a few words with the figure
    verdict: str
    detail: dict[str, Any] = field(default_factory=dict)  # every figure behind the row, for the JSON report
    failure: str | None = None  # set when a promise is broken: the test fails with it

    @property
    def claim(self) -> Seed:
        """The seed this row measures."""
        return SEED_BY_ID[self.seed]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form, with the seed's text so a report reads on its own."""
        s = self.claim
        return dict(asdict(self), claim=s.claim, reported=s.reported, hardware=s.hardware, source=s.source)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ClaimRow":
        """Inverse of ``to_dict`` (the seed's text is looked up again, not trusted from the file)."""
        return cls(seed=str(data["seed"]), framework=str(data["framework"]), measured=str(data["measured"]),
                   verdict=str(data["verdict"]), detail=dict(data.get("detail") or {}),
                   failure=data.get("failure"))


def not_run(seed: str, framework: str, reason: str) -> ClaimRow:
    """A row for a claim this machine cannot measure, with the reason."""
    return ClaimRow(seed, framework, f"- ({reason})", NOT_RUN)


HEADER = ("claim", "framework", "reported then (hardware)", "measured now", "verdict")


def table_rows(rows: Sequence[ClaimRow]) -> list[list[str]]:
    """The claims table's cells, rows in seed order then framework."""
    order = {s.id: i for i, s in enumerate(SEEDS)}
    out = []
    for r in sorted(rows, key=lambda r: (order.get(r.seed, len(order)), r.framework)):
        verdict = r.verdict + (" FAILED" if r.failure else "")
        out.append([f"{r.seed}: {r.claim.claim}", r.framework, f"{r.claim.reported} ({r.claim.hardware})",
                    r.measured, verdict])
    return out


def markdown_table(rows: Sequence[ClaimRow]) -> list[str]:
    """The claims table in Markdown (pipes in cells escaped)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table_rows(rows)]
    return lines


def failure_message(row: ClaimRow) -> str:
    """The test failure of a broken promise: the row as a small table and what it means."""
    s = row.claim
    return "\n".join([f"claim {s.id} ({row.framework}): {row.failure}",
                      f"  claim:     {s.claim}",
                      f"  reported:  {s.reported} ({s.hardware})",
                      f"  measured:  {row.measured}",
                      f"  verdict:   {row.verdict}"])
