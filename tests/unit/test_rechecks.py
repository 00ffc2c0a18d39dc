"""Which nights check a case fully (float64 parity, energy) and which compare the sides only."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from factories import CASE, record

from pytest_rnnperf.model.records import CaseRecord, StoredRun
from pytest_rnnperf.store.rechecks import Recheck, checks_line, claims_recheck, recheck

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)
ENV = {"gpu.name": "NVIDIA H100 80GB HBM3", "gpu.uuid": "GPU-a", "gpu.driver_version": "580.159.04",
       "torch.cudnn_version": "9.19.0", "torch.cudnn_allow_tf32": "True"}


def stored(name: str, when: str, env: dict[str, str] = ENV, checks: str = "full") -> StoredRun:
    """A stored file holding the matrix case, checked ``checks``, written ``when``."""
    rec: CaseRecord = record(checks=checks)
    return StoredRun(path=Path(name), gpu_slug="NVIDIA_H100_80GB_HBM3", environment=dict(env),
                     records={CASE.id: rec}, datetime=when)


def test_a_night_like_the_last_full_check_compares_the_sides_only() -> None:
    """Same environment, two days after the full check (a sampled night between): the sides only."""
    runs = [stored("0003_run.json", "2026-11-23T12:00:00+00:00", checks="sampled"),
            stored("0002_run.json", "2026-11-22T12:00:00+00:00")]
    assert recheck(runs, CASE.id, ENV, NOW, 7) == Recheck(False, "same", "environment as at 0002_run.json",
                                                          "0002_run.json")


def test_another_card_of_the_same_model_or_an_injected_fault_is_not_a_change() -> None:
    """The card's uuid and a deliberate spin change no result, so neither asks for a full check."""
    runs = [stored("0002_run.json", "2026-11-22T12:00:00+00:00")]
    tonight = {**ENV, "gpu.uuid": "GPU-b", "RNNPERF_INJECT_CUDNN_DELAY_US": "torch-*=30"}
    assert not recheck(runs, CASE.id, tonight, NOW, 7).full


def test_one_process_on_a_host_of_two_gpus_is_not_a_changed_environment() -> None:
    """What JAX and TensorFlow list when they see two H100s (measured on a two-GPU host, one pytest process)
    changes no result: the case still runs on one of them."""
    one = {**ENV, "jax.devices": "1: NVIDIA H100 80GB HBM3", "tf.gpus": "1: NVIDIA H100 80GB HBM3 (cc 9.0)",
           "tf.memory_growth": "GPU:0 on; TF_FORCE_GPU_ALLOW_GROWTH=true", "tf.memory_growth_setup": "on (1 GPU(s))"}
    two = {**ENV, "jax.devices": "2: 2 x NVIDIA H100 80GB HBM3",
           "tf.gpus": "2: NVIDIA H100 80GB HBM3 (cc 9.0), NVIDIA H100 80GB HBM3 (cc 9.0)",
           "tf.memory_growth": "GPU:0 on, GPU:1 on; TF_FORCE_GPU_ALLOW_GROWTH=true",
           "tf.memory_growth_setup": "on (2 GPU(s))"}
    runs = [stored("0037_run.json", "2026-11-23T12:00:00+00:00", env=one)]
    for framework in ("tf", "jax", "keras_jax"):
        assert recheck(runs, CASE.id, two, NOW, 7, framework=framework).kind == "same", framework
    assert recheck(runs, CASE.id, {**two, "gpu.driver_version": "590.1"}, NOW, 7, framework="tf").kind == "changed"


def test_a_changed_driver_or_precision_flag_checks_fully_and_names_the_field() -> None:
    """What changed since the last full check is named."""
    runs = [stored("0002_run.json", "2026-11-22T12:00:00+00:00")]
    found = recheck(runs, CASE.id, {**ENV, "torch.cudnn_allow_tf32": "False"}, NOW, 7)
    assert found.full and found.kind == "changed"
    assert found.why == "environment changed since 0002_run.json (torch.cudnn_allow_tf32)"


