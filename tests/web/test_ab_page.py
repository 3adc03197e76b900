"""An A/B comparison's page in a browser against a real `hylo serve`: a record `hylo ab` made for real (BabyAI's
expert against a random agent) listed on the runs overview, and its page showing the API's decision, pairs, flips and
the path of the statistic against the decision boundary; a capped one with a futility δ showing its design, δ,
outcome and B's lead against both boundaries, and one stopped for futility."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from browser import HyloServe, snap
from playwright.sync_api import Locator, Page, expect

from hylo.eval.spec import EvalSpec
from hylo.evallog.logdir import AB_DIR
from hylo.experiments.ab import run_ab
from hylo.stats.sequential import PairedSequentialTest

EVAL = "/api/eval/v2"


@pytest.fixture(scope="module")
def recorded(server: HyloServe) -> dict[str, Any]:
    """An A/B record made into the server's log dir, as the API serves it."""
    sides = [
        EvalSpec(benchmark="babyai", agent=agent, tasks=["GoToLocal"], max_steps=30, log_dir=str(server.log_dir))
        for agent in ("expert", "random")
    ]
    result = run_ab(*sides, max_pairs=40)
    response = server.api.get(f"{EVAL}/ab/{result.ab_id}")
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()
    return record


def test_the_runs_overview_lists_the_comparison_and_links_to_its_page(
    page: Page, server: HyloServe, recorded: dict[str, Any]
) -> None:
    ab_id = recorded["ab_id"]
    page.goto(f"{server.url}/#/runs")
    row = page.get_by_test_id(f"ab-row-{ab_id}")
    expect(row).to_contain_text(recorded["agent_a"])
    expect(row).to_contain_text(recorded["decision"])
    expect(row).to_contain_text(f"{recorded['pairs_used']} of {recorded['max_pairs']}")
    page.get_by_test_id(f"ab-link-{ab_id}").click()
    expect(page).to_have_url(f"{server.url}/#/ab/{ab_id}")
    expect(page.get_by_test_id("ab-decision")).to_have_text(recorded["decision"])


def test_the_page_shows_the_decision_the_flips_and_the_path_the_api_recorded(
    page: Page, server: HyloServe, recorded: dict[str, Any], tmp_path: Path
) -> None:
    assert recorded["decision"] == "A better" and recorded["pairs_used"] < recorded["max_pairs"]
    page.goto(f"{server.url}/#/ab/{recorded['ab_id']}")
    expect(page.get_by_test_id("ab-decision")).to_have_text(recorded["decision"])
    expect(page.get_by_test_id("ab-pairs")).to_have_text(f"{recorded['pairs_used']} of {recorded['max_pairs']}")
    flips = recorded["flips"]
    for name, key in (("ab-both", "both"), ("ab-a-wins", "a_wins"), ("ab-b-wins", "b_wins"), ("ab-neither", "neither")):
        expect(page.get_by_test_id(name)).to_have_text(str(flips[key]))
    expect(page.get_by_test_id("ab-abstentions")).to_have_text(str(recorded["abstentions"]))
    # A better: B − A is ruled out at 0 and above, and the page says the interval is the test's own
    low, high = recorded["confidence_sequence"]
    assert recorded["confidence_sequence_kind"] == "test" and low < high < 0
    expect(page.get_by_test_id("ab-confidence")).not_to_contain_text(re.compile(r"[+-]0\.0 pp"))  # never reads as 0
    expect(page.get_by_test_id("ab-confidence-note")).to_have_text(
        f"every B − A the test itself has not ruled out at alpha {recorded['alpha']}; it leaves out 0 exactly "
        "because the test decided"
    )
    for side in ("a", "b"):
        link = page.get_by_test_id(f"ab-run-{side}")
        expect(link).to_have_text(recorded[f"run_{side}"])
        expect(link).to_have_attribute("href", f"#/runs/{recorded[f'run_{side}']}")

    chart = page.get_by_test_id("path-chart")
    expect(chart.get_by_test_id("path-point")).to_have_count(len(recorded["path"]))
    boundary = chart.get_by_test_id("path-boundary")
    expect(boundary).to_have_attribute("data-threshold", str(recorded["threshold"]))
    decided = chart.get_by_test_id("deciding-point")
    expect(decided).to_have_attribute("data-pair", str(len(recorded["path"])))
    # a point is drawn on or above the boundary line (SVG y grows downwards) exactly when log E reached the threshold
    boundary_y = float(boundary.locator("line").get_attribute("y1") or "nan")
    ys = chart.get_by_test_id("path-point").evaluate_all("points => points.map(p => Number(p.getAttribute('cy')))")
    reached = [log_e >= recorded["threshold"] for log_e in recorded["path"]]
    assert [y <= boundary_y for y in ys] == reached and reached[-1]
    snap(page, tmp_path, "ab")

    page.get_by_test_id("ab-run-a").click()
    expect(page).to_have_url(f"{server.url}/#/runs/{recorded['run_a']}")


