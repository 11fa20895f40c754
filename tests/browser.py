"""A real browser for the tests of the leaderboard pages: Debian's chromium, headless, through
selenium and chromium-driver (the `browser` fixture of conftest.py), and what the tests do with it.

The browser is installed by scripts/test.sh where it may install packages (root, or CI=true);
elsewhere, when it is missing, a browser test is skipped and says why; in CI it fails.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Where the screenshots are copied for a person to look at (printed by the tests).
SHOTS = Path(os.environ.get("NEOBENCH_SCREENSHOTS", Path(tempfile.gettempdir()) / "neobench-page"))


def browser_or_skip():
    """Debian's chromium and its driver, or a skip (a failure in CI) that says what is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium and driver:
        try:
            import selenium  # noqa: F401
        except ImportError:
            pass
        else:
            return chromium, driver
    message = (
        "the browser test needs Debian's chromium and chromium-driver (`apt-get install -y "
        "chromium chromium-driver`, done by scripts/test.sh as root or with CI=true) and "
        f"selenium (the test extra); found chromium={chromium}, chromedriver={driver}"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def start(downloads: Path):
    """Headless chromium at 1,400 x 1,000 with its console log kept, saving downloads there."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = browser_or_skip()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", "--hide-scrollbars"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads)})
    chrome = webdriver.Chrome(options=options, service=Service(driver))
    chrome.downloads = downloads
    return chrome


def width(chrome, pixels: int, height: int = 1000) -> None:
    """Lay the page out at ``pixels`` CSS pixels wide, as a phone (400) or a screen (1400)."""
    mobile = pixels < 600
    chrome.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": pixels, "height": height, "deviceScaleFactor": 1, "mobile": mobile})  # fmt: skip


def shoot(chrome, tmp_path: Path, name: str) -> Path:
    """A screenshot of the whole page (not only the window), in the test's folder and copied
    to SHOTS for a person to look at."""
    import base64

    tall = chrome.execute_script("return document.documentElement.scrollHeight")
    wide = chrome.execute_script("return window.innerWidth")
    width(chrome, wide, min(int(tall), 6000))
    shot = chrome.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
    path = tmp_path / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SHOTS / path.name)
    width(chrome, wide)
    return path


def errors(chrome) -> list[str]:
    return [e["message"] for e in chrome.get_log("browser") if e["level"] == "SEVERE"]


def rows(chrome) -> list[str]:
    from selenium.webdriver.common.by import By

    found = chrome.find_elements(By.CSS_SELECTOR, "#board tbody tr[data-label]")
    return [tr.get_attribute("data-label") for tr in found]
