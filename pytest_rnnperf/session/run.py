"""What a run is: its GPU, software, settings and where its baselines live, fixed once the run is configured."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from pytest_rnnperf.backends import INJECT_ENVS
from pytest_rnnperf.measure.environment import fingerprint_key, key_fields
from pytest_rnnperf.measure.gpu import GpuInfo
from pytest_rnnperf.measure.placement import Placement
from pytest_rnnperf.session.settings import Settings


@dataclass(frozen=True)
class Run:
    """The run's fixed facts; what it measures goes to ``store.measured.Measured``."""

    gpu: GpuInfo
    software: Mapping[str, str]
    settings: Settings = field(default_factory=Settings.defaults)
    root: Path = Path("baselines")  # the baselines folder
    machine_id: str = ""  # pytest-benchmark's machine id, the subfolder a recorded baseline goes to
    placement: Placement | None = None  # a pytest-xdist worker's GPU (None outside a worker)
    compile_cache: Path | None = None  # the compile cache kept between runs (None: off); subprocesses get it too
    compile_cache_empty: bool = False  # nothing in it when the run started: cases that compile build from scratch
    extra_environment: Mapping[str, str] = field(default_factory=dict)  # fields a conftest adds (plugin/hooks.py)
    siblings: tuple[str, ...] = ()  # one GPU model's view: the run's other models (its baselines are theirs to name)

    def environment(self, runtime: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
        """Flat environment: ``gpu.*`` static device fields, software versions, the frameworks' ``runtime``."""
        env = {f"gpu.{k}": v for k, v in self.gpu.static_dict().items()}
        env.update(self.software)
        for fields in runtime.values():
            env.update(fields)
        env.update(self.extra_environment)
        for name in INJECT_ENVS:
            if os.environ.get(name):
                # A deliberately injected slowdown is part of the environment, so a diff names it as a cause.
                env[name] = os.environ[name]
        return env

    def fingerprint(self, runtime: Mapping[str, Mapping[str, str]]) -> str:
        """Stable key of the fields that make timings comparable (see ``environment.key_field_map``)."""
        return fingerprint_key(key_fields(self.gpu.static_dict(), self.environment(runtime)))
