"""Print an RNNPERF_INJECT_CUDNN_DELAY_US value that slows every cuDNN step of a stored run by a share of its device time.

Only the suite's cases of backends that honour the variable (torch, Keras on torch) get a part: a team's model
test (``ModelCase``) runs its own module, which the spin does not reach.

    RNNPERF_INJECT_CUDNN_DELAY_US=$(python scripts/injection_spec.py baselines/.../0003_baseline.json 0.05)
    RNNPERF_INJECT_CUDNN_DELAY_US=$(python scripts/injection_spec.py baselines/NVIDIA_H200 0.03)  # its newest run

Each case of the stored run that has device time gets a spin of PERCENT of its cuDNN device time per step: the
induced slowdown that shows which cases the regression rule catches (baselines/<gpu>/evidence/README.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_rnnperf.backends import spec  # noqa: E402
from pytest_rnnperf.model.cases import ModelCase  # noqa: E402
from pytest_rnnperf.model.records import BaselineError  # noqa: E402
from pytest_rnnperf.store.baselines import find_latest  # noqa: E402
from pytest_rnnperf.store.runs import load_run  # noqa: E402


def stored_run(path: Path) -> Path:
    """``path`` itself, or where it is a GPU model's folder the newest run stored under it (NNNN_*.json)."""
    if not path.is_dir():
        return path
    newest = find_latest(path.parent, path.name)
    if newest is None:
        raise BaselineError(f"{path}: no stored run (NNNN_run.json or NNNN_baseline.json) under it")
    return newest


def main(argv: list[str]) -> int:
    """Print the variable's value for the run and share given."""
    if len(argv) != 2:
        print("usage: injection_spec.py STORED_RUN|GPU_FOLDER SHARE (e.g. 0.05)", file=sys.stderr)
        return 2
    try:
        share = float(argv[1])
        path = stored_run(Path(argv[0]))
        run = load_run(path)
    except (BaselineError, ValueError) as exc:
        print(f"injection_spec.py: {exc}", file=sys.stderr)
        return 2
    parts = [f"{case_id}={share * r.cudnn_device.busy.median * 1e6:.2f}"
             for case_id, r in run.records.items() if r.cudnn_device is not None and not isinstance(r.case, ModelCase)
             and spec(r.case.framework).can_inject]
    if not parts:  # an empty value would inject nothing, silently
        print(f"injection_spec.py: {path} holds no torch or Keras-on-torch case with device time: name a stored run "
              "that does", file=sys.stderr)
        return 2
    print(f"injection_spec.py: {share:.0%} of each case's cuDNN device time in {path}", file=sys.stderr)
    print(",".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
