"""Tensor-op math as a fact of the path: which GEMM math the cuDNN side's kernels show for the case's precision.

At fp16, bf16 and tf32 cuDNN (and the cuBLAS GEMMs it calls for the input projections) must run tensor-op
kernels; in fp32 (TF32 off) none may. A cuDNN or framework update that quietly drops tensor-op math at fp16 still
passes parity and may still pass its floor, but its kernel names change: that is what this rule reads, from the
cuDNN side's CUPTI kernel table (the longest kernels of a traced window, ``DeviceTiming.kernels``).

The names, from the stored H100 and H200 runs (torch 2.11, TF 2.21, JAX/XLA, cuDNN 9.19, cuBLAS 13) and the
kernel families of cuBLAS, CUTLASS and cuDNN on Volta to Hopper:

- tensor op: CUTLASS ``cutlass_80_tensorop_s1688gemm_*`` (tf32), cuBLAS/cuDNN ``sm90_xmma_gemm_f32f32_tf32f32_*``
  (tf32) and ``*_xmma_*_f16f16_*`` / ``bf16bf16``, Hopper's cuBLAS ``nvjet_sm90_hsh_*`` (fp16) and ``nvjet_sm90_tst_*``
  (bf16), the older ``*_s16816gemm``/``h16816``/``s1688``/``h1688``/``884`` families, ``hmma``/``wgmma``/``gmma``;
- scalar FMA: CUTLASS ``cutlass_80_simt_sgemm_*``, cuBLAS ``sm80_xmma_gemm_f32f32_f32f32_f32_*_ffma_*`` (an xmma
  kernel on FFMA: ``xmma`` alone says nothing), ``sgemm_*``/``hgemm``;
- neither: cuDNN's RNN cells (``elemWiseRNNcell``, ``*_elementWise_bp*``), memsets, copies, gemv, the table's
  "(N other kernels)" row, and cuDNN's persistent RNN kernels (``RNN_blockPersist_*``): they run the whole
  recurrence in one kernel, and their names do not say whether it uses tensor cores.

So a reduced-precision case fails only on evidence: a scalar GEMM ran and no tensor-op kernel did. A table with
neither (the work inside a persistent kernel, or folded into the "other" row) decides nothing and passes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from pytest_rnnperf.model.records import CaseRecord

# Precisions whose cuDNN side must run tensor-op kernels; fp32 must run none.
TENSOR_OP_PRECISIONS: tuple[str, ...] = ("tf32", "fp16", "bf16")
TENSOR_OP = re.compile(
    r"tensorop|[hs]16816|[hs]1688|[hs]884|hmma|gmma|tf32f32|f16f16|bf16bf16|f16f32"
    r"|nvjet_(sm\d+_)?(?!sss_)[a-z]{3}_", re.IGNORECASE)
SCALAR_GEMM = re.compile(r"simt|ffma|sgemm|hgemm|dgemm", re.IGNORECASE)
SHOWN = 2  # kernels named in a failure line, by time


def is_tensor_op(name: str) -> bool:
    """The kernel's name says it runs on tensor cores."""
    return TENSOR_OP.search(name) is not None


def is_scalar_gemm(name: str) -> bool:
    """The kernel's name says it is a GEMM on scalar FMA units (and not a tensor-op one)."""
    return SCALAR_GEMM.search(name) is not None and not is_tensor_op(name)


@dataclass(frozen=True)
class PrecisionFinding:
    """What the cuDNN side's kernel table says about a case's math: nothing (``applies`` False), or a verdict."""

    applies: bool
    verdict: str = ""  # e.g. "fp16 ran no tensor-op kernel"; empty when the rule holds or does not apply
    kernels: tuple[str, ...] = ()  # the kernels that show it, longest first

    @property
    def ok(self) -> bool:
        """The rule holds, or does not apply."""
        return not self.verdict

    @property
    def problem(self) -> str:
        """The one-line failure ("precision: fp16 ran no tensor-op kernel (cuDNN side ran ...)"), empty if ok."""
        if self.ok:
            return ""
        more = len(self.kernels) - SHOWN
        named = ", ".join(self.kernels[:SHOWN]) + (f" and {more} more" if more > 0 else "")
        return f"precision: {self.verdict} (cuDNN side ran {named})"


def judge_kernels(precision: str, names: Sequence[str]) -> PrecisionFinding:
    """The rule on a kernel table's names (longest first), for a case of ``precision``."""
    if not names:
        return PrecisionFinding(False)
    tensor = tuple(n for n in names if is_tensor_op(n))
    if precision not in TENSOR_OP_PRECISIONS:
        return PrecisionFinding(True, f"{precision} ran tensor-op kernels" if tensor else "", tensor)
    scalar = tuple(n for n in names if is_scalar_gemm(n))
    if tensor or not scalar:
        return PrecisionFinding(True)
    return PrecisionFinding(True, f"{precision} ran no tensor-op kernel", scalar)


def precision_finding(record: CaseRecord) -> PrecisionFinding:
    """The rule on a record: the cuDNN side's kernel table against the case's precision.

    It does not apply where there is no table: no cuDNN side, or device time off (no CUPTI, a CPU run).
    """
    dev = record.cudnn_device if record.cudnn is not None else None
    return judge_kernels(record.case.precision, [] if dev is None else [k.name for k in dev.kernels])
