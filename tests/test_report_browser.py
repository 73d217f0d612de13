"""The HTML reports as a reader meets them: the test study end to end, then `snakemake --report` and the
study's report.html opened in a real headless browser (Chromium from Debian's packages). Screenshots go to
results/test-artifacts/ (ignored by git) for a person to look at."""
import shutil
import subprocess
from pathlib import Path

import pytest

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


def _screenshot(page: Path, name: str, size: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / name
    headless(f"--window-size={size}", f"--screenshot={shot}", page.as_uri())
    assert shot.is_file() and shot.stat().st_size > 10_000, f"no screenshot of {page}"
    return shot


@needs_browser
def test_the_study_report_page_shows_its_tables_verdicts_and_figures(study):
    page = study / "results" / "test" / "report.html"
    dom = headless("--dump-dom", page.as_uri()).stdout
    assert "<table" in dom and "Table 1" in dom and "The paper's claims" in dom and "Per cell" in dom
    assert dom.count("data:image/png;base64,") >= 2  # the figures travel inside the page
    assert 'class="verdict-' in dom
    _screenshot(page, "study-report.png", "1300,2400")


@needs_browser
def test_snakemake_report_groups_figures_by_question(study):
    """(With the captions drawn for the runs: test_pipeline.py's test of the same study.)"""
    page = study / "snakemake-report.html"
    dom = headless("--dump-dom", page.as_uri()).stdout  # after its scripts ran: what a reader sees
    assert "1. Tables and verdicts" in dom and "2. Does compressed gossip reach consensus?" in dom
    assert "3. How fast does each method learn" in dom  # numbered 1, 2, 3: no gaps
    _screenshot(page, "snakemake-report.png", "1400,1000")
