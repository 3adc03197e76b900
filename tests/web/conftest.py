"""Fixtures for the browser tests: one `hylo serve` and one Chromium per test module (its own log dir, the
token it makes), and a fresh page per test, signed in to the running servers as a user is (by opening the URL
each printed), whose screenshot is saved as `screenshot.png` in the test's temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import CHROMIUM_ARGS, HyloServe, chromium_path
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright

WAIT_MS = 20_000
"""How long an action or an expectation waits: a server's first answers (the catalog's imports) take seconds on a
loaded machine."""

expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HyloServe]:
    served = HyloServe(tmp_path_factory.mktemp("serve") / "runs")
    yield served
    served.close()


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    """Per module, not per session: Playwright's sync API runs an event loop in this process while it is started, and
    a test of another module run after it in the same process (the files run in parallel processes) must find none."""
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    launched = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
    yield launched
    launched.close()


@pytest.fixture
def page(browser: Browser, tmp_path: Path) -> Iterator[Page]:
    """A page in a new context, 1400x900, that has opened the URL each running server printed (their tokens are in its
    storage, none in its address bar) and then `about:blank`. Its last view is saved to `screenshot.png` in the
    test's temporary directory, pass or fail; `browser.snap(page, tmp_path, name)` saves more along the way."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    signed_in = [server for server in HyloServe.running if server.made_token]
    for server in signed_in:
        server.sign_in(opened)
    if signed_in:
        opened.goto("about:blank")  # each test's first `goto` loads its page afresh
    yield opened
    opened.screenshot(path=str(tmp_path / "screenshot.png"), full_page=True)
    context.close()
    assert not errors, f"the page raised: {errors}"
