"""Device fingerprint and telemetry window against a fake NVML at the library boundary."""

from __future__ import annotations

import json
import sys

import pytest
from fake_nvml import NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED, FakeClock, FakeNVML, sample

from pytest_rnnperf.measure import gpu as device
from pytest_rnnperf.measure.gpu import (
    GPU_FIELDS, GpuInfo, TelemetrySummary, TelemetryWindow, noise_warnings, nvml_index, read_gpu_info,
)

OWN_PID = 4242
GiB = 2**30


def window(fake: FakeNVML, clock: FakeClock) -> TelemetryWindow:
    return TelemetryWindow(index=0, nvml=fake, clock=clock, own_pid=OWN_PID)


# --- fingerprint -------------------------------------------------------------------------------------

def test_full_fingerprint_of_a_fake_h200() -> None:
    fake = FakeNVML(processes=[(123, int(1.2 * GiB)), (456, None)], clock_reasons=0x1)
    info = read_gpu_info(0, nvml=fake)
    assert info.available and info.reason == ""
    assert info.as_dict() == {
        "name": "NVIDIA H200",
        "uuid": "GPU-12345678-aaaa-bbbb-cccc-1234567890ab",
        "compute_capability": "9.0",
        "memory_total": "141.0 GiB",
        "driver_version": "580.95.05",
        "cuda_driver_version": "13.0",
        "power_limit_enforced_w": "700",
        "power_limit_default_w": "700",
        "sm_clock_max_mhz": "1980",
        "mem_clock_max_mhz": "3201",
        "sm_clock_mhz": "1980",
        "mem_clock_mhz": "3201",
        "persistence_mode": "on",
        "ecc_mode": "on",
        "mig_mode": "disabled",
        "pcie_link": "gen5 x16",
        "compute_processes": "2: pid 123 (1.2 GiB), pid 456 (memory n/a)",
        "temperature_c": "35",
        "throttle_reasons": "gpu idle",
    }
    assert info.gpu_slug == "NVIDIA_H200"
    static = info.static_dict()
    assert "driver_version" in static and "power_limit_enforced_w" in static
    assert not {"sm_clock_mhz", "mem_clock_mhz", "temperature_c", "compute_processes"} & set(static)


def test_formats_versions_modes_and_bytes_from_older_bindings() -> None:
    fake = FakeNVML(name=b"NVIDIA H100 80GB HBM3", cuda_driver=12040, ecc=[0, 1], mig=[1, 1], power_enforced_mw=612_500)
    fake.missing = {"nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetCurrentClocksEventReasons"}
    fake.clock_reasons = 0x4 | 0x40
    info = read_gpu_info(nvml=fake)
    assert info.name == "NVIDIA H100 80GB HBM3" and info.gpu_slug == "NVIDIA_H100_80GB_HBM3"
    assert info.cuda_driver_version == "12.4"  # from the v1 call the older binding has
    assert info.ecc_mode == "off (pending on)" and info.mig_mode == "enabled"
    assert info.power_limit_enforced_w == "612.5"
    assert info.throttle_reasons == "sw power cap, hw thermal slowdown"  # from the ThrottleReasons fallback


def test_not_supported_fields_are_unavailable_and_the_rest_still_reads() -> None:
    fake = FakeNVML()
    fake.fail = {name: NVML_ERROR_NOT_SUPPORTED for name in
                 ("nvmlDeviceGetEccMode", "nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetMaxPcieLinkWidth")}
    info = read_gpu_info(nvml=fake)
    assert info.available
    assert info.ecc_mode == "unavailable: NotSupported"
    assert info.power_limit_default_w == "unavailable: NotSupported"
    assert info.pcie_link == "unavailable: NotSupported"
    assert info.name == "NVIDIA H200" and info.driver_version == "580.95.05" and info.power_limit_enforced_w == "700"


def test_no_nvml_library_makes_everything_unavailable() -> None:
    fake = FakeNVML(init_error=NVML_ERROR_LIBRARY_NOT_FOUND)
    info = read_gpu_info(nvml=fake)
    assert not info.available
    assert "NVML library not found" in info.reason
    assert set(info.as_dict().values()) == {"unavailable: NVML library not found"}
    assert info.gpu_slug == "no-gpu"
    assert noise_warnings(info) == []


def test_missing_device_index_says_so() -> None:
    info = read_gpu_info(3, nvml=FakeNVML())
    assert not info.available and info.reason.startswith("no GPU at NVML index 3")
    assert all(v.startswith("unavailable: no GPU at NVML index 3") for v in info.as_dict().values())


def test_nvml_is_initialised_once_per_binding() -> None:
    fake = FakeNVML()
    read_gpu_info(nvml=fake)
    read_gpu_info(nvml=fake)
    with window(fake, FakeClock()):
        pass
    assert fake.init_calls == 1


