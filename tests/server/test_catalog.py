"""The catalog API driven over HTTP, as the canvas sees it: graphs saved and read back, refusals with every problem,
the palette of node types, benchmarks and agents. A real uvicorn serves a small app with the catalog under `/api`
and the server's middlewares."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from served_app import Served

from hylo.graph.store import EXAMPLES_DIR, GraphStore
from hylo.graph.wires import Wire, fits
from hylo.server.access import ServerAccess
from hylo.server.auth import BearerToken
from hylo.server.catalog import router as catalog_router
from hylo.server.dependencies import graph_store, server_access
from hylo.server.limits import BODY_LIMIT_OVERRIDES, BodyLimit
from hylo.server.problems import exception_handlers


def catalog_app(graphs: Path, token: str | None = None) -> FastAPI:
    """The catalog under `/api` behind the body limits (and the token), plus two probes: `POST /api/echo` answers the
    size of its body, `GET /api/query` the query string the app sees; `/api/ws` echoes websocket messages."""
    app = FastAPI(exception_handlers=exception_handlers())
    mount_catalog(app, GraphStore(graphs))

    @app.post("/api/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"received": len(await request.body())}

    @app.get("/api/query")
    def query(request: Request) -> dict[str, str]:
        return {"query": request.url.query}

    @app.websocket("/api/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                await websocket.send_text(f"echo:{len(await websocket.receive_text())}")

    app.add_middleware(BodyLimit, overrides=BODY_LIMIT_OVERRIDES)
    if token:
        app.add_middleware(BearerToken, token=token)
    return app


def mount_catalog(app: FastAPI, store: GraphStore) -> None:
    """The catalog's router under `/api` of `app`, over `store` (and a default server's access rules): what it reads
    of a whole server's state, given as overrides of its dependencies."""
    app.include_router(catalog_router, prefix="/api")
    app.dependency_overrides[graph_store] = lambda: store
    app.dependency_overrides[server_access] = ServerAccess


@pytest.fixture
def graphs_dir(tmp_path: Path) -> Path:
    return tmp_path / "graphs"


@pytest.fixture
def client(graphs_dir: Path) -> Iterator[httpx.Client]:
    server = Served(catalog_app(graphs_dir))
    yield server.client
    server.close()


def example(name: str = "babyai_expert", *, named: bool = True) -> dict[str, Any]:
    """A built-in example's document; without its `name` when not `named` (the path then names it)."""
    data: dict[str, Any] = json.loads((EXAMPLES_DIR / f"{name}.json").read_text())
    if not named:
        del data["name"]
    return data


def problems(response: httpx.Response) -> set[tuple[str | None, str]]:
    """(node, rule) of every problem of a 422 refusal; each entry has exactly node, rule and message."""
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail and all(set(entry) == {"node", "rule", "message"} and entry["message"] for entry in detail)
    return {(entry["node"], entry["rule"]) for entry in detail}


def messages(response: httpx.Response) -> str:
    return " | ".join(entry["message"] for entry in response.json()["detail"])


# -- graphs ------------------------------------------------------------------------------------------------------


def test_the_built_in_examples_are_listed_and_served(client: httpx.Client) -> None:
    listed = client.get("/api/graphs")
    assert listed.status_code == 200
    graphs = {g["name"]: g for g in listed.json()["graphs"]}
    assert {"babyai_expert", "babyai_memory", "metaworld_chunked_expert"} <= set(graphs)
    expert = graphs["babyai_expert"]
    assert expert["builtin"] is True and expert["shadows_builtin"] is False and expert["error"] is None
    assert expert["nodes"] == 7 and expert["placement"] == {"benchmark": "babyai", "split": None, "task": "GoToLocal"}
    assert "BabyAI's expert" in expert["description"] and expert["modified"] > 0

    got = client.get("/api/graphs/babyai_expert")
    assert got.status_code == 200 and got.json() == example()

    missing = client.get("/api/graphs/no_such_graph")
    assert missing.status_code == 404 and "'no_such_graph'" in missing.json()["detail"]
    assert "babyai_expert" in missing.json()["detail"]  # says what exists


