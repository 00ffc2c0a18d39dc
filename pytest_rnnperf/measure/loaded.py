"""The backends one run has loaded: in this process, or in subprocesses for those that need their own environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from pytest_rnnperf.backends import Backend, load_backend, spec
from pytest_rnnperf.measure.gpu import entry_index, gpu_uuid
from pytest_rnnperf.measure.placement import ENV
from pytest_rnnperf.measure.subprocesses import RemoteBackend, SubprocessPool


@dataclass
class LoadedBackends:
    """Each backend loaded once; a backend's runtime info goes to ``runtime`` on first use."""

    new_pool: Callable[[], SubprocessPool]  # the run's subprocesses, made when the first one is needed
    runtime: dict[str, dict[str, str]]  # framework -> its runtime fields, filled as backends are loaded
    _backends: dict[str, Backend] = field(default_factory=dict)
    # rnnperf.model()'s backends: in this process for a model built here, else in a worker with that Keras backend
    _model_backends: dict[tuple[str, bool], Backend] = field(default_factory=dict)
    _pool: SubprocessPool | None = None
    _extra_pools: list[SubprocessPool] = field(default_factory=list)  # --rnnperf-record-processes' processes
    # The GPUs (CUDA_VISIBLE_DEVICES entries) a recording's extra processes take turns on, this process's first: on
    # a host of several, the history then holds more than one card from its first night (a history of one card
    # failed new cards' nulls on H200s). Empty: every process where this one runs.
    record_gpus: tuple[str, ...] = ()
    extra_cards: list[str] = field(default_factory=list)  # the card each extra process was pinned to, in order
    nvml: Any = None  # the NVML binding that maps ``record_gpus`` to UUIDs (None: pynvml)

    def pool(self) -> SubprocessPool:
        """The run's subprocesses (one per backend that needs an environment this process lacks)."""
        if self._pool is None:
            self._pool = self.new_pool()
        return self._pool

    def extra_pool(self, i: int) -> SubprocessPool:
        """The ``i``-th extra set of subprocesses (process ``i + 2`` of a recording), started on first use, on the
        next of ``record_gpus`` where there are several."""
        while len(self._extra_pools) <= i:
            base = self.pool()
            n = len(self._extra_pools)
            env, telemetry = dict(base.env), base.telemetry_index
            if len(self.record_gpus) > 1:
                entry = self.record_gpus[(n + 1) % len(self.record_gpus)]
                index = entry_index(entry, self.nvml)
                # By UUID, as pytest-xdist workers are pinned: CUDA's own order need not be NVML's.
                env[ENV] = (gpu_uuid(index, self.nvml) if index is not None else None) or entry
                telemetry = index if index is not None and telemetry is not None else telemetry
                self.extra_cards.append(env[ENV])
            self._extra_pools.append(SubprocessPool(base.log_dir / f"process{n + 2}", telemetry, env=env))
        return self._extra_pools[i]

    def start(self, frameworks: Iterable[str]) -> list[str]:
        """Start the subprocesses these frameworks run in, without waiting, so their imports overlap this
        process's work; the backends started. An unknown backend is left to its cases to report."""
        started = []
        for name in dict.fromkeys(frameworks):
            try:
                backend_spec = spec(name)
            except Exception:  # noqa: BLE001 - an unknown or broken backend: its own cases say why
                continue
            if name not in self._backends and not backend_spec.in_process(os.environ):
                self.pool().start_early(backend_spec)
                started.append(name)
        return started

    def stop(self, keep: Iterable[str]) -> None:
        """Stop the subprocesses started early for backends other than ``keep`` (their cases were deselected)."""
        if self._pool is not None:
            self._pool.discard(set(self._pool.subprocesses) - set(keep) - set(self._backends))

    def backend(self, name: str) -> Backend:
        """The backend for ``name``, loaded once (in a subprocess when it needs its own environment)."""
        if name not in self._backends:
            backend_spec = spec(name)
            backend = (load_backend(name) if backend_spec.in_process(os.environ)
                       else RemoteBackend(backend_spec, self.pool()))
            self._backends[name] = backend
            if backend.unavailable_reason() is None:
                self.runtime[name] = backend.runtime_info()
        return self._backends[name]

    def model_backend(self, name: str, remote_keras: str | None = None) -> Backend:
        """The backend that checks a team's model: loaded here (the model was built here), or for ``remote_keras``
        in a subprocess started with KERAS_BACKEND=<it>."""
        key = (name, remote_keras is not None)
        if key not in self._model_backends:
            backend_spec = spec(name)
            if remote_keras is None:
                backend: Backend = (self._backends[name] if not isinstance(self._backends.get(name), RemoteBackend)
                                    and name in self._backends else load_backend(name))
            else:
                env = {**backend_spec.env, "KERAS_BACKEND": remote_keras}
                backend = RemoteBackend(backend_spec if dict(backend_spec.env) == env else replace(backend_spec, env=env),
                                        self.pool())
            self._model_backends[key] = backend
            if backend.unavailable_reason() is None:
                self.runtime.setdefault(name, backend.runtime_info())
        return self._model_backends[key]

    def close(self) -> None:
        """Stop every subprocess (the end of the run)."""
        for pool in ([self._pool] if self._pool is not None else []) + self._extra_pools:
            pool.close()
