"""Which GPU each pytest-xdist worker pins, and why none when the GPUs are too few (fake NVML)."""

from __future__ import annotations

import pytest
from fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, FakeNVML

from pytest_rnnperf.measure.gpu import GpuInfo, nvml_index, read_gpu_info
from pytest_rnnperf.measure.placement import (
    Placement, assign, gpu_entries, place, plan, visible_entries, worker_number,
)

UUID0 = "GPU-00000000-aaaa-bbbb-cccc-1234567890ab"
UUID1 = "GPU-00000001-aaaa-bbbb-cccc-1234567890ab"
UUID2 = "GPU-00000002-aaaa-bbbb-cccc-1234567890ab"


def test_cuda_visible_devices_entries_are_read_as_cuda_reads_them() -> None:
    """Unset is None, empty is no GPU, an invalid entry ends the list, UUIDs and indices are kept as written."""
    assert visible_entries(None) is None
    assert visible_entries("") == []
    assert visible_entries("-1") == []
    assert visible_entries(" 2, 0 ") == ["2", "0"]
    assert visible_entries(f"{UUID1},3") == [UUID1, "3"]
    assert visible_entries("1,foo,2") == ["1"]
    assert visible_entries("MIG-1234abcd-0000") == ["MIG-1234abcd-0000"]


def test_worker_k_gets_the_kth_gpu_when_each_worker_has_one() -> None:
    """Visible entries first, NVML's count otherwise; more workers than GPUs (or unknown GPUs): none."""
    assert gpu_entries(["3", "1"], nvml_count=8) == ["3", "1"]
    assert gpu_entries(None, nvml_count=2) == ["0", "1"]
    assert gpu_entries(None, nvml_count=None) is None
    assert [assign(k, 2, ["3", "1"]) for k in range(2)] == ["3", "1"]
    assert assign(1, 2, ["0", "1", "2"]) == "1"  # fewer workers than GPUs: the first ones
    assert assign(0, 3, ["0", "1"]) is None
    assert assign(0, 1, None) is None
    assert worker_number("gw12") == 12 and worker_number("custom") == -1


def test_each_worker_pins_its_gpu_by_uuid_and_nvml_maps_it_back() -> None:
    """Two GPUs, two workers: gw0 and gw1 pin different UUIDs; under each pin NVML reads that worker's GPU."""
    fake = FakeNVML().devices("NVIDIA H200", "NVIDIA H100 80GB HBM3")
    placements = plan(2, {}, fake)
    assert [(p.worker, p.entry, p.pin, p.index) for p in placements] == [("gw0", "0", UUID0, 0), ("gw1", "1", UUID1, 1)]
    assert all(p.shared_reason() is None for p in placements)
    environ: dict[str, str] = {}
    placements[1].apply(environ)
    assert environ == {"CUDA_VISIBLE_DEVICES": UUID1}
    assert nvml_index(0, fake, environ=environ) == 1
    assert read_gpu_info(nvml_index(0, fake, environ=environ), fake).name == "NVIDIA H100 80GB HBM3"


def test_the_users_cuda_visible_devices_is_respected() -> None:
    """CUDA_VISIBLE_DEVICES=2,0 (indices) or a UUID list: worker k takes the k-th entry, pinned by its UUID."""
    fake = FakeNVML().devices("NVIDIA H200", "NVIDIA H200", "NVIDIA H200")
    by_index = plan(2, {"CUDA_VISIBLE_DEVICES": "2,0"}, fake)
    assert [(p.entry, p.pin, p.index) for p in by_index] == [("2", UUID2, 2), ("0", UUID0, 0)]
    by_uuid = place("gw0", 1, {"CUDA_VISIBLE_DEVICES": "GPU-00000001"}, fake)  # a UUID prefix, as CUDA allows
    assert (by_uuid.entry, by_uuid.pin, by_uuid.index, by_uuid.gpus) == ("GPU-00000001", UUID1, 1, 1)


def test_a_gpu_whose_uuid_cannot_be_read_is_pinned_by_its_index() -> None:
    """nvmlDeviceGetUUID failing: the pin falls back to the entry; a UUID NVML does not list stays as written."""
    fake = FakeNVML(fail={"nvmlDeviceGetUUID": 3}).devices("NVIDIA H200", "NVIDIA H200")
    assert [p.pin for p in plan(2, {}, fake)] == ["0", "1"]
    unknown = place("gw0", 1, {"CUDA_VISIBLE_DEVICES": "MIG-1234abcd-0000"}, FakeNVML())
    assert (unknown.pin, unknown.index) == ("MIG-1234abcd-0000", None)


@pytest.mark.parametrize("workers, environ, nvml, reason", [
    (3, {}, FakeNVML().devices("A", "B"),
     "cuDNN timing needs a GPU per pytest-xdist worker: 3 workers, 2 GPUs; run with -n 2"),
    (2, {}, FakeNVML(), "cuDNN timing needs a GPU per pytest-xdist worker: 2 workers, 1 GPU; run with -n 1"),
    (2, {"CUDA_VISIBLE_DEVICES": ""}, FakeNVML(),
     "cuDNN timing needs a GPU per pytest-xdist worker: 2 workers, 0 GPUs; run without -n"),
    (2, {}, FakeNVML(init_error=NVML_ERROR_LIBRARY_NOT_FOUND),
     "cuDNN timing needs a GPU per pytest-xdist worker: 2 workers, GPUs not counted (NVML: NVML library not found); "
     "run without -n"),
])
def test_too_few_gpus_pin_nothing_and_say_how_many_workers_to_run(workers: int, environ: dict[str, str], nvml: FakeNVML,
                                                                  reason: str) -> None:
    """More workers than GPUs, or GPUs that cannot be counted: no worker pins, each gives the one-line reason."""
    for p in plan(workers, environ, nvml):
        assert p.pin == "" and p.shared_reason() == reason
        env = dict(environ)
        p.apply(env)
        assert env == environ


def test_placement_and_device_info_survive_the_trip_to_the_controller() -> None:
    """to_dict/from_dict round trips (pytest-xdist hands the worker's output over as JSON)."""
    fake = FakeNVML(processes=[(123, 2**30), (456, None)]).devices("NVIDIA H200", "NVIDIA H200")
    p = place("gw1", 2, {}, fake)
    assert Placement.from_dict(p.to_dict()) == p
    info = read_gpu_info(1, fake)
    assert GpuInfo.from_dict(info.to_dict()) == info
    assert GpuInfo.from_dict({}).available is False
