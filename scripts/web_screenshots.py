"""Screenshots of the web view for the README: the run page and the best candidate's page of the shipped attention
example, taken in headless Chromium (needs chromium, chromium-driver and selenium; see .ci/browser.sh).

    python scripts/web_screenshots.py [OUT_DIR]        # default: docs/
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "web")]

from browser import serving, start_driver  # noqa: E402
from web_runs import ATTENTION, EXAMPLES  # noqa: E402

from avo.cli import main  # noqa: E402
from avo.run.directory import Run  # noqa: E402
from avo.web.server import Site  # noqa: E402


def shoot(driver, url: str, out: Path, width: int = 1280, max_height: int = 2400) -> None:
    driver.set_window_size(width, 900)
    driver.get(url)
    time.sleep(0.5)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(height + 20, max_height))
    time.sleep(0.3)
    driver.save_screenshot(str(out))
    print(out)


def run(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        assert main(["import", str(EXAMPLES / "attention-from-naive-h200.avo.tar"), "--runs-dir", str(runs)]) == 0
        opened = Run.open(ATTENTION, runs)
        best = opened.lineage.best
        opened.close()
        driver = start_driver()
        try:
            with serving(Site(runs)) as base:
                shoot(driver, f"{base}/run/{ATTENTION}/", out_dir / "web-run.png")
                shoot(driver, f"{base}/run/{ATTENTION}/{best}", out_dir / "web-candidate.png")
        finally:
            driver.quit()


if __name__ == "__main__":
    run(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs")
