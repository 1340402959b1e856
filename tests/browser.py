"""Headless Chromium for the tests that open what a user opens (Playwright driving Debian's chromium).

`.ci/run` installs Debian's chromium and sets GROUPSCALE_REQUIRE_CHROMIUM=1, so there a missing browser fails the
test; elsewhere the test is skipped with the command that installs it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Without the networking flags Chromium keeps calling out (updates, sync), which a closed network refuses.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_chromium() -> None:
    """Skip (or fail under GROUPSCALE_REQUIRE_CHROMIUM=1) without a chromium binary or the playwright package."""
    missing = [] if Path(CHROMIUM).is_file() else ["chromium (apt-get install chromium)"]
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("playwright (pip install playwright)")
    if missing:
        why = "no " + " and no ".join(missing)
        if os.environ.get("GROUPSCALE_REQUIRE_CHROMIUM") == "1":
            pytest.fail(why)
        pytest.skip(why)


def page_text(url: str, wait_for: str, screenshot: Path, timeout_s: float = 60) -> str:
    """The visible text of ``url`` in headless Chromium once ``wait_for`` (text) shows, or after ``timeout_s``;
    a full-page screenshot is written to ``screenshot``."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url)
            try:
                page.get_by_text(wait_for, exact=False).first.wait_for(timeout=timeout_s * 1000)
            except PlaywrightTimeout:
                pass  # the caller's assertions say what is missing
            page.screenshot(path=str(screenshot), full_page=True)
            return page.inner_text("body")
        finally:
            browser.close()
