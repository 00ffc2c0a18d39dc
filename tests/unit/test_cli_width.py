"""The subcommands on stored H100 runs: every line within the terminal's width, and compare's filter."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_rnnperf.cli.main import main
from pytest_rnnperf.report import text

REPO = Path(__file__).resolve().parents[2]
H100 = "NVIDIA_H100_80GB_HBM3"
MACHINE = "Linux-CPython-3.12-64bit"
WIDTH = 120


@pytest.fixture(scope="module")
def baselines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the stored H100 runs (the commands read them only; a copy keeps baselines/ out of reach)."""
    folder = tmp_path_factory.mktemp("baselines") / H100
    shutil.copytree(REPO / "baselines" / H100 / MACHINE, folder / MACHINE)
    return folder


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    """Exit code and stdout lines of ``python -m pytest_rnnperf ARGS``."""
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, out.splitlines()


@pytest.mark.parametrize("command", ["compare", "history", "sensitivity", "sensitivity --case", "spread", "noise"])
def test_no_line_of_a_subcommand_is_wider_than_the_terminal(
        baselines: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """COLUMNS=120: tables share out the width, long lines wrap; every line fits (the stored runs had 996)."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    run = [str(baselines / MACHINE / f"00{n}_run.json") for n in (22, 23, 24, 25, 26)]
    case = "torch-lstm-train-fp32-T28-B128-I28-H128-L1"
    args = {"compare": ["compare", str(baselines), run[-1]], "history": ["history", str(baselines)],
            "sensitivity": ["sensitivity", str(baselines)],
            "sensitivity --case": ["sensitivity", str(baselines), "--case", case],
            "spread": ["spread", *run[2:]], "noise": ["noise", *run[:2]]}[command]
    _, lines = _run(capsys, *args)
    assert len(lines) > 5
    wide = [line for line in lines if len(line) > WIDTH]
    assert not wide, "\n".join(wide)


def test_compare_changed_lists_only_the_cases_that_did_not_come_out_unchanged(
        baselines: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """--changed hides the unchanged cases and says how many; an ambiguous case says it had too few processes."""
    monkeypatch.setenv("COLUMNS", "200")
    old, new = (str(baselines / MACHINE / f"00{n}_run.json") for n in (25, 26))
    _, every = _run(capsys, "compare", old, new)
    _, changed = _run(capsys, "compare", old, new, "--changed")
    labels = [line.split()[0] for line in every if line[:1].isupper() and line.split()[0].isupper()]
    assert "UNCHANGED" in labels and {"AMBIGUOUS"} <= set(labels)
    assert not any(line.startswith("UNCHANGED") for line in changed)
    kept = [line for line in every if line[:1].isupper() and not line.startswith("UNCHANGED")]
    assert all(line in changed for line in kept)
    assert changed[-1] == every[-1] + f" ({labels.count('UNCHANGED')} unchanged not listed: --changed)"
    ambiguous = changed.index(next(line for line in changed if line.startswith("AMBIGUOUS")))
    follow = [line.strip() for line in changed[ambiguous + 1:ambiguous + 4]]  # the verdict wraps onto 1-2 lines
    assert any(line.startswith("ambiguous with too few processes: OLD is one run") for line in follow)


def test_a_log_without_columns_is_drawn_at_the_log_width_not_the_80_column_fallback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """CI writes to a pipe with no $COLUMNS: 120 wide, so case ids are not cut; $COLUMNS or a terminal still decide."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(text, "_on_terminal", lambda: False)
    assert text.terminal_width(80) == text.LOG_WIDTH == 120
    monkeypatch.setattr(text, "_on_terminal", lambda: True)
    assert text.terminal_width(80) == 80
    monkeypatch.setattr(text, "_on_terminal", lambda: False)
    monkeypatch.setenv("COLUMNS", "90")
    assert text.terminal_width(90) == 90


def test_sensitivity_of_one_case_says_what_spreads_it_in_the_stored_history(
        baselines: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch LSTM at batch 4700 on the H100: its largest GEMM runs at two speeds, which spreads its busy time;
    its steady kernels resolve 3% all the same. The bidirectional LSTM, with no steady kernel, stays limited by
    its own noise, and says what spreads it."""
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    _, lines = _run(capsys, "sensitivity", str(baselines), "--case", "torch-lstm-train-fp32-T60-B4700-I32-H256-L1")
    head = next(i for i, line in enumerate(lines) if line.startswith("resolves 3% on its steady kernels ("))
    assert lines[head + 1] == "what spreads its busy time:"
    why = " ".join(line.strip() for line in lines[head + 2:])
    assert "- cutlass_80_simt_sgemm_128x128_8x4_nt_align1 runs at two speeds: " in why, why
    _, limited = _run(capsys, "sensitivity", str(baselines), "--case", "torch-lstm-train-fp32-T50-B64-I64-H256-L2-bi")
    head = next(i for i, line in enumerate(limited) if line.startswith("its own noise ("))
    assert limited[head].endswith("; what spreads it:")
    # What the history names changes as nights join it (0001-0051: the host's gaps, then a GEMM at two speeds).
    causes = " ".join(limited[head + 1:])
    assert any(cause in causes for cause in ("how its kernels overlap varies by process", "moves with its wall time",
                                             "runs at two speeds")), causes
    _, quiet = _run(capsys, "sensitivity", str(baselines), "--case", "torch-lstm-infer-fp32-T60-B500-I32-H256-L1")
    head = quiet.index("resolves 3% on its steady kernels (100% of its kernel time)")
    # Nothing of its own spreads it; once one more card ran it twice (0056, 0057), its history names the cards.
    causes = " ".join(line.strip() for line in quiet[head + 1:])
    cards = "what spreads its busy time: - its steady kernels' time differs between cards: the medians of its "
    assert causes == "" or (causes.startswith(cards) and causes.count(" - ") == 1), causes


def test_compare_names_the_fields_an_older_format_did_not_record_apart_from_the_changes(
        baselines: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """0012 (format 3) against 0040 (format 4): the torch fields 0012's recorder did not write are one item, last;
    the same pair in one format (0039 against 0040) has no such item."""
    monkeypatch.setenv("COLUMNS", "200")
    _, lines = _run(capsys, "compare", str(baselines / MACHINE / "0012_run.json"), str(baselines / MACHINE / "0040_run.json"))
    changes = " ".join(lines[next(i for i, line in enumerate(lines) if line.startswith("environment changes: ")):])
    assert "; not recorded by 0012_run.json, an older format: " in changes
    unrecorded = changes.split("; not recorded by 0012_run.json, an older format: ")[1]
    assert "absent ->" not in unrecorded.split(" case(s) compared")[0]
    _, same = _run(capsys, "compare", str(baselines / MACHINE / "0039_run.json"), str(baselines / MACHINE / "0040_run.json"))
    assert not any("not recorded by" in line for line in same)


def test_compare_shows_the_steady_kernels_beside_the_device_time_where_they_alone_regressed(
        baselines: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """0047 with one case's cuDNN kernels 4% slower in every round and its busy time as measured: the device time is
    unchanged, the steady kernels regressed, and compare's line says both, in that order."""
    import json

    monkeypatch.setenv("COLUMNS", "400")
    case = "torch-lstm-infer-fp32-T60-B500-I32-H256-L1"
    run = json.loads((baselines / MACHINE / "0047_run.json").read_text())
    for bench in run["benchmarks"]:
        stored = bench["extra_info"].get("rnnperf") or {}
        if bench["params"].get("side") == "cudnn" and (stored.get("case") or {}).get("id") == case:
            for kernel in stored["cudnn_device"]["kernels"]:
                kernel["ms_per_step"] *= 1.04
            for name, samples in stored["metrics"].items():  # each kernel's rounds
                if name.startswith("cudnn/kernel/"):
                    stored["metrics"][name] = [v * 1.04 for v in samples]
    slower = tmp_path / "0047_slower.json"
    slower.write_text(json.dumps(run))
    code, lines = _run(capsys, "compare", str(baselines), str(slower))
    at = next(i for i, line in enumerate(lines) if f" {case}: " in line)
    line = " ".join([lines[at]] + [more.strip() for more in lines[at + 1:at + 3] if more.startswith(" ")])  # wrapped
    assert code == 1 and line.startswith("REGRESSED"), line
    device, steady = line.index("cudnn device time"), line.index("; cudnn steady time +4.")
    assert device < steady and line[device:steady].endswith("unchanged"), line
    assert "): regressed (3 steady kernels" in line[steady:], line