def test_default_binding_missing_gives_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now raises ImportError
    info = read_gpu_info()
    assert not info.available and info.reason == "nvidia-ml-py not installed"
    summary = TelemetryWindow().stop()
    assert summary.energy_j is None


def test_real_binding_never_raises() -> None:
    """On this CPU machine the library is missing; on a GPU machine the device reads. Either way: strings."""
    pytest.importorskip("pynvml")
    info = read_gpu_info()
    assert all(isinstance(v, str) for v in info.as_dict().values())
    assert info.available or info.reason


def test_every_call_raising_never_raises() -> None:
    fake = FakeNVML()
    fake.fail = {n: RuntimeError("boom") for n in dir(FakeNVML)
                 if n.startswith("nvml") and n not in ("nvmlInit", "nvmlDeviceGetHandleByIndex")}
    info = read_gpu_info(nvml=fake)
    assert info.name == "unavailable: RuntimeError: boom" and not info.available
    assert all(v.startswith("unavailable: ") for v in info.as_dict().values())
    assert noise_warnings(info) == []


def test_abi_constants_match_the_real_binding() -> None:
    pynvml = pytest.importorskip("pynvml")
    assert device.NVML_CLOCK_SM == pynvml.NVML_CLOCK_SM and device.NVML_CLOCK_MEM == pynvml.NVML_CLOCK_MEM
    assert device.NVML_TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU
    assert device.NVML_ERROR_NOT_FOUND == pynvml.NVML_ERROR_NOT_FOUND
    assert device.NVML_GPU_UTILIZATION_SAMPLES == pynvml.NVML_GPU_UTILIZATION_SAMPLES
    assert device.NVML_PROCESSOR_CLK_SAMPLES == pynvml.NVML_PROCESSOR_CLK_SAMPLES
    assert device.NVML_GPM_METRIC_SM_UTIL == pynvml.NVML_GPM_METRIC_SM_UTIL
    assert device.NVML_GPM_METRIC_ANY_TENSOR_UTIL == pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL
    assert device.NVML_GPM_METRICS_GET_VERSION == pynvml.NVML_GPM_METRICS_GET_VERSION
    for name, value in device.PERF_POLICIES:
        assert getattr(pynvml, f"NVML_PERF_POLICY_{name.upper()}") == value
    assert (0x4, "sw power cap") in device.CLOCK_EVENT_REASONS
    assert pynvml.nvmlClocksEventReasonSwPowerCap == 0x4 and pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown == 0x80
    for code, name in ((3, "NOT_SUPPORTED"), (12, "LIBRARY_NOT_FOUND"), (13, "FUNCTION_NOT_FOUND")):
        assert getattr(pynvml, f"NVML_ERROR_{name}") == code


