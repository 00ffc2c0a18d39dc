"""The HTML pages as text: the run's page drawn from the report's rows, and the history site from stored runs.

What a browser makes of them is tests/browser's; here the pages are checked as the files they are: self-contained
(no address outside the folder), every case in the table and in a panel, data that cannot end its script element,
no chart where plotly is missing, and a site that never replaces a file.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from factories import device, record  # noqa: E402
from fake_nvml import FakeNVML  # noqa: E402

from pytest_rnnperf.cli.main import main  # noqa: E402
from pytest_rnnperf.measure.gpu import read_gpu_info  # noqa: E402
from pytest_rnnperf.model.cases import ModelCase  # noqa: E402
from pytest_rnnperf.model.records import StoredRun  # noqa: E402
from pytest_rnnperf.model.stats import Interval  # noqa: E402
from pytest_rnnperf.judge.verdicts import judge  # noqa: E402
from pytest_rnnperf.model.flags import FlagKind, WindowFlag  # noqa: E402
from pytest_rnnperf.report.html import PLOTLY_MISSING, OUTCOME_COLOURS, log_ticks, outcome_colour, run_page  # noqa: E402
from pytest_rnnperf.report.rows import NEEDS_GPU, build_rows  # noqa: E402
from pytest_rnnperf.session.run import Run  # noqa: E402
from pytest_rnnperf.session.session import RnnperfSession  # noqa: E402
from pytest_rnnperf.store.stored import Stored  # noqa: E402
from pytest_rnnperf.store.runs import benchmark_extra, run_meta  # noqa: E402

pytest.importorskip("plotly", reason="the pages' charts need plotly: pip install -e '.[html]'")

START = datetime(2026, 1, 1, 3, 0, tzinfo=timezone.utc)
GPU = "NVIDIA_H100_80GB_HBM3"


def _run(with_baseline: bool = True) -> RnnperfSession:
    """A judged-less run of two cases on the fake H200, the first with device time and a stored record to compare."""
    run = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML()), software={"torch": "2.13.0"}))
    now = record(cudnn_dev_ms=0.3, generic_dev_ms=2.0, busy_pct=40.0, speedup=Interval(4.0, 3.8, 4.2, 0.95),
                 kernel="RNN_blockPersist_fp_LSTM<float>")
    model = record(case=ModelCase(id="test_enc[</script><b>x]", framework="torch"), seed=2,
                   speedup=Interval(2.5, 2.4, 2.6, 0.95))
    run.measured.results += [now, model]
    if with_baseline:
        base = record(cudnn_dev_ms=0.25, seed=5, kernel="RNN_elementWise_fp<float>")
        env = dict(run.environment(), **{"gpu.driver_version": "570.1"})
        run.stored = Stored((StoredRun(path=Path("0001_baseline.json"), gpu_slug="NVIDIA_H200", environment=env,
                                       records={base.id: base}),))
    return run


def _spec_blocks(text: str) -> list[dict]:
    """Every chart's figure as the page's script reads it."""
    return [json.loads(m) for m in re.findall(r'<script type="application/json" id="spec-\d+">(.*?)</script>', text, re.S)]


def test_the_run_page_holds_every_case_in_the_table_and_in_a_panel_with_its_evidence() -> None:
    run = _run()
    rows = build_rows(run)
    text = run_page([("", rows)], generated="2026-01-01 03:00 UTC")
    table = text.split('id="s0-cases"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr data-backend=") == 2
    assert 'data-verdict="not judged"' in table and 'data-cell="lstm"' in table and 'data-cell="model"' in table
    panels = re.findall(r'<details class="case[^"]*" id="([^"]+)"', text)
    assert panels == ["s0-torch-lstm-train-fp32-T28-B128-I28-H128-L1", "s0-test_enc___script__b_x_"]
    lstm = text.split(f'id="{panels[0]}"', 1)[1].split("</details>", 1)[0]
    for seen in ("ops aten::_cudnn_rnn", "cudnn vs generic", "Kernels: cudnn baseline", "RNN_blockPersist_fp_LSTM&lt;float&gt;",
                 "appeared: RNN_blockPersist_fp_LSTM&lt;float&gt;", "gpu.driver_version: 570.1 -&gt;",
                 "baseline record: 0001_baseline.json", "utilization", "4.00x [3.80, 4.20]"):
        assert seen in lstm, seen
    # A case named with markup is text on the page, and cannot end the script element that holds the charts' data.
    assert "<b>x]" not in text and "&lt;/script&gt;&lt;b&gt;x]" in text
    specs = _spec_blocks(text)
    assert len(specs) == 3  # the speedups of the run, and one chart of rounds per case
    assert any(t.get("y") and "test_enc[</script><b>x]" in t["y"] for t in specs[0]["data"])
    boxes = [t for t in specs[1]["data"] if t["type"] == "box"]
    assert {(t["name"], t["x"][0]) for t in boxes} >= {("now", "cudnn wall"), ("now", "cudnn device"),
                                                        ("baseline", "cudnn device"), ("now", "generic wall")}


def _judged(flagged: bool = False) -> RnnperfSession:
    """The run of ``_run`` with its first case judged against its stored record: 20% slower in device time, and a
    kernel that appeared (its window flagged, so that it regresses without failing, where ``flagged``)."""
    run = _run()
    assert run.stored.baseline is not None
    base = next(iter(run.stored.baseline.records.values()))
    verdict = judge(base, run.measured.results[0])
    assert verdict is not None and verdict.fails
    if flagged:
        verdict = replace(verdict, flags=(WindowFlag(FlagKind.OVERLAP, "kernels overlapped differently"),))
    run.measured.verdicts = {verdict.case_id: verdict}
    return run


def test_the_page_opens_with_the_status_and_what_regressed_by_how_much_which_kernel_and_what_changed() -> None:
    text = run_page([("", build_rows(_judged()))])
    body = text.split("<body>", 1)[1]
    # Status, then the environment diff and the regressions table, before any chart or the table of cases.
    order = [body.index(x) for x in ('id="s0-status"', "Environment changes since the baseline",
                                     'id="s0-regressions"', 'data-spec="spec-0"', 'id="s0-cases"')]
    assert order == sorted(order)
    assert "regressions found: 1 case(s) failed" in body
    table = body.split('id="s0-regressions"', 1)[1].split("</table>", 1)[0]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table, re.S)
    assert "torch-lstm-train-fp32-T28-B128-I28-H128-L1" in cells[0] and cells[1] == "cudnn device time"
    assert re.match(r"\+2\d\.\d% \[\+\d+\.\d%, \+\d+\.\d%\]", cells[2]) and cells[3] == "3%"
    assert "appeared: RNN_blockPersist_fp_LSTM&lt;float&gt;" in cells[4] and "as above" in cells[5]
    # The case table says the same change, and the first chart is the deciding metric with its threshold band.
    assert re.search(r'<span title="cudnn device time \+2\d\.\d%[^"]*">\+2\d\.\d%</span>', body)
    first = _spec_blocks(text)[0]
    assert [t["name"] for t in first["data"]] == ["threshold band", "change now (95% CI)"]
    band = first["data"][0]
    assert band["base"] == [-3.0] and band["x"] == [6.0] and first["data"][1]["marker"]["color"] == ["#cf222e"]


def test_a_regression_that_did_not_fail_is_amber_never_green_on_the_page_and_in_speedups_png(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    amber = OUTCOME_COLOURS["not failed"]
    assert outcome_colour("regressed (not failed)") == outcome_colour("host overhead regressed (not failed)") == amber
    assert outcome_colour("regressed") == "#cf222e" and outcome_colour("improved") == "#1a7f37"
    rows = build_rows(_judged(flagged=True))
    text = run_page([("", rows)])
    assert re.search(r'<tr data-backend="torch"[^>]*data-cell="lstm"[^>]* class="warn">', text)
    assert '<span class="warn" title="kernels overlapped differently">regressed (not failed)</span>' in text
    speedups = _spec_blocks(text)[1]
    assert speedups["data"][0]["marker"]["color"][0] == amber
    # speedups.png writes each moved case's outcome beside it, in the same colour.
    import matplotlib.axes

    from pytest_rnnperf.report.plot import plot_speedups

    written: list[tuple[str, str]] = []
    annotate = matplotlib.axes.Axes.annotate
    monkeypatch.setattr(matplotlib.axes.Axes, "annotate",
                        lambda ax, text, *a, **k: written.append((text, k["color"])) or annotate(ax, text, *a, **k))
    assert plot_speedups(rows, tmp_path / "speedups.png")
    assert written == [("regressed (not failed)", amber)]


def test_log_axes_read_one_two_five_ten_each_tick_the_whole_value() -> None:
    assert log_ticks(0.266, 13.6)[1] == ["0.2", "0.5", "1", "2", "5", "10", "20"]
    assert log_ticks(0.001, 500)[1] == ["0.001", "0.01", "0.1", "1", "10", "100", "1000"]  # decades alone
    assert log_ticks(0.25, 0.28)[1] == ["0.2", "0.25", "0.26", "0.28", "0.5"]  # a narrow range keeps its ends
    rounds = _spec_blocks(run_page([("", build_rows(_judged()))]))[2]
    axis = rounds["layout"]["yaxis"]
    assert axis["type"] == "log" and axis["ticktext"] == [f"{v:g}" for v in axis["tickvals"]]
    assert len(set(axis["ticktext"])) == len(axis["ticktext"]) and "0.2" in axis["ticktext"]


def test_each_speedup_on_a_case_panel_is_labelled_by_what_it_is() -> None:
    text = run_page([("", build_rows(_judged()))])
    panel = text.split('id="s0-torch-lstm-train-fp32-T28-B128-I28-H128-L1"', 1)[1].split("</details>", 1)[0]
    assert "speedup, wall (median generic / median cuDNN) <b>4.00x [3.80, 4.20]</b>" in panel
    assert "the table below judges the speedup, median of rounds" in panel
    assert "<td>speedup, median of rounds</td>" in panel and "<td>speedup</td>" not in panel


def test_without_a_gpu_the_page_says_how_many_cudnn_cases_did_not_run_instead_of_all_passed() -> None:
    run = RnnperfSession(Run(gpu=read_gpu_info(0, nvml=FakeNVML(device_count=0)), software={}))
    run.measured.results.append(record(cudnn_ms=None, seed=3))
    run.measured.skipped += [("a", f"{NEEDS_GPU}: no CUDA GPU visible to torch"), ("b", f"{NEEDS_GPU}: no CUDA GPU visible "
                    "to torch"), ("c", "tensorflow is not installed")]
    rows = build_rows(run)
    assert rows.status == "2 cuDNN cases not run: no GPU" and rows.no_gpu == 2
    text = run_page([("", rows)])
    assert '<div class="status warn" id="s0-status">2 cuDNN cases not run: no GPU</div>' in text
    assert "all checks passed" not in text


def test_the_run_page_needs_no_network() -> None:
    """plotly is inside the page; no script, style or image is fetched from anywhere."""
    text = run_page([("", build_rows(_run()))])
    head, body = text.split("</head>", 1)
    ours = re.sub(r"<script>.*?</script>", "", head, count=1, flags=re.S) + body  # plotly's own links are its own
    assert "Plotly" in head and len(head) > 1_000_000
    assert not re.search(r'(src|href)="(https?:)?//', ours) and "<script src=" not in text


def test_without_plotly_the_page_keeps_its_tables_and_says_what_to_install() -> None:
    text = run_page([("", build_rows(_run()))], plotly=False)
    assert html.escape(PLOTLY_MISSING) in text and "pytest-rnnperf[html]" in PLOTLY_MISSING
    assert len(text) < 200_000 and not _spec_blocks(text)  # no plotly.js (4.8 MB), no chart
    assert text.count("<tr data-backend=") == 2 and "Path evidence" in text


def test_a_gate_failure_and_a_regression_mark_the_row() -> None:
    run = _run(with_baseline=False)
    run.measured.results[0] = replace(run.measured.results[0], speedup=Interval(1.5, 1.4, 1.6, 0.95))  # under the 2x floor
    text = run_page([("", build_rows(run))])
    row = re.search(r'<tr data-backend="torch"[^>]*data-cell="lstm"[^>]*>', text)
    assert row and 'class="bad"' in row.group(0)
    assert "gate failed" in text and "gate failures" in text


def test_write_reports_writes_the_page_and_a_missing_plotly_is_one_note(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_rnnperf.report.files import write_reports

    notes = write_reports(_run(), str(tmp_path / "a"))
    assert "index.html" in notes[-1] and (tmp_path / "a" / "index.html").stat().st_size > 1_000_000
    monkeypatch.setitem(sys.modules, "plotly", None)  # as if not installed: find_spec answers None
    notes = write_reports(_run(), str(tmp_path / "b"))
    assert f"index.html has no charts: {PLOTLY_MISSING}" in notes
    assert (tmp_path / "b" / "index.html").stat().st_size < 200_000


def test_the_package_imports_without_plotly() -> None:
    """plotly is imported where a chart is drawn, never on import."""
    code = ("import sys; sys.modules['plotly'] = None; import pytest_rnnperf.plugin, pytest_rnnperf.report.files, "
            "pytest_rnnperf.report.html, pytest_rnnperf.history.site, pytest_rnnperf.cli.main; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


# --------------------------------------------------------------------------------------------- history site


def _store(folder: Path, night: int, ms: float, driver: str, kernel: str) -> Path:
    """One nightly run of one case whose cuDNN side runs ``kernel`` for ``ms`` per step, under ``driver``."""
    rec = record(cudnn_ms=1.5 * ms, seed=night, kernel=kernel)
    rec = replace(rec, cudnn_device=device("cudnn", ms, seed=night, kernel=kernel))
    env = {"gpu.driver_version": driver, "torch.version": "2.13.0", "torch.cudnn_version": "9.19.0"}
    data = {"machine_info": {"rnnperf": run_meta(GPU, env, "abc")}, "datetime": (START + timedelta(days=night)).isoformat(),
            "benchmarks": [{"name": f"test[{rec.id}]", "extra_info": benchmark_extra(rec, "cudnn")}]}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{night:04d}_run.json"
    path.write_text(json.dumps(data))
    return path


def _nights(folder: Path) -> None:
    """Twelve nights; from night 6 a new driver and another kernel make the step 10% slower."""
    for night in range(12):
        late = night >= 6
        _store(folder, night, 2.0 * (1.10 if late else 1.0) * (1 + 0.002 * (-1) ** night),
               "590.10" if late else "580.95", "RNN_elementWise_fp" if late else "RNN_blockPersist_fp_LSTM")


def test_the_history_site_shows_each_series_and_the_change_with_its_diff_and_kernels(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _nights(tmp_path / "runs")
    code = main(["history", str(tmp_path / "runs"), "--html", str(tmp_path / "site")])
    out = capsys.readouterr().out
    assert code == 1 and f"written: {tmp_path / 'site' / 'index.html'}" in out
    names = sorted(p.name for p in (tmp_path / "site").iterdir())
    assert names == [f"{GPU}-changes.html", f"{GPU}.html", "index.html", "plotly.min.js"]
    model = (tmp_path / "site" / f"{GPU}.html").read_text()
    assert '<script src="plotly.min.js"></script>' in model and not re.search(r'src="(https?:)?//', model)
    specs = _spec_blocks(model)
    overview, case = specs[0], specs[1]
    assert len(overview["data"]) == 1 and len(overview["data"][0]["y"]) == 12
    assert [t["name"] for t in case["data"]] == ["device", "wall", "speedup"]
    hover = case["data"][0]["customdata"][7]
    assert hover[1] == "0007_run.json (baseline)" and "gpu.driver_version=590.10" in hover[2]
    assert "torch.cudnn_version=9.19.0" in hover[2] and "RNN_elementWise_fp" in hover[3]
    assert any("step +10" in a["text"] and "slower" in a["text"] for a in case["layout"]["annotations"])
    changes = (tmp_path / "site" / f"{GPU}-changes.html").read_text()
    night6 = changes.split("<h2>", 2)[1]
    assert night6.startswith("2026-01-07 03:00: 0006_run.json")
    assert "gpu.driver_version: 580.95 -&gt; 590.10" in night6
    assert "appeared: RNN_elementWise_fp" in night6 and "vanished: RNN_blockPersist_fp_LSTM" in night6
    assert '<tr class="bad">' in night6 and "slower" in night6
    index = (tmp_path / "site" / "index.html").read_text()
    assert f'href="{GPU}.html"' in index and f'href="{GPU}-changes.html"' in index


def test_the_terminal_and_the_site_give_one_count_each_change_point_labelled_with_its_series(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Night 6 moved device time, wall time and the speedup: one change point each, and one of them counted."""
    monkeypatch.setenv("COLUMNS", "200")  # the count on one terminal line, to read it whole
    _nights(tmp_path / "runs")
    code = main(["history", str(tmp_path / "runs"), "--html", str(tmp_path / "site")])
    counted = next(line for line in capsys.readouterr().out.splitlines() if "change point(s) toward slower" in line)
    assert code == 1 and counted.startswith("1 case(s): 1 change point(s) toward slower in the device series")
    index = (tmp_path / "site" / "index.html").read_text()
    shown = re.search(r'<div class="status fail" id="h-count">(.*?)</div>', index)
    assert shown and html.unescape(shown.group(1)) == counted  # the terminal's line, word for word
    assert "<td>device 1 (1 slower), wall 1 (1 slower), speedup 1 (1 slower)</td>" in index
    model = (tmp_path / "site" / f"{GPU}.html").read_text()
    assert "<b>1 change point(s) toward slower in the device series</b>" in model
    header = re.findall(r"<th>([^<]*)</th>", model.split('id="h-cases"', 1)[1].split("</thead>", 1)[0])
    assert header[-3:] == ["device: change points", "wall: change points", "speedup: change points"]
    assert re.search(r'<td class="num">1 \(1 slower\)</td><td class="num">1 \(1 slower\)</td>'
                     r'<td class="num">1 \(1 slower\)</td></tr>', model)
    # Each series is drawn with the band a shift must leave to be reported.
    case = _spec_blocks(model)[1]
    bands = [shape for shape in case["layout"]["shapes"] if shape["type"] == "rect" and shape["line"]["width"] == 0]
    assert len(bands) == 3 and all(b["y1"] / b["y0"] == pytest.approx(1.01 / 0.99) for b in bands)
    # With a window past night 6 the step is no longer counted, on the site as in the terminal.
    assert main(["history", str(tmp_path / "runs"), "--since", "3", "--html", str(tmp_path / "later")]) == 0
    later = (tmp_path / "later" / "index.html").read_text()
    assert "; 1 earlier, outside the window (not counted)" in later and 'class="status ok"' in later


