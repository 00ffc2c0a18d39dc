"""Framework backends and their registry.

A backend builds matched cuDNN/generic pairs with identical weights, proves which path each ran and
syncs the device. Each declares itself with a ``BackendSpec``: its name (the first part of case ids), the
cells it has a cuDNN path for, the distributions and runtime fields of its fingerprint, and whether it
can inject a slowdown. Specs are found through the ``pytest_rnnperf.backends`` entry-point group, so
another package adds a backend with one module and one line in its ``pyproject.toml``:

    [project.entry-points."pytest_rnnperf.backends"]
    mxnet = "my_package.rnnperf_backend:SPEC"

Frameworks are imported only inside the backend modules, and only when a pair is built or runtime info
is read, so ``import pytest_rnnperf`` works with no framework installed.
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import re
import sys
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol

from pytest_rnnperf.model.reference import CaseInputs
from pytest_rnnperf.model.results import ImplResult, PathProof

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pytest_rnnperf.model.cases import Case, ModelCase
    from pytest_rnnperf.model.reference import RNNWeights

IMPLS: tuple[str, ...] = ("cudnn", "generic")
ENTRY_POINT_GROUP = "pytest_rnnperf.backends"
# Fault injection for proving the regression detector on real hardware: "<case-id glob>=<microseconds>"
# (comma-separated for several) adds that much device time (a spin kernel) or host time (a busy wait) to every
# cuDNN step of the matching cases, in backends whose spec says can_inject. Each is part of the environment,
# so a report names it as a cause.
INJECT_ENV = "RNNPERF_INJECT_CUDNN_DELAY_US"
INJECT_HOST_ENV = "RNNPERF_INJECT_HOST_DELAY_US"
# "<case-id glob>=<milliseconds>": a sleep inside the first call after build of the cuDNN side of the matching
# cases (every backend that times first calls, ``backends.cold``), never in a timed step: it proves the first-call
# rule catches a cold regression while the steady verdict holds.
INJECT_COLD_ENV = "RNNPERF_INJECT_COLD_DELAY_MS"
# "<case-id glob>" (comma-separated for several): the torch cuDNN side of each matching fp16/bf16/tf32 case runs its
# math in IEEE float32 (the case keeps its label), so its kernels are SIMT/FFMA ones, as when a cuDNN update drops
# tensor-op math; torch has no switch that turns tensor-op math off for a half-precision cuDNN RNN.
INJECT_NO_TENSOR_OP_ENV = "RNNPERF_INJECT_NO_TENSOR_OP"
# "<case-id glob>[,...]" alone: the matching bidirectional cases run their cuDNN side as one unidirectional pass per
# layer and direction, one after the other (torch: backends/torch_common.py), as a release that gave up running
# the two directions concurrently would; the same kernels' work, less overlap.
INJECT_SERIALIZE_ENV = "RNNPERF_INJECT_SERIALIZE_BIDIRECTIONAL"
# "<case-id glob>=<percent>": the torch and Keras-on-torch cuDNN side of the matching cases runs each timed step over
# that many percent more timesteps (the sequence's last ones again; parity still checks the case's own inputs):
# cuDNN's kernels do more work, as a release that slows them all would, where a spin adds a kernel of its own (cuBLAS
# may pick another GEMM tile for the longer sequence).
INJECT_LONGER_ENV = "RNNPERF_INJECT_LONGER_STEP"
INJECT_ENVS: tuple[str, ...] = (INJECT_ENV, INJECT_HOST_ENV, INJECT_NO_TENSOR_OP_ENV, INJECT_SERIALIZE_ENV,
                                INJECT_COLD_ENV, INJECT_LONGER_ENV)
# The variables of globs alone (a case has the fault or not), and why they take no =<amount>.
GLOBS_ALONE: dict[str, str] = {INJECT_NO_TENSOR_OP_ENV: "the case runs without tensor-op math or not",
                               INJECT_SERIALIZE_ENV: "the case runs its directions one after the other or not"}


# An injected delay is a few percent of a step (to prove a gate catches it); a second per step is far beyond any
# use, and a typo past it (1e99) would spin the GPU for ever or overflow the spin's cycle count.
MAX_INJECT_US = 1_000_000
# Each variable's unit and largest value: a first call's cold cost is seconds, a minute is beyond any use.
INJECT_UNITS: Mapping[str, tuple[str, float, str]] = {
    INJECT_COLD_ENV: ("milliseconds", 60_000, "milliseconds is more than 60000 (a minute in one first call)"),
    INJECT_LONGER_ENV: ("percent", 100, "percent is more than 100 (twice the sequence)")}
_PER_STEP = ("microseconds", MAX_INJECT_US, f"microseconds per step is more than {MAX_INJECT_US} (1 s)")


def parse_injection(spec: str, name: str = INJECT_ENV) -> list[tuple[str, float]]:
    """An injection variable's value as (case-id glob, amount in its unit) pairs (0 for a variable of globs alone);
    ValueError names a malformed part."""
    unit, limit, too_much = INJECT_UNITS.get(name, _PER_STEP)
    out = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if name in GLOBS_ALONE:
            if "=" in part:
                raise ValueError(f"{name}: {part!r} is not a <case-id glob> (no =<amount>: {GLOBS_ALONE[name]})")
            out.append((part, 0.0))
            continue
        pattern, _, amount = part.rpartition("=")
        try:
            value = float(amount)
        except ValueError:
            value = -1.0
        if not pattern or not (value >= 0 and value < float("inf")):
            raise ValueError(f"{name}: {part!r} is not <case-id glob>=<{unit}>")
        if value > limit:
            raise ValueError(f"{name}: {part!r}: {value:g} {too_much}")
        out.append((pattern, value))
    return out


def injection_for(case_id: str, name: str, environ: Mapping[str, str] | None = None) -> float | None:
    """The amount of the first part of injection variable ``name`` whose glob matches ``case_id`` (None: no part does;
    0 for a variable of globs alone). The plugin checks the form before the run: a malformed value is a skip here."""
    try:
        parts = parse_injection((os.environ if environ is None else environ).get(name, ""), name)
    except ValueError as exc:
        raise BackendUnavailable(str(exc)) from None
    return next((amount for pattern, amount in parts if fnmatch.fnmatch(case_id, pattern)), None)


def unmatched_injections(case_ids: Iterable[str], environ: Mapping[str, str]) -> list[str]:
    """One line per injection variable of ``environ`` naming its globs that match none of ``case_ids`` (the timed cases).

    Such a glob slows nothing: an evidence run would show no regression, and not because the gates missed one.
    """
    ids = list(case_ids)
    lines = []
    for name in INJECT_ENVS:
        globs = [glob for glob, _ in parse_injection(environ.get(name, ""), name)
                 if not any(fnmatch.fnmatch(case_id, glob) for case_id in ids)]
        if globs:
            like = f" (case ids look like {ids[0]})" if ids else ""
            lines.append(f"{name}: {', '.join(map(repr, globs))} matched no timed case of this run, so nothing was "
                         f"injected there{like}")
    return lines


class BackendUnavailable(Exception):
    """The framework (or its GPU support) is not usable here; the message is a one-line skip reason."""


def require_usable(backend: Any, impls: tuple[str, ...]) -> None:
    """BackendUnavailable with the backend's own reason where it, or (for a cuDNN side) its GPU, cannot be used."""
    reason = backend.unavailable_reason() or (backend.gpu_unavailable_reason() if "cudnn" in impls else None)
    if reason:
        raise BackendUnavailable(reason)


