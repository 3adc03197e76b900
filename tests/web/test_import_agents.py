"""A `hylo serve --allow-import` started in a user's project directory: the start form offers `module:Class` agents
and the job runs the user's own agent, imported from that directory (the form on a server without the flag is tested
with the other refusals, in test_runs.py); a run's page shows that agent's code and, after the file is edited, which
file changed since the same configuration ran."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import HyloServe, snap
from playwright.sync_api import Page, expect

EVAL = "/api/eval/v2"

AGENT = '''
from hylo.core.chunk import ActionChunk


class TurnLeft:
    """Turns left at every step (BabyAI's action 0): it never reaches the goal, and never raises."""

    def act(self, obs):
        return ActionChunk([0])
'''


@pytest.fixture(scope="module")
def importing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HyloServe]:
    """`hylo serve --allow-import` started in a directory that holds `myagents.py`, as a user starts it."""
    project = tmp_path_factory.mktemp("project")
    (project / "myagents.py").write_text(AGENT)
    served = HyloServe(project / "runs", args=["--allow-import"], cwd=project)
    yield served
    served.close()


def test_the_form_takes_a_module_class_agent_and_the_job_imports_it_from_the_servers_directory(
    importing: HyloServe, page: Page, tmp_path: Path
) -> None:
    run_id = "ui-imported"
    page.goto(importing.url + "/#/runs")
    expect(page.get_by_test_id("start-benchmark")).to_have_value("babyai")
    expect(page.get_by_test_id("start-import-allowed")).to_be_visible()
    form = page.get_by_test_id("start-form")
    form.get_by_test_id("start-tasks").select_option(["GoToLocal"])
    form.get_by_test_id("start-agent").fill("myagents:TurnLeft")
    form.get_by_test_id("start-episodes").fill("2")
    form.get_by_test_id("start-max-steps").fill("5")
    form.get_by_test_id("start-run-id").fill(run_id)
    form.get_by_test_id("start-submit").click()
    expect(page.get_by_test_id("start-run-link")).to_have_text(run_id)
    expect(page.get_by_test_id(f"run-status-{run_id}")).to_have_text("complete", timeout=60_000)
    snap(page, tmp_path, "imported")

    detail = importing.api.get(f"{EVAL}/runs/{run_id}").json()
    assert detail["run"]["agent"] == "myagents:TurnLeft"
    assert detail["summary"]["status_counts"]["failure"] == 2  # it ran the user's agent: no episode is an error
    page.get_by_test_id(f"run-link-{run_id}").click()
    expect(page.get_by_test_id("run-agent")).to_have_text("myagents:TurnLeft")


def start_and_wait(served: HyloServe, run_id: str) -> dict[str, Any]:
    request = {"benchmark": "babyai", "agent": "myagents:TurnLeft", "tasks": ["GoToLocal"], "episodes": 1}
    started = served.api.post(f"{EVAL}/start", json={**request, "max_steps": 3, "run_id": run_id})
    assert started.status_code == 200, started.text
    deadline = time.monotonic() + 120
    while (status := served.api.get(f"{EVAL}/status/{started.json()['job_id']}").json())["state"] in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline, status
        time.sleep(0.2)
    assert status["state"] == "done", status["message"]
    detail: dict[str, Any] = served.api.get(f"{EVAL}/runs/{run_id}").json()
    return detail


def test_the_run_page_shows_the_agents_code_and_which_files_changed_since_the_same_configuration_ran(
    importing: HyloServe, page: Page, tmp_path: Path
) -> None:
    agent_file = importing.log_dir.parent / "myagents.py"
    first = start_and_wait(importing, "code-before")
    agent_file.write_text(AGENT.replace("never raises.", "never raises (edited)."))
    second = start_and_wait(importing, "code-after")
    assert first["run"]["spec"]["config_digest"] == second["run"]["spec"]["config_digest"]
    assert first["code"]["digest"] != second["code"]["digest"]
    changes = second["code_changes"]
    assert changes["against"] == "code-before" and not changes["same_code"]
    assert [(c["name"], c["change"]) for c in changes["changes"]] == [("myagents.py", "changed")]
    sources = [p["path"] for p in second["code"]["agents"][0]["parts"] if p["kind"] == "source"]
    assert "myagents.py" in sources

    page.goto(importing.url + "/#/runs/code-after")
    panel = page.get_by_test_id("code-panel")
    expect(panel.get_by_test_id("code-digest")).to_have_text(second["code"]["digest"])
    expect(panel.get_by_test_id("code-source")).to_have_count(len(sources))
    expect(panel.get_by_test_id("code-source").first).to_contain_text("myagents.py")  # the agent's own module first
    expect(panel.get_by_test_id("code-source-summary")).to_have_text(f"myagents.py + {len(sources) - 1} imported")
    distributions = [p for p in second["code"]["agents"][0]["parts"] if p["kind"] == "distribution"]
    expect(panel.get_by_test_id("code-distribution")).to_have_count(len(distributions))
    expect(panel.get_by_test_id("code-files")).to_have_text("none")
    expect(panel.get_by_test_id("code-against")).to_have_text("code-before")
    expect(panel.get_by_test_id("code-verdict")).to_have_text("1 part of the code differs")
    change = panel.get_by_test_id("code-change")
    expect(change).to_have_count(1)
    expect(change).to_have_attribute("data-name", "myagents.py")
    expect(change).to_have_text("changed myagents.py")
    snap(page, tmp_path, "code")

    panel.get_by_test_id("code-against").click()
    expect(page.get_by_test_id("run-id")).to_have_text("code-before")
    expect(page.get_by_test_id("code-against")).to_have_text("code-after")  # no earlier one: the later one