def test_a_valid_graph_is_saved_listed_and_read_back(client: httpx.Client, graphs_dir: Path) -> None:
    doc = example(named=False)  # the name is filled in from the path
    doc["description"] = "mine"
    doc["layout"] = {"positions": {"reset": {"x": 1, "y": 2}}}
    saved = client.put("/api/graphs/my-graph.v2", json=doc)
    assert saved.status_code == 200, saved.text
    assert saved.json() == {**doc, "name": "my-graph.v2"}
    assert json.loads((graphs_dir / "my-graph.v2.json").read_text()) == saved.json()

    mine = next(g for g in client.get("/api/graphs").json()["graphs"] if g["name"] == "my-graph.v2")
    assert mine["builtin"] is False and mine["description"] == "mine" and mine["nodes"] == 7
    assert client.get("/api/graphs/my-graph.v2").json() == saved.json()

    doc["description"] = "mine, again"
    assert client.put("/api/graphs/my-graph.v2", json={**doc, "name": "my-graph.v2"}).status_code == 200
    assert client.get("/api/graphs/my-graph.v2").json()["description"] == "mine, again"
    assert sorted(p.name for p in graphs_dir.iterdir()) == ["my-graph.v2.json"]  # no temp file left behind

    assert client.delete("/api/graphs/my-graph.v2").status_code == 204
    assert client.get("/api/graphs/my-graph.v2").status_code == 404
    assert client.delete("/api/graphs/my-graph.v2").status_code == 404


def test_saving_under_an_examples_name_shadows_it_until_deleted(client: httpx.Client, graphs_dir: Path) -> None:
    doc = example()
    doc["description"] = "my own take"
    assert client.put("/api/graphs/babyai_expert", json=doc).status_code == 200
    listed = [g for g in client.get("/api/graphs").json()["graphs"] if g["name"] == "babyai_expert"]
    assert len(listed) == 1 and listed[0]["builtin"] is False and listed[0]["shadows_builtin"] is True
    assert client.get("/api/graphs/babyai_expert").json()["description"] == "my own take"
    assert (EXAMPLES_DIR / "babyai_expert.json").read_text() != (graphs_dir / "babyai_expert.json").read_text()

    assert client.delete("/api/graphs/babyai_expert").status_code == 204
    assert client.get("/api/graphs/babyai_expert").json() == example()  # the example is served again
    read_only = client.delete("/api/graphs/babyai_expert")
    assert read_only.status_code == 409 and "built-in" in read_only.json()["detail"]
    assert (EXAMPLES_DIR / "babyai_expert.json").exists()


def test_an_invalid_graph_is_refused_with_every_problem_and_not_saved(client: httpx.Client) -> None:
    doc = example(named=False)
    doc["nodes"] = [n for n in doc["nodes"] if n["id"] != "reset"]  # no reset: nothing brings the env to its episode
    doc["edges"] = [e for e in doc["edges"] if e["source"] != "reset"]
    doc["edges"] = [e for e in doc["edges"] if e["target"] != "reason"]
    doc["edges"].append({"source": "step", "sourceHandle": "reward", "target": "reason", "targetHandle": "observation"})
    doc["nodes"].append({"id": "mystery", "type": "babyai.teleport", "config": {}})
    refused = client.put("/api/graphs/broken", json=doc)
    found = problems(refused)
    assert ("reason", "wire_mismatch") in found  # a number wired into an observation
    assert ("mystery", "unknown_node_type") in found
    assert ("reason", "unfilled_port") in found  # the mismatched edge does not fill its observation
    assert ("step", "no_reset") in found
    text = messages(refused)
    assert "babyai.teleport" in text and "babyai.step" in text  # names the type and what exists
    assert "takes observation" in text and "gives number" in text
    assert client.get("/api/graphs/broken").status_code == 404


def test_a_document_that_is_not_a_graph_is_refused_naming_the_problem(client: httpx.Client) -> None:
    not_json = client.put("/api/graphs/g", content=b'{"nodes": [', headers={"Content-Type": "application/json"})
    assert problems(not_json) == {(None, "format")} and "not JSON" in messages(not_json)
    empty = client.put("/api/graphs/g", content=b"")
    assert problems(empty) == {(None, "format")} and "empty" in messages(empty)
    array = client.put("/api/graphs/g", json=[1, 2])
    assert problems(array) == {(None, "format")} and "JSON object, got an array" in messages(array)

    malformed = client.put("/api/graphs/g", json={"nodes": [{"id": "a"}, {"id": "b", "type": "iterIn"}], "extra": 1})
    assert problems(malformed) == {("a", "format"), (None, "format")}
    assert "nodes.0.type" in messages(malformed) and "extra" in messages(malformed)

    renamed = client.put("/api/graphs/g", json={**example(), "name": "other"})
    assert problems(renamed) == {(None, "name_mismatch")} and "'other'" in messages(renamed)
    assert client.get("/api/graphs/g").status_code == 404


