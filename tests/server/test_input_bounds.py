"""Every input of the API is bounded: a value past its bound is a 422 naming the field, never a 500, a queued job
that grows without bound, or an answer the error handler cannot write; and a request never picks a Ray cluster or a
URL the server connects to."""

from __future__ import annotations

import codecs
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from fastapi import FastAPI
from live_server import LiveServer
from served_app import Served
from test_api import refused_fields
from test_catalog import mount_catalog

from hylo.graph.store import GraphStore
from hylo.jobs import JobScheduler
from hylo.server import ServerAccess
from hylo.server.problems import exception_handlers

API = "/api/eval/v2"
QUICK = {"benchmark": "babyai", "agent": "random", "tasks": ["GoToLocal"], "episodes": 1}


@pytest.fixture(scope="module")
def idle_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for the refusals (its scheduler never starts: nothing it queued would run)."""
    scheduler = JobScheduler(tmp_path_factory.mktemp("bounds") / "runs")
    server = LiveServer(scheduler)
    yield server
    server.close()
    scheduler.close()


def raw_start(client: httpx.Client, text: str) -> httpx.Response:
    """POST /start with a body written by hand (JSON that `json=` cannot produce, such as 1e400)."""
    return client.post(f"{API}/start", content=text.encode(), headers={"content-type": "application/json"})


@pytest.mark.parametrize(
    "field, value",
    [
        ("episodes", "100000000000000000000000"),
        ("episodes", "100001"),
        ("seed", str(2**63)),
        ("seed", "-1"),
        ("priority", str(10**26)),
        ("priority", "-1000001"),
        ("ram_gb", "1e400"),
        ("gpu_mem_gb", "1e400"),
        ("cpus", str(10**30)),
        ("act_timeout", "1e9"),
        ("episode_timeout", "86401"),
        ("max_steps", str(10**12)),
        ("workers", "100000"),
        ("video", "100000000"),
        ("retry_infra", str(2**70)),
        ("tasks", json.dumps(["GoToLocal"] * 10_001)),
        ("agent_args", json.dumps({"chunk": 3_000_000})),
        ("agent_args", '{"nested": ' + "[" * 20 + "]" * 20 + "}"),
        ("timing_options", json.dumps({"latency_s": 1e300})),
        ("benchmark", json.dumps("b" * 10_000)),
    ],
)
def test_a_value_past_its_bound_is_refused_naming_the_field(idle_server: LiveServer, field: str, value: str) -> None:
    client = idle_server.client
    body = json.dumps({k: v for k, v in QUICK.items() if k != field})[:-1] + f', "{field}": {value}}}'
    answer = raw_start(client, body)
    assert refused_fields(answer) == [field], answer.text
    assert client.get(f"{API}/queue").json()["jobs"] == []


def test_workers_beyond_this_machines_cpus_are_refused(make_server) -> None:
    client = make_server(start=False).client
    cpus = psutil.Process().cpu_affinity() or [0]
    answer = client.post(f"{API}/start", json={**QUICK, "workers": len(cpus) + 1, "cpus": 1})
    assert refused_fields(answer) == ["workers"] and "usable CPUs" in answer.json()["detail"][0]["msg"]


def test_a_deep_json_body_is_refused_before_it_is_parsed(make_server) -> None:
    client = make_server(start=False).client
    for path, method in ((f"{API}/start", "POST"), ("/api/graphs/deep", "PUT"), ("/api/sessions", "POST")):
        body = '{"graph": ' + "[" * 100_000 + "]" * 100_000 + "}"
        answer = client.request(method, path, content=body.encode(), headers={"content-type": "application/json"})
        assert answer.status_code == 422, (path, answer.text)
        assert "nests deeper than" in answer.json()["detail"][0]["msg"]
    assert client.get(f"{API}/queue").status_code == 200  # the server is fine


CHARSETS = {
    "UTF-16-LE": lambda text: text.encode("utf-16-le"),
    "UTF-16-BE": lambda text: text.encode("utf-16-be"),
    "UTF-16-LE with BOM": lambda text: codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
    "UTF-16-BE with BOM": lambda text: codecs.BOM_UTF16_BE + text.encode("utf-16-be"),
    "UTF-32-LE": lambda text: text.encode("utf-32-le"),
    "UTF-32-BE": lambda text: text.encode("utf-32-be"),
    "UTF-32-LE with BOM": lambda text: codecs.BOM_UTF32_LE + text.encode("utf-32-le"),
    "UTF-32-BE with BOM": lambda text: codecs.BOM_UTF32_BE + text.encode("utf-32-be"),
    "UTF-8 with BOM": lambda text: codecs.BOM_UTF8 + text.encode(),
}
"""JSON in every encoding the parser reads (RFC 8259 §8.1 and its predecessors), as a client may send it."""

JSON_ROUTES = [
    ("POST", f"{API}/start"),
    ("PUT", "/api/graphs/deep"),
    ("POST", "/api/sessions"),
    ("POST", "/api/env-panels/env_babyai/field"),
    ("POST", "/api/env-panels/env_babyai/action"),
]
"""Every route that takes a JSON body."""


@pytest.mark.parametrize("charset", list(CHARSETS))
def test_a_deep_json_body_is_refused_in_every_charset_on_every_route(idle_server: LiveServer, charset: str) -> None:
    """'∀' (U+2200) is a quote byte beside a zero byte in UTF-16 and UTF-32: counted in the raw bytes, the brackets
    after it read as the inside of a string, and 900 levels reached the parser (a graph's `PUT` answered 500)."""
    client = idle_server.client
    text = '{"description": "\u2200", "name": ' + "[" * 900 + "]" * 900 + "}"
    for method, path in JSON_ROUTES:
        answer = client.request(method, path, content=CHARSETS[charset](text),
                                headers={"content-type": "application/json"})  # fmt: skip
        assert answer.status_code == 422, (path, answer.status_code, answer.text[:200])
        assert "nests deeper than 64 levels" in answer.json()["detail"][0]["msg"], path
    assert client.get("/api/graphs/deep").status_code == 404
    assert client.get(f"{API}/queue").json()["jobs"] == []


@pytest.mark.parametrize("charset", list(CHARSETS))
def test_a_json_body_in_any_charset_the_parser_reads_is_taken(idle_server: LiveServer, charset: str) -> None:
    client = idle_server.client
    name = "charset-" + charset.replace(" ", "-").lower()
    graph = {"description": "héllo \u2200 [not a bracket", "nodes": []}
    saved = client.put(f"/api/graphs/{name}", content=CHARSETS[charset](json.dumps(graph, ensure_ascii=False)),
                       headers={"content-type": "application/json"})  # fmt: skip
    assert saved.status_code == 200, saved.text
    assert client.get(f"/api/graphs/{name}").json()["description"] == graph["description"]


def test_the_graph_routes_refuse_a_body_too_deep_to_parse_wherever_they_are_mounted(tmp_path: Path) -> None:
    """Without the server's body limits in front (which count the depth first), the parser's own limit is met."""
    app = FastAPI(exception_handlers=exception_handlers())
    mount_catalog(app, GraphStore(tmp_path / "graphs"))
    served = Served(app)
    try:
        body = ("[" * 100_000 + "]" * 100_000).encode("utf-16")
        answer = served.client.put("/api/graphs/deep", content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 422, answer.text
        assert "cannot be read as a graph: RecursionError" in json.dumps(answer.json())
        assert served.client.get("/api/graphs/deep").status_code == 404
    finally:
        served.close()


def test_the_queue_takes_max_queued_jobs_then_answers_429(make_server) -> None:
    client = make_server(start=False, max_queued=3).client
    for seed in range(3):
        assert client.post(f"{API}/start", json={**QUICK, "seed": seed}).status_code == 200
    full = client.post(f"{API}/start", json={**QUICK, "seed": 99})
    assert full.status_code == 429 and "3" in full.json()["detail"]
    assert len(client.get(f"{API}/queue").json()["jobs"]) == 3
    run = client.get(f"{API}/queue").json()["jobs"][0]["run_id"]
    assert client.post(f"{API}/runs/{run}/cancel").status_code == 200
    assert client.post(f"{API}/start", json={**QUICK, "seed": 99}).status_code == 200  # room again


def test_a_session_cannot_size_the_servers_memory(make_server) -> None:
    client = make_server(start=False).client
    before = psutil.Process().memory_info().rss
    for args in ({"chunk": 3_000_000}, {"chunk": 0}, {"chunk": True}, {"chonk": 2}):
        answer = client.post("/api/sessions", json={"agent": "random", "agent_args": args,
                                                    "placement": {"benchmark": "babyai"}})  # fmt: skip
        assert answer.status_code == 422, (args, answer.text)
        assert answer.json()["detail"][0]["loc"] == ["body", "agent_args"]
        assert "chunk" in answer.json()["detail"][0]["msg"]
    assert psutil.Process().memory_info().rss - before < 50 * 2**20
    assert client.get("/api/sessions").json()["sessions"] == []


def test_ray_over_http_needs_the_operator_and_then_joins_only_its_cluster(make_server) -> None:
    client = make_server(start=False).client
    ray = client.post(f"{API}/start", json={**QUICK, "backend": "ray", "workers": 1})
    assert refused_fields(ray) == ["backend"] and "--allow-ray" in ray.json()["detail"][0]["msg"]
    joined = client.post(f"{API}/start", json={**QUICK, "backend": "ray", "address": "10.9.9.9:6379"})
    assert refused_fields(joined) == ["address"] and "--allow-ray" in joined.json()["detail"][0]["msg"]
    assert client.get(f"{API}/queue").json()["jobs"] == []


def test_with_allow_ray_a_ray_job_uses_the_operators_address_only(make_server) -> None:
    server = make_server(start=False, access=ServerAccess.of(allow_ray="ray://head.lab:10001"))
    client = server.client
    other = client.post(f"{API}/start", json={**QUICK, "backend": "ray", "address": "ray://evil:10001"})
    assert refused_fields(other) == ["address"]
    queued = client.post(f"{API}/start", json={**QUICK, "backend": "ray"})
    assert queued.status_code == 200, queued.text
    (job,) = server.scheduler.jobs()
    assert (job.spec.backend, job.spec.address) == ("ray", "ray://head.lab:10001")


class Listener:
    """A TCP listener on loopback that counts the connections made to it (and never answers them)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join()
        self.sock.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("agent", ["openpi-remote", "vlaeval-remote"])
def test_a_request_never_makes_the_server_connect_to_its_url(make_server, agent: str) -> None:
    listener = Listener()
    try:
        client = make_server(start=False).client
        texts = []
        for port in (listener.port, closed_port()):
            spec = {**QUICK, "agent": agent, "agent_args": {"url": f"ws://127.0.0.1:{port}"}}
            answer = client.post(f"{API}/start", json=spec)
            assert refused_fields(answer) == ["agent_args"] and "--allow-remote" in answer.json()["detail"][0]["msg"]
            texts.append(answer.json()["detail"][0]["msg"].replace(str(port), "PORT"))
        assert texts[0] == texts[1]  # an open and a closed port read the same: the request learns nothing
        session = client.post("/api/sessions", json={"agent": agent, "agent_args": {"url": f"ws://127.0.0.1:{listener.port}"},
                                                     "placement": {"benchmark": "babyai"}})  # fmt: skip
        assert session.status_code == 422 and "--allow-remote" in session.text
        huge = {**QUICK, "agent": agent, "agent_args": {"url": f"ws://127.0.0.1:{listener.port}", "timeout": 1e9}}
        assert refused_fields(client.post(f"{API}/start", json=huge)) == ["agent_args"]
        time.sleep(0.5)
        assert listener.accepted == 0  # nothing connected to it while the requests were handled
    finally:
        listener.close()


def test_an_allowed_policy_server_is_queued_without_being_contacted(make_server) -> None:
    listener = Listener()
    try:
        access = ServerAccess.of(allow_remote=[f"ws://127.0.0.1:{listener.port}/policies"])
        client = make_server(start=False, access=access).client
        inside = f"ws://127.0.0.1:{listener.port}/policies/pi0"
        queued = client.post(f"{API}/start", json={**QUICK, "agent": "openpi-remote", "agent_args": {"url": inside}})
        assert queued.status_code == 200, queued.text
        for outside in (
            f"ws://127.0.0.1:{listener.port}/other",
            f"ws://127.0.0.1:{listener.port}/policiesX",
            f"ws://127.0.0.1:{listener.port + 1}/policies",
            f"ws://127.0.0.1:{listener.port}@evil.example/policies",
            f"wss://127.0.0.1:{listener.port}/policies",
        ):
            spec = {**QUICK, "agent": "openpi-remote", "agent_args": {"url": outside}, "seed": 1}
            assert refused_fields(client.post(f"{API}/start", json=spec)) == ["agent_args"], outside
        time.sleep(0.5)
        assert listener.accepted == 0  # the job's own process connects when it runs, never the request
    finally:
        listener.close()
