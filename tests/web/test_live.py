"""The Live place in a browser against a real `hylo serve`: the env panel places an episode and drives its session
(Play / Pause / Step, a refused change shown as the server words it), and the live view follows the run (frame,
instruction, step counter, outcome, timeline, trace events, state containers)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import HyloServe, snap
from playwright.sync_api import Page, Request, Route, expect

BABYAI = ("env_babyai", "babyai/default")
METAWORLD = ("env_metaworld", "metaworld/mt10")
"""Panels and the start of their episode ids. BabyAI's expert finishes an episode in a few dozen steps; Meta-World
runs about 50 steps a second for up to 500, long enough for the `hold` agent's execution to be acted on."""


@pytest.fixture(autouse=True)
def no_sessions(server: HyloServe) -> Iterator[None]:
    """Each test starts and ends with no session on the server (the panels keep their placement)."""
    close_all(server)
    yield
    close_all(server)


def close_all(server: HyloServe) -> None:
    for session in server.api.get("/api/sessions").json()["sessions"]:
        server.api.delete(f"/api/sessions/{session['id']}")
    deadline = time.monotonic() + 30
    while server.api.get("/api/sessions").json()["sessions"]:
        assert time.monotonic() < deadline, "the sessions did not close"
        time.sleep(0.05)


def open_panel(server: HyloServe, page: Page, panel: tuple[str, str], task: str, episode: int) -> None:
    """Open the Live place, choose `panel` and place `task` / `episode` with its fields."""
    page.goto(server.url + "/#/live")
    choose_panel(page, panel, task, episode)


def choose_panel(page: Page, panel: tuple[str, str], task: str, episode: int) -> None:
    name, prefix = panel
    page.get_by_test_id("panel-select").select_option(name)
    page.get_by_test_id("field-task").select_option(label=task)
    expect(page.get_by_test_id("placed-episode")).to_contain_text(f"{prefix}/{task}/")
    set_number(page, "episode_index", episode)
    expect(page.get_by_test_id("placed-episode")).to_have_text(placed(panel, task, episode))


def placed(panel: tuple[str, str], task: str, episode: int) -> str:
    return f"{panel[1]}/{task}/{episode:04d}@s0"


def set_number(page: Page, field: str, value: int) -> None:
    box = page.get_by_test_id(f"field-{field}")
    box.fill(str(value))
    box.press("Enter")


def counter(page: Page) -> int:
    return int(page.get_by_test_id("step-counter").inner_text())


def wait_counter_past(page: Page, step: int) -> None:
    """Wait (the page's own default timeout) until the step counter shows more than `step`."""
    page.wait_for_function(
        "step => Number(document.querySelector('[data-testid=step-counter]')?.textContent ?? NaN) > step", arg=step
    )


def only_session(server: HyloServe) -> dict[str, Any]:
    sessions: list[dict[str, Any]] = server.api.get("/api/sessions").json()["sessions"]
    assert len(sessions) == 1, sessions
    return sessions[0]


def start_holding(server: HyloServe, page: Page, episode: int) -> dict[str, Any]:
    """Place Meta-World's reach-v3/`episode`, choose the `hold` agent, press Play; wait until it runs."""
    open_panel(server, page, METAWORLD, "reach-v3", episode)
    page.get_by_test_id("agent-select").select_option("agent:hold")
    page.get_by_test_id("action-play").click()
    expect(page.get_by_test_id("session-status")).to_have_text("running")
    wait_counter_past(page, 5)
    session = only_session(server)
    assert session["agent"] == "hold" and session["state"] == "running"
    return session