@pytest.mark.parametrize("name", ["bad name", ".hidden", "-dash", "x" * 65, "a;b"])
def test_a_bad_graph_name_is_refused_naming_it(client: httpx.Client, graphs_dir: Path, name: str) -> None:
    for response in (client.put(f"/api/graphs/{name}", json=example()), client.get(f"/api/graphs/{name}")):
        assert response.status_code == 400, response.text
        assert repr(name) in response.json()["detail"]
    assert not graphs_dir.exists() or not list(graphs_dir.iterdir())


def test_a_path_is_never_a_graph_name(client: httpx.Client, tmp_path: Path) -> None:
    response = client.put("/api/graphs/..%2F..%2Fescaped", json=example())
    assert response.status_code in (400, 404)
    assert not list(tmp_path.rglob("escaped*"))


def test_import_paths_are_refused_and_nothing_is_imported(
    client: httpx.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sentinel = "hylo_catalog_sentinel"
    (tmp_path / f"{sentinel}.py").write_text("raise SystemExit('imported!')\nclass Agent: ...\nclass Step: ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    doc = example(named=False)
    node = {n["id"]: n for n in doc["nodes"]}
    node["reason"]["config"] = {"agent": f"{sentinel}:Agent", "args": {"command": "touch /tmp/x"}}
    node["step"]["type"] = f"{sentinel}:Step.step"
    doc["placement"] = {"benchmark": f"gym:{sentinel}:Env-v0"}
    refused = client.put("/api/graphs/evil", json=doc)
    found = problems(refused)
    assert ("reason", "unknown_agent") in found and "import path" in messages(refused)
    assert ("step", "unknown_node_type") in found
    assert (None, "bad_placement") in found
    assert sentinel not in sys.modules

    unregistered = example(named=False)
    next(n for n in unregistered["nodes"] if n["id"] == "reason")["config"] = {"agent": "gpt"}
    refused = client.put("/api/graphs/unregistered", json=unregistered)
    assert problems(refused) == {("reason", "unknown_agent")}
    assert "random" in messages(refused) and "hold" in messages(refused)  # names the registered agents


def test_agent_arguments_and_the_placement_are_checked(client: httpx.Client) -> None:
    doc = example(named=False)
    next(n for n in doc["nodes"] if n["id"] == "reason")["config"] = {"agent": "random", "args": {"chunks": 2}}
    doc["placement"] = {"benchmark": "babyai", "task": "GoToMoon"}
    refused = client.put("/api/graphs/g", json=doc)
    assert problems(refused) == {("reason", "bad_agent_args"), (None, "bad_placement")}
    assert "'chunks'" in messages(refused) and "chunk" in messages(refused) and "'GoToMoon'" in messages(refused)

    next(n for n in doc["nodes"] if n["id"] == "reason")["config"] = {"agent": "random", "args": {"chunk": 2}}
    doc["placement"] = {"benchmark": "babyai", "task": "GoToObj"}
    assert client.put("/api/graphs/g", json=doc).status_code == 200


# -- the palette ---------------------------------------------------------------------------------------------------


def test_nodes_lists_every_node_type_with_its_ports_by_nodeset(client: httpx.Client) -> None:
    response = client.get("/api/nodes")
    assert response.status_code == 200
    body = response.json()
    groups = {g["nodeset"]: g for g in body["nodesets"]}
    assert {"core", "agents", "babyai", "metaworld"} <= set(groups)
    assert body["unavailable"] == []
    reason = next(n for n in groups["agents"]["nodes"] if n["type"] == "reason")
    assert [(p["name"], p["wire"], p["required"]) for p in reason["inputs"]] == [
        ("observation", "observation", True),
        ("memory", "json", False),
    ]
    assert [(p["name"], p["wire"]) for p in reason["outputs"]] == [("chunk", "chunk")]
    assert reason["role"] == "policy" and "agent" in reason["config"]["properties"]
    step = next(n for n in groups["babyai"]["nodes"] if n["type"] == "babyai.step")
    assert [p["name"] for p in step["inputs"]] == ["action"]
    assert {"reward", "done", "success", "result"} <= {p["name"] for p in step["outputs"]}
    assert {"iterIn", "iterOut"} <= {n["type"] for n in groups["core"]["nodes"]}
    assert "metaworld.step" in {n["type"] for n in groups["metaworld"]["nodes"]}

    # the widening table lets a canvas refuse exactly the edges the engine refuses
    widens = body["widens"]
    for source in Wire:
        for target in Wire:
            served = source is target or Wire.ANY in (source, target) or target.value in widens.get(source.value, [])
            assert served == fits(source, target), (source, target)


def test_benchmarks_lists_splits_tasks_and_budgets(client: httpx.Client) -> None:
    response = client.get("/api/benchmarks")
    assert response.status_code == 200
    benchmarks = {b["name"]: b for b in response.json()["benchmarks"]}
    assert {"babyai", "metaworld"} <= set(benchmarks)
    babyai = benchmarks["babyai"]
    assert babyai["display_name"] == "BabyAI" and babyai["available"] is True and babyai["reason"] is None
    assert babyai["default_split"] == "default" and "grid" in babyai["observation_keys"]
    tasks = {t["name"]: t for t in babyai["splits"][0]["tasks"]}
    assert tasks["GoToLocal"]["step_budget"] == 64
    metaworld = benchmarks["metaworld"]
    assert metaworld["display_name"] == "Meta-World" and metaworld["default_split"] == "mt10"
    mt10 = next(s for s in metaworld["splits"] if s["name"] == "mt10")
    reach = next(t for t in mt10["tasks"] if t["name"] == "reach-v3")
    assert reach["step_budget"] > 0 and reach["instruction"]


def test_agents_lists_registered_agents_with_their_arguments(client: httpx.Client) -> None:
    response = client.get("/api/agents")
    assert response.status_code == 200
    agents = {a["name"]: a for a in response.json()["agents"]}
    assert {"random", "hold", "expert", "openpi-remote", "vlaeval-remote"} <= set(agents)
    random = agents["random"]
    assert random["target"] == "hylo.agents.basic:RandomAgent" and "uniformly" in random["description"]
    assert random["args"] == [{"name": "chunk", "required": False, "default": 1, "annotation": "int"}]
    assert random["available"] is True and random["extra_args"] is False
    url = next(a for a in agents["openpi-remote"]["args"] if a["name"] == "url")
    assert url["required"] is True and url["default"] is None
    assert agents["expert"]["target"] is None and "expert" in agents["expert"]["description"]
    assert all(":" not in name for name in agents)  # only registered names, never an import path


def test_the_openapi_document_describes_the_catalog(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"get", "put", "delete"} <= set(paths["/api/graphs/{name}"])
    assert "422" in paths["/api/graphs/{name}"]["put"]["responses"]
    assert {"/api/graphs", "/api/nodes", "/api/benchmarks", "/api/agents"} <= set(paths)


def test_hylo_list_describes_benchmarks_and_agents_with_the_catalogs_fields_and_words(
    client: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    from hylo.cli import main

    assert main(["list", "agents", "--json"]) == 0
    listed_agents = json.loads(capsys.readouterr().out)
    served_agents = {a["name"]: a for a in client.get("/api/agents").json()["agents"]}
    assert listed_agents == served_agents

    assert main(["list", "benchmarks", "--json"]) == 0
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert listed.pop("gym:<id>")["available"] is True
    served = {b["name"]: b for b in client.get("/api/benchmarks").json()["benchmarks"]}
    assert set(listed) == set(served)
    for name, row in listed.items():
        counts = {split["name"]: len(split["tasks"]) for split in served[name]["splits"]}
        assert row == {**served[name], "splits": counts, "why": served[name]["reason"] or ""}


def test_protocols_lists_the_registered_protocols_as_hylo_list_does(
    client: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    from hylo.cli import main

    response = client.get("/api/protocols")
    assert response.status_code == 200
    served = response.json()["protocols"]
    d2 = next(p for p in served if p["name"] == "realtime-d2")
    assert d2["timing_options"] == {"schedule": "chunked", "adaptive_refill": False, "clock": "virtual",
                                    "latency_steps": 2, "max_hold_steps": 20}  # fmt: skip
    assert main(["list", "protocols", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == served
    assert "/api/protocols" in client.get("/openapi.json").json()["paths"]
