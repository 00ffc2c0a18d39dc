"""Print an RNNPERF_INJECT_CUDNN_DELAY_US value that slows every cuDNN step of a stored run by a share of its device time.

Only the suite's cases of backends that honour the variable (torch, Keras on torch) get a part: a team's model
test (``ModelCase``) runs its own module, which the spin does not reach.

    RNNPERF_INJECT_CUDNN_DELAY_US=$(python scripts/injection_spec.py baselines/.../0003_baseline.json 0.05)
    RNNPERF_INJECT_CUDNN_DELAY_US=$(python scripts/injection_spec.py baselines/NVIDIA_H200 0.03)  # its history

Each case of the stored run that has device time gets a spin of PERCENT of its cuDNN device time per step: the
induced slowdown that shows which cases the regression rule catches (baselines/<gpu>/evidence/README.md). A GPU
model's folder stands for its whole history: each case as its newest stored run with device time of it has it (the
newest run may hold one framework's cases only).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_rnnperf.backends import spec  # noqa: E402
from pytest_rnnperf.model.cases import ModelCase  # noqa: E402
from pytest_rnnperf.model.records import BaselineError  # noqa: E402
from pytest_rnnperf.store.baselines import find_all  # noqa: E402
from pytest_rnnperf.store.runs import load_run  # noqa: E402


def stored_runs(path: Path) -> list[Path]:
    """``path`` itself, or where it is a GPU model's folder every run stored under it (NNNN_*.json), newest first."""
    if not path.is_dir():
        return [path]
    runs = find_all(path.parent, path.name)
    if not runs:
        raise BaselineError(f"{path}: no stored run (NNNN_run.json or NNNN_baseline.json) under it")
    return runs


def spins(paths: list[Path], share: float) -> dict[str, str]:
    """Case id -> its spin in microseconds: ``share`` of its cuDNN device time in the first of ``paths`` (newest
    first) that holds it with device time; only the suite's cases of backends that honour the variable."""
    parts: dict[str, str] = {}
    for path in paths:
        for case_id, r in load_run(path).records.items():
            if (case_id not in parts and r.cudnn_device is not None and not isinstance(r.case, ModelCase)
                    and spec(r.case.framework).can_inject):
                parts[case_id] = f"{share * r.cudnn_device.busy.median * 1e6:.2f}"
    return parts


def main(argv: list[str]) -> int:
    """Print the variable's value for the run and share given."""
    if len(argv) != 2:
        print("usage: injection_spec.py STORED_RUN|GPU_FOLDER SHARE (e.g. 0.05)", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        share = float(argv[1])
        paths = stored_runs(path)
        parts = spins(paths, share)
    except (BaselineError, ValueError) as exc:
        print(f"injection_spec.py: {exc}", file=sys.stderr)
        return 2
    if not parts:  # an empty value would inject nothing, silently
        print(f"injection_spec.py: {path} holds no torch or Keras-on-torch case with device time: name a stored run "
              "that does", file=sys.stderr)
        return 2
    where = f"{path}" if len(paths) == 1 else f"their newest stored run of {path} with it ({len(paths)} runs)"
    print(f"injection_spec.py: {share:.0%} of each case's cuDNN device time in {where}", file=sys.stderr)
    print(",".join(f"{case_id}={us}" for case_id, us in parts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
