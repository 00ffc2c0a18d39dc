"""A pytest-xdist worker's share of the host's CPU threads, set in its environment before any framework loads.

Each framework sizes its thread pools to every core of the host (torch's intra-op pool, TensorFlow's, XLA's
Eigen pool, the BLAS under NumPy). Two workers that each do so fight over the cores: on two H100s the float64
references and the CPU-side work of each case took three times as long under ``-n 2`` as in one process,
while the GPUs idled. A worker gets ``CPUs // workers`` threads (its affinity within the container's quota) (at least one). Set as environment
variables before any framework is imported, the share reaches this process's frameworks and the backend
subprocesses, which inherit the environment. A variable the user set keeps the user's value.

A worker with a GPU of its own is also pinned to its own CPUs (``own_cpus``, ``pin_process``). Thread counts alone
leave the other worker's compile threads (XLA's, Inductor's), which no variable limits, free to preempt the thread
that launches the timed kernels: sharded nights failed cases on one worker only with busy time up and the kernels'
work down, as gaps between launches would. Threads and subprocesses started later inherit the pin.

XLA's thread flags are left alone (the pin bounds its pool all the same): JAX hashes XLA_FLAGS into its persistent
compile cache's keys, so a worker's thread flags made every JAX and Keras-on-JAX program compiled under ``-n`` miss
in one process and on a host of another core count.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, MutableMapping, Sequence


WORKER_COUNT = "PYTEST_XDIST_WORKER_COUNT"  # pytest-xdist sets it in each worker before pytest reads a conftest
# OpenMP (torch's intra-op pool), the BLAS libraries NumPy may use, TensorFlow's two pools.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                    "TF_NUM_INTEROP_THREADS")


@dataclass(frozen=True)
class ThreadShare:
    """The threads one worker may use and the environment variables that say so (the user's own left out)."""

    threads: int
    env: Mapping[str, str] = field(default_factory=dict)


def thread_share(cpus: int | None, workers: int) -> int:
    """Threads per worker: the host's CPUs split evenly among ``workers``, at least one (all with no workers)."""
    return max(1, (cpus or 1) // max(1, workers))


def share_env(threads: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that limit every framework to ``threads``, less those ``environ`` already sets."""
    return {name: str(threads) for name in THREAD_VARIABLES if name not in environ}


def quota_cpus(cpu_max: str) -> int | None:
    """The CPUs a cgroup v2 ``cpu.max`` line ("QUOTA PERIOD", or "max PERIOD") allows, rounded up; None: no quota."""
    parts = cpu_max.split()
    if len(parts) != 2 or not parts[0].isdigit() or not parts[1].isdigit() or int(parts[1]) == 0:
        return None
    return max(1, -(-int(parts[0]) // int(parts[1])))


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on (every one the host counts where the platform has no affinity)."""
    return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))


def host_cpus(cgroup_cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """The CPUs this process may run on: its affinity, within its container's CPU quota.

    ``os.cpu_count()`` counts the whole host: a 32-core slice of a larger machine would hand each worker more
    threads than it has cores.
    """
    cpus = len(allowed_cpus())
    try:
        quota = quota_cpus(cgroup_cpu_max.read_text(encoding="ascii"))
    except (OSError, UnicodeDecodeError):
        quota = None
    return min(cpus, quota) if quota else cpus


def limit_worker(environ: MutableMapping[str, str], cpus: int | None = None) -> ThreadShare | None:
    """In a pytest-xdist worker, set its share of the CPU threads in ``environ``; None outside a worker."""
    workers = environ.get(WORKER_COUNT, "")
    if not workers.isdigit():
        return None
    threads = thread_share(host_cpus() if cpus is None else cpus, int(workers))
    env = share_env(threads, environ)
    environ.update(env)
    return ThreadShare(threads, env)


def limit_imported(threads: int, modules: Mapping[str, Any] = sys.modules) -> None:
    """Limit the pools that started before the environment was set: NumPy's BLAS (the plugin imports NumPy, and
    the float64 references run on it) and torch where a plugin or conftest imported it."""
    if "numpy" in modules:
        try:
            from threadpoolctl import threadpool_limits  # optional: without it the BLAS keeps every core
        except ImportError:
            pass
        else:
            threadpool_limits(limits=threads)  # applied now, for the rest of the process
    torch = modules.get("torch")
    if torch is None:
        return
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(threads)
    except RuntimeError:  # torch allows it once, before its inter-op pool starts: that pool stays as it is
        pass


def own_cpus(allowed: Collection[int], worker: int, share: int) -> list[int]:
    """Worker ``worker``'s own CPUs: the ``worker``-th run of ``share`` among the ``allowed`` ones in order (wrapping
    round where the workers outnumber them)."""
    ordered = sorted(allowed)
    if not ordered:
        return []
    start = worker * share
    return sorted({ordered[(start + k) % len(ordered)] for k in range(min(share, len(ordered)))})


def cpu_ranges(cpus: Collection[int]) -> str:
    """e.g. ``0-15,32`` for CPUs 0 to 15 and 32, as taskset and /proc write them."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def pin_process(cpus: Collection[int], tasks: Path = Path("/proc/self/task"),
                setaffinity: Callable[[int, Collection[int]], None] | None = None) -> int:
    """Pin every thread of this process to ``cpus`` (threads and subprocesses started later inherit it); how many
    threads were pinned (0 where the platform has no affinity)."""
    setaffinity = setaffinity or getattr(os, "sched_setaffinity", None)
    if setaffinity is None or not cpus:
        return 0
    try:
        ids: Sequence[int] = [int(t.name) for t in tasks.iterdir() if t.name.isdigit()]
    except OSError:  # no /proc: the calling thread alone, which starts the frameworks' pools
        ids = [0]
    pinned = 0
    for tid in ids:
        try:
            setaffinity(tid, cpus)
            pinned += 1
        except OSError:  # a thread that ended meanwhile, or CPUs this container may not use
            continue
    return pinned
