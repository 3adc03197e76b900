"""What the canvas asks of the server: validate an open (unsaved) graph without saving it, and run it in a session
from its document, whose stream then says how each node stands and what crossed each edge."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from served_app import Served

from hylo.graph.model import MAX_GRAPH_BYTES
from hylo.jobs import JobScheduler
from hylo.server import create_app


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    scheduler = JobScheduler(tmp_path / "runs")
    server = Served(create_app(scheduler))
    yield server
    for session in server.client.get("/api/sessions").json()["sessions"]:
        server.client.delete(f"/api/sessions/{session['id']}")
    server.close()
    scheduler.close()


@pytest.fixture
def expert(served: Served) -> dict[str, Any]:
    document: dict[str, Any] = served.client.get("/api/graphs/babyai_expert").json()
    return document


def without_action(document: dict[str, Any]) -> dict[str, Any]:
    broken = copy.deepcopy(document)
    broken["edges"] = [e for e in broken["edges"] if (e["source"], e["target"]) != ("reason", "step")]
    return broken


# -- POST /api/graphs/validate -------------------------------------------------------------------------------------


def test_validate_says_valid_and_saves_nothing(served: Served, expert: dict[str, Any]) -> None:
    draft = {**expert, "name": "draft_only"}
    answer = served.client.post("/api/graphs/validate", json=draft)
    assert answer.status_code == 200 and answer.json() == {"valid": True, "problems": []}
    assert served.client.get("/api/graphs/draft_only").status_code == 404


def test_validate_lists_the_same_problems_a_save_would(served: Served, expert: dict[str, Any]) -> None:
    broken = without_action({**expert, "name": "broken"})
    answer = served.client.post("/api/graphs/validate", json=broken).json()
    refused = served.client.put("/api/graphs/broken", json=broken)
    assert refused.status_code == 422
    assert answer["valid"] is False and answer["problems"] == refused.json()["detail"]
    assert any(p["node"] == "step" and "'action'" in p["message"] for p in answer["problems"])


def test_validate_refuses_import_paths_and_names_what_is_not_a_graph(served: Served, expert: dict[str, Any]) -> None:
    imported = copy.deepcopy(expert)
    imported.pop("name")
    next(n for n in imported["nodes"] if n["id"] == "reason")["config"]["agent"] = "os:system"
    problems = served.client.post("/api/graphs/validate", json=imported).json()["problems"]
    assert [(p["node"], p["rule"]) for p in problems] == [("reason", "unknown_agent")]

    json_type = {"content-type": "application/json"}
    not_json = served.client.post("/api/graphs/validate", content=b"{nodes: [", headers=json_type)
    assert not_json.status_code == 200
    problem = not_json.json()["problems"][0]
    assert problem["rule"] == "format" and "not JSON" in problem["message"]
    listed = served.client.post("/api/graphs/validate", json=[1, 2]).json()["problems"]
    assert listed == [{"node": None, "rule": "format", "message": "a graph is a JSON object, got an array"}]


def test_validate_bounds_its_body(served: Served) -> None:
    huge = json.dumps({"nodes": [], "edges": [], "description": "x" * MAX_GRAPH_BYTES})
    answer = served.client.post("/api/graphs/validate", content=huge, headers={"content-type": "application/json"})
    assert "2097152" in answer.text  # the limit, named
    assert answer.status_code == 413


# -- POST /api/sessions with a document ----------------------------------------------------------------------------


def until_idle(served: Served, session: str, executions: int) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        state: dict[str, Any] = served.client.get(f"/api/sessions/{session}").json()
        if state["state"] == "idle" and state["executions"] == executions:
            return state
        assert time.monotonic() < deadline, f"session {session} never finished: {state}"
        time.sleep(0.02)


def test_an_unsaved_document_runs_and_its_stream_shows_every_node_done(served: Served, expert: dict[str, Any]) -> None:
    draft = {**expert, "name": "canvas_draft", "placement": {**expert["placement"], "task": "GoToLocal"}}
    created = served.client.post("/api/sessions", json={"document": draft, "placement": {"episode_index": 2}})
    assert created.status_code == 201, created.text
    session = created.json()
    assert session["graph"] == "canvas_draft" and session["panel"] == "env_babyai"
    assert served.client.get("/api/graphs/canvas_draft").status_code == 404  # run, not saved

    pressed = served.client.post("/api/env-panels/env_babyai/action", json={"name": "play"})
    assert pressed.status_code == 200, pressed.text
    done = until_idle(served, session["id"], 1)
    assert done["last_outcome"]["status"] == "success"

    events = served.client.get(f"/api/sessions/{session['id']}/events", params={"limit": 2000}).json()["events"]
    kinds = [e["event"] for e in events]
    watched = [e for e in events if e["event"] == "graph.nodes"]
    assert watched and len(watched) <= done["step"] + 2  # coalesced: never more than one per step
    last = watched[-1]
    assert kinds.index("graph.nodes") > kinds.index("episode.start")
    assert len(kinds) - 1 - kinds[::-1].index("graph.nodes") < kinds.index("session.outcome")
    assert last["phase"] == "end" and last["status"] == "success"
    assert {node["state"] for node in last["nodes"].values()} == {"done"}
    assert set(last["nodes"]) == {node["id"] for node in expert["nodes"]}
    keys = {f"{e['source']}.{e['sourceHandle']}->{e['target']}.{e['targetHandle']}" for e in expert["edges"]}
    assert set(last["values"]) == keys
    assert "uint8" in last["values"]["observe.observation->reason.observation"]  # the image, summarised
    assert all(len(text) <= 160 for text in last["values"].values())


def test_an_invalid_document_is_refused_with_its_per_node_problems(served: Served, expert: dict[str, Any]) -> None:
    refused = served.client.post("/api/sessions", json={"document": without_action(expert)})
    assert refused.status_code == 422
    problems = refused.json()["detail"]
    assert any(p["node"] == "step" and "'action'" in p["message"] for p in problems)
    assert served.client.get("/api/sessions").json()["sessions"] == []

    both = served.client.post("/api/sessions", json={"document": expert, "graph": "babyai_expert"})
    assert both.status_code == 422 and "exactly one of" in both.text
