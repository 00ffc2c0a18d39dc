"""What a renderer reads of a run: the session's shape as a protocol, so report/ never imports session/."""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

from pytest_rnnperf.measure.device_time import DeviceTimer
from pytest_rnnperf.measure.gpu import GpuInfo
from pytest_rnnperf.measure.placement import Placement
from pytest_rnnperf.store.measured import Measured
from pytest_rnnperf.store.stored import Stored


class WorkerView(Protocol):
    """A pytest-xdist worker as the controller's report sees it."""

    placement: Placement
    gpu: GpuInfo
    fingerprint: str
    baseline: str | None
    measured: Measured

    @property
    def id(self) -> str:
        """pytest-xdist's name of the worker, e.g. ``gw0``."""

    def gpu_label(self) -> str:
        """The worker, its GPU's model and the start of its UUID."""


class RunView(Protocol):
    """A run as its renderers see it: fingerprint, what it measured, baselines and the workers' share."""

    device_timer: DeviceTimer
    measured: Measured
    stored: Stored

    @property
    def gpu(self) -> GpuInfo:
        """The run's GPU."""

    @property
    def software(self) -> Mapping[str, str]:
        """The run's software versions."""

    @property
    def worker_runs(self) -> Mapping[str, WorkerView]:
        """The controller's workers by id, as they reported."""

    @property
    def plan(self) -> Sequence[WorkerView]:
        """The pytest-xdist workers foreseen, one per GPU."""

    def environment(self) -> dict[str, str]:
        """The fingerprint's fields and the software versions of this run."""

    def fingerprint(self) -> str:
        """The short hash of the fingerprint's key fields."""

    def baseline_status(self) -> str:
        """One line: which baseline files the run was judged against."""

    def parallel_reason(self) -> str | None:
        """Why cuDNN cases cannot be timed in this pytest-xdist layout, if they cannot."""

    def incomplete(self) -> str | None:
        """Why the run's results are partial (workers that handed over none, an interruption), else None."""

    def workers(self) -> Sequence[WorkerView]:
        """The pytest-xdist workers that reported, in order."""

    def models(self) -> Mapping[str, Sequence[WorkerView]]:
        """The workers grouped by GPU model."""

    def model_views(self) -> Sequence[RunView]:
        """One view per GPU model of the workers (the controller of a mixed-model run)."""

    def as_dict(self) -> dict[str, Any]:
        """The whole run as rnnperf.json holds it."""
