"""Suite-level aggregates in a browser against a real `hylo serve`: a run of several tasks and seeds shows its mean
over tasks and IQM with their intervals, what they count and how they were had, as the API answers them; a run of
one task shows none; the compare page shows P(b > a) with its interval."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from browser import HyloServe, snap
from playwright.sync_api import Page, expect
from synthetic import write_run

EVAL = "/api/eval/v2"
TASKS = ["GoToLocal", "Open", "Pickup", "Unlock"]


def get(server: HyloServe, path: str, **params: Any) -> Any:
    response = server.api.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def pct(value: float) -> str:
    """A rate as the page writes it: a percentage with one decimal, halves rounded away from zero."""
    return f"{Decimal(value * 100).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)}%"


def fixed(value: float) -> str:
    return str(Decimal(value).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def test_the_run_page_shows_the_suite_figures_and_the_compare_page_p_improvement(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    a = write_run(server.log_dir, "suite-a", 40, TASKS, seed=1, seeds=[0, 1], success_p=[0.2, 0.3, 0.5, 0.4])
    b = write_run(server.log_dir, "suite-b", 40, TASKS, seed=2, seeds=[0, 1], success_p=[0.6, 0.5, 0.7, 0.8])
    write_run(server.log_dir, "suite-one", 10, ["GoToLocal"], seed=3)
    suite = get(server, f"{EVAL}/runs/{a.name}")["suite"]
    assert suite["mean"] is not None and suite["seeds"] == 2

    page.goto(server.url + f"/#/runs/{a.name}")
    panel = page.get_by_test_id("suite-panel")
    low, high = suite["mean_ci"]
    expect(panel.get_by_test_id("suite-mean")).to_have_text(f"{pct(suite['mean'])} [{pct(low)}, {pct(high)}]")
    low, high = suite["iqm_ci"]
    expect(panel.get_by_test_id("suite-iqm")).to_have_text(f"{pct(suite['iqm'])} [{pct(low)}, {pct(high)}]")
    expect(panel.get_by_test_id("suite-counted")).to_have_text(f"{suite['tasks']} tasks, 2 seeds")
    expect(panel.get_by_test_id("suite-method")).to_contain_text("(task, index) clusters")
    expect(panel.get_by_test_id("suite-method")).to_contain_text("2000 times")
    snap(page, tmp_path, "run-suite")

    page.goto(server.url + "/#/runs/suite-one")
    expect(page.get_by_test_id("run-id")).to_have_text("suite-one")
    expect(page.get_by_test_id("suite-panel")).to_have_count(0)

    improvement = get(server, f"{EVAL}/compare", a=a.name, b=b.name)["improvement"]
    page.goto(server.url + f"/#/compare?a={a.name}&b={b.name}")
    low, high = improvement["ci"]
    shown = f"{fixed(improvement['probability'])} [{fixed(low)}, {fixed(high)}] over {len(TASKS)} tasks"
    expect(page.get_by_test_id("improvement")).to_have_text(shown)
    label = page.get_by_test_id("improvement-label")
    expect(label).to_have_attribute("title", re.compile(r"over each seed's success rate.*stratified bootstrap"))
    snap(page, tmp_path, "compare-improvement")
