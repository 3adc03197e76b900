"""The OpenAPI document describes every answer: each route's success status has a response model (a schema in
`components`), or, for a route that streams (a file, an image, server-sent events), the media type it sends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hylo.jobs import JobScheduler
from hylo.server import create_app

STREAMED = {"text/event-stream", "video/mp4", "image/png", "image/svg+xml"}
"""The media types a route may send instead of a JSON body its document describes."""

LIVE_ROUTES = {
    ("get", "/api/env-panels"),
    ("get", "/api/env-panels/{name}"),
    ("get", "/api/env-panels/{name}/options/{field}"),
    ("post", "/api/env-panels/{name}/field"),
    ("post", "/api/env-panels/{name}/action"),
    ("get", "/api/sessions"),
    ("post", "/api/sessions"),
    ("get", "/api/sessions/{session_id}"),
    ("delete", "/api/sessions/{session_id}"),
    ("get", "/api/sessions/{session_id}/frame"),
    ("get", "/api/sessions/{session_id}/events"),
}
"""The HTTP routes of live sessions (the twelfth, the session stream, is a websocket: OpenAPI has no word for it)."""


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with JobScheduler(tmp_path_factory.mktemp("openapi") / "runs") as scheduler:
        yield create_app(scheduler, docs=True).openapi()


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method, path, operation) for path, item in document["paths"].items() for method, operation in item.items()]


def success(operation: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {status: answer for status, answer in operation["responses"].items() if status.startswith("2")}


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    prefix = "#/components/schemas/"
    assert schema.get("$ref", "").startswith(prefix), f"not a response model: {schema}"
    resolved: dict[str, Any] = document["components"]["schemas"][schema["$ref"].removeprefix(prefix)]
    return resolved


def test_every_success_answer_has_a_response_model_or_a_streamed_media_type(document: dict[str, Any]) -> None:
    undescribed = []
    for method, path, operation in operations(document):
        answers = success(operation)
        assert answers, f"{method.upper()} {path} documents no success status"
        for status, answer in answers.items():
            content = answer.get("content", {})
            if status == "204":
                assert not content, f"{method.upper()} {path}: a 204 has no body"
                continue
            json_schema = content.get("application/json", {}).get("schema")
            if json_schema is not None:
                if not json_schema.get("$ref", "").startswith("#/components/schemas/"):
                    undescribed.append(f"{method.upper()} {path} {status}: {json_schema}")
                else:
                    assert resolve(document, json_schema).get("properties"), (method, path, status)
            elif not content or not set(content) <= STREAMED:
                undescribed.append(f"{method.upper()} {path} {status}: content {sorted(content)}")
    assert not undescribed, "answers without a response model:\n" + "\n".join(undescribed)


def test_the_streaming_routes_declare_their_media_type(document: dict[str, Any]) -> None:
    paths = document["paths"]
    declared = {
        "/api/eval/v2/status/{job}/events": "text/event-stream",
        "/api/eval/v2/runs/{run}/video": "video/mp4",
        "/api/eval/v2/sweeps/{sweep_id}/plot.svg": "image/svg+xml",
        "/api/sessions/{session_id}/frame": "image/png",
    }
    for path, media_type in declared.items():
        assert list(paths[path]["get"]["responses"]["200"]["content"]) == [media_type], path


def test_the_live_routes_are_described_with_their_models(document: dict[str, Any]) -> None:
    listed = {(method, path) for method, path, _ in operations(document)}
    assert listed >= LIVE_ROUTES, sorted(LIVE_ROUTES - listed)
    paths = document["paths"]

    def model(path: str, method: str = "get", status: str = "200") -> dict[str, Any]:
        return resolve(document, paths[path][method]["responses"][status]["content"]["application/json"]["schema"])

    session = model("/api/sessions/{session_id}")
    brief = {"id", "state", "step", "episode_id", "executions", "last_outcome", "frame"}
    details = {"benchmark", "graph", "agent", "panel", "last_execution", "containers", "events", "error", "created_at"}
    assert set(session["properties"]) == brief | details
    assert model("/api/sessions", "post", "201") == session
    assert set(model("/api/sessions/{session_id}", "delete")["properties"]) == {"id", "state"}
    assert model("/api/sessions/{session_id}", "delete", "202") == model("/api/sessions/{session_id}", "delete")
    assert set(model("/api/sessions/{session_id}/events")["properties"]) == {"position", "dropped", "events"}
    assert {"name", "display_name", "fields", "actions", "context", "state", "session"} <= set(
        model("/api/env-panels/{name}")["properties"]
    )
    assert set(model("/api/env-panels/{name}/options/{field}")["properties"]) == {"name", "options"}
    assert {"ok", "side_effect", "session"} <= set(model("/api/env-panels/{name}/action", "post")["properties"])


def test_the_docs_pages_and_options_stay_out_of_the_document(document: dict[str, Any]) -> None:
    assert not {"/docs", "/redoc", "/{path}"} & set(document["paths"])
