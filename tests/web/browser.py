"""A headless Chromium driven by Selenium for the web-view tests, and a server thread to point it at.

Debian's `chromium` and `chromium-driver` (installed by .ci/browser.sh) are used as they are; nothing is downloaded.
Without them the browser tests skip and say why, except under CI, where they must run.
"""

from __future__ import annotations

import os
import shutil
import threading
from contextlib import contextmanager

import pytest

from avo.web.server import Site, make_server

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    if not any(shutil.which(b) for b in BROWSERS):
        return "no chromium on the PATH (apt-get install chromium chromium-driver, or run .ci/browser.sh)"
    if not shutil.which("chromedriver"):
        return "no chromedriver on the PATH (apt-get install chromium-driver, or run .ci/browser.sh)"
    return None


def start_driver():
    why = _missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests must run in CI: {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = next(shutil.which(b) for b in BROWSERS if shutil.which(b))
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))


@contextmanager
def serving(site: Site):
    """`site` on a free loopback port for the duration; yields its base address."""
    server = make_server(site, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
