"""The precision gate end to end: the fake cuDNN side's kernel names against each case's precision."""

from __future__ import annotations

import pytest

from conftest import run
from test_bad_input import _usage_error

SIMT = "cutlass_80_simt_sgemm_64x64_8x5_nn_align1"
TENSOR_OP = "nvjet_sm90_hsh_128x128_64x6_2x1_v_bz_NNT"
TWO_PRECISIONS = """
import pytest
from pytest_rnnperf.model.cases import Case, Shape

CASES = [Case("torch", "lstm", Shape(4, 2, 3, 5), precision=p) for p in ("fp16", "fp32")]

@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_pair(case, rnnperf):
    rnnperf.check(rnnperf.measure(case))
"""
FP16, FP32 = "torch-lstm-train-fp16-T4-B2-I3-H5-L1", "torch-lstm-train-fp32-T4-B2-I3-H5-L1"


def test_an_fp16_case_without_tensor_op_kernels_fails_by_name_and_fp32_with_one_fails_too(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIMT GEMMs fail the fp16 case (message and answer table name it) and suit the fp32 one; a tensor-op GEMM the
    other way round."""
    project.makepyfile(test_cases=TWO_PRECISIONS)
    monkeypatch.setenv("FAKE_CUDNN_GEMMS", SIMT)
    result = run(project)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines([f"{FP16}: precision: fp16 ran no tensor-op kernel (cuDNN side ran {SIMT})",
                                 "rnnperf: gate failures", f"{FP16}   precision *-           -   fp16 ran no tensor-op kernel"])
    assert f"FAILED test_cases.py::test_pair[{FP32}]" not in result.stdout.str()
    monkeypatch.setenv("FAKE_CUDNN_GEMMS", TENSOR_OP)
    result = run(project)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines([f"{FP32}: precision: fp32 ran tensor-op kernels (cuDNN side ran {TENSOR_OP})"])


def test_a_no_tensor_op_injection_with_an_amount_or_a_stored_run_is_refused_before_the_run(
        project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """RNNPERF_INJECT_NO_TENSOR_OP takes case-id globs: "glob=5" is one line up front, and set, no run is stored."""
    monkeypatch.setenv("RNNPERF_INJECT_NO_TENSOR_OP", "torch-*=5")
    _usage_error(run(project), "RNNPERF_INJECT_NO_TENSOR_OP: 'torch-*=5' is not a <case-id glob>")
    monkeypatch.setenv("RNNPERF_INJECT_NO_TENSOR_OP", "torch-lstm-*fp16*")
    _usage_error(run(project, "--rnnperf-keep-run"),
                 "--rnnperf-keep-run: RNNPERF_INJECT_NO_TENSOR_OP set: a run with injected faults is never stored")