class OutOfDeviceMemory(Exception):
    """The case does not fit in device memory; the message is a one-line skip reason."""


class ModelError(ValueError):
    """A team's model or inputs cannot be checked as given; the message says why in one line (a failure)."""


def empty_input(shapes: Iterable[tuple[str, tuple[int, ...]]], batch_axis: int = 0) -> str | None:
    """Why inputs of these (name, shape) pairs leave nothing to compare, or None: an empty tensor runs and matches.

    ``batch_axis`` is 0 for batch-major inputs (Keras; torch with ``batch_first=True``), 1 for time-major ones.
    """
    for name, shape in shapes:
        if 0 not in shape:
            continue
        if len(shape) >= 2 and shape[batch_axis] == 0:
            return "inputs: batch of size 0: nothing to compare"
        if len(shape) >= 2 and shape[1 - batch_axis] == 0:
            return "inputs: sequence of length 0: nothing to compare"
        return f"inputs: {name} of shape {tuple(shape)} holds no value: nothing to compare"
    return None


class Impl(Protocol):
    """One side of a pair (cuDNN or generic), ready to run on the device."""

    name: str  # "cudnn" or "generic"

    def step(self) -> None:
        """Run one timed step (forward, plus backward in train mode) without copying anything to the host."""

    def result(self) -> Any:
        """Run once and return outputs and gradients: an ImplResult, or named arrays for a model."""

    def prove_path(self) -> PathProof:
        """Run once under a profiler or graph trace and report which implementation actually ran."""