def test_an_unknown_comparison_says_so(page: Page, server: HyloServe) -> None:
    page.goto(f"{server.url}/#/ab/ab-000000000000")
    expect(page.get_by_test_id("ab-error")).to_contain_text("no A/B comparison 'ab-000000000000'")


@pytest.fixture(scope="module")
def capped(server: HyloServe) -> dict[str, Any]:
    """A capped A/B record with a futility δ made into the server's log dir by `hylo ab`'s own code, as served."""
    sides = [
        EvalSpec(benchmark="babyai", agent=agent, tasks=["GoToLocal"], max_steps=30, log_dir=str(server.log_dir))
        for agent in ("expert", "random")
    ]
    result = run_ab(*sides, max_pairs=40, design="capped", min_effect=0.3)
    record: dict[str, Any] = server.api.get(f"{EVAL}/ab/{result.ab_id}").json()
    return record


@pytest.fixture(scope="module")
def futile(server: HyloServe, capped: dict[str, Any]) -> dict[str, Any]:
    """A record that stopped for futility: the capped record's shape, its test fed the pairs of two equal agents (A
    and B each win one pair in four) until "no difference ≥ 0.3"."""
    test = PairedSequentialTest(design="capped", max_pairs=200, min_effect=0.3)
    for i in range(200):
        test.add(i % 4 == 1, i % 4 == 3)  # only A wins pair 1 of 4, only B pair 3, neither the others
        if test.stopped:
            break
    ab_id = "ab-" + "f" * 12
    record = {**capped, **test.to_json(), **test.design_json(), "ab_id": ab_id, "max_pairs": 200}
    (server.log_dir / AB_DIR / f"{ab_id}.json").write_text(json.dumps(record))
    served: dict[str, Any] = server.api.get(f"{EVAL}/ab/{ab_id}").json()
    return served


def drawn_boundary(chart: Locator, name: str) -> list[float | None]:
    values: list[float | None] = json.loads(chart.get_by_test_id(name).get_attribute("data-values") or "null")
    return values


def test_the_page_shows_the_design_its_delta_the_outcome_and_both_boundaries(
    page: Page, server: HyloServe, capped: dict[str, Any], futile: dict[str, Any], tmp_path: Path
) -> None:
    page.goto(f"{server.url}/#/ab/{capped['ab_id']}")
    expect(page.get_by_test_id("ab-design")).to_contain_text("capped")
    expect(page.get_by_test_id("ab-design-note")).to_contain_text(
        "capped at 40 pairs, futility at δ = 0.3; valid up to the cap only: this capped record cannot be extended"
    )
    expect(page.get_by_test_id("ab-min-effect")).to_have_text("0.3")
    expect(page.get_by_test_id("ab-decision")).to_have_text("A better")
    expect(page.get_by_test_id("ab-stopped-for")).to_have_text("the test decided")
    chart = page.get_by_test_id("lead-chart")
    expect(chart.get_by_test_id("lead-point")).to_have_count(len(capped["lead_path"]))
    assert drawn_boundary(chart, "efficacy-boundary") == capped["efficacy_boundary"]
    expect(page.get_by_test_id("path-chart")).to_have_count(0)  # the log E chart is the anytime design's

    assert futile["decision"] == "no difference ≥ 0.3" and futile["stopped_for"] == "futility"
    page.goto(f"{server.url}/#/ab/{futile['ab_id']}")
    expect(page.get_by_test_id("ab-decision")).to_have_text("no difference ≥ 0.3")
    expect(page.get_by_test_id("ab-stopped-for")).to_contain_text("a difference of 0.3 or more became unlikely")
    chart = page.get_by_test_id("lead-chart")
    futility = drawn_boundary(chart, "futility-boundary")
    assert futility == futile["futility_boundary"] and futility[-1] is not None
    assert drawn_boundary(chart, "efficacy-boundary") == futile["efficacy_boundary"]
    for name in ("efficacy-boundary", "futility-boundary"):  # each drawn above and below 0
        assert chart.get_by_test_id(name).locator("polyline").count() >= 2
    snap(page, tmp_path, "ab-futility")
