"""A `hylo serve` started as a user starts it belongs to that user: it makes a token and prints the URL that carries
it, another user of the machine gets 401 on every route and cannot read the log dir (made 0700, its files 0600, a
job's files too), no token is ever written to the server's log, `X-Forwarded-For` is believed only from a proxy the
operator names, and the interactive docs (scripts from a CDN) are off unless asked for."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.routing import iter_route_contexts
from live_server import quick_spec, wait_final
from serve_process import ServeProcess
from served_app import Served
from starlette.routing import Route, WebSocketRoute
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from hylo.jobs import JobScheduler
from hylo.server import create_app

API = "/api/eval/v2"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, dict[str, str]]]:
    """A default `hylo serve` whose log dir's parent any user may enter (as a home directory often is), so that the
    log dir's own mode is what keeps another user out; and one finished job, which recorded a video."""
    base = Path(tempfile.mkdtemp(prefix="hylo-owner-"))
    base.chmod(0o755)
    server = ServeProcess(base / "runs")
    try:
        started = server.client.post(f"{API}/start", json=quick_spec(episodes=1, video=1))
        assert started.status_code == 200, started.text
        done = wait_final(server.client, started.json()["job_id"])
        assert done["state"] == "done", done["message"]
        yield server, {"run": started.json()["run_id"], "job": started.json()["job_id"]}
    finally:
        server.close()
        shutil.rmtree(base, ignore_errors=True)


def test_serve_makes_a_token_and_prints_the_url_that_carries_it(served: tuple[ServeProcess, dict[str, str]]) -> None:
    server, _ = served
    assert server.open_url == f"{server.url}/#token={server.token}"  # in the fragment: no request carries it
    assert server.token is not None and len(server.token) >= 32
    assert httpx.get(f"{server.url}{API}/runs").status_code == 401
    assert server.client.get(f"{API}/runs").status_code == 200
    assert httpx.get(f"{server.url}/").status_code == 200  # the page itself holds no data


def test_the_log_dir_and_every_file_in_it_are_the_owners_alone(served: tuple[ServeProcess, dict[str, str]]) -> None:
    server, ids = served
    log_dir = Path(server.output_path.parent / "runs")
    paths = [log_dir, *log_dir.rglob("*")]
    assert any(path.suffix == ".mp4" for path in paths), "the job recorded no video"
    assert any(path.name == "jobs.sqlite" for path in paths) and any(path.name == "stderr.log" for path in paths)
    assert any(ids["run"] in path.name for path in paths)
    shared = {str(path): f"{stat.S_IMODE(path.lstat().st_mode):04o}" for path in paths if path.lstat().st_mode & 0o077}
    assert not shared, shared
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o700


NOBODY = r"""
import http.client, json, os, socket, sys
plan = json.loads(sys.argv[1])
host, port = "127.0.0.1", plan["port"]
seen = {"http": {}, "ws": {}, "files": {}}
for method, path in plan["http"]:
    connection = http.client.HTTPConnection(host, port, timeout=60)
    body = b"{}" if method in ("POST", "PUT", "PATCH", "DELETE") else None
    connection.request(method, path, body=body, headers={"content-type": "application/json"} if body else {})
    seen["http"][method + " " + path] = connection.getresponse().status
    connection.close()
for path in plan["ws"]:
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        seen["ws"][path] = sock.recv(4096).split(b"\r\n", 1)[0].decode()
for path in plan["files"]:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            open(path, "rb").close()
        seen["files"][path] = "read"
    except OSError as exc:
        seen["files"][path] = type(exc).__name__
connection = http.client.HTTPConnection(host, port, timeout=60)
connection.request("GET", "/api/eval/v2/queue", headers={"Authorization": "Bearer " + plan["token"]})
seen["with_token"] = connection.getresponse().status
print(json.dumps(seen))
"""


