"""The case matrices of the ready suite, per framework and scale.

nightly covers the shapes of the H200 evidence (baselines/NVIDIA_H200/evidence/README.md), hidden sizes on
both sides of cuDNN's algorithm thresholds (<=128, 129-192, >192), multi-layer and bidirectional stacks, small and very large
batches, train and infer, and FP32 / TF32 / FP16 / BF16. smoke is tiny shapes for CPU CI; full adds
every cell and precision to every shape.
"""

from __future__ import annotations

import dataclasses

from pytest_rnnperf.backends import spec
from pytest_rnnperf.model.cases import CELLS, Case, Shape
from .floors import floor_for

# (T, B, I, H, layers): the five shapes measured on an H200 in DESIGN.md.
DESIGN_SHAPES = (
    Shape(28, 128, 28, 128, 1),
    Shape(100, 64, 64, 512, 2),
    Shape(60, 500, 32, 256, 1),
    Shape(60, 4700, 32, 256, 1),
    Shape(50, 512, 512, 1024, 1),
)
H_BAND_129_192 = Shape(50, 64, 64, 160, 1)
BIDIRECTIONAL = Shape(50, 64, 64, 256, 2, bidirectional=True)
SMALL_BATCH = Shape(100, 1, 64, 256, 1)

SMOKE_SHAPES = (Shape(8, 4, 8, 16, 1), Shape(6, 3, 5, 12, 2, bidirectional=True))

# Frameworks that run the whole nightly matrix. The others (Keras on torch and JAX, native JAX, compiled
# torch) run on the same cuDNN underneath, so at nightly scale they get a lean matrix: the cases where their
# own path can differ (layer wrapping, batch-major layout, stacking, bidirectional, TF32, inference).
WHOLE_MATRIX = ("torch", "tf")
# torch.compile: compilation costs seconds to minutes per case, and the question is the path it takes.
COMPILED = ("torch_compile", "torch_compile_rnn")


# Defects of a framework that the suite found and that are not ours to fix: (framework, precision, mode,
# impl) -> reason. The cases run and are marked xfail(strict): when the framework is fixed they XPASS and
# the run says so, and the entry must go.
_ALLOW_RNN = ("torch 2.11 torch.compile with dynamo's allow_rnn=True leaves cuDNN: Inductor decomposes aten.lstm/gru into a "
               "per-timestep cell loop (pytorch#140845; no cuDNN RNN kernel runs), and the compiled LSTM returns h_n and "
               "c_n of shape (1, 1, B, H) instead of (1, B, H) (inference: parity fails; training: autograd's shape check "
               "itself raises 'Boolean value of Tensor ... is ambiguous'); seen on an H100, 2026-11-23")
KNOWN_ISSUES: dict[tuple[str, str, str], str] = {
    ("torch_compile_rnn", "fp32", "train"): _ALLOW_RNN,
    ("torch_compile_rnn", "fp32", "infer"): _ALLOW_RNN,
    ("tf", "bf16", "train"): "TF 2.21 cuDNN RNN backward in bf16 returns wrong gradients (normalized error ~1.0, "
                             "GRU recurrent-weight gradients all zero) while the forward pass and fp16 are fine; "
                             "seen on an H200 with cuDNN 9.19, 2026-11-22. Its cuDNN RNN also runs bf16 as float32 "
                             "(elemWiseRNNcell<float>, SIMT SGEMMs in every stored run), which fails the precision gate",
}


def known_issue(case: Case) -> str | None:
    """Why a case is expected to fail (a framework defect), or None."""
    return KNOWN_ISSUES.get((case.framework, case.precision, case.mode))


def _with_floor(cases: list[Case]) -> list[Case]:
    """Attach each case's documented floor."""
    return [dataclasses.replace(c, floor=floor_for(c)) for c in cases]


def _cells(framework: str, cells: tuple[str, ...]) -> tuple[str, ...]:
    """The cells that have a cuDNN path in this framework (Keras: LSTM and GRU only)."""
    return tuple(c for c in cells if c in spec(framework).cudnn_cells)


