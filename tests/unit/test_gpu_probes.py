"""The GPU experiments' arithmetic (scripts/clock_ramp.py, scripts/placement_probe.py), on made-up traces."""

from __future__ import annotations

import numpy as np
from script_modules import load_script


def test_a_ramp_settles_at_the_first_bin_within_half_a_percent_of_the_steady_duration() -> None:
    """Launches 3% slower for the first 6 ms, then steady: the ramp settles in the bin that starts at 6 ms."""
    starts = np.arange(0.0, 100.0, 0.05)
    durations = np.where(starts < 6.0, 57.0, 55.3)
    steady, settled, bins = load_script("clock_ramp").settling(starts, durations, bin_ms=2.0)
    assert steady == 55.3 and settled == 6.0
    assert bins[0] == (0.0, 57.0) and len(bins) == 50


def test_a_ramp_still_drifting_settles_only_in_the_bins_beside_the_tail_it_is_measured_against() -> None:
    """A trace that drifts to its end (+1 us per ms) has no bin within 0.5% of its last millisecond but the last ones."""
    starts = np.arange(0.0, 60.0, 0.05)
    steady, settled, _ = load_script("clock_ramp").settling(starts, 50.0 + starts, bin_ms=2.0, tail_ms=1.0)
    assert settled is not None and settled >= 56.0  # only the bins next to the tail come within 0.5%


def test_placement_probe_tells_builds_that_differ_from_rounds_that_agree() -> None:
    """Each build's repeats agree; builds differ by 1%: "between builds" reads about 1%, "within" about 0."""
    def process(offset: float) -> list[dict[str, object]]:
        builds = [[{"k": 1e-4 * (1 + 0.01 * b + offset)} for _ in range(3)] for b in range(4)]
        return [{"case": "c", "builds": builds}]

    lines = load_script("placement_probe").summarize([process(0.0), process(0.002), process(0.004)])
    row = next(line for line in lines if line.strip().startswith("k "))
    assert "within  0.00%" in row and "between builds  1.27%" in row and "between processes  0.20%" in row
