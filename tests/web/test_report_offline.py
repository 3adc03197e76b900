"""A report opened from disk in Chromium with the network cut off: nothing is fetched beyond the file itself, its
tables (the suite figures and the probability of improvement too) show, its episode filter works and an embedded clip
loads."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, Request, Route, expect

from hylo.cli import main


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Meta-World expert against random on two tasks, 2 episodes each, every one recorded: a paired report."""
    root = tmp_path_factory.mktemp("report")
    runs = root / "runs"
    for agent in ("expert", "random"):
        args = [
            "eval",
            "metaworld",
            "--task",
            "reach-v3",
            "push-v3",
            "--episodes",
            "2",
            "--video",
            "2",
            "--max-steps",
            "30",
        ]
        assert main([*args, "--agent", agent, "--run-id", agent, "--log-dir", str(runs)]) == 0
    out = root / "report.html"
    assert main(["report", "expert", "random", "--log-dir", str(runs), "-o", str(out)]) == 0
    return out


def _offline(page: Page) -> list[str]:
    """Cut the page off from everything but files; the URLs it asked for, whatever their scheme."""
    asked: list[str] = []

    def gate(route: Route, request: Request) -> None:
        asked.append(request.url)
        if request.url.startswith(("file:", "data:")):
            route.continue_()
        else:
            route.abort()

    page.context.route("**/*", gate)
    page.on("request", lambda request: asked.append(request.url))
    page.context.set_offline(True)
    return asked


def test_the_report_reads_offline_and_its_filter_and_clips_work(page: Page, report: Path):
    asked = _offline(page)
    page.goto(report.as_uri())
    expect(page.locator("#paired")).to_be_visible()
    expect(page.locator("#tasks-0 tbody tr")).to_have_count(3)  # two tasks and the overall row
    expect(page.locator("#suite-1 tbody tr")).to_have_count(2)  # the mean over tasks and the IQM
    expect(page.locator("#improvement tbody tr")).to_have_count(3)  # two tasks and their mean
    shown = page.locator('.filters[data-table="episodes-1"] .shown')
    visible = page.locator("#episodes-1 tbody tr:visible")
    expect(shown).to_have_text("4 of 4 episodes shown")

    page.locator('.filters[data-table="episodes-1"] select[name="task"]').select_option("push-v3")
    expect(visible).to_have_count(2)
    expect(page.locator('#episodes-1 tbody tr:visible[data-task="push-v3"]')).to_have_count(2)
    expect(shown).to_have_text("2 of 4 episodes shown")
    page.locator('.filters[data-table="episodes-1"] select[name="status"]').select_option("failure")
    failures = page.locator('#episodes-1 tbody tr[data-task="push-v3"][data-status="failure"]').count()
    expect(visible).to_have_count(failures)
    page.locator('.filters[data-table="episodes-1"] select[name="task"]').select_option("")
    page.locator('.filters[data-table="episodes-1"] select[name="status"]').select_option("")
    expect(visible).to_have_count(4)

    video = page.locator("figure video").first
    video.scroll_into_view_if_needed()
    page.wait_for_function("document.querySelector('figure video').readyState >= 1")
    assert video.evaluate("v => v.videoWidth") > 0
    assert [url for url in asked if not url.startswith(("file:", "data:"))] == []
