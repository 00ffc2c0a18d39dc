"""The backend registry: built-ins, another package's backend through the entry-point group, broken ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rnnperf.backends import BackendSpec, cross_pairs, spec, specs

EXTRA = '''
from pytest_rnnperf.backends import BackendSpec

SPEC = BackendSpec(name="mxnet", title="MXNet", module=__name__, cudnn_cells=("lstm",),
                   distributions={"mxnet": ("mxnet",)}, runtime_prefix="mxnet.", key_fields=("mxnet.cudnn",))


class Backend:
    name = "mxnet"

    def unavailable_reason(self):
        return "mxnet is not installed"


def get_backend():
    return Backend()
'''

PROBE = """
import json
from pytest_rnnperf import backends
from pytest_rnnperf.measure import environment
from pytest_rnnperf.model.cases import Case, Shape
from suites.matrix import paired_cases
print(json.dumps({"names": [s.name for s in backends.specs()], "cross": backends.cross_pairs(),
                  "keys": sorted(k for k in environment.key_field_map() if "mxnet" in k),
                  "dists": "mxnet" in environment.distributions(), "problems": backends.problems(),
                  "reason": backends.load_backend("mxnet").unavailable_reason(),
                  "cases": [c.id for c in paired_cases("mxnet", "smoke")]}))
"""


def _installed(tmp_path: Path, entry_points: str, module: str = "") -> dict[str, object]:
    """Run PROBE in a fresh process with a distribution that declares ``entry_points`` on its path."""
    dist = tmp_path / "extra_backend-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: extra-backend\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[pytest_rnnperf.backends]\n{entry_points}\n")
    if module:
        (tmp_path / "extra_backend.py").write_text(module)
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(repo)]))
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


BUILT_IN = ["torch", "tf", "keras_torch", "keras_jax", "jax", "torch_compile", "torch_compile_rnn"]


def test_the_built_in_backends_are_registered_in_order() -> None:
    """torch first (the cross checks' anchor), then Keras on each backend, JAX, compiled torch; each with its cells."""
    assert [s.name for s in specs()][:len(BUILT_IN)] == BUILT_IN
    assert spec("keras_jax").cudnn_cells == ("lstm",) and spec("jax").cells == ("lstm",)
    assert not spec("torch_compile").reference and not spec("torch_compile").cross
    assert spec("tf").cudnn_cells == ("lstm", "gru") and "rnn_tanh" in spec("torch").cudnn_cells
    assert ("torch", "tf") in cross_pairs()


def test_another_package_adds_a_backend_with_one_module_and_one_entry_point(tmp_path: Path) -> None:
    """Its cases, cross pair, fingerprint distribution and runtime key fields all come from its spec."""
    got = _installed(tmp_path, "mxnet = extra_backend:SPEC", EXTRA)
    assert got["names"] == [*BUILT_IN, "mxnet"] and ["torch", "mxnet"] in got["cross"]  # type: ignore[operator]
    assert got["keys"] == ["mxnet", "mxnet.cudnn"] and got["dists"] is True and got["problems"] == []
    assert got["reason"] == "mxnet is not installed"
    assert got["cases"] == ["mxnet-lstm-train-fp32-T8-B4-I8-H16-L1"]


def test_a_broken_entry_point_is_reported_and_the_others_still_load(tmp_path: Path) -> None:
    """A backend that does not import is a header warning, not a crash of every run."""
    got = _installed(tmp_path, "broken = no_such_module:SPEC\nmxnet = extra_backend:SPEC", EXTRA)
    assert got["names"] == [*BUILT_IN, "mxnet"]
    assert got["problems"] == ["backend entry point broken: no_such_module:SPEC does not load "
                               "(ModuleNotFoundError: No module named 'no_such_module')"]


def test_a_backend_name_must_fit_in_a_case_id() -> None:
    """Names become the first part of case ids and baseline keys."""
    with pytest.raises(ValueError, match="lowercase letters"):
        BackendSpec(name="Keras-Torch", title="x", module="x", cudnn_cells=())
    with pytest.raises(ValueError, match="unknown framework 'trch'; registered backends: torch, tf"):
        spec("trch")
