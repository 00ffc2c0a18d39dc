"""Redraw the README's two screenshots (docs/img/) from stored H100 runs, in headless Chromium.

    python scripts/readme_screenshots.py [OUT_DIR]

- run-page.png: the run's page of a stored run with an injected 5% cuDNN slowdown (evidence/..._spin-5pct-vs-0003),
  judged against 0003_baseline.json as the plugin judges a run against one baseline file. The run is replayed
  from its file (its records, environment and the verdicts compare_runs gives), not measured again.
- history.png: ``history baselines/NVIDIA_H100_80GB_HBM3/Linux-CPython-3.12-64bit --html``'s page of the H100: its
  stored runs only, never the evidence runs with injected slowdowns (those would be the history's change points);
  the case that moved most, its three series with their change points and band, a point hovered.

Needs plotly, selenium, Debian's chromium and chromium-driver, and Pillow (matplotlib's) to shrink the PNGs.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import fields, replace
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "baselines" / "NVIDIA_H100_80GB_HBM3"
STORED = GPU / "Linux-CPython-3.12-64bit"  # the nightly's runs; evidence/ holds the injected ones
BASELINE = STORED / "0003_baseline.json"
RUN = GPU / "evidence" / "2026-11-23_spin-5pct-vs-0003.json"
sys.path[:0] = [str(REPO), str(REPO / "tests" / "unit")]


def replayed_page(folder: Path, baseline: Path = BASELINE, run_file: Path = RUN) -> Path:
    """The run's page of ``run_file`` (RUN) judged against ``baseline`` (BASELINE), written into ``folder``."""
    from fake_nvml import FakeNVML

    from pytest_rnnperf.judge.verdicts import compare_runs
    from pytest_rnnperf.measure.gpu import read_gpu_info
    from pytest_rnnperf.report.files import write_reports
    from pytest_rnnperf.session.run import Run
    from pytest_rnnperf.session.session import RnnperfSession
    from pytest_rnnperf.store.measured import Measured
    from pytest_rnnperf.store.stored import Stored
    from pytest_rnnperf.store.runs import load_run

    old, new = load_run(baseline), load_run(run_file)
    # The stored run's GPU fields, for the page's header, fingerprint and environment diff.
    device = read_gpu_info(0, nvml=FakeNVML())
    device = replace(device, **{f.name: new.environment[f"gpu.{f.name}"] for f in fields(device)
                                if f"gpu.{f.name}" in new.environment})
    software = {k: v for k, v in new.environment.items() if not k.startswith("gpu.")}
    measured = Measured(results=list(new.records.values()), verdicts={v.case_id: v for v in compare_runs(old, new)})
    run = RnnperfSession(Run(gpu=device, software=software), measured, Stored((old,)))
    write_reports(run, str(folder))
    return folder / "index.html"


# On the history page: open the first case listed (the one that moved toward slower most), show it, hover a point.
OPEN_FIRST_CASE = """
var link = document.querySelector('#h-cases tbody tr a');
location.hash = link.getAttribute('href');
"""
HOVER = """
document.querySelector('details[open]').scrollIntoView();
var gd = document.querySelector('details[open] div.chart[data-drawn]');
Plotly.Fx.hover(gd, [{curveNumber: 1, pointNumber: gd.data[1].x.length - 2}], 'x2y2');
"""


def shoot(url: str, out: Path, width: int, height: int, *scripts: str) -> None:
    """A screenshot of ``url`` at ``width`` x ``height`` after running ``scripts``, shrunk to 900 px wide."""
    from PIL import Image
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={width},{height}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=shutil.which("chromedriver")))
    try:
        driver.get(url)
        time.sleep(2)  # plotly draws on load
        for script in scripts:
            driver.execute_script(script)
            time.sleep(1)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()
    image = Image.open(out).convert("RGB")
    image = image.resize((900, round(image.height * 900 / image.width)), Image.LANCZOS)
    image.quantize(colors=160).save(out, optimize=True)


def main() -> None:
    """Both screenshots into OUT_DIR (default docs/img)."""
    from pytest_rnnperf.cli.main import main as rnnperf

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        page = replayed_page(Path(tmp) / "report")
        shoot(page.as_uri(), out / "run-page.png", 1280, 1000)
        rnnperf(["history", str(STORED), "--html", str(Path(tmp) / "site")])
        shoot((Path(tmp) / "site" / f"{GPU.name}.html").as_uri(), out / "history.png", 1280, 900, OPEN_FIRST_CASE,
              HOVER)
    print(f"written: {out / 'run-page.png'}, {out / 'history.png'}")


if __name__ == "__main__":
    main()
