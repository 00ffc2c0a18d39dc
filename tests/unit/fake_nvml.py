"""A fake of the ``pynvml`` module (nvidia-ml-py) at the library boundary, for tests without a GPU.

Values are plain attributes a test sets; counters (energy, violation time, samples, processes) are
attributes too, so a test changes them between ``TelemetryWindow.start()`` and ``stop()``.
``fail`` makes a function raise (``{"nvmlDeviceGetEccMode": NVML_ERROR_NOT_SUPPORTED}``, ``"*"`` for all,
or an exception instance); ``missing`` hides a function, as an older binding would; ``init_error`` makes
``nvmlInit`` raise (``NVML_ERROR_LIBRARY_NOT_FOUND`` is what a machine without a driver gives).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

NVML_SUCCESS = 0
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_UNKNOWN = 999


class NVMLError(Exception):
    """Same shape as pynvml's: the nvmlReturn_t code in ``.value``."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return f"NVML error {self.value}"


@dataclass
class _Metric:
    metricId: int = 0
    nvmlReturn: int = 0
    value: float = 0.0


@dataclass
class GpmMetricsGet:
    """Stands in for pynvml.c_nvmlGpmMetricsGet_t."""

    version: int = 0
    numMetrics: int = 0
    sample1: Any = None
    sample2: Any = None
    metrics: list[_Metric] = field(default_factory=lambda: [_Metric() for _ in range(8)])


def sample(ts_us: int, value: int) -> SimpleNamespace:
    """One nvmlSample_t with an unsigned-int value."""
    return SimpleNamespace(timeStamp=ts_us, sampleValue=SimpleNamespace(uiVal=value))


class FakeNVML:
    """Configurable fake NVML binding; defaults describe a quiet H200 (driver 580, CUDA 13.0)."""

    NVMLError = NVMLError
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_NOT_FOUND = NVML_ERROR_NOT_FOUND
    NVML_ERROR_LIBRARY_NOT_FOUND = NVML_ERROR_LIBRARY_NOT_FOUND
    NVML_GPM_METRICS_GET_VERSION = 1
    c_nvmlGpmMetricsGet_t = GpmMetricsGet

    def __init__(self, **values: Any) -> None:
        self.fail: dict[str, int | BaseException] = {}
        self.missing: set[str] = set()
        self.init_error: int | None = None
        self.init_calls = 0
        self.device_count = 1
        self.name: str | bytes = "NVIDIA H200"
        self.names: list[str] | None = None  # one name per device where they differ (else ``name`` for all)
        self.uuids = ["GPU-12345678-aaaa-bbbb-cccc-1234567890ab"]
        self.cc = (9, 0)
        self.memory_total = 141 * 2**30
        self.memory_used = 1 * 2**30
        self.driver = "580.95.05"
        self.cuda_driver = 13000
        self.power_enforced_mw = 700_000
        self.power_default_mw = 700_000
        self.max_clocks = {1: 1980, 2: 3201}  # NVML_CLOCK_SM, NVML_CLOCK_MEM
        self.clocks = {1: 1980, 2: 3201}
        self.persistence = 1
        self.ecc = [1, 1]
        self.mig = [0, 0]
        self.pcie_gen, self.pcie_width = 5, 16
        self.processes: list[tuple[int, int | None]] = []  # (pid, used bytes)
        self.temperature = 35
        self.clock_reasons = 0x1  # idle
        self.energy_mj = 1_000_000
        self.violations_ns = {p: 0 for p in range(6)}
        self.samples: dict[int, list[SimpleNamespace]] = {1: [], 5: []}  # GPU util, processor clock
        self.gpm_values = {2: 63.5, 5: 41.25}  # SM_UTIL, ANY_TENSOR_UTIL
        self.gpm_errors: dict[int, int] = {}
        self.gpm_supported = 1
        self.gpm_alloc = self.gpm_free = 0
        for key, value in values.items():
            setattr(self, key, value)

    def devices(self, *names: str) -> FakeNVML:
        """Present one device per name, each with its own UUID (``GPU-00000000-...``, ``GPU-00000001-...``)."""
        self.device_count = len(names)
        self.names = list(names)
        self.uuids = [f"GPU-{i:08x}-aaaa-bbbb-cccc-1234567890ab" for i in range(len(names))]
        return self

    def __getattribute__(self, name: str) -> Any:
        # Every nvml* function passes here, so "fail" and "missing" apply uniformly.
        if name.startswith("nvml"):
            if name in object.__getattribute__(self, "missing"):
                raise AttributeError(name)
            fail = object.__getattribute__(self, "fail")
            if name != "nvmlInit" and (name in fail or "*" in fail):
                err = fail.get(name, fail.get("*"))

                def raiser(*args: Any) -> Any:
                    raise NVMLError(err) if isinstance(err, int) else err
                return raiser
        return object.__getattribute__(self, name)

    # --- system and device ---------------------------------------------------------------------------
    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            raise NVMLError(self.init_error)

    def nvmlDeviceGetCount(self) -> int:
        return self.device_count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < self.device_count:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return index

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda_driver

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return self.cuda_driver

    def nvmlDeviceGetName(self, h: int) -> str | bytes:
        return self.names[h] if self.names else self.name

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self.uuids[h]

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return self.cc

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(total=self.memory_total, used=self.memory_used,
                               free=self.memory_total - self.memory_used)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self.power_enforced_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h: int) -> int:
        return self.power_default_mw

    def nvmlDeviceGetMaxClockInfo(self, h: int, kind: int) -> int:
        return self.max_clocks[kind]

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        return self.clocks[kind]

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return self.persistence

    def nvmlDeviceGetEccMode(self, h: int) -> list[int]:
        return list(self.ecc)

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        return list(self.mig)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return self.pcie_gen

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return self.pcie_width

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.processes]

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return self.temperature

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self.clock_reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:
        return self.clock_reasons

    # --- counters ------------------------------------------------------------------------------------
    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        return self.energy_mj

    def nvmlDeviceGetViolationStatus(self, h: int, policy: int) -> SimpleNamespace:
        return SimpleNamespace(referenceTime=0, violationTime=self.violations_ns[policy])

    def nvmlDeviceGetSamples(self, h: int, kind: int, since_us: int) -> tuple[int, list[SimpleNamespace]]:
        newer = [s for s in self.samples.get(kind, []) if s.timeStamp > since_us]
        if not newer:  # real NVML answers NOT_FOUND when there is no newer sample
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return 1, newer  # NVML_VALUE_TYPE_UNSIGNED_INT

    # --- GPM -----------------------------------------------------------------------------------------
    def nvmlGpmQueryDeviceSupport(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(version=1, isSupportedDevice=self.gpm_supported)

    def nvmlGpmSampleAlloc(self) -> SimpleNamespace:
        self.gpm_alloc += 1
        return SimpleNamespace(taken=False)

    def nvmlGpmSampleGet(self, h: int, s: SimpleNamespace) -> SimpleNamespace:
        s.taken = True
        return s

    def nvmlGpmSampleFree(self, s: SimpleNamespace) -> None:
        self.gpm_free += 1

    def nvmlGpmMetricsGet(self, req: GpmMetricsGet) -> GpmMetricsGet:
        assert req.version == 1 and req.sample1.taken and req.sample2.taken
        for m in req.metrics[: req.numMetrics]:
            m.nvmlReturn = self.gpm_errors.get(m.metricId, NVML_SUCCESS)
            m.value = self.gpm_values.get(m.metricId, 0.0) if m.nvmlReturn == NVML_SUCCESS else 0.0
        return req


class FakeClock:
    """A monotonic clock that moves only when told."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
