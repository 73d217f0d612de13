"""The HTML reports as a reader meets them: the test study end to end, then `snakemake --report`, the
study's report.html and its results browser (browser.html) opened in a real headless browser (Chromium from
Debian's packages). Screenshots go to results/test-artifacts/ (ignored by git) for a person to look at."""
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis_fixtures import page_data
from test_pipeline import ROOT

pytestmark = pytest.mark.slow
ARTIFACTS = ROOT / "results" / "test-artifacts"
BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chromium: `apt-get install chromium` to check the "
                                                            "HTML reports in a browser")


def headless(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=5000", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def study(interrupted_study):
    # the test study through the pipeline and `snakemake --report`, built once for this and test_pipeline's
    # interruption test (tests/shared_studies.py)
    return interrupted_study[0]


def _screenshot(page: Path, name: str, size: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / name
    headless(f"--window-size={size}", f"--screenshot={shot}", page.as_uri())
    assert shot.is_file() and shot.stat().st_size > 10_000, f"no screenshot of {page}"


@needs_browser
@pytest.mark.parametrize("page, shows, figures, shot, size", [  # figures: how many travel inside the page
    ("results/test/report.html", ["<table", "Table 1", "The paper's claims", "Per cell", 'class="verdict-'], 2,
     "study-report.png", "1300,2400"),
    # (with the captions drawn for the runs: test_pipeline.py's test of the same study); numbered 1, 2, 3: no gaps
    ("snakemake-report.html", ["1. Tables and verdicts", "2. Does compressed gossip reach consensus?",
                               "3. How fast does each method learn"], 0, "snakemake-report.png", "1400,1000"),
])
def test_the_reports_show_tables_verdicts_and_figures_by_question(study, page, shows, figures, shot, size):
    dom = headless("--dump-dom", (study / page).as_uri()).stdout  # after its scripts ran: what a reader sees
    assert [s for s in shows if s not in dom] == [] and dom.count("data:image/png;base64,") >= figures
    _screenshot(study / page, shot, size)


@needs_browser
def test_the_results_browser_draws_every_run_and_redraws_for_a_filter(study):
    """A link may carry a filter (#method=...): it ticks the filter's boxes as a reader would, then redraws."""
    page = study / "results" / "test" / "browser.html"
    shown = [len(items := page_data(page)["items"]), sum(i["method"] == "all-reduce" for i in items)]
    drawn = [headless("--dump-dom", page.as_uri() + tail).stdout.count('class="trace scatter') for tail in
             ("", "#method=all-reduce")]
    assert drawn == [3 * n for n in shown] and 0 < shown[1] < shown[0]  # three panels: three traces a run
    _screenshot(page, "results-browser.png", "1500,1400")
