"""Models a test declares with ``@pytest.mark.rnnperf_ahead(model=model_args)``, so that a first night compiles them
ahead.

``model_args`` is a module-level function of ``scale=`` and any of the test's parameters that returns the keyword
arguments the test passes to ``rnnperf.model()``. A declared Keras-on-JAX model is then compiled in the compile-ahead
process of its backend like a matrix case (``measure/ahead.py``); its test waits for it instead of stopping them all.
The declaration only decides what compiles ahead: a wrong one costs a first night time, never a result.
"""

from __future__ import annotations

import inspect
from typing import Any, Mapping

import pytest

from pytest_rnnperf.backends import ModelError, ModelOptions, keras_spec
from pytest_rnnperf.measure.ahead import AheadModel
from pytest_rnnperf.model.cases import ModelCase
from pytest_rnnperf.plugin.fixtures import RnnperfFixture
from pytest_rnnperf.plugin.ids import model_case_id

MARKER = "rnnperf_ahead"
MARKER_LINE = (f"{MARKER}(model=model_args): model_args(scale=..., <the test's parameters>) returns the keyword "
               "arguments the test passes to rnnperf.model(); a first night compiles that model ahead of its turn")
# What model_args may return: rnnperf.model()'s own keywords.
MODEL_ARGUMENTS = tuple(name for name in inspect.signature(RnnperfFixture.model).parameters if name != "self")


def declared_args(item: pytest.Item, scale: str) -> dict[str, Any] | None:
    """The ``rnnperf.model()`` arguments the item's ``rnnperf_ahead`` marker declares (None without one); a
    ``pytest.UsageError`` naming the test where the marker or what its function returns is malformed."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    where = f"{item.nodeid}: @pytest.mark.{MARKER}"
    # A keyword: pytest takes a mark called with a lone function as a decorator of that function.
    function = marker.kwargs.get("model")
    if marker.args or set(marker.kwargs) != {"model"} or not callable(function):
        raise pytest.UsageError(f"{where} takes model=model_args, a function of scale= and the test's parameters; "
                                f"got args {marker.args!r} and keywords {marker.kwargs!r}")
    callspec = getattr(item, "callspec", None)
    given = {"scale": scale, **(callspec.params if callspec is not None else {})}
    try:
        wanted = inspect.signature(function).parameters
        args = function(**{name: value for name, value in given.items() if name in wanted})
    except Exception as exc:  # noqa: BLE001 - whatever the team's function raises is its mistake, in one line
        raise pytest.UsageError(f"{where}: {getattr(function, '__name__', function)}() raised "
                                f"{type(exc).__name__}: {str(exc)[:160]}") from None
    return _checked(where, args)


def _checked(where: str, args: Any) -> dict[str, Any]:
    """``args`` as rnnperf.model() keyword arguments, or a UsageError saying what is wrong with them."""
    if not isinstance(args, Mapping) or not {"build", "inputs"} <= set(args):
        raise pytest.UsageError(f"{where}: its function must return rnnperf.model()'s keyword arguments as a dict "
                                f"with build and inputs, got {type(args).__name__}")
    if unknown := sorted(set(args) - set(MODEL_ARGUMENTS)):
        raise pytest.UsageError(f"{where}: {', '.join(unknown)}: not rnnperf.model() arguments "
                                f"({', '.join(MODEL_ARGUMENTS)})")
    return dict(args)


def ahead_model(item: pytest.Item, args: Mapping[str, Any], precision: str) -> AheadModel | None:
    """The declared model as its compile-ahead process builds it; None where only a Keras backend named by ``backend=``
    can compile it ahead, or where its arguments cannot be sent to another process (its test says why, if it must)."""
    from pytest_rnnperf.measure.subprocesses import model_payload

    backend = args.get("backend")
    if not isinstance(backend, str):  # a torch model, or Keras on this process's backend: nothing of it compiles
        return None
    try:
        spec = keras_spec(backend)
        case = ModelCase(id=model_case_id(item, args.get("name") or ""),
                         framework=spec.name, mode=args.get("mode", "train"),
                         precision=args.get("precision") or precision, floor=args.get("floor", 1.0))
        options = ModelOptions(targets=args.get("targets"), loss=args.get("loss"), optimizer=args.get("optimizer"),
                               step=args.get("step"), allow_generic=bool(args.get("allow_generic", False)),
                               parity_inputs=args.get("parity_inputs"))
        payload = model_payload(args["build"], args["inputs"], options, backend)
    except (ModelError, ValueError, KeyError):  # the test itself meets the same mistake and says it in one line
        return None
    return AheadModel(case, payload)


__all__ = ["MARKER", "MARKER_LINE", "MODEL_ARGUMENTS", "ahead_model", "declared_args"]