def every_route(tmp_path: Path, ids: dict[str, str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(method, path) of every HTTP route of the app, and the path of every websocket route, as the app declares
    them (the OpenAPI document's routes, the catch-all `OPTIONS` and `/openapi.json` among them), with the path's
    parameters filled in (the finished run and job where a route names one)."""
    with JobScheduler(tmp_path / "probe") as scheduler:
        app = create_app(scheduler, token="a-token-for-the-probe-only")
    fill = {"run": ids["run"], "job": ids["job"], "path": "x"}

    def filled(path: str) -> str:
        return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: fill.get(m.group(1), "x"), path)

    routes = list(iter_route_contexts(app.routes))  # the included routers' routes, with their prefixes
    http = [(method, filled(route.path)) for route in routes if isinstance(route.original_route, Route)
            for method in sorted(route.methods or ()) if method != "HEAD"]  # fmt: skip
    ws = [filled(route.path) for route in routes if isinstance(route.original_route, WebSocketRoute)]
    return http, ws


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run a client as another user (nobody)")
def test_another_user_gets_401_on_every_route_and_cannot_read_the_log_dir(
    served: tuple[ServeProcess, dict[str, str]], tmp_path: Path
) -> None:
    server, ids = served
    python = shutil.which("python3", path="/usr/bin:/bin")
    setpriv = shutil.which("setpriv")
    if python is None or setpriv is None:
        pytest.skip("needs setpriv and a python3 that another user may run")
    http, ws = every_route(tmp_path, ids)
    assert len(http) > 30 and len(ws) >= 1 and ("GET", "/openapi.json") in http and ("OPTIONS", "/x") in http
    log_dir = server.output_path.parent / "runs"
    run_dir = next(path for path in log_dir.iterdir() if path.name.startswith(ids["run"]))
    files = [log_dir, log_dir / "jobs.sqlite", run_dir, next(path for path in run_dir.rglob("*") if path.is_file())]
    plan = {"port": server.port, "token": server.token, "http": http, "ws": ws, "files": [str(f) for f in files]}
    done = subprocess.run(
        [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", python, "-c", NOBODY, json.dumps(plan)],
        capture_output=True, text=True, timeout=300, cwd="/", env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["with_token"] == 200  # nobody reaches the server: what keeps it out is the token alone
    assert {route: status for route, status in seen["http"].items() if status != 401} == {}
    assert len(seen["http"]) == len(set(http))
    assert all(line.split()[1] == "403" for line in seen["ws"].values()), seen["ws"]  # refused before the handshake
    assert set(seen["files"].values()) == {"PermissionError"}, seen["files"]


def test_a_token_is_never_written_to_the_log_even_when_the_request_is_refused(
    served: tuple[ServeProcess, dict[str, str]],
) -> None:
    server, ids = served
    token = server.token
    assert token is not None
    url = server.url
    before = len(server.output())
    refused_host = httpx.get(f"{url}{API}/runs?access_token={token}", headers={"Host": "evil.example"})
    refused_origin = httpx.post(f"{url}{API}/runs/{ids['run']}/cancel?access_token={token}",
                                headers={"Origin": "http://evil.example"})  # fmt: skip
    with pytest.raises(InvalidStatus):
        connect(f"{server.url.replace('http', 'ws')}/api/sessions/x/stream?access_token={token}",
                origin="http://evil.example", open_timeout=30)  # fmt: skip
    accepted = httpx.get(f"{url}{API}/runs?b=2&access_token={token}")
    encoded = httpx.get(f"{url}{API}/queue?access%5Ftoken={token}")
    in_a_post = httpx.post(f"{url}{API}/runs/{ids['run']}/cancel?access_token={token}")
    statuses = [r.status_code for r in (refused_host, refused_origin, accepted, encoded, in_a_post)]
    assert statuses == [403, 403, 200, 200, 401]
    deadline = time.monotonic() + 30
    while f"{API}/runs/{ids['run']}/cancel" not in server.output()[before:].rsplit("403", 1)[-1]:
        assert time.monotonic() < deadline, server.output()[before:]
        time.sleep(0.1)
    logged = server.output()[before:]
    assert f'"GET {API}/runs HTTP/1.1" 403' in logged and f'"GET {API}/runs?b=2 HTTP/1.1" 200' in logged
    assert '"WebSocket /api/sessions/x/stream" 403' in logged
    assert token not in logged
    assert server.output().count(token) == 1  # the URL printed at start, to the user who started it


def test_forwarded_headers_are_believed_only_from_a_proxy_the_operator_names(tmp_path: Path) -> None:
    forwarded = {"X-Forwarded-For": "203.0.113.9"}
    plain = ServeProcess(tmp_path / "plain")
    try:
        assert plain.client.get(f"{API}/queue", headers=forwarded).status_code == 200
    finally:
        plain.close()
    proxied = ServeProcess(tmp_path / "proxied", "--trusted-proxy", "127.0.0.1")
    try:
        assert proxied.client.get(f"{API}/queue", headers=forwarded).status_code == 200
    finally:
        proxied.close()
    assert re.search(rf'127\.0\.0\.1:\d+ - "GET {API}/queue', plain.output()), plain.output()
    assert "203.0.113.9" not in plain.output()
    assert re.search(rf'203\.0\.113\.9:\d+ - "GET {API}/queue', proxied.output()), proxied.output()


def test_an_existing_log_dir_open_to_others_is_left_as_it_is_and_named_in_a_warning(tmp_path: Path) -> None:
    log_dir = tmp_path / "shared-runs"
    log_dir.mkdir()
    log_dir.chmod(0o755)
    server = ServeProcess(log_dir)
    server.close()
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o755  # not changed behind its owner's back
    assert f"warning: other users may read {log_dir} (mode 0755)" in server.output()
    assert f"chmod 700 {log_dir}" in server.output()
    assert stat.S_IMODE((log_dir / "jobs.sqlite").stat().st_mode) == 0o600  # what the server makes is private


def test_the_interactive_docs_are_off_unless_asked_for_and_the_schema_needs_the_token(tmp_path: Path) -> None:
    token = "docs-token-0123456789"
    with JobScheduler(tmp_path / "runs") as scheduler:
        plain = Served(create_app(scheduler, token=token), token)
        docs = Served(create_app(scheduler, token=token, docs=True), token)
        try:
            for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
                assert plain.client.get(path).status_code == 404, path
            for path in ("/docs", "/redoc"):
                page = httpx.get(docs.url + path)  # a navigation carries no header: the page holds no data
                assert page.status_code == 200 and "hylo:token" in page.text, path
                assert "@5/" not in page.text and "@2/" not in page.text  # pinned versions, not the latest
                loaded = re.findall(r"<(?:script|link)\b[^>]*\b(?:src|href)=[^>]*>", page.text)
                assert loaded and all('integrity="sha384-' in tag for tag in loaded), loaded  # and their hashes
                assert all('crossorigin="anonymous"' in tag for tag in loaded), loaded
            for server in (plain, docs):
                assert httpx.get(server.url + "/openapi.json").status_code == 401
                assert server.client.get("/openapi.json").status_code == 200
        finally:
            plain.close()
            docs.close()
