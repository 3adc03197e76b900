"""Signing in as a user does, against a `hylo serve` started as a user starts it: it makes a token and prints the URL
that carries it; the page opened there keeps the token, takes it out of the address bar and the history, and works on
through a reload and in every place; the token never reaches the server's log; a page without it asks for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import HyloServe, snap
from playwright.sync_api import Browser, Page, expect
from synthetic import write_run

RUN = "signed-in-run"


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[HyloServe]:
    """A server no page has signed in to, with one run."""
    served = HyloServe(tmp_path / "runs")
    write_run(served.log_dir, RUN, 20, ["GoToLocal"], seed=1)
    yield served
    served.close()


@pytest.fixture
def new_page(browser: Browser) -> Iterator[Page]:
    """A page in a context of its own: nothing in its storage."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(20_000)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, f"the page raised: {errors}"


def test_the_printed_url_signs_in_and_the_token_leaves_the_address_bar(
    fresh: HyloServe, new_page: Page, tmp_path: Path
) -> None:
    page = new_page
    assert fresh.made_token and fresh.token is not None and fresh.open_url.endswith(f"/#token={fresh.token}")
    refused: list[str] = []
    page.on("response", lambda r: refused.append(f"{r.status} {r.url}") if r.status == 401 else None)

    page.goto(fresh.open_url)
    expect(page).to_have_url(fresh.url + "/")  # out of the address bar, and so out of what is bookmarked or shared
    expect(page.locator('[data-testid^="palette-item-"]').first).to_be_visible()  # the catalog came with the token
    expect(page.locator("form.token-prompt")).to_have_count(0)
    assert page.evaluate("localStorage.getItem('hylo:token')") == fresh.token

    page.reload()  # the token is kept, not in the address
    expect(page.locator('[data-testid^="palette-item-"]').first).to_be_visible()
    page.get_by_test_id("nav-runs").click()
    expect(page.get_by_test_id(f"run-row-{RUN}")).to_be_visible()
    page.get_by_test_id(f"run-link-{RUN}").click()
    expect(page.get_by_test_id("run-id")).to_have_text(RUN)
    snap(page, tmp_path, "signed-in-run")

    page.go_back()
    page.go_back()
    expect(page).to_have_url(fresh.url + "/")  # the history holds no token either
    assert "token" not in page.evaluate("location.href")
    assert refused == [] and page.locator("form.token-prompt").count() == 0
    assert fresh.log_path.read_text().count(fresh.token) == 1  # the URL printed at start; no request line holds it


def test_a_page_without_the_token_asks_for_it(fresh: HyloServe, new_page: Page) -> None:
    new_page.goto(fresh.url + "/#/runs")
    prompt = new_page.locator("form.token-prompt")
    expect(prompt).to_be_visible()
    expect(prompt).to_contain_text("open the URL hylo serve printed")
    expect(new_page.get_by_test_id(f"run-row-{RUN}")).to_have_count(0)
