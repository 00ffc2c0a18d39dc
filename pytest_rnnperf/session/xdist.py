"""pytest-xdist: what a worker hands the controller, and the controller's view of each worker.

The whole merge API: a worker calls ``worker_output`` once at its end; the controller passes each text to
``read_worker`` (done by ``RnnperfSession.merge_worker``), which gives a ``WorkerRun`` whose ``measured`` the
controller merges into its own (``store.measured.Measured.merge``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from pytest_rnnperf.measure.environment import key_fields
from pytest_rnnperf.measure.gpu import GpuInfo
from pytest_rnnperf.measure.placement import Placement, worker_number
from pytest_rnnperf.model.process import ProcessSummary
from pytest_rnnperf.report.files import as_json_safe
from pytest_rnnperf.store.measured import Measured


@dataclass
class WorkerRun:
    """A pytest-xdist worker as the controller sees it: its GPU and fingerprint, and what it measured there."""

    placement: Placement
    gpu: GpuInfo
    fingerprint: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    baseline: str | None = None  # the newest baseline file it judged against
    measured: Measured = field(default_factory=Measured)
    entries: list[Any] = field(default_factory=list)  # its records' entries in the controller's pytest-benchmark
    close_s: float | None = None  # how long its backend subprocesses took to exit, before it handed over

    @property
    def id(self) -> str:
        """pytest-xdist's name of the worker, e.g. ``gw0``."""
        return self.placement.worker

    @property
    def card(self) -> str:
        """The UUID of the worker's GPU (NVML's, else the one it was pinned to)."""
        return self.gpu.uuid if self.gpu.uuid.startswith("GPU-") else self.placement.pin

    def gpu_label(self) -> str:
        """e.g. ``gw0 NVIDIA H200 (GPU-1234abcd)``: the worker, its GPU's model and the start of its UUID."""
        if not self.gpu.available:
            return f"{self.id} no GPU ({self.gpu.reason})"
        return f"{self.id} {self.gpu.name} ({self.card[:12]})"

    def as_dict(self) -> dict[str, Any]:
        """The worker's part of rnnperf.json: its GPU, fingerprint, baseline and the cases it ran."""
        return {"worker": self.id, "cuda_visible_devices": self.placement.pin, "placement": self.placement.to_dict(),
                "gpu_slug": self.gpu.gpu_slug, "device": self.gpu.as_dict(), "fingerprint": self.fingerprint,
                "environment": self.environment, "baseline": self.baseline,
                "cases": [r.id for r in self.measured.results], "cross": [c.id for c in self.measured.cross],
                "skipped": [c for c, _ in self.measured.skipped], "close_s": self.close_s}


def case_cards(workers: Sequence[WorkerRun]) -> dict[str, str]:
    """Case id -> the UUID of the GPU of the worker that measured it: a stored run's ``cards``, so that a later night
    on either card tells whether its case moved to another (each worker's environment names its own card)."""
    return {r.id: w.card for w in workers if w.gpu.available and w.card for r in w.measured.results}


def worker_output(placement: Placement | None, gpu: GpuInfo, fingerprint: str, environment: dict[str, str],
                  baseline: str | None, measured: Measured, close_s: float | None = None) -> str:
    """What a pytest-xdist worker hands the controller: its GPU, fingerprint and everything it measured (JSON)."""
    position = {id(r): i for i, r in enumerate(measured.results)}
    return json.dumps(as_json_safe({
        "placement": None if placement is None else placement.to_dict(), "device": gpu.to_dict(),
        "fingerprint": fingerprint, "environment": environment, "baseline": baseline, "measured": measured.to_dict(),
        "close_s": close_s,
        # each record's pytest-benchmark entries (pytest-benchmark is off in a worker), by the record's position
        "benchmarks": [{"source": s, "result": position[id(r)]} for s, r in measured.bench_sources if id(r) in position],
    }))


def read_worker(text: str, default_id: str) -> tuple[WorkerRun, list[dict[str, Any]]]:
    """The worker that wrote ``text`` (``worker_output``), and its pytest-benchmark entries to add."""
    data = json.loads(text)
    worker = WorkerRun(placement=Placement.from_dict(data.get("placement") or {"worker": default_id}),
                       gpu=GpuInfo.from_dict(data.get("device", {})), fingerprint=str(data.get("fingerprint", "")),
                       environment={str(k): str(v) for k, v in data.get("environment", {}).items()},
                       baseline=data.get("baseline"), measured=Measured.from_dict(data.get("measured", {})),
                       close_s=_seconds(data.get("close_s")))
    return worker, list(data.get("benchmarks", []))


def _seconds(value: Any) -> float | None:
    """A number of seconds from a worker's JSON, None where absent or not a number."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def add_worker_entries(worker: WorkerRun, benchmarks: list[dict[str, Any]], processes: dict[str, list[ProcessSummary]],
                add: Callable[..., list[Any]]) -> None:
    """Put a worker's timings into the controller's pytest-benchmark (``add(source, record[, more processes])``)."""
    for entry in benchmarks:
        record = worker.measured.results[entry["result"]]
        more = processes.get(record.id)
        worker.entries += add(entry["source"], record, more) if more else add(entry["source"], record)


def in_order(workers: dict[str, WorkerRun]) -> list[WorkerRun]:
    """The workers that reported, gw0 first."""
    return sorted(workers.values(), key=lambda w: (worker_number(w.id), w.id))


def by_model(workers: list[WorkerRun]) -> dict[str, list[WorkerRun]]:
    """The workers by the GPU model they measured on (``gpu_slug``), in their order."""
    out: dict[str, list[WorkerRun]] = {}
    for w in workers:
        out.setdefault(w.gpu.gpu_slug, []).append(w)
    return out


def fingerprint_conflicts(workers: list[WorkerRun]) -> list[str]:
    """Fingerprint fields on which workers differ, e.g. ``driver 580.95.05 (gw0) vs 590.1 (gw1)``.

    A field only one worker has is no conflict: a worker reads a framework's fields when its first case of that
    framework runs, and pytest-xdist may send all of a framework's cases to one worker.
    """
    fields = [(w.id, key_fields(w.gpu.static_dict(), w.environment)) for w in workers]
    out = []
    for key in dict.fromkeys(k for _, f in fields for k in f):
        values = {wid: f[key] for wid, f in fields if key in f}
        if len(set(values.values())) > 1:
            out.append(f"{key} " + " vs ".join(f"{v} ({wid})" for wid, v in values.items()))
    return out