def test_the_site_is_written_into_a_new_or_empty_folder_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing is replaced: a folder with files, a file, or a folder of the stored runs read is refused first."""
    _nights(tmp_path / "runs")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "index.html").write_text("mine")
    (tmp_path / "empty").mkdir()
    for target, message in ((tmp_path / "used", "the folder holds files, which are never replaced"),
                            (tmp_path / "runs" / "0000_run.json", "a file, not a folder"),
                            (tmp_path / "runs" / "site", "a folder of stored runs that is read, never written")):
        assert main(["history", str(tmp_path / "runs"), "--html", str(target)]) == 2
        assert message in capsys.readouterr().err
    assert (tmp_path / "used" / "index.html").read_text() == "mine" and not (tmp_path / "runs" / "site").exists()
    assert main(["history", str(tmp_path / "runs"), "--html", str(tmp_path / "empty")]) == 1
    assert (tmp_path / "empty" / "index.html").is_file()


def test_history_html_without_plotly_is_one_line_naming_the_extra(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _nights(tmp_path / "runs")
    monkeypatch.setitem(sys.modules, "plotly", None)
    assert main(["history", str(tmp_path / "runs"), "--html", str(tmp_path / "site")]) == 2
    assert capsys.readouterr().err.strip() == f"error: history --html: {PLOTLY_MISSING}"
    assert not (tmp_path / "site").exists()
