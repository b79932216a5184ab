"""A real headless Chromium for the page tests (Debian's `chromium`, driven by
Playwright): `browser` (one per module) and `tab` (a phone-wide page that records its
requests and fails the test on a script error), and a free loopback port for a server.
Without the browser or Playwright the tests that use them skip; with `CI` set they fail.
"""

import os
import socket

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGUMENTS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync"]

@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module's tests."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = ("the playwright package" if sync_playwright is None else
               CHROMIUM if not os.access(CHROMIUM, os.X_OK) else None)
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs the page in a browser: {missing} is missing")
        pytest.skip(f"{missing} is missing")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGUMENTS)
        yield chromium
        chromium.close()


@pytest.fixture
def tab(browser):
    """A page at a phone's width that records every request it makes and every error
    its script throws."""
    page = browser.new_page(viewport={"width": 375, "height": 800})
    page.requests, page.errors = [], []
    page.on("request", lambda request: page.requests.append(request.url))
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    yield page
    assert page.errors == []
    page.close()


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
