"""The precision rule (judge/precision.py): tensor-op kernels at fp16/bf16/tf32 and none in fp32, by kernel name."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest
from factories import CASE, record
from fake_cupti import FakeCupti
from fake_nvml import FakeClock

from pytest_rnnperf.judge.gates import GATES, gates_hold
from pytest_rnnperf.judge.precision import PrecisionFinding, precision_finding
from pytest_rnnperf.measure.device_time import DeviceTimer
from pytest_rnnperf.model.records import CaseRecord
from pytest_rnnperf.report.rows import CaseRow, answer_rows
from pytest_rnnperf.report.text import gate_failures
from pytest_rnnperf.store.runs import load_run, read_json

BASELINES = Path(__file__).resolve().parents[2] / "baselines"
SIMT = "cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>"
FFMA = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_e..."
TENSOR_OP = "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>"
HALF_CELL = "elemWiseRNNcell<__half, __half, float, (cudnnRNNMode_t)2, (cudnnRNNBiasMode_t)2>"
FP16 = dataclasses.replace(CASE, precision="fp16")


def stored_records() -> list[tuple[str, CaseRecord]]:
    """Every case record stored under baselines/: the runs (pytest-benchmark files) and the reports' results."""
    out: list[tuple[str, CaseRecord]] = []
    for path in sorted(p for p in BASELINES.rglob("*") if p.name.endswith((".json", ".json.gz"))):
        data = read_json(path)
        if "benchmarks" in data:
            out += [(path.name, r) for r in load_run(path).records.values()]
        else:
            out += [(path.name, CaseRecord.from_dict(r)) for r in data.get("results", [])]
    return out


def traced(precision: str, *kernels: str) -> CaseRecord:
    """A record of ``precision`` whose cuDNN side launched ``kernels`` each step, traced through the fake CUPTI."""
    clock = FakeClock()
    cupti = FakeCupti(clock)

    def step(names: tuple[str, ...]) -> object:
        def run() -> None:
            for name in names:
                cupti.launch(name, 0.0002)
                clock.advance(0.0002)
        return run

    timer = DeviceTimer(cupti=cupti, host_clock=lambda: int(clock() * 1e9))
    cudnn, generic = timer.pair(step(kernels), step(("elementwise_cell",) * 8), lambda: None, rounds=3, steps=(2, 2))
    return record(case=dataclasses.replace(CASE, precision=precision), cudnn_device=cudnn, generic_device=generic)


def test_every_stored_record_keeps_the_rule_but_tf_bf16_whose_cudnn_rnn_runs_in_float32() -> None:
    """Every stored H100/H200 record of every framework and precision holds the rule, except TF's bf16 training cases.

    Those are no false alarm: TF 2.21 hands cuDNN its bf16 RNN as float32 (cuDNN's cells run ``<float, ...>``, its
    GEMMs on SIMT SGEMMs), the fp16-without-tensor-ops kind of defect the rule is for; the case is a known issue
    (suites/matrix.py). The rule must have judged each precision on real tables, or it proved nothing.
    """
    records = stored_records()
    judged: Counter[str] = Counter()
    for name, rec in records:
        finding = precision_finding(rec)
        judged[rec.case.precision] += finding.applies
        tf_bf16 = (rec.case.framework, rec.case.precision) == ("tf", "bf16")
        if not tf_bf16:
            assert finding.ok, f"{name}: {rec.id}: {finding.problem}"
        elif finding.applies:
            assert finding.verdict == "bf16 ran no tensor-op kernel", f"{name}: {rec.id}"
            assert rec.case.mode == "train" and rec.cudnn_device is not None
            assert any(k.name.startswith("elemWiseRNNcell<float, float, float") for k in rec.cudnn_device.kernels)
    assert len(records) > 4000 and all(judged[p] >= 20 for p in ("fp32", "tf32", "fp16", "bf16")), judged


def test_fp16_with_only_simt_and_ffma_gemms_fails_in_one_line_naming_the_precision_and_kernels() -> None:
    """A fp16 case whose cuDNN side ran SIMT/FFMA GEMMs and no tensor-op kernel fails the precision gate alone."""
    rec = traced("fp16", SIMT, FFMA, HALF_CELL)
    assert [gate.name for gate in GATES if not gate.holds(rec)] == ["precision"] and not gates_hold(rec)
    assert gate_failures(rec) == [f"{rec.id}: precision: fp16 ran no tensor-op kernel (cuDNN side ran {SIMT}, {FFMA})"]


def test_fp32_with_a_tensor_op_gemm_fails_and_without_one_holds() -> None:
    """TF32 math leaking into an fp32 case is named; fp32 on SIMT GEMMs is what fp32 promises."""
    assert precision_finding(traced("fp32", TENSOR_OP, SIMT)).problem == (
        f"precision: fp32 ran tensor-op kernels (cuDNN side ran {TENSOR_OP})")
    assert precision_finding(traced("fp32", SIMT, FFMA)) == PrecisionFinding(True)


@pytest.mark.parametrize("precision, kernels", [
    ("fp16", ("nvjet_sm90_hsh_128x128_64x6_2x1_v_bz_NNT", SIMT)),  # Hopper cuBLAS: no "tensorop" in the name
    ("bf16", ("nvjet_sm90_tst_64x64_64x13_2x1_v_bz_NNT",)),
    ("tf32", ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize64x64x32_warpgroupsize1x1x1_execute_segment_k_off_",)),
    ("fp16", ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn",)),
    ("fp16", ("RNN_blockPersist_fp_LSTM<__half, __half, float, (int)128>", "(3 other kernels)")),  # no GEMM named
])
def test_a_reduced_precision_case_holds_on_tensor_op_names_or_without_any_gemm_named(precision: str,
                                                                                     kernels: tuple[str, ...]) -> None:
    """Tensor-op kernels of every family the stored runs show hold; a persistent kernel alone decides nothing."""
    finding = precision_finding(traced(precision, *kernels))
    assert finding.applies and finding.ok


def test_without_a_kernel_table_the_rule_does_not_apply() -> None:
    """No CUPTI (device time off, a CPU run) or no cuDNN side: nothing to judge, so nothing fails."""
    for rec in (record(case=FP16), record(case=FP16, cudnn_ms=None, cudnn_dev_ms=1.0, kernel=SIMT)):
        assert precision_finding(rec) == PrecisionFinding(False) and gates_hold(rec)


def test_the_answer_table_names_a_precision_failure() -> None:
    """The summary's answer leads with the case, the precision metric and what its kernels showed."""
    row = CaseRow(id="torch-lstm-train-fp16-x", paired=True, cells={}, speedup=None, baseline_speedup=None, floor=1.0,
                  verdict=None, gates_ok=False, precision="fp16 ran no tensor-op kernel")
    assert [a.cells for a in answer_rows([row], [])] == [
        ("torch-lstm-train-fp16-x", "precision", "-", "-", "fp16 ran no tensor-op kernel")]