def test_play_runs_the_placed_episode_with_the_expert_and_the_panel_is_remembered(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    open_panel(server, page, BABYAI, "GoToLocal", 4)
    expect(page.get_by_test_id("agent-select")).to_have_value("agent:expert")  # the benchmark's expert by default
    expect(page.get_by_test_id("action-pause")).to_be_disabled()

    page.get_by_test_id("action-step").click()  # a new session, one step, paused
    expect(page.get_by_test_id("session-status")).to_have_text("paused")
    expect(page.get_by_test_id("step-counter")).to_have_text("1")
    frame = page.get_by_test_id("live-frame")
    expect(frame).to_have_attribute("src", re.compile(r"/frame\?n=\d+"))
    first_src = frame.get_attribute("src")
    assert first_src is not None
    first_png = server.api.get(first_src).content
    trace = server.api.get(f"/api/sessions/{only_session(server)['id']}/events").json()["events"]
    mission = next(e["obs"]["instruction"] for e in trace if e["event"] == "observation")
    assert mission.startswith("go to ")
    expect(page.get_by_test_id("live-instruction")).to_have_text(mission)
    snap(page, tmp_path, "stepped")

    page.get_by_test_id("action-play").click()
    expect(page.get_by_test_id("outcome-status")).to_have_text("success")
    expect(page.get_by_test_id("outcome-reason")).to_have_text("success")
    expect(page.get_by_test_id("session-status")).to_have_text("idle")
    session = only_session(server)
    assert session["agent"] == "expert" and session["episode_id"] == "babyai/default/GoToLocal/0004@s0"
    assert session["last_outcome"]["status"] == "success"
    expect(page.get_by_test_id("step-counter")).to_have_text(str(session["step"]))
    assert session["step"] > 1
    expect(frame).not_to_have_attribute("src", first_src)  # the frame moved with the run
    last_src = frame.get_attribute("src")
    assert last_src is not None and server.api.get(last_src).content != first_png
    expect(page.get_by_test_id("timeline").locator("[data-step]")).to_have_count(session["step"])
    snap(page, tmp_path, "played")

    page.reload()
    expect(page.get_by_test_id("panel-select")).to_have_value(BABYAI[0])
    assert page.evaluate("localStorage.getItem('hylo:active_env_panel')") == BABYAI[0]
    expect(page.get_by_test_id("outcome-status")).to_have_text("success")  # the session is found again


def test_pause_holds_the_step_then_step_adds_one_and_moving_the_episode_ends_the_execution(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    session = start_holding(server, page, 2)
    page.get_by_test_id("action-pause").click()
    expect(page.get_by_test_id("session-status")).to_have_text("paused")
    expect(page.get_by_test_id("action-pause")).to_be_disabled()
    answer = server.api.get(f"/api/sessions/{session['id']}").json()
    assert answer["state"] == "paused"
    held = answer["step"]
    expect(page.get_by_test_id("step-counter")).to_have_text(str(held))

    # one step more and no other: had the pause not held, the counter would have gone past held + 1
    page.get_by_test_id("action-step").click()
    expect(page.get_by_test_id("step-counter")).to_have_text(str(held + 1))
    expect(page.get_by_test_id("session-status")).to_have_text("paused")
    assert server.api.get(f"/api/sessions/{session['id']}").json()["step"] == held + 1
    snap(page, tmp_path, "paused")

    set_number(page, "episode_index", 3)  # moving the episode while paused ends the execution
    expect(page.get_by_test_id("placed-episode")).to_have_text(placed(METAWORLD, "reach-v3", 3))
    expect(page.get_by_test_id("session-status")).to_have_text("idle")
    expect(page.get_by_test_id("outcome-status")).to_have_text("infra_invalid")
    expect(page.get_by_test_id("outcome-reason")).to_contain_text("the episode was moved")
    answer = server.api.get(f"/api/sessions/{session['id']}").json()
    assert answer["state"] == "idle" and answer["last_outcome"]["status"] == "infra_invalid"
    assert answer["last_outcome"]["steps"] == held + 1
    state = server.api.get(f"/api/env-panels/{METAWORLD[0]}").json()["state"]
    assert state["episode_id"] == placed(METAWORLD, "reach-v3", 3)
    expect(page.get_by_test_id("panel-message")).to_have_count(0)


def test_a_session_being_started_shows_busy_and_a_double_click_starts_it_once(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    open_panel(server, page, METAWORLD, "reach-v3", 1)
    page.get_by_test_id("agent-select").select_option("agent:hold")
    creates: list[str] = []
    refusals: list[str] = []

    def sent(request: Request) -> None:
        if request.method == "POST" and request.url.endswith("/api/sessions"):
            creates.append(request.url)

    def hold(route: Route) -> None:  # the session's creation waits until the page is looked at while it starts
        if route.request.method == "POST":
            held.append(route)
        else:
            route.fallback()

    held: list[Route] = []
    page.on("request", sent)
    page.on("response", lambda r: refusals.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.route("**/api/sessions", hold)

    page.get_by_test_id("action-play").dblclick()
    starting = page.get_by_test_id("session-starting")
    expect(starting).to_be_visible()
    expect(starting).to_contain_text("agent hold")
    expect(page.get_by_test_id("no-session")).to_have_count(0)
    expect(page.get_by_test_id("action-play")).to_be_disabled()
    expect(page.get_by_test_id("action-step")).to_be_disabled()
    snap(page, tmp_path, "starting")
    for _ in range(600):  # the page sends it once its panel is read again; Playwright hands it over as it waits
        if held:
            break
        page.wait_for_timeout(50)
    assert len(held) == 1, held
    held[0].continue_()

    expect(page.get_by_test_id("session-status")).to_have_text("running")
    expect(page.get_by_test_id("session-starting")).to_have_count(0)
    wait_counter_past(page, 2)
    session = only_session(server)
    assert session["agent"] == "hold" and session["episode_id"] == placed(METAWORLD, "reach-v3", 1)
    assert len(creates) == 1, creates
    assert refusals == []
    expect(page.get_by_test_id("panel-message")).to_have_count(0)
    page.get_by_test_id("action-stop").click()
    expect(page.get_by_test_id("session-status")).to_have_text("idle")


def out_of_range_graph(server: HyloServe) -> str:
    """Save a Meta-World graph whose action is a constant far outside the action space (carried around the loop from
    iterIn's `init_push`): the shield clips it at every step."""
    graph = server.api.get("/api/graphs/metaworld_chunked_expert").json()
    graph["name"] = "out_of_range"
    graph.pop("layout", None)
    graph["nodes"] = [n for n in graph["nodes"] if n["id"] != "reason"]
    graph["nodes"].append({"id": "push", "type": "constant", "config": {"wire": "action", "value": [5.0, 0, 0, 0]}})
    next(n for n in graph["nodes"] if n["id"] == "iterOut")["config"]["carry"].append(
        {"name": "push", "wire": "action"}
    )
    graph["edges"] = [e for e in graph["edges"] if "reason" not in (e["source"], e["target"])] + [
        {"source": "push", "sourceHandle": "value", "target": "iterIn", "targetHandle": "init_push"},
        {"source": "iterIn", "sourceHandle": "push", "target": "step", "targetHandle": "action"},
        {"source": "iterIn", "sourceHandle": "push", "target": "iterOut", "targetHandle": "push"},
    ]
    saved = server.api.put("/api/graphs/out_of_range", json=graph)
    assert saved.status_code == 200, saved.text
    return "out_of_range"


def play_graph(server: HyloServe, page: Page, graph: str, budget: int) -> dict[str, Any]:
    """On Meta-World's panel, run `graph` for `budget` steps from the page; the session's answer once it is idle."""
    page.get_by_test_id("agent-select").select_option(f"graph:{graph}")
    page.get_by_test_id("step-budget").fill(str(budget))
    page.get_by_test_id("action-play").click()
    expect(page.get_by_test_id("outcome-status")).to_be_visible()
    expect(page.get_by_test_id("session-status")).to_have_text("idle")
    session = only_session(server)
    assert session["graph"] == graph and session["last_outcome"]["steps"] == budget, session
    return session


def test_the_timeline_marks_shield_interventions_and_chunk_boundaries(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    graph = out_of_range_graph(server)
    open_panel(server, page, METAWORLD, "reach-v3", 0)
    session = play_graph(server, page, graph, 12)
    interventions = session["last_outcome"]["safety_interventions"]
    assert interventions == 12  # every step's action was clipped
    expect(page.get_by_test_id("timeline-intervention")).to_have_count(interventions)
    expect(page.locator("h3", has_text="Timeline")).to_contain_text(f"{interventions} shield interventions")
    expect(page.get_by_test_id("timeline-chunk")).to_have_count(0)  # one action per step: nothing to mark
    snap(page, tmp_path, "shield")

    close_all(server)
    page.reload()
    session = play_graph(server, page, "metaworld_chunked_expert", 12)  # chunks of 4, 2 of them run
    events = server.api.get(f"/api/sessions/{session['id']}/events", params={"limit": 1000}).json()["events"]
    chunks = [e for e in events if e["event"] == "agent.chunk"]
    assert len(chunks) == 6  # a new chunk every 2 steps
    expect(page.get_by_test_id("timeline-chunk")).to_have_count(len(chunks))
    expect(page.get_by_test_id("timeline-intervention")).to_have_count(0)
    for chunk in chunks:
        expect(
            page.get_by_test_id(f"timeline-step-{chunk['requested_at']}").get_by_test_id("timeline-chunk")
        ).to_have_count(1)
    snap(page, tmp_path, "chunks")


def test_a_refused_change_is_shown_and_the_trace_can_be_filtered_and_read_per_step(
    server: HyloServe, page: Page, tmp_path: Path
) -> None:
    session = start_holding(server, page, 5)
    set_number(page, "episode_index", 6)  # moving the episode while it runs: 409
    message = page.get_by_test_id("panel-message")
    expect(message).to_contain_text("409")
    refused = server.api.post(f"/api/env-panels/{METAWORLD[0]}/field", json={"name": "episode_index", "value": 6})
    assert refused.status_code == 409
    # the server's own words (the step it names moves on while it runs)
    worded = re.sub(r"step\\ \d+", r"step\\ \\d+", re.escape(refused.json()["detail"]))
    expect(message).to_have_text(re.compile(f"^409: {worded}$"))
    expect(page.get_by_test_id("field-episode_index")).to_have_value("5")  # the field shows the panel's value again
    snap(page, tmp_path, "refused")
    page.get_by_test_id("action-stop").click()
    expect(page.get_by_test_id("outcome-status")).to_have_text("infra_invalid")
    expect(page.get_by_test_id("outcome-reason")).to_contain_text("stopped")
    assert server.api.get(f"/api/sessions/{session['id']}").json()["last_outcome"]["status"] == "infra_invalid"

    # another panel, with a graph of state containers: its checkpoints are read per step from the trace
    page.get_by_test_id("close-session").click()
    expect(page.get_by_test_id("no-session")).to_be_visible()
    choose_panel(page, BABYAI, "GoToLocal", 1)
    page.get_by_test_id("agent-select").select_option("graph:babyai_memory")
    page.get_by_test_id("action-play").click()
    expect(page.get_by_test_id("outcome-status")).to_have_text("success")
    session = only_session(server)
    assert session["graph"] == "babyai_memory" and session["panel"] == BABYAI[0] and session["step"] >= 2

    trace = server.api.get(f"/api/sessions/{session['id']}/events", params={"limit": 2000}).json()["events"]
    assert len(trace) < 2000, "the whole trace fits one read"
    events = page.get_by_test_id("trace-events").get_by_test_id("trace-event")
    page.get_by_test_id("kind-filter").select_option("step.result")
    results = [e for e in trace if e["event"] == "step.result"]
    assert len(results) == session["step"]
    expect(events).to_have_count(min(300, len(results)))
    assert set(events.evaluate_all("rows => rows.map(r => r.dataset.kind)")) == {"step.result"}
    expect(events.first).to_contain_text(f"#{results[-1]['step']}")  # newest first
    checkpoints = {e["step"]: e["values"] for e in trace if e["event"] == "container.checkpoint"}
    decisions = page.get_by_test_id("containers").get_by_test_id("container-decisions").locator("code")
    for step in (1, 0):
        page.get_by_test_id(f"timeline-step-{step}").click()
        expect(page.get_by_test_id("containers-step")).to_have_text(f"at step {step}")
        expect(decisions).to_have_text(json.dumps(checkpoints[step]["decisions"], separators=(",", ":")))
    assert checkpoints[0]["decisions"] != checkpoints[1]["decisions"]
    snap(page, tmp_path, "containers")


def test_the_token_reaches_the_frame_and_the_stream(page: Page, tmp_path: Path) -> None:
    """On a server with a token, what a browser cannot send a header with (the frame's <img>, the websocket) carries
    the token in its URL and is let through."""
    token = "a-token-for-the-live-test"
    guarded = HyloServe(tmp_path / "runs", token=token)
    try:
        assert guarded.api.get("/api/env-panels", headers={"Authorization": ""}).status_code == 401
        page.add_init_script(f"localStorage.setItem('hylo:token', {json.dumps(token)})")
        open_panel(guarded, page, BABYAI, "GoToLocal", 0)
        page.get_by_test_id("action-step").click()
        expect(page.get_by_test_id("session-status")).to_have_text("paused")
        frame = page.get_by_test_id("live-frame")
        expect(frame).to_have_attribute("src", re.compile(r"/frame\?n=\d+&access_token="))
        page.wait_for_function(
            "() => { const img = document.querySelector('[data-testid=live-frame]');"
            " return img !== null && img.complete && img.naturalWidth > 0; }"
        )
        # trace events come only over the websocket
        expect(page.get_by_test_id("trace-events").get_by_test_id("trace-event").first).to_be_visible()
        expect(page.get_by_test_id("session-status").locator("..")).not_to_contain_text("connecting")
        snap(page, tmp_path, "token")
    finally:
        guarded.close()