class Pair(Protocol):
    """Matched cuDNN and generic implementations of one case with identical weights and inputs."""

    cudnn: Impl | None
    generic: Impl | None
    device: str  # e.g. "cuda:0" or "cpu"

    def sync(self) -> None:
        """Block until all queued device work is done (no device-to-host copy of results)."""

    def close(self) -> None:
        """Free device memory held by the pair."""


@dataclass(frozen=True)
class ModelOptions:
    """How rnnperf.model() trains a Keras model and what it accepts; a torch model takes none of them."""

    targets: Any = None  # the y of model.fit: an array, a list/dict of them, or a callable returning that
    loss: Any = None  # a Keras loss (name, object or function); None: the compiled loss, else fixed upstream gradients
    optimizer: Any = None  # a Keras optimizer name or a function returning a new one; None: the compiled one, else none
    step: Callable[..., Any] | None = None  # step(model, x, y): timed instead of the plugin's own step
    allow_generic: bool = False  # accept layers that ask for cuDNN (use_cudnn=True) where they cannot have it
    # More batches shaped like the inputs (a list of them, or a callable returning one) that parity also runs on,
    # keeping each compared quantity's worst error: a fault that corrupts some batches only is missed by one batch.
    parity_inputs: Any = None

    def given(self) -> list[str]:
        """Names of the options set to something other than their default."""
        return [name for name, value in (("targets", self.targets), ("loss", self.loss), ("optimizer", self.optimizer),
                                         ("step", self.step), ("parity_inputs", self.parity_inputs))
                if value is not None] + (
            ["allow_generic"] if self.allow_generic else [])


class ModelPair(Pair, Protocol):
    """A team's model as a cuDNN and a generic copy, plus a float64 copy whose results are the reference."""

    def reference(self) -> Any:
        """Named float64 arrays of the reference copy (same inputs and upstream gradients)."""


class Backend(Protocol):
    """A framework: builds pairs and says why it cannot when it cannot."""

    name: str

    def unavailable_reason(self) -> str | None:
        """None when the framework can build pairs here; else a one-line reason (not installed, ...)."""

    def gpu_unavailable_reason(self) -> str | None:
        """None when a CUDA GPU with cuDNN is usable; else a one-line reason for skipping cuDNN cases."""

    def runtime_info(self) -> dict[str, str]:
        """Framework version, build and loaded CUDA/cuDNN, precision and determinism flags."""

    def build(
        self, case: "Case", weights: "RNNWeights", inputs: "CaseInputs", impls: tuple[str, ...] = IMPLS
    ) -> Pair:
        """Build the pair (only the listed impls; the rest are None) on the GPU, or the CPU when impls=("generic",)."""


class ModelBackend(Backend, Protocol):
    """A backend that can also check a team's own model (``BackendSpec.models``)."""

    def build_model(self, case: "ModelCase", model: Any, inputs: Any, impls: tuple[str, ...] = IMPLS,
                    seed: int = 0, *, build: Callable[[], Any] | None = None,
                    options: ModelOptions | None = None) -> ModelPair:
        """Copies of ``model`` for each side (cuDNN, generic, float64 reference) with identical weights.

        ``build`` (what returned ``model``) makes more copies where the framework cannot copy a model itself.
        A pair may leave its cuDNN side None (no layer of the model can use cuDNN); its notes say why.
        """


