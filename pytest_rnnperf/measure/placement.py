"""One GPU per pytest-xdist worker: which GPU worker k of n times on, and why none when there are too few.

The GPUs a run may use are the entries of the controller's CUDA_VISIBLE_DEVICES (indices, ``GPU-`` UUIDs or
``MIG-`` UUIDs, as the user wrote them), else every NVML device. Worker ``gwK`` takes the K-th and pins it by
setting its own CUDA_VISIBLE_DEVICES to that GPU's UUID before any framework is imported, so torch, TF, JAX
and the backend subprocesses (which inherit the environment) see that GPU alone, as their device 0, and
``device.nvml_index`` maps it back for NVML telemetry. A UUID is pinned rather than an index because CUDA
numbers devices fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, while NVML numbers them by PCI bus.

With more workers than GPUs two workers would share a GPU and time each other's kernels: nothing is pinned
and every cuDNN case skips with ``Placement.shared_reason``. Pure logic; NVML is read through ``device``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping, MutableMapping, Sequence

from pytest_rnnperf.measure.gpu import entry_index, gpu_count, gpu_uuid

ENV = "CUDA_VISIBLE_DEVICES"
# What CUDA accepts in CUDA_VISIBLE_DEVICES; it ignores the first entry that is none of these and all after it.
_ENTRY = re.compile(r"^(\d+|GPU-[0-9A-Fa-f-]+|MIG-[0-9A-Za-z/-]+)$")


def visible_entries(value: str | None) -> list[str] | None:
    """The GPUs a CUDA_VISIBLE_DEVICES value lets CUDA see, as written (None when it is unset)."""
    if value is None:
        return None
    entries = []
    for entry in (e.strip() for e in value.split(",")):
        if not _ENTRY.match(entry):
            break  # CUDA stops at an invalid entry ("-1" is the usual way to hide every GPU)
        entries.append(entry)
    return entries


def gpu_entries(visible: Sequence[str] | None, nvml_count: int | None) -> list[str] | None:
    """The GPUs the run may use: the visible entries, else NVML's indices (None when neither is known)."""
    if visible is not None:
        return list(visible)
    return None if nvml_count is None else [str(i) for i in range(nvml_count)]


def assign(worker: int, workers: int, gpus: Sequence[str] | None) -> str | None:
    """The entry worker ``worker`` (0-based) of ``workers`` times on; None when the GPUs are too few or unknown."""
    if gpus is None or workers > len(gpus) or not 0 <= worker < len(gpus):
        return None
    return gpus[worker]


def worker_number(worker_id: str) -> int:
    """0 for pytest-xdist's ``gw0``, 3 for ``gw3``; -1 for an id of another form."""
    match = re.fullmatch(r"gw(\d+)", worker_id)
    return int(match.group(1)) if match else -1


@dataclass(frozen=True)
class Placement:
    """A pytest-xdist worker's GPU: what it was given and what it pinned (``pin`` empty: nothing pinned)."""

    worker: str  # "gw0"
    workers: int
    gpus: int | None  # GPUs the run may use; None when they could not be counted
    entry: str = ""  # the GPU as the user's CUDA_VISIBLE_DEVICES (or NVML's index) names it
    pin: str = ""  # this worker's CUDA_VISIBLE_DEVICES: the GPU's UUID, its entry where the UUID cannot be read
    index: int | None = None  # NVML index of that GPU, for telemetry and the fingerprint
    uncounted: str = ""  # why the GPUs could not be counted
    cpus: str = ""  # the CPUs the worker pinned itself to (``0-15``), empty where it did not

    def shared_reason(self) -> str | None:
        """Why cuDNN cases cannot be timed in this run (more workers than GPUs); None when each has its own."""
        if self.gpus is not None and self.workers <= self.gpus:
            return None
        # Two workers on one GPU would time each other's kernels: speedups and baselines would be wrong.
        if self.gpus is None:
            have, advice = f"GPUs not counted ({self.uncounted})", "run without -n"
        else:
            have = f"{self.gpus} GPU" + ("" if self.gpus == 1 else "s")
            advice = f"run with -n {self.gpus}" if self.gpus else "run without -n"
        return f"cuDNN timing needs a GPU per pytest-xdist worker: {self.workers} workers, {have}; {advice}"

    def apply(self, environ: MutableMapping[str, str]) -> None:
        """Pin this worker's GPU in ``environ`` (nothing when it has none of its own)."""
        if self.pin:
            environ[ENV] = self.pin

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON, for the worker's output and the report."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Placement:
        """The inverse of ``to_dict``."""
        index = data.get("index")
        gpus = data.get("gpus")
        return cls(worker=str(data.get("worker", "")), workers=int(data.get("workers", 0)),
                   gpus=None if gpus is None else int(gpus), entry=str(data.get("entry", "")),
                   pin=str(data.get("pin", "")), index=None if index is None else int(index),
                   uncounted=str(data.get("uncounted", "")), cpus=str(data.get("cpus", "")))


def usable_gpus(environ: Mapping[str, str], nvml: Any = None) -> tuple[list[str] | None, str]:
    """The GPUs the run may use (``gpu_entries``) and, when they cannot be counted, why."""

    visible = visible_entries(environ.get(ENV))
    if visible is not None:
        return visible, ""
    count, why = gpu_count(nvml)
    return gpu_entries(None, count), why


def place(worker_id: str, workers: int, environ: Mapping[str, str], nvml: Any = None) -> Placement:
    """The GPU of worker ``worker_id`` among ``workers``, read from the controller's ``environ`` and NVML."""

    gpus, why = usable_gpus(environ, nvml)
    entry = assign(worker_number(worker_id), workers, gpus)
    base = Placement(worker=worker_id, workers=workers, gpus=None if gpus is None else len(gpus),
                     uncounted=f"NVML: {why}" if gpus is None else "")
    if entry is None:
        return base
    # A MIG instance's UUID or a GPU UUID NVML does not list is pinned as written: CUDA takes it as it is.
    index = entry_index(entry, nvml)
    uuid = None if index is None else gpu_uuid(index, nvml)
    return replace(base, entry=entry, pin=uuid or entry, index=index)


def plan(workers: int, environ: Mapping[str, str], nvml: Any = None) -> list[Placement]:
    """Every worker's placement, as the controller foresees it (for the header and before-the-run checks)."""
    return [place(f"gw{k}", workers, environ, nvml) for k in range(workers)]
