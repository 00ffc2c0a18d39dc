"""The pages as a person sees them: opened from disk in headless Chromium, with no network, and looked at.

The run's page comes from a run of the plugin on the fake GPU (a recorded baseline, then a run whose cuDNN kernel
got 50% slower), and from a stored H100 run with an injected 5% slowdown judged against its baseline (at 1280 px, as
a reader opens it); the history site from the committed runs of the H100 (never its evidence runs). Each test checks with DOM assertions
that the table, a case's panel and a chart render with their data, that filtering and sorting work, and that the
browser logged no error; it keeps a screenshot in its tmp_path.

Chromium is Debian's ``chromium`` driven through its ``chromedriver`` (package ``chromium-driver``) by selenium:
nothing is downloaded. Where any of the three is missing the tests skip with the reason, and fail instead where
RNNPERF_BROWSER_REQUIRED is set (.ci/run sets it: CI must run them).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "baselines" / "NVIDIA_H100_80GB_HBM3"
HISTORY = H100 / "Linux-CPython-3.12-64bit"
# A stored H100 run whose cuDNN side was slowed by a spin kernel of 5% of each case's step, and its baseline.
SLOWED = H100 / "evidence" / "2026-11-23_spin-5pct-vs-0003.json"
SLOWED_BASELINE = HISTORY / "0003_baseline.json"
# Every element's right edge past the window's width, and every table that scrolls sideways in its box.
OVERFLOW = """
var width = document.documentElement.clientWidth, out = [];
document.querySelectorAll('body *').forEach(function (e) {
  var r = e.getBoundingClientRect();
  if (r.width > 0 && r.right > width + 0.5) { out.push(e.tagName + '#' + e.id + '.' + e.className + ' ' + Math.round(r.right)); }
});
document.querySelectorAll('div.scroll').forEach(function (e) {
  if (e.scrollWidth > e.clientWidth + 1) { out.push('scrolls: ' + e.firstElementChild.id + ' ' + e.scrollWidth); }
});
return [width, document.documentElement.scrollWidth, out.slice(0, 10)];
"""
WAIT_S = 30


def _plugin_helpers() -> Any:
    """tests/plugin/conftest.py under a name of its own (the fake GPU's conftest and the test file it runs)."""
    spec = importlib.util.spec_from_file_location("rnnperf_plugin_helpers", REPO / "tests" / "plugin" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _missing() -> str | None:
    """What is missing to open a page in headless Chromium, or None."""
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed: pip install -e '.[test]'"
    if importlib.util.find_spec("plotly") is None:
        return "plotly is not installed: pip install -e '.[html]'"
    if _chromium() is None:
        return "no chromium browser: apt-get install chromium chromium-driver"
    if shutil.which("chromedriver") is None:
        return "no chromedriver: apt-get install chromium-driver"
    return None


def _chromium() -> str | None:
    """Debian's chromium (or another Chrome on PATH)."""
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium at 1400x1000, its console kept (every level) for the checks."""
    missing = _missing()
    if missing is not None:
        if os.environ.get("RNNPERF_BROWSER_REQUIRED"):
            pytest.fail(f"the browser test must run here (RNNPERF_BROWSER_REQUIRED): {missing}")
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(_chromium())
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Explicit paths: selenium's own manager would otherwise look for (and try to download) a driver.
    driver = webdriver.Chrome(options=options, service=Service(executable_path=shutil.which("chromedriver")))
    try:
        yield driver
    finally:
        driver.quit()


def _open(browser: Any, path: Path, fragment: str = "") -> None:
    """Open a page from disk and wait until its first chart is drawn."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(path.as_uri() + fragment)
    WebDriverWait(browser, WAIT_S).until(lambda d: d.execute_script(
        "return document.readyState === 'complete' && document.querySelector('div.chart[data-drawn] .main-svg') !== null"))


def _errors(browser: Any) -> list[str]:
    """The console's errors since the last call (uncaught exceptions, console.error, failed loads)."""
    return [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def _count(browser: Any, box: str) -> str:
    """The "N of M" a table's filter bar shows."""
    return browser.execute_script(f"return document.querySelector('{box} .count').textContent")


def test_the_run_page_shows_the_table_a_case_panel_and_the_charts(browser: Any, pytester: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    helpers = _plugin_helpers()
    project = helpers.make_project(pytester, monkeypatch)  # the plugin tests' fake-GPU project
    helpers.run(project, "--rnnperf-update-baseline").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_CUDNN_DEV_MS", "0.75")
    helpers.run(project).assert_outcomes(failed=2)
    page = project.path / "rnnperf-report" / "index.html"

    started = time.monotonic()
    _open(browser, page)
    rows = browser.find_elements(By.CSS_SELECTOR, "#s0-cases tbody tr")
    assert [r.find_element(By.CSS_SELECTOR, "td:last-child").text for r in rows] == ["regressed", "regressed"]
    assert all(float(r.find_elements(By.TAG_NAME, "td")[1].text.split("/")[0]) > 0 for r in rows)
    # The speedup chart (after the deciding metric's): three traces (now, baseline, floor), a point per case in each.
    traces = browser.execute_script("var gd = document.querySelectorAll('div.chart[data-drawn]')[1]; "
                                    "return gd.data.map(function (t) { return [t.name, t.x.length]; });")
    assert traces == [["now (95% CI)", 2], ["baseline (95% CI)", 2], ["floor", 2]]
    assert len(browser.find_elements(By.CSS_SELECTOR, "div.chart[data-drawn] .scatterlayer .point")) >= 6

    # Filtering by text and by a facet, then sorting by the case column.
    search = browser.find_element(By.CSS_SELECTOR, ".filters input[type=search]")
    search.send_keys("gru")
    assert _count(browser, ".filters") == "1 of 2"
    assert not browser.find_element(By.ID, "s0-torch-lstm-train-fp32-T4-B2-I3-H5-L1").is_displayed()
    search.clear()
    search.send_keys(" ")  # an input event with an empty filter
    browser.execute_script("var s = document.querySelector('.filters select[data-facet=cell]'); s.value = 'lstm'; "
                           "s.dispatchEvent(new Event('input', {bubbles: true}));")
    assert _count(browser, ".filters") == "1 of 2"
    browser.execute_script("var s = document.querySelector('.filters select[data-facet=cell]'); s.value = ''; "
                           "s.dispatchEvent(new Event('input', {bubbles: true}));")
    header = browser.find_element(By.CSS_SELECTOR, "#s0-cases thead th")
    header.click()
    first = lambda: browser.find_element(By.CSS_SELECTOR, "#s0-cases tbody tr td").text  # noqa: E731
    assert header.get_attribute("aria-sort") == "ascending" and first().startswith("torch-gru")
    header.click()
    assert header.get_attribute("aria-sort") == "descending" and first().startswith("torch-lstm")

    # A case's panel opens from its link, and its chart of rounds is drawn then.
    browser.find_element(By.LINK_TEXT, "torch-lstm-train-fp32-T4-B2-I3-H5-L1").click()
    panel = browser.find_element(By.ID, "s0-torch-lstm-train-fp32-T4-B2-I3-H5-L1")
    WebDriverWait(browser, WAIT_S).until(lambda d: panel.find_elements(By.CSS_SELECTOR, "div.chart[data-drawn] .main-svg"))
    assert panel.get_attribute("open") is not None
    boxes = browser.execute_script("var gd = arguments[0].querySelector('div.chart[data-drawn]'); return gd.data.filter("
                                   "function (t) { return t.type === 'box'; }).map(function (t) { return t.name + ' ' "
                                   "+ t.x[0] + ' ' + t.y.length; });", panel)
    assert "now cudnn device 8" in boxes and "baseline cudnn device 8" in boxes and "now generic wall 8" in boxes
    text = panel.text
    for seen in ("Path evidence", "fake cudnn kernels", "Parity", "Against the baseline", "Kernels: cudnn baseline",
                 "RNN_blockPersist_fp_LSTM 0.500 -> 0.750 ms/step (+50%)", "Telemetry (NVML)", "none (same fingerprint)"):
        assert seen in text, seen
    browser.save_screenshot(str(tmp_path / "run-page.png"))
    assert _errors(browser) == []
    print(f"run page checked in {time.monotonic() - started:.1f} s; screenshot: {tmp_path / 'run-page.png'}")


def _replay(folder: Path) -> Path:
    """The page of the slowed H100 run judged against its baseline, both copied into ``folder`` first."""
    spec = importlib.util.spec_from_file_location("readme_screenshots", REPO / "scripts" / "readme_screenshots.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    folder.mkdir()
    run, baseline = (Path(shutil.copy(p, folder / p.name)) for p in (SLOWED, SLOWED_BASELINE))
    return script.replayed_page(folder / "report", baseline, run)


def test_at_1280_px_the_run_page_opens_with_what_regressed_by_how_much_and_which_kernel(browser: Any,
                                                                                        tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    page = _replay(tmp_path / "runs")
    browser.set_window_size(1280, 1000)
    try:
        _open(browser, page)
        width, scroll, wide = browser.execute_script(OVERFLOW)
        assert width >= 1260 and scroll <= width and wide == [], wide
        # The regressions table, its header and first rows, within the first 1000 px: case, change, kernel.
        table = browser.find_element(By.CSS_SELECTOR, "#s0-regressions")
        header = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
        assert header[:3] == ["case", "metric", "change [95% CI]"] and "kernel that moved" in header
        first = table.find_element(By.CSS_SELECTOR, "tbody tr")
        cells = dict(zip(header, (td.text for td in first.find_elements(By.TAG_NAME, "td"))))
        assert first.rect["y"] + first.rect["height"] < 1000, first.rect
        assert cells["case"].startswith("torch-") and cells["metric"] == "cudnn device time"
        assert cells["change [95% CI]"].startswith("+") and "%" in cells["change [95% CI]"]
        assert "spin_kernel" in cells["kernel that moved"] and cells["verdict"] == "regressed"
        status = browser.find_element(By.ID, "s0-status").text
        assert status.startswith("regressions found: ") and "failed" in status
        # The first chart is the deciding metric: each case's change over its threshold band.
        traces = browser.execute_script("return document.querySelector('div.chart[data-drawn]').data.map("
                                        "function (t) { return t.name; });")
        assert traces == ["threshold band", "change now (95% CI)"]
        browser.save_screenshot(str(tmp_path / "run-page-top.png"))
        assert _errors(browser) == []
    finally:
        browser.set_window_size(1400, 1000)


def test_the_history_site_shows_each_series_with_its_change_points(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # As a user runs it, in a process of its own (plotly and Pillow stay out of this one, whose later tests
    # import matplotlib inside pytester's sys.modules snapshots).
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pytest_rnnperf", "history", str(HISTORY), "--html", str(site)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    started = time.monotonic()
    _open(browser, site / "NVIDIA_H100_80GB_HBM3.html")
    # The chart of all cases: one trace per case with a device series, each with a point per run it ran in.
    overview = browser.execute_script("var gd = document.querySelector('div.chart[data-drawn]'); "
                                      "return gd.data.map(function (t) { return t.y.length; });")
    rows = browser.find_elements(By.CSS_SELECTOR, "#h-cases tbody tr")
    assert len(overview) >= 50 and len(rows) >= len(overview) and min(overview) >= 1 and max(overview) >= 6
    assert _count(browser, ".filters") == f"{len(rows)} of {len(rows)}"
    browser.find_element(By.CSS_SELECTOR, ".filters input[type=checkbox]").click()
    changed = int(_count(browser, ".filters").split()[0])
    assert 1 <= changed < len(rows)

    # The first case listed (one that moved toward slower) opens with its three series and its change point marked.
    link = browser.find_element(By.CSS_SELECTOR, "#h-cases tbody tr:not([hidden]) a")
    case = link.text
    link.click()
    panel = browser.find_element(By.ID, link.get_attribute("href").split("#", 1)[1])
    WebDriverWait(browser, WAIT_S).until(lambda d: panel.find_elements(By.CSS_SELECTOR, "div.chart[data-drawn] .main-svg"))
    series = browser.execute_script("var gd = arguments[0].querySelector('div.chart[data-drawn]'); return [gd.data.map("
                                    "function (t) { return t.name + ' ' + t.y.length; }), gd.layout.shapes.length, "
                                    "gd.layout.annotations.map(function (a) { return a.text; })];", panel)
    names, shapes, notes = series
    assert [n.split()[0] for n in names] == ["device", "wall", "speedup"] and shapes >= 1
    assert any(n.startswith(("step", "drift")) for n in notes), notes
    # Hovering a point names the run, its versions and the kernels of its cuDNN side.
    hover = browser.execute_script("var gd = arguments[0].querySelector('div.chart[data-drawn]'); "
                                   "Plotly.Fx.hover(gd, [{curveNumber: 0, pointNumber: 0}]); "
                                   "var h = gd.querySelector('.hovertext'); return h ? h.textContent : '';", panel)
    assert "gpu.driver_version=" in hover and "kernels of the cuDNN side" in hover, hover
    browser.save_screenshot(str(tmp_path / "history-case.png"))

    # The changes page lists the change of that case under the run where it happened, with the environment diff.
    browser.find_element(By.PARTIAL_LINK_TEXT, "changes").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: d.title.endswith("changes"))
    runs = browser.find_elements(By.CSS_SELECTOR, "h2")
    assert runs and all(".json" in h.text for h in runs)
    assert case in browser.find_element(By.TAG_NAME, "body").text
    assert browser.find_elements(By.XPATH, "//h3[text()='Environment changes between them']")
    browser.save_screenshot(str(tmp_path / "history-changes.png"))
    browser.get((site / "index.html").as_uri())
    assert "NVIDIA_H100_80GB_HBM3" in browser.find_element(By.TAG_NAME, "table").text
    assert _errors(browser) == []
    print(f"history site checked in {time.monotonic() - started:.1f} s; screenshots in {tmp_path}")
