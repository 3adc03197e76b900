"""A latency sweep's page in a browser against a real `hylo serve`: a sweep `hylo sweep` made for real (Meta-World's
chunked expert) listed on the runs overview, and its page showing the plot the API serves and the table of grid
points, each linking to its run, with the refused points and the rule they break."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from browser import HyloServe, snap
from playwright.sync_api import Page, expect

from hylo.eval.spec import EvalSpec
from hylo.experiments.sweep import run_sweep

EVAL = "/api/eval/v2"


def _p_value(p: float | None) -> str:
    """A p-value as the page writes it."""
    return "—" if p is None else f"{p:.4f}" if p >= 0.001 else f"{p:.2e}"


@pytest.fixture(scope="module")
def recorded(server: HyloServe) -> dict[str, Any]:
    """A sweep recorded into the server's log dir, as the API serves it."""
    base = EvalSpec(benchmark="metaworld", tasks=["reach-v3"], agent="expert", agent_args={"chunk_size": 8},
                    episodes=2, log_dir=str(server.log_dir))  # fmt: skip
    result = run_sweep(base, [0, 2, 4], [2, 4])
    response = server.api.get(f"{EVAL}/sweeps/{result.sweep_id}")
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()
    return record


def test_the_runs_overview_lists_the_sweep_and_links_to_its_page(
    page: Page, server: HyloServe, recorded: dict[str, Any]
) -> None:
    sweep_id = recorded["sweep_id"]
    page.goto(f"{server.url}/#/runs")
    row = page.get_by_test_id(f"sweep-row-{sweep_id}")
    expect(row).to_contain_text(recorded["agent"])
    expect(row).to_contain_text("0, 2, 4")
    page.get_by_test_id(f"sweep-link-{sweep_id}").click()
    expect(page).to_have_url(f"{server.url}/#/sweeps/{sweep_id}")
    expect(page.get_by_test_id("sweep-points")).to_be_visible()


def test_the_page_shows_the_plot_and_every_point_linking_to_its_run(
    page: Page, server: HyloServe, recorded: dict[str, Any], tmp_path: Path
) -> None:
    page.goto(f"{server.url}/#/sweeps/{recorded['sweep_id']}")
    plot = page.get_by_test_id("sweep-plot")
    token = quote(server.token or "", safe="")  # an <img> sends no header: the token rides in its URL
    expect(plot).to_have_attribute("src", f"{EVAL}/sweeps/{recorded['sweep_id']}/plot.svg?access_token={token}")
    page.wait_for_function("() => document.querySelector('[data-testid=sweep-plot]').naturalWidth > 0")

    points = recorded["points"]
    rows = page.get_by_test_id("sweep-points").locator("tbody tr")
    expect(rows).to_have_count(len(points))
    for point in points:
        row = page.get_by_test_id(f"sweep-point-{point['latency_steps']}-{point['execution_steps']}")
        expect(row.get_by_test_id("sweep-rate")).to_have_text(f"{100 * point['success_rate']:.1f}%")
        expect(row.get_by_test_id("sweep-p")).to_have_text(_p_value(point["mcnemar_p"]))
        link = row.get_by_test_id("sweep-run")
        expect(link).to_have_text(point["run_id"])
        expect(link).to_have_attribute("href", f"#/runs/{point['run_id']}")
    expect(page.get_by_test_id("sweep-refused")).to_contain_text("refused d = 4, s = 2")
    expect(page.get_by_test_id("sweep-refused")).to_contain_text("H - d")
    snap(page, tmp_path, "sweep")

    target = points[-1]["run_id"]
    page.get_by_test_id("sweep-point-4-4").get_by_test_id("sweep-run").click()
    expect(page).to_have_url(f"{server.url}/#/runs/{target}")


def test_an_unknown_sweep_says_so(page: Page, server: HyloServe) -> None:
    page.goto(f"{server.url}/#/sweeps/sweep-000000000000")
    expect(page.get_by_test_id("sweep-error")).to_contain_text("no sweep 'sweep-000000000000'")