def test_no_stored_full_check_an_old_one_or_zero_days_check_fully() -> None:
    """First night, a full check older than the limit, an undated file, and --rnnperf-recheck-days=0."""
    sampled_only = [stored("0003_run.json", "2026-11-23T12:00:00+00:00", checks="sampled")]
    assert recheck(sampled_only, CASE.id, ENV, NOW, 7).kind == "first"
    assert recheck([], CASE.id, ENV, NOW, 7).why == "no full check stored"
    old = recheck([stored("0001_baseline.json", "2026-11-10T12:00:00+00:00")], CASE.id, ENV, NOW, 7)
    assert (old.full, old.why) == (True, "last full check 0001_baseline.json is 14 days old")
    assert recheck([stored("0001_baseline.json", "")], CASE.id, ENV, NOW, 7).kind == "old"
    assert recheck([stored("0002_run.json", "2026-11-24T11:00:00+00:00")], CASE.id, ENV, NOW, 0).kind == "always"
    fresh = [stored("0002_run.json", "2026-11-24T11:00:00+00:00")]
    assert recheck(fresh, CASE.id, ENV, NOW, 7, recording=True).kind == "recording"


def test_the_summary_line_counts_full_checks_by_reason_and_the_sampled_ones() -> None:
    """One line for the whole run, whatever the number of files named."""
    rechecks = {"a": Recheck(True, "changed", "environment changed since 0002_run.json (gpu.driver_version)"),
                "b": Recheck(True, "changed", "environment changed since 0001_run.json (tf.version)"),
                "c": Recheck(True, "first", "no full check stored"),
                "d": Recheck(False, "same", "environment as at 0002_run.json")}
    assert checks_line(rechecks, 7) == (
        "checks: 3 case(s) fully (parity against float64, energy) [environment changed: 2; no full check stored: 1], "
        "1 compared cuDNN with generic only: environment as at their last full check, within 7 days "
        "(--rnnperf-recheck-days=0 checks every case fully)")
    # The order the cases ran in (a worker's, or one process's) does not reorder the reasons.
    assert checks_line(dict(reversed(rechecks.items())), 7) == checks_line(rechecks, 7)
    tied = {"a": Recheck(True, "first", "no full check stored"), "b": Recheck(True, "changed", "... (tf.version)")}
    assert "[environment changed: 1; no full check stored: 1]" in checks_line(tied, 7)
    assert checks_line({}, 7) == ""


def test_a_record_keeps_its_checks_through_its_json_and_older_records_read_as_full() -> None:
    """The field round-trips; a record written before it was always checked fully; a wrong value is named."""
    import pytest

    from pytest_rnnperf.model.records import RecordError

    sampled = record(checks="sampled")
    assert CaseRecord.from_dict(sampled.to_dict()).checks == "sampled"
    data = sampled.to_dict()
    del data["checks"]
    assert CaseRecord.from_dict(data).checks == "full"
    with pytest.raises(RecordError, match="checks is 'some'"):
        CaseRecord.from_dict({**data, "checks": "some"})


def test_a_claims_test_stored_in_tonights_environment_is_not_measured_and_one_never_stored_is() -> None:
    """The claims follow the full check's rule: the newest run that measured the test, the same environment."""
    with_claims = replace(stored("0002_run.json", "2026-11-22T12:00:00+00:00"), claims=("test_digits[torch]",))
    runs = [stored("0003_run.json", "2026-11-23T12:00:00+00:00", checks="sampled"), with_claims]
    assert claims_recheck(runs, "test_digits[torch]", ENV, NOW, 7) == Recheck(
        False, "same", "environment as at 0002_run.json", "0002_run.json")
    assert claims_recheck(runs, "test_digits[keras]", ENV, NOW, 7).kind == "first"
    assert claims_recheck(runs, "test_digits[torch]", {**ENV, "torch.cudnn_version": "9.20.0"}, NOW, 7).kind == "changed"
    assert claims_recheck(runs, "test_digits[torch]", ENV, NOW, 7, recording=True).full


def test_only_what_can_touch_a_case_s_framework_asks_for_its_full_check() -> None:
    """A TensorFlow upgrade re-checks TF cases, not torch ones; a torch runtime change re-checks torch, compiled
    torch and Keras on torch, not TF; a driver change re-checks every framework."""
    runs = [stored("0002_run.json", "2026-11-22T12:00:00+00:00",
                   env={**ENV, "tensorflow": "2.21.0", "tf.version": "2.21.0", "torch": "2.11.0", "keras": "3.15.1"})]
    tf_upgrade = {**runs[0].environment, "tensorflow": "2.22.0", "tf.version": "2.22.0"}
    assert not recheck(runs, CASE.id, tf_upgrade, NOW, 7, framework="torch").full
    assert not recheck(runs, CASE.id, tf_upgrade, NOW, 7, framework="keras_torch").full
    upgraded = recheck(runs, CASE.id, tf_upgrade, NOW, 7, framework="tf")
    assert upgraded.full and upgraded.why == "environment changed since 0002_run.json (tensorflow, tf.version)"
    cudnn = {**runs[0].environment, "torch.cudnn_version": "9.20.0"}
    assert [recheck(runs, CASE.id, cudnn, NOW, 7, framework=f).full
            for f in ("torch", "torch_compile", "keras_torch", "tf", "jax")] == [True, True, True, False, False]
    driver = {**runs[0].environment, "gpu.driver_version": "590.10"}
    assert all(recheck(runs, CASE.id, driver, NOW, 7, framework=f).full for f in ("torch", "tf", "keras_jax", None))


def test_a_parity_test_of_known_frameworks_runs_again_only_where_a_change_can_touch_one_of_them() -> None:
    """A TensorFlow upgrade re-runs the TF parity tests and the torch-vs-TF cross check, not the torch parity
    tests; a test of no known framework (a team's own) runs again on any change, as before."""
    env = {**ENV, "tensorflow": "2.21.0", "tf.version": "2.21.0", "torch": "2.11.0", "keras": "3.15.1"}
    runs = [StoredRun(path=Path("0002_run.json"), gpu_slug="NVIDIA_H100_80GB_HBM3", environment=env, records={},
                      datetime="2026-11-22T12:00:00+00:00", claims=("test_parity",))]
    tf_upgrade = {**env, "tensorflow": "2.22.0", "tf.version": "2.22.0"}
    assert claims_recheck(runs, "test_parity", tf_upgrade, NOW, 7, frameworks=("torch",)).kind == "same"
    assert claims_recheck(runs, "test_parity", tf_upgrade, NOW, 7, frameworks=("tf",)).kind == "changed"
    both = claims_recheck(runs, "test_parity", tf_upgrade, NOW, 7, frameworks=("torch", "tf"))
    assert both.why == "environment changed since 0002_run.json (tensorflow, tf.version)"
    assert claims_recheck(runs, "test_parity", tf_upgrade, NOW, 7).kind == "changed"
    driver = {**env, "gpu.driver_version": "590.10"}
    assert claims_recheck(runs, "test_parity", driver, NOW, 7, frameworks=("torch",)).kind == "changed"


def test_a_deferred_full_check_is_counted_apart_and_keeps_why_it_was_due() -> None:
    """A check a change asked for, put off by the budget: not full, its reason kept, one count in the line."""
    from pytest_rnnperf.store.rechecks import deferred

    due = Recheck(True, "changed", "environment changed since 0002_run.json (tf.version)", "0002_run.json")
    put_off = deferred(due)
    assert (put_off.full, put_off.kind, put_off.last) == (False, "deferred", "0002_run.json")
    assert put_off.why == "deferred by --rnnperf-budget: environment changed since 0002_run.json (tf.version)"
    assert checks_line({"a": due, "b": put_off, "c": Recheck(False, "same", "environment as at 0002_run.json")}, 7) == (
        "checks: 1 case(s) fully (parity against float64, energy) [environment changed: 1], 1 deferred to a later "
        "night (--rnnperf-budget): checked cuDNN against generic only, their full check still due, 1 compared cuDNN "
        "with generic only: environment as at their last full check, within 7 days (--rnnperf-recheck-days=0 checks "
        "every case fully)")


def test_a_wheel_another_framework_brought_changes_nothing_where_the_loaded_libraries_are_named() -> None:
    """TensorFlow's CUDA 12 runtime installed beside torch's 13: torch loaded the same libraries, so no full check;
    another loaded cuDNN, or a night that names no loaded library, still checks fully."""
    loaded = {**ENV, "cuda_runtime_wheel": "13.0.96 (nvidia-cuda-runtime)",
              "torch.cudnn_library": "9.19.0 at /lib/libcudnn.so.9",
              "torch.cudart_library": "13.0 at /lib/libcudart.so.13"}
    runs = [stored("0002_run.json", "2026-11-22T12:00:00+00:00", env=loaded)]
    staged = {**loaded, "cuda_runtime_wheel": "12.5.82 (nvidia-cuda-runtime-cu12), 13.0.96 (nvidia-cuda-runtime)"}
    assert not recheck(runs, CASE.id, staged, NOW, 7, framework="torch").full
    other = recheck(runs, CASE.id, {**staged, "torch.cudnn_library": "9.20.0 at /lib/libcudnn.so.9"}, NOW, 7,
                    framework="torch")
    assert other.full and other.why.endswith("(torch.cudnn_library)")
    unnamed = {k: v for k, v in staged.items() if not k.endswith("_library")}
    assert recheck(runs, CASE.id, unnamed, NOW, 7, framework="torch").full


def test_a_full_check_is_put_off_only_when_a_change_asked_for_it_the_run_is_short_and_another_was_checked() -> None:
    """Deferred: changed or old, short of budget, one checked already; a first check or a roomy run keeps it full."""
    from pytest_rnnperf.store.rechecks import put_off

    changed = Recheck(True, "changed", "environment changed since 0002_run.json (tf.version)", "0002_run.json")
    first = Recheck(True, "first", "no full check stored")
    assert put_off(changed, short=True, checked_one=True).kind == "deferred"
    assert put_off(changed, short=False, checked_one=True) == changed
    assert put_off(changed, short=True, checked_one=False) == changed
    assert put_off(first, short=True, checked_one=True) == first


def test_a_runtime_another_framework_loaded_first_into_the_process_is_not_a_change() -> None:
    """The fields as stored by a night where torch ran first and as read on a pytest-xdist worker where TensorFlow
    had loaded its CUDA 12 runtime before (measured on two H100s: 41 cases were re-checked for it). torch's own
    runtime moving still checks fully, whatever else is loaded."""
    cu13 = "13.0 at /venv/nvidia/cu13/lib/libcudart.so.13"
    cu12 = "12.5 at /tmp/rnnperf-site/nvidia/cuda_runtime/lib/libcudart.so.12"
    alone = {**ENV, "torch.cudnn_library": "9.19.0 at /lib/libcudnn.so.9", "torch.cudart_library": cu13}
    runs = [stored("0028_run.json", "2026-11-22T12:00:00+00:00", env=alone)]
    beside = {**alone, "torch.cudart_library": f"{cu13}; {cu12}"}
    assert recheck(runs, CASE.id, beside, NOW, 7, framework="torch").kind == "same"
    assert recheck([stored("0037_run.json", "2026-11-22T12:00:00+00:00", env=beside)], CASE.id, alone, NOW, 7,
                   framework="torch").kind == "same"
    moved = {**alone, "torch.cudart_library": f"13.1 at /venv/nvidia/cu13/lib/libcudart.so.13; {cu12}"}
    found = recheck(runs, CASE.id, moved, NOW, 7, framework="torch")
    assert found.kind == "changed" and found.why.endswith("(torch.cudart_library)")
