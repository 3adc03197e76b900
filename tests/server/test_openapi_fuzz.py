"""The API against its own OpenAPI document, with inputs schemathesis generates (valid and invalid) and with long and
odd names in every name a path or query holds (256 to 5,000 characters, NUL, `..`, non-ASCII letters whose UTF-8 is
longer than a file name may be, a refused `gym:` namespace): no request gets a 5xx, and every answer is one the
document describes (status code, content type, body schema).

No evaluation process starts: the scheduler is never started (a queued job stays queued) and the session manager
takes no session (a valid session request is answered 409 after it has been checked). The SSE route (a stream that
lasts until its job ends) and the websocket (not in the document) are left out.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from hylo.graph.store import GraphStore
from hylo.jobs import JobScheduler
from hylo.server import ServerAccess, create_app
from hylo.sessions import SessionManager

EXAMPLES = 12
"""Generated requests per operation (valid and invalid; about 25 operations)."""


_LOG_DIR = Path(tempfile.mkdtemp(prefix="hylo-openapi-"))
_SCHEDULER = JobScheduler(_LOG_DIR / "runs", max_queued=50)
_GRAPHS = GraphStore(_LOG_DIR / "runs" / "graphs")
APP = create_app(
    _SCHEDULER,
    graphs=_GRAPHS,
    sessions=SessionManager(graphs=_GRAPHS.get, max_sessions=0),
    access=ServerAccess.of(allow_hosts=["testserver"]),  # the in-process client's Host
)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP).exclude(path_regex=r"/events$")


@pytest.fixture(scope="module", autouse=True)
def _release() -> Iterator[None]:
    yield
    _SCHEDULER.close()
    shutil.rmtree(_LOG_DIR, ignore_errors=True)


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_gets_a_server_error_or_an_undocumented_answer(case: Any) -> None:
    _call(case)


ODD_NAMES = {
    "256 chars": "r" * 256,
    "5000 chars": "r" * 5000,
    "254 bytes": "é" * 127,
    "400 bytes in 200 chars": "é" * 200,
    "600 bytes in 200 chars": "日本" * 100,
    "emoji": "\U0001f600" * 70,
    "NUL": "\x00",
    "NUL inside": "run\x00id",
    "dot dot": "%2E%2E",  # `..`, encoded so that the client sends it instead of collapsing the path
    "dot": "%2E",
    "dots": "...",
    "leading dots": "..run",
    "space": " ",
    "a gym id": "gym:refused_ns:Env-v0",
}
"""Names no route may answer with a 5xx: too long for a file name (in characters or in UTF-8 bytes), holding what a
file name cannot, or naming the directory or its parent. (A name holding `/` is another path, not a name.)"""

NAMED = [
    operation
    for operation in (result.ok() for result in schema.get_all_operations())
    if list(operation.path_parameters) or any(parameter.is_required for parameter in operation.query)
]


@pytest.mark.parametrize("name", list(ODD_NAMES.values()), ids=list(ODD_NAMES))
@pytest.mark.parametrize("operation", NAMED, ids=lambda operation: f"{operation.method.upper()} {operation.path}")
def test_long_and_odd_names_get_a_documented_refusal(operation: Any, name: str) -> None:
    """Every name in a path, and every required query parameter (an episode id, the runs to compare), set to `name`."""
    case = operation.Case(
        path_parameters={parameter.name: name for parameter in operation.path_parameters},
        query={parameter.name: name for parameter in operation.query if parameter.is_required},
        body={} if list(operation.body) else NOT_SET,
        media_type="application/json" if list(operation.body) else None,
    )
    response = _call(case)
    assert response.status_code in (400, 404, 409, 422), (operation.path, name[:20], response.text[:200])


@pytest.mark.parametrize("name", [name for label, name in ODD_NAMES.items() if label != "254 bytes"],
                         ids=[label for label in ODD_NAMES if label != "254 bytes"])  # fmt: skip
def test_a_long_or_odd_run_id_is_refused_before_it_is_queued(name: str) -> None:
    response = _start(name)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "run_id"], response.text


def test_a_run_id_as_long_as_a_file_name_is_queued_and_its_run_is_read() -> None:
    longest = "é" * 127 + "r"  # 255 bytes of UTF-8
    queued = _start(longest)
    assert queued.status_code == 200 and queued.json()["run_id"] == longest, queued.text
    status = _call(
        _operation("GET", "/api/eval/v2/status/{job}").Case(path_parameters={"job": queued.json()["job_id"]})
    )
    assert status.status_code == 200 and status.json()["state"] == "queued"
    run = _call(_operation("GET", "/api/eval/v2/runs/{run}").Case(path_parameters={"run": longest}))
    assert run.status_code == 404 and "no run" in run.json()["detail"]  # queued, not begun
    assert _start(longest + "r").status_code == 422  # one byte more


def test_a_session_naming_a_refused_gym_namespace_is_refused_naming_the_field() -> None:
    """Directly, and through a saved graph's placement: 422 naming `placement.benchmark`, nothing imported."""
    sessions = _operation("POST", "/api/sessions")
    direct = {"agent": "random", "placement": {"benchmark": "gym:refused_ns/Env-v0"}}
    graph = {"nodes": [], "placement": {"benchmark": "gym:refused_ns/Env-v0"}}
    assert _call(_operation("PUT", "/api/graphs/{name}").Case(
        path_parameters={"name": "refused-namespace"}, body=graph, media_type="application/json"
    )).status_code == 200  # fmt: skip
    for body in (direct, {"graph": "refused-namespace"}):
        response = _call(sessions.Case(body=body, media_type="application/json"))
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["loc"] == ["body", "placement", "benchmark"]
        assert "refused_ns" in response.json()["detail"][0]["msg"]
    assert "refused_ns" not in sys.modules


def _operation(method: str, path: str) -> Any:
    return schema[path][method]


def _start(run_id: str) -> Any:
    body = {"benchmark": "babyai", "agent": "random", "tasks": ["GoToLocal"], "episodes": 1, "run_id": run_id}
    return _call(_operation("POST", "/api/eval/v2/start").Case(body=body, media_type="application/json"))


def _call(case: Any) -> Any:
    return case.call_and_validate(
        headers={"content-type": "application/json"} if case.body is not None else None,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )
