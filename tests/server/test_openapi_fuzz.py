"""The API against its own OpenAPI document, with inputs schemathesis generates (valid and invalid): no request gets a
5xx, and every answer is one the document describes (status code, content type, body schema).

No evaluation process starts: the scheduler is never started (a queued job stays queued) and the session manager
takes no session (a valid session request is answered 409 after it has been checked). The SSE route (a stream that
lasts until its job ends) and the websocket (not in the document) are left out.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
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
    case.call_and_validate(
        headers={"content-type": "application/json"} if case.body is not None else None,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )
