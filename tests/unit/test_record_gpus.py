"""--rnnperf-record-gpus=all: a recording's extra processes take turns on the host's GPUs (fake NVML)."""

from __future__ import annotations

from pathlib import Path

from fake_nvml import FakeNVML

from pytest_rnnperf.measure.loaded import LoadedBackends
from pytest_rnnperf.measure.subprocesses import SubprocessPool

UUID0 = "GPU-00000000-aaaa-bbbb-cccc-1234567890ab"
UUID1 = "GPU-00000001-aaaa-bbbb-cccc-1234567890ab"


def _backends(tmp_path: Path, gpus: tuple[str, ...]) -> LoadedBackends:
    """A run's backends on a fake host of two H200s, the extra processes turning over ``gpus``."""
    return LoadedBackends(lambda: SubprocessPool(tmp_path, 0, env={"XLA_FLAGS": "x"}), {}, record_gpus=gpus,
                          nvml=FakeNVML().devices("NVIDIA H200", "NVIDIA H200"))


def test_the_extra_processes_of_a_recording_take_turns_on_the_gpus_pinned_by_uuid_with_their_telemetry(
        tmp_path: Path) -> None:
    """Process 2 on the second GPU, process 3 back on the first (this process's), each read by NVML there; the
    pool's own environment is kept."""
    backends = _backends(tmp_path, ("0", "1"))
    second, third = backends.extra_pool(0), backends.extra_pool(1)
    assert (second.env["CUDA_VISIBLE_DEVICES"], second.telemetry_index) == (UUID1, 1)
    assert (third.env["CUDA_VISIBLE_DEVICES"], third.telemetry_index) == (UUID0, 0)
    assert second.env["XLA_FLAGS"] == "x" and backends.extra_cards == [UUID1, UUID0]
    assert backends.extra_pool(0) is second and backends.extra_cards == [UUID1, UUID0]


def test_without_several_gpus_to_turn_over_every_extra_process_runs_where_this_one_does(tmp_path: Path) -> None:
    """No GPUs given, or one: the extra processes inherit this process's GPU and telemetry, and no card is named."""
    for gpus in ((), ("0",)):
        backends = _backends(tmp_path, gpus)
        pool = backends.extra_pool(1)
        assert "CUDA_VISIBLE_DEVICES" not in pool.env and pool.telemetry_index == 0 and backends.extra_cards == []


def test_a_gpu_given_by_uuid_is_pinned_as_given(tmp_path: Path) -> None:
    """CUDA_VISIBLE_DEVICES listed the GPUs by UUID: the extra process is pinned to that UUID, NVML's index read."""
    pool = _backends(tmp_path, (UUID0, UUID1)).extra_pool(0)
    assert (pool.env["CUDA_VISIBLE_DEVICES"], pool.telemetry_index) == (UUID1, 1)