def test_nvml_index_follows_cuda_visible_devices() -> None:
    fake = FakeNVML(device_count=3, uuids=["GPU-aaaa", "GPU-bbbb-1", "GPU-cccc"])
    assert nvml_index(0, fake, environ={}) == 0
    assert nvml_index(1, fake, environ={"CUDA_VISIBLE_DEVICES": "2,0"}) == 0
    assert nvml_index(0, fake, environ={"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}) == 1  # UUID prefix
    assert nvml_index(0, fake, environ={"CUDA_VISIBLE_DEVICES": "MIG-xyz"}) == 0


# --- noise warnings ----------------------------------------------------------------------------------

def test_quiet_machine_has_no_noise_warnings() -> None:
    fake = FakeNVML(processes=[(OWN_PID, GiB)], clock_reasons=0x1 | 0x2)  # idle, app clocks: benign
    assert noise_warnings(read_gpu_info(nvml=fake), own_pid=OWN_PID) == []


def test_noise_warnings_name_the_problems() -> None:
    fake = FakeNVML(processes=[(OWN_PID, GiB), (777, 3 * GiB)], persistence=0, clock_reasons=0x1 | 0x4 | 0x8)
    warnings = noise_warnings(read_gpu_info(nvml=fake), own_pid=OWN_PID)
    assert len(warnings) == 3
    assert "1 other process(es)" in warnings[0] and "pid 777 (3.0 GiB)" in warnings[0]
    assert str(OWN_PID) not in warnings[0]
    assert "persistence mode is off" in warnings[1]
    assert "sw power cap, hw slowdown" in warnings[2] and "idle" not in warnings[2]
    assert all("\n" not in w for w in warnings)


# --- telemetry window --------------------------------------------------------------------------------

def busy_window(fake: FakeNVML, clock: FakeClock, seconds: float) -> TelemetrySummary:
    """Open a window, let the fake GPU work for ``seconds``, close it."""
    fake.samples = {1: [sample(1_000, 5)], 5: [sample(1_000, 345)]}  # already in the buffer: not ours
    fake.processes = [(OWN_PID, GiB), (999, GiB)]  # 999 was there before: not "appeared"
    fake.memory_used = 2 * GiB
    w = window(fake, clock)
    w.start()
    clock.advance(seconds)
    fake.energy_mj += int(300_000 * seconds)  # 300 W
    fake.violations_ns[0] += 250_000_000  # power capped 0.25 s
    fake.violations_ns[4] += 900_000_000  # low utilisation: benign
    fake.samples[1] += [sample(2_000, 90), sample(3_000, 100), sample(4_000, 95)]
    fake.samples[5] += [sample(2_000, 1900), sample(3_000, 1800)]
    fake.processes.append((31337, 5 * GiB))
    fake.memory_used = 40 * GiB
    fake.clock_reasons = 0x1 | 0x4
    return w.stop()


def test_telemetry_over_a_busy_window() -> None:
    fake, clock = FakeNVML(), FakeClock()
    s = busy_window(fake, clock, 2.0)
    assert s.duration_s == pytest.approx(2.0)
    assert s.energy_j == pytest.approx(600.0) and s.mean_power_w == pytest.approx(300.0) and s.energy_note == ""
    assert s.throttle_s == pytest.approx({"power": 0.25, "thermal": 0, "sync_boost": 0, "board_limit": 0,
                                          "low_utilization": 0.9, "reliability": 0})
    assert s.throttle_reasons == ("gpu idle", "sw power cap")
    assert s.utilization == {"samples": 3, "mean": pytest.approx(95.0), "max": 100.0}
    assert s.mean_sm_clock_mhz == pytest.approx(1850.0) and s.sm_clock_note == ""
    assert s.peak_memory_used_bytes == 40 * GiB
    assert s.foreign_processes == ("pid 31337 (5.0 GiB)",)
    assert s.gpm == {"sm_activity_pct": "63.5", "tensor_activity_pct": "41.2"}
    assert fake.gpm_alloc == fake.gpm_free == 2  # no GPM sample leaks
    assert s.unavailable == {}
    warnings = s.warnings()
    assert len(warnings) == 3
    assert "power 0.25 s" in warnings[0] and "low_utilization" not in warnings[0]
    assert "sw power cap" in warnings[1] and "idle" not in warnings[1]
    assert "pid 31337" in warnings[2]
    assert json.loads(json.dumps(s.as_dict()))["foreign_processes"] == ["pid 31337 (5.0 GiB)"]


def test_short_window_says_energy_is_rough() -> None:
    s = busy_window(FakeNVML(), FakeClock(), 0.4)
    assert s.energy_j == pytest.approx(120.0)
    assert s.energy_note == "window 0.4 s < 1 s: energy resolves ~100 ms, figure is rough"


def test_quiet_window_has_no_warnings() -> None:
    fake, clock = FakeNVML(), FakeClock()
    with window(fake, clock) as w:
        clock.advance(1.5)
        fake.energy_mj += 150_000
    assert w.summary is not None and w.summary.warnings() == []
    assert w.summary.mean_power_w == pytest.approx(100.0)


def test_samples_not_supported_fall_back_to_the_clock_at_stop() -> None:
    fake, clock = FakeNVML(), FakeClock()
    fake.fail = {"nvmlDeviceGetSamples": NVML_ERROR_NOT_SUPPORTED}
    with window(fake, clock) as w:
        clock.advance(2.0)
        fake.clocks[1] = 1755
    s = w.summary
    assert s is not None
    assert s.mean_sm_clock_mhz == 1755.0
    assert s.sm_clock_note == "clock samples unavailable (NotSupported): SM clock read once at stop, not a mean"
    assert s.utilization == {} and s.as_dict()["utilization"] == "unavailable: NotSupported"
    assert s.energy_j == 0.0  # the rest still reads


def test_no_samples_in_window_is_zero_samples_not_an_error() -> None:
    fake, clock = FakeNVML(), FakeClock()
    with window(fake, clock) as w:  # the fake's buffer is empty: NVML answers NOT_FOUND
        clock.advance(0.05)
    s = w.summary
    assert s is not None
    assert s.as_dict()["utilization"] == {"samples": 0, "mean": "unavailable: no samples in window",
                                          "max": "unavailable: no samples in window"}
    assert s.sm_clock_note.startswith("no clock samples in window")


def test_gpm_needs_hopper() -> None:
    fake, clock = FakeNVML(cc=(8, 0)), FakeClock()
    s = window(fake, clock).start().stop()
    assert s.gpm == {"sm_activity_pct": "unavailable: GPM needs compute capability 9.0 or newer, this GPU is 8.0",
                     "tensor_activity_pct": "unavailable: GPM needs compute capability 9.0 or newer, this GPU is 8.0"}
    assert fake.gpm_alloc == 0


def test_gpm_missing_from_binding_or_metric_failing() -> None:
    fake = FakeNVML()
    fake.missing = {"nvmlGpmMetricsGet"}
    gpm = window(fake, FakeClock()).start().stop().gpm
    assert gpm["sm_activity_pct"] == "unavailable: nvidia-ml-py has no GPM support"
    fake = FakeNVML(gpm_errors={5: NVML_ERROR_NOT_SUPPORTED})
    gpm = window(fake, FakeClock()).start().stop().gpm
    assert gpm == {"sm_activity_pct": "63.5", "tensor_activity_pct": "unavailable: NotSupported"}
    fake = FakeNVML(gpm_supported=0)
    gpm = window(fake, FakeClock()).start().stop().gpm
    assert gpm["sm_activity_pct"] == "unavailable: GPM not supported on this device"


def test_energy_counter_going_backwards_is_unavailable() -> None:
    fake, clock = FakeNVML(), FakeClock()
    with window(fake, clock) as w:
        clock.advance(2.0)
        fake.energy_mj -= 10
    assert w.summary is not None and w.summary.energy_j is None
    assert w.summary.as_dict()["energy_j"] == "unavailable: energy counter went backwards"


@pytest.mark.parametrize("error", [NVML_ERROR_NOT_SUPPORTED, RuntimeError("boom")], ids=["nvml", "other"])
def test_telemetry_never_raises_when_every_call_raises(error: int | BaseException) -> None:
    fake, clock = FakeNVML(), FakeClock()
    fake.fail = {n: error for n in dir(FakeNVML) if n.startswith("nvml")
                 and n not in ("nvmlInit", "nvmlDeviceGetHandleByIndex")}
    w = window(fake, clock)
    w.start()
    clock.advance(1.0)
    s = w.stop()
    assert s.duration_s == 1.0
    assert s.energy_j is None and s.mean_power_w is None and s.mean_sm_clock_mhz is None
    assert s.peak_memory_used_bytes is None and s.throttle_s == {} and s.foreign_processes == ()
    d = s.as_dict()
    json.dumps(d)
    flat = [d[k] for k in ("energy_j", "mean_power_w", "throttle_reasons", "mean_sm_clock_mhz", "utilization",
                           "peak_memory_used_bytes", "foreign_processes")]
    flat += list(d["throttle_s"].values()) + list(d["gpm"].values())
    assert all(isinstance(v, str) and v.startswith("unavailable: ") for v in flat), flat
    assert s.warnings() == []


def test_telemetry_without_nvml_reports_the_duration_only() -> None:
    fake, clock = FakeNVML(init_error=NVML_ERROR_LIBRARY_NOT_FOUND), FakeClock()
    with window(fake, clock) as w:
        clock.advance(3.0)
    s = w.summary
    assert s is not None and s.duration_s == 3.0
    d = s.as_dict()
    assert d["duration_s"] == 3.0 and d["energy_note"] == ""
    assert all(v == "unavailable: NVML library not found" for k, v in d.items()
               if k not in ("duration_s", "energy_note", "sm_clock_note"))


def test_window_edge_cases() -> None:
    fake, clock = FakeNVML(), FakeClock()
    never = window(fake, clock).stop()
    assert never.duration_s == 0.0 and never.unavailable["energy_j"] == "window never started"
    w = window(fake, clock).start()
    assert w.stop() is w.stop()  # stopping twice gives the same summary
    # The window records and lets the test's own error through.
    with pytest.raises(ValueError), window(fake, clock) as w2:
        raise ValueError("test failed")
    assert w2.summary is not None


def test_device_fields_are_all_reported_strings() -> None:
    assert "available" not in GPU_FIELDS and "processes" not in GPU_FIELDS
    info = read_gpu_info(nvml=FakeNVML())
    assert isinstance(info, GpuInfo)
    assert all(isinstance(v, str) for v in info.as_dict().values())
    with pytest.raises(AttributeError):
        info.name = "x"  # type: ignore[misc]  # frozen


@pytest.mark.parametrize("name", ["..", ".", "...", " .. "])
def test_a_gpu_name_of_dots_never_names_a_folder_outside_the_baselines(name: str) -> None:
    """D32 (issue 23): a GPU named '..' had the slug '..', so its baselines were recorded outside the folder."""
    fake = FakeNVML(name=name)
    slug = read_gpu_info(nvml=fake).gpu_slug
    assert slug.strip(".") and "/" not in slug
