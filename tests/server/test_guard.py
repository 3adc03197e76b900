"""What a web page in the user's browser can forge — another Host (DNS rebinding), another Origin, a cross-site read,
a body that is not JSON — against a real server, and what the server answers."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from served_app import Served
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from hylo.jobs import JobScheduler
from hylo.server import ServerAccess, create_app

API = "/api/eval/v2"
EVIL = "http://evil.example"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    scheduler = JobScheduler(tmp_path / "runs")  # never started: a queued job stays queued
    server = Served(create_app(scheduler, access=ServerAccess.of(allow_origins=["http://dev.local:5173"])))
    yield server
    for session in server.client.get("/api/sessions").json()["sessions"]:
        server.client.delete(f"/api/sessions/{session['id']}")
    server.close()
    scheduler.close()


def port_of(server: Served) -> int:
    return int(server.url.rsplit(":", 1)[1])


def ws_open(server: Served, path: str, *, host: str | None = None, origin: str | None = None) -> Any:
    """A websocket handshake to `path` of `server`, sending `host` as Host (over a socket to 127.0.0.1)."""
    port = port_of(server)
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    uri = f"ws://{host or f'127.0.0.1:{port}'}{path}"
    return connect(uri, sock=sock, origin=origin, open_timeout=10)  # type: ignore[arg-type]


QUICK = {"benchmark": "babyai", "agent": "random", "tasks": ["GoToLocal"], "episodes": 1}


def test_a_foreign_host_is_refused_on_every_route_and_loopback_names_are_served(served: Served) -> None:
    port = port_of(served)
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}", f"localhost.evil.example:{port}"):
        for path in (f"{API}/queue", f"{API}/runs", f"{API}/ab", "/api/sessions", "/", "/openapi.json"):
            answer = served.client.get(path, headers={"Host": host})
            assert answer.status_code == 403, (host, path, answer.text)
            assert "--allow-host" in answer.json()["detail"] and host in answer.json()["detail"]
        assert served.client.post(f"{API}/start", json=QUICK, headers={"Host": host}).status_code == 403
    assert served.client.get(f"{API}/queue").json()["jobs"] == []  # nothing was queued by the refused requests
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
        assert served.client.get(f"{API}/queue", headers={"Host": host}).status_code == 200, host


def test_an_operator_adds_host_names_with_allow_host(tmp_path: Path) -> None:
    with JobScheduler(tmp_path / "runs") as scheduler:
        server = Served(create_app(scheduler, access=ServerAccess.of(allow_hosts=["hylo.lab.internal"])))
        try:
            port = port_of(server)
            for proxied in (f"hylo.lab.internal:{port}", "hylo.lab.internal", "hylo.lab.internal:443"):
                assert server.client.get(f"{API}/queue", headers={"Host": proxied}).status_code == 200, proxied
            assert server.client.get(f"{API}/queue", headers={"Host": f"evil.example:{port}"}).status_code == 403
        finally:
            server.close()


def test_a_state_change_from_another_origin_is_refused_and_changes_nothing(served: Served) -> None:
    client = served.client
    queued = client.post(f"{API}/start", json=QUICK)
    assert queued.status_code == 200, queued.text
    run_id = queued.json()["run_id"]
    graph = client.get("/api/graphs/babyai_expert").json()
    for origin in (EVIL, f"{EVIL}:{port_of(served)}", "null", f"http://localhost:{port_of(served) + 1}"):
        headers = {"Origin": origin}
        attempts = [
            client.post(f"{API}/runs/{run_id[:8]}/cancel", headers=headers),  # body-less: no preflight in a browser
            client.post(f"{API}/start", json={**QUICK, "seed": 7}, headers=headers),
            client.put("/api/graphs/stolen", json={**graph, "name": "stolen"}, headers=headers),
            client.delete("/api/graphs/babyai_expert", headers=headers),
            client.post(
                "/api/sessions", json={"agent": "random", "placement": {"benchmark": "babyai"}}, headers=headers
            ),
            client.post("/api/env-panels/env_babyai/field", json={"name": "seed", "value": 3}, headers=headers),
        ]
        for answer in attempts:
            assert answer.status_code == 403, (origin, answer.request.url, answer.text)
            assert "--allow-origin" in answer.json()["detail"]
    jobs = client.get(f"{API}/queue").json()["jobs"]
    assert [(job["run_id"], job["state"]) for job in jobs] == [(run_id, "queued")]  # not cancelled, nothing added
    assert client.get("/api/graphs/stolen").status_code == 404
    assert client.get("/api/sessions").json()["sessions"] == []
    same_origin = {"Origin": served.url}
    assert client.post(f"{API}/runs/{run_id[:8]}/cancel", headers=same_origin).json()["state"] == "cancelled"
    allowed = client.put(
        "/api/graphs/mine", json={**graph, "name": "mine"}, headers={"Origin": "http://dev.local:5173"}
    )
    assert allowed.status_code == 200, allowed.text


def test_a_cross_site_read_is_refused_and_a_navigation_is_served(served: Served) -> None:
    client = served.client
    embedded = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}
    for path in (f"{API}/runs", "/api/sessions", f"{API}/runs/x/video?episode=e"):
        answer = client.get(path, headers=embedded)
        assert answer.status_code == 403 and "another site" in answer.json()["detail"], path
    assert client.get(f"{API}/runs", headers={**embedded, "Sec-Fetch-Site": "same-site"}).status_code == 403
    assert (
        client.get(f"{API}/runs", headers={"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}).status_code
        == 200
    )
    link = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    assert client.get("/", headers=link).status_code == 200  # a link to the UI from elsewhere opens it


def test_every_answer_forbids_framing_and_sniffing(served: Served) -> None:
    for answer in (
        served.client.get("/"),
        served.client.get(f"{API}/queue"),
        served.client.get(f"{API}/runs/nope"),
        served.client.post(f"{API}/start", json={"benchmark": "babyai"}),
        served.client.get(f"{API}/queue", headers={"Host": "evil.example"}),
    ):
        assert answer.headers["x-frame-options"] == "DENY", answer.request.url
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
        assert answer.headers["x-content-type-options"] == "nosniff"


def test_a_body_that_is_not_declared_json_is_refused(served: Served) -> None:
    body = json.dumps(QUICK).encode()
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = {"content-type": content_type} if content_type else {}
        answer = httpx.post(f"{served.url}{API}/start", content=body, headers=headers)
        assert answer.status_code == 415, (content_type, answer.text)
        assert "application/json" in answer.json()["detail"]
    assert served.client.get(f"{API}/queue").json()["jobs"] == []
    ok = httpx.post(
        f"{served.url}{API}/start", content=body, headers={"content-type": "application/json; charset=utf-8"}
    )
    assert ok.status_code == 200, ok.text


def test_options_says_what_a_path_takes_and_grants_no_cross_origin_access(served: Served) -> None:
    root = served.client.options("/")
    assert root.status_code == 204 and set(root.headers["allow"].split(", ")) == {"GET", "HEAD", "OPTIONS"}
    start = served.client.options(f"{API}/start", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"})
    assert start.status_code == 204 and "POST" in start.headers["allow"]
    assert not [name for name in start.headers if name.lower().startswith("access-control-")]
    assert served.client.options("/api/graphs/x").headers["allow"] == "DELETE, GET, OPTIONS, PUT"


def test_a_websocket_from_another_origin_or_host_is_refused(served: Served) -> None:
    session = served.client.post("/api/sessions", json={"agent": "random", "placement": {"benchmark": "babyai"}})
    assert session.status_code == 201, session.text
    path = f"/api/sessions/{session.json()['id']}/stream"
    for host, origin in ((None, EVIL), (None, "null"), (f"evil.example:{port_of(served)}", None)):
        with pytest.raises(InvalidStatus) as refused:
            ws_open(served, path, host=host, origin=origin).close()
        assert refused.value.response.status_code == 403, (host, origin)
    for origin in (None, served.url, "http://dev.local:5173"):  # no Origin: not a browser
        with ws_open(served, path, origin=origin) as ws:
            assert json.loads(ws.recv(timeout=20))["type"] == "hello"


def test_two_origins_or_a_cross_site_state_change_without_origin_are_refused(served: Served) -> None:
    twice = served.client.post(f"{API}/start", json=QUICK, headers=[("Origin", served.url), ("Origin", EVIL)])
    assert twice.status_code == 403 and "one Host and one Origin" in twice.json()["detail"]
    unnamed = served.client.post(f"{API}/start", json=QUICK, headers={"Sec-Fetch-Site": "cross-site"})
    assert unnamed.status_code == 403 and "another site" in unnamed.json()["detail"]
    assert served.client.get(f"{API}/queue").json()["jobs"] == []