def paired_cases(framework: str, scale: str) -> list[Case]:
    """cuDNN-vs-generic cases (GPU only) of one framework at one scale."""
    cases: list[Case] = []

    def add(cells: tuple[str, ...], shapes: tuple[Shape, ...], mode: str = "train", precision: str = "fp32") -> None:
        for cell in _cells(framework, cells):
            for shape in shapes:
                cases.append(Case(framework, cell, shape, mode, precision))

    if scale == "smoke":
        add(("lstm", "gru"), SMOKE_SHAPES[:1])
        return _with_floor(cases)
    if framework in COMPILED and scale == "nightly":
        add(("lstm", "gru"), DESIGN_SHAPES[:1])
        add(("lstm", "gru"), DESIGN_SHAPES[:1], mode="infer")
        return _with_floor(cases)
    if framework not in WHOLE_MATRIX and scale == "nightly":
        add(("lstm", "gru"), DESIGN_SHAPES[:3] + (BIDIRECTIONAL,))
        add(("lstm", "gru"), DESIGN_SHAPES[:1], mode="infer")
        add(("lstm", "gru"), DESIGN_SHAPES[1:2], precision="tf32")
        return _with_floor(cases)
    add(("lstm", "gru"), DESIGN_SHAPES + (H_BAND_129_192, BIDIRECTIONAL, SMALL_BATCH))
    add(("lstm", "gru"), (DESIGN_SHAPES[0], DESIGN_SHAPES[2], DESIGN_SHAPES[4]), mode="infer")
    add(("lstm",), (DESIGN_SHAPES[1], DESIGN_SHAPES[4]), precision="tf32")
    add(("lstm",), (DESIGN_SHAPES[4],), precision="fp16")
    add(("lstm",), (DESIGN_SHAPES[4],), precision="bf16")
    add(("rnn_tanh", "rnn_relu"), (DESIGN_SHAPES[0], DESIGN_SHAPES[2]))
    if scale == "full":
        add(("lstm", "gru", "rnn_tanh", "rnn_relu"), DESIGN_SHAPES, precision="tf32")
        add(("gru",), (DESIGN_SHAPES[4],), precision="fp16")
        add(("gru",), (DESIGN_SHAPES[4],), precision="bf16")
        add(("rnn_tanh", "rnn_relu"), DESIGN_SHAPES[1:] + (BIDIRECTIONAL,))
        add(("lstm", "gru"), DESIGN_SHAPES[1:2] + DESIGN_SHAPES[3:4] + (BIDIRECTIONAL,), mode="infer")
    return _with_floor(list(dict.fromkeys(cases)))


def reference_cases(framework: str, scale: str) -> list[Case]:
    """Generic-vs-float64 cases: small shapes, any device (they run on CPU CI).

    At smoke scale every cell. At nightly and full scale only the cells without a cuDNN path in this
    framework (Keras SimpleRNN): every paired case already holds its generic side against float64.
    """
    backend = spec(framework)
    if not backend.reference:
        return []
    cells = backend.cells if scale == "smoke" else tuple(c for c in backend.cells if c not in backend.cudnn_cells)
    cases = [Case(framework, cell, shape, "train", "fp32") for cell in cells for shape in SMOKE_SHAPES]
    cases += [Case(framework, cell, SMOKE_SHAPES[0], "infer", "fp32") for cell in ("lstm", "gru") if cell in cells]
    return cases


def cross_cases(framework: str, scale: str, other: str | None = None) -> list[Case]:
    """Cross-framework checks from ``framework``'s side: one checkpoint, every cell both build, training (gradients too).

    On a GPU each side runs cuDNN where its framework has it (Keras SimpleRNN stays generic and is held
    against torch's cuDNN RNN); without one both run generic on the CPU.
    """
    shapes = SMOKE_SHAPES if scale == "smoke" else (DESIGN_SHAPES[0], BIDIRECTIONAL)
    cells = [c for c in CELLS if c in spec(framework).cells and (other is None or c in spec(other).cells)]
    return [Case(framework, cell, shape, "train", "fp32") for cell in cells for shape in shapes]
