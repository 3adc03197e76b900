"""The page `hylo serve` serves at `/`: it loads without Node on the machine, from the bundle in the package."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import HyloServe
from playwright.sync_api import Page, expect


@pytest.fixture
def browser_server_with_token(tmp_path: Path) -> Iterator[HyloServe]:
    served = HyloServe(tmp_path / "runs", token="w3b-t0ken-for-a-test")
    yield served
    served.close()


def test_root_serves_the_bundled_ui(server: HyloServe, page: Page, tmp_path: Path) -> None:
    response = page.goto(server.url + "/")
    assert response is not None and response.status == 200
    for place in ("canvas", "live", "runs"):
        page.get_by_test_id(f"nav-{place}").click()
        expect(page.get_by_test_id(f"nav-{place}")).to_have_class("active")
    assert server.api.get("/").headers["cache-control"] == "no-cache"


def test_a_server_with_a_token_asks_for_it_once_and_then_every_place_loads(
    page: Page, tmp_path: Path, browser_server_with_token: HyloServe
) -> None:
    server = browser_server_with_token
    page.goto(server.url + "/")
    prompt = page.locator("form.token-prompt")
    expect(prompt).to_be_visible()  # the API answered 401: the page asks for the token
    expect(page.locator('[data-testid^="palette-item-"]')).to_have_count(0)

    prompt.locator("input").fill("w3b-t0ken-for-a-test")
    prompt.get_by_role("button", name="Use token").click()
    expect(page.locator('[data-testid^="palette-item-"]').first).to_be_visible()
    expect(prompt).to_have_count(0)
    assert page.evaluate("localStorage.getItem('hylo:token')") == "w3b-t0ken-for-a-test"

    page.get_by_test_id("nav-runs").click()
    expect(page.get_by_test_id("start-form")).to_be_visible()
    expect(prompt).to_have_count(0)  # every call of the page carries the token