@dataclass(frozen=True)
class BackendSpec:
    """What the rest of the package knows of a backend without importing its framework."""

    name: str  # first part of case ids, e.g. "torch"
    title: str  # for people, e.g. "PyTorch"
    module: str  # module with get_backend(); imported on first use
    cudnn_cells: tuple[str, ...]  # cells with a cuDNN path (Keras: lstm, gru)
    # Fingerprint: software_info key -> distribution names (the first installed one wins).
    distributions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    runtime_prefix: str = ""  # runtime fields of this backend start with it, e.g. "torch."
    key_fields: tuple[str, ...] = ()  # runtime fields that make timings comparable (part of the fingerprint key)
    can_inject: bool = False  # honours RNNPERF_INJECT_CUDNN_DELAY_US (device spin in each cuDNN step)
    cross: bool = True  # takes part in the cross-framework checks
    # Top-level modules whose objects this backend checks with rnnperf.model() (empty: it checks none).
    model_modules: tuple[str, ...] = ()
    # Cells it builds at all (generic side included); the suite's reference cases come from these.
    cells: tuple[str, ...] = ("lstm", "gru", "rnn_tanh", "rnn_relu")
    # False when its generic side is another backend's (compiled torch): no reference cases of its own.
    reference: bool = True
    # The Keras backend this spec runs Keras on ("tensorflow", "torch", "jax"); "" for no Keras. rnnperf.model()
    # sends a Keras model to the spec of the backend it was built on, and backend="torch" picks a spec by it.
    keras_backend: str = ""
    # Environment the framework must be imported under (Keras picks its backend once per process from
    # KERAS_BACKEND). A process without it runs this backend's cases in a subprocess started with it.
    env: Mapping[str, str] = field(default_factory=dict)
    # Its builds compile (XLA, Inductor) into the compile cache: on a night that starts with the cache empty, its
    # cases are built once ahead, behind the other cases (measure/ahead.py).
    compiles: bool = False

    def __post_init__(self) -> None:
        """Names become parts of case ids and baseline keys: keep them plain."""
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"backend name {self.name!r}: use lowercase letters, digits and '_'")
        if self.runtime_prefix and not self.runtime_prefix.endswith("."):
            raise ValueError(f"backend {self.name}: runtime_prefix must end with '.', got {self.runtime_prefix!r}")

    def load(self) -> Backend:
        """Import the backend module and return its backend (the framework itself still loads lazily).

        ``module`` names a module with ``get_backend()``, or ``module:factory`` when one module serves several specs.
        """
        module, _, name = self.module.partition(":")
        factory: Callable[[], Backend] = getattr(importlib.import_module(module), name or "get_backend")
        return factory()

    def in_process(self, environ: Mapping[str, str]) -> bool:
        """Whether this process (environment ``environ``) can run the backend itself, without a subprocess."""
        return all(environ.get(key) == value for key, value in self.env.items())


# The built-in backends, listed here only; the entry-point group adds (or replaces) more.
_BUILTIN: tuple[str, ...] = (
    "pytest_rnnperf.backends.torch:SPEC", "pytest_rnnperf.backends.tensorflow:SPEC",
    "pytest_rnnperf.backends.keras:KERAS_TORCH", "pytest_rnnperf.backends.keras:KERAS_JAX",
    "pytest_rnnperf.backends.jax:SPEC", "pytest_rnnperf.backends.torch_compile:SPEC",
    "pytest_rnnperf.backends.torch_compile:SPEC_RNN",
)
_registry: dict[str, BackendSpec] | None = None
_broken: dict[str, str] = {}  # entry-point name -> why it did not load


def _load_ref(ref: str) -> BackendSpec:
    """The object an entry-point style reference ``module:attribute`` names."""
    module, _, attr = ref.partition(":")
    spec = getattr(importlib.import_module(module), attr)
    if not isinstance(spec, BackendSpec):
        raise TypeError(f"{ref} is not a BackendSpec")
    return spec


