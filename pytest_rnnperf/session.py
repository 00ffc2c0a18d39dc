"""One run's state outside pytest: the device, the software, loaded backends, results and skips."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .backends import Backend, load_backend

# Fault injection for testing the regression detector: "<case-id glob>=<microseconds>" adds that much
# device time to every cuDNN step of the matching cases (torch backend).
INJECT_ENV = "RNNPERF_INJECT_CUDNN_DELAY_US"

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .baselines import CaseVerdict, StoredRun
    from .device import DeviceInfo
    from .runner import CaseResult, CrossResult


@dataclass
class RunSession:
    """Device and software fingerprint plus every result of one run, in the order they came."""

    device: "DeviceInfo"
    software: dict[str, str]
    runtime: dict[str, dict[str, str]] = field(default_factory=dict)
    results: list["CaseResult"] = field(default_factory=list)
    cross: list["CrossResult"] = field(default_factory=list)  # cross-framework checks of the same weights
    skipped: list[tuple[str, str]] = field(default_factory=list)
    baseline: "StoredRun | None" = None
    verdicts: dict[str, "CaseVerdict"] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # one-line facts the summary prints last
    _backends: dict[str, Backend] = field(default_factory=dict)

    def backend(self, name: str) -> Backend:
        """The backend for ``name``, loaded once; its runtime info is recorded on first use."""
        if name not in self._backends:
            backend = load_backend(name)
            self._backends[name] = backend
            if backend.unavailable_reason() is None:
                self.runtime[name] = backend.runtime_info()
        return self._backends[name]

    def environment(self) -> dict[str, str]:
        """Flat environment: ``gpu.*`` static device fields, software versions, framework runtime."""
        env = {f"gpu.{k}": v for k, v in self.device.static_dict().items()}
        env.update(self.software)
        for fields in self.runtime.values():
            env.update(fields)
        injected = os.environ.get(INJECT_ENV)
        if injected:
            # A deliberately injected slowdown is part of the environment, so a diff names it as a cause.
            env[INJECT_ENV] = injected
        return env

    def fingerprint(self) -> str:
        """Stable key of the fields that make timings comparable (see ``environment.KEY_FIELDS``)."""
        from .environment import fingerprint_key, key_fields

        return fingerprint_key(key_fields(self.device.static_dict(), self.environment()))

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe form of the run: environment, fingerprint, results and skips."""
        return {
            "fingerprint": self.fingerprint(),
            "gpu_slug": self.device.gpu_slug,
            "environment": self.environment(),
            "results": [r.as_record() for r in self.results],
            "cross": [c.as_record() for c in self.cross],
            "skipped": [{"case": c, "reason": r} for c, r in self.skipped],
            "baseline": None if self.baseline is None else str(self.baseline.path),
            "verdicts": [v.as_dict() for v in self.verdicts.values()],
            "notes": list(self.notes),
        }