def _discover() -> dict[str, BackendSpec]:
    """Built-in specs, then every spec of the entry-point group, in that order (a later name replaces)."""
    found: dict[str, BackendSpec] = {}
    for ref in _BUILTIN:
        spec = _load_ref(ref)
        found[spec.name] = spec
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.value in _BUILTIN:
            continue  # this package's own registration of a built-in
        try:
            spec = ep.load()
        except Exception as exc:  # a broken third-party backend must not break the others
            _broken[ep.name] = f"{ep.value} does not load ({type(exc).__name__}: {str(exc)[:120]})"
            continue
        if not isinstance(spec, BackendSpec):
            _broken[ep.name] = f"{ep.value} is not a BackendSpec"
            continue
        found[spec.name] = spec
    return found


def specs() -> tuple[BackendSpec, ...]:
    """Every registered backend, built-ins first."""
    global _registry
    if _registry is None:
        _registry = _discover()
    return tuple(_registry.values())


def problems() -> list[str]:
    """One line per backend entry point that could not be used (shown in the header)."""
    specs()
    return [f"backend entry point {name}: {why}" for name, why in _broken.items()]


def spec(name: str) -> BackendSpec:
    """The spec of backend ``name``; ValueError naming the registered ones otherwise."""
    for s in specs():
        if s.name == name:
            return s
    if name in _broken:
        raise BackendUnavailable(f"backend entry point {name}: {_broken[name]}")
    raise ValueError(f"unknown framework {name!r}; registered backends: {', '.join(s.name for s in specs())} "
                     f"(add one through the {ENTRY_POINT_GROUP!r} entry-point group)")


def register(new: BackendSpec) -> None:
    """Add or replace a backend for this process (entry points are the way for installed packages)."""
    specs()
    assert _registry is not None
    _registry[new.name] = new


def load_backend(name: str) -> Backend:
    """Import and return the backend for ``name``; the framework itself loads lazily."""
    return spec(name).load()


def keras_specs() -> dict[str, BackendSpec]:
    """The specs that run Keras models, by Keras backend name ("tensorflow", "torch", "jax")."""
    return {s.keras_backend: s for s in specs() if s.keras_backend}


def keras_spec(backend: str) -> BackendSpec:
    """The spec that runs Keras on ``backend``; ModelError naming the known ones otherwise."""
    known = keras_specs()
    if backend not in known:
        raise ModelError(f"backend={backend!r} is no Keras backend; expected one of {', '.join(sorted(known))}")
    return known[backend]


def model_backend_for(model: Any) -> BackendSpec:
    """The backend whose framework ``model`` belongs to (by the modules of its class and its bases).

    A Keras model goes to the spec of the Keras backend it was built on, whatever else its classes derive from
    (on torch every Keras layer is also an ``nn.Module``).
    """
    modules = {c.__module__.split(".")[0] for c in type(model).__mro__}
    if "keras" in modules:
        keras = sys.modules.get("keras")
        built_on = str(keras.backend.backend()) if keras is not None else "tensorflow"
        if built_on in keras_specs():
            return keras_specs()[built_on]
    for s in specs():
        if modules & set(s.model_modules):
            return s
    takes = ", ".join([f"{s.name} ({'/'.join(s.model_modules)})" for s in specs() if s.model_modules]
                      + [f"{s.name} (Keras 3 on {name})" for name, s in keras_specs().items()])
    raise ModelError(f"{type(model).__module__}.{type(model).__qualname__} is no model a backend can check; "
                     f"backends that check models: {takes or 'none'}")


def cross_pairs() -> list[tuple[str, str]]:
    """Framework pairs of the cross checks: the first cross backend against each of the others."""
    names = [s.name for s in specs() if s.cross]
    return [(names[0], other) for other in names[1:]]


__all__ = [
    "Backend", "BackendSpec", "BackendUnavailable", "CaseInputs", "ENTRY_POINT_GROUP", "IMPLS", "INJECT_COLD_ENV",
    "INJECT_ENV", "INJECT_ENVS", "INJECT_HOST_ENV", "INJECT_NO_TENSOR_OP_ENV", "INJECT_SERIALIZE_ENV", "Impl",
    "ImplResult", "injection_for", "ModelBackend", "ModelError", "empty_input", "ModelOptions", "ModelPair", "keras_spec", "keras_specs", "OutOfDeviceMemory", "model_backend_for", "require_usable", "Pair", "PathProof", "cross_pairs", "load_backend",
    "parse_injection", "problems", "unmatched_injections", "register", "spec", "specs",
]
