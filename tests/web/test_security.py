"""A hostile web page in a real Chromium against a real `hylo serve` on loopback: it can neither read nor change
anything, whether it re-points its own name at 127.0.0.1 (DNS rebinding) or sends requests from its own origin.

Chromium maps `evil.example` to 127.0.0.1 (`--host-resolver-rules`), as a rebinding attacker's DNS would. The
attacker's page is served by a real HTTP server on loopback, so the browser treats it as a local page and sends its
requests: what stops them is hylo's answer (its log shows each refusal), not the browser.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import CHROMIUM_ARGS, HyloServe, chromium_path, free_port
from playwright.sync_api import Browser, Page, Playwright

API = "/api/eval/v2"
QUICK = {"benchmark": "babyai", "agent": "expert", "tasks": ["GoToLocal"], "episodes": 2}
SLOW = {"benchmark": "metaworld", "agent": "random", "tasks": ["reach-v3"], "episodes": 40, "max_steps": 60,
        "timing": "realtime", "timing_options": {"clock": "wall"}}  # fmt: skip
ATTACK = "<!doctype html><title>a page of another site</title><p>nothing to see</p>"


class AttackerSite:
    """`http://evil.example:<port>/`: the attacker's own server (HTTP/1.0: every connection closes after one answer,
    so nothing of it survives once it stops)."""

    def __init__(self, port: int) -> None:
        class Page(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = ATTACK.encode()
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.port = port
        self.url = f"http://evil.example:{port}/"
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Page)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture(scope="module")
def rebinding_browser(playwright: Playwright) -> Iterator[Browser]:
    launched = playwright.chromium.launch(
        executable_path=chromium_path(), args=[*CHROMIUM_ARGS, "--host-resolver-rules=MAP evil.example 127.0.0.1"]
    )
    yield launched
    launched.close()


@pytest.fixture
def evil_page(rebinding_browser: Browser, tmp_path: Path) -> Iterator[Page]:
    context = rebinding_browser.new_context()
    context.set_default_timeout(20_000)
    page = context.new_page()
    yield page
    page.screenshot(path=str(tmp_path / "screenshot.png"))
    context.close()


def seed(server: HyloServe) -> dict[str, Any]:
    """A finished run, a running job and a live session: what a page would want to read or change."""
    done = server.api.post(f"{API}/start", json=QUICK).json()
    deadline = time.monotonic() + 90
    while server.api.get(f"{API}/status/{done['job_id']}").json()["state"] != "done":
        assert time.monotonic() < deadline, "the seed run did not finish"
        time.sleep(0.2)
    running = server.api.post(f"{API}/start", json=SLOW).json()
    session = server.api.post("/api/sessions", json={"agent": "random", "placement": {"benchmark": "babyai"}}).json()
    return {"run": done["run_id"], "job": running["job_id"], "running_run": running["run_id"], "session": session["id"]}


def state(server: HyloServe) -> dict[str, Any]:
    """What the page must not be able to change: which jobs there are and whether one was cancelled (a job moves from
    queued to running to done on its own, as fast as the machine lets it), runs, graphs and sessions."""
    jobs = server.api.get(f"{API}/queue").json()["jobs"]
    return {
        "jobs": sorted((j["job_id"], j["state"] == "cancelled") for j in jobs),
        "runs": sorted(r["run_id"] for r in server.api.get(f"{API}/runs").json()["runs"]),
        "graphs": sorted(g["name"] for g in server.api.get("/api/graphs").json()["graphs"]),
        "sessions": sorted(s["id"] for s in server.api.get("/api/sessions").json()["sessions"]),
    }


def refusals(server: HyloServe, since: int) -> list[str]:
    """The request lines hylo answered 403, in its log after byte `since`."""
    text = server.log_path.read_text(errors="replace")[since:]
    return re.findall(r'"((?:GET|POST|PUT|DELETE|OPTIONS) [^ ]+) HTTP/1\.1" 403', text) + re.findall(
        r'"WebSocket ([^ "]+)" 403', text
    )


ATTEMPTS = """async ([base, wsBase, seeded, graph]) => {
    const out = {};
    const tryFetch = async (name, url, init) => {
        try {
            const answer = await fetch(url, init);
            const body = answer.type === "opaque" ? "" : await answer.text();
            out[name] = {status: answer.status, type: answer.type, body};
        } catch (error) { out[name] = {error: String(error)}; }
    };
    const job = (seed) => JSON.stringify({benchmark: "babyai", agent: "random", seed});
    await tryFetch("runs", base + "/api/eval/v2/runs", {});
    await tryFetch("sessions", base + "/api/sessions", {});
    const cancel = `/api/eval/v2/runs/${seeded.running_run}/cancel`;
    await tryFetch("cancel", base + cancel, {method: "POST", mode: "no-cors"});
    await tryFetch("start", base + "/api/eval/v2/start",
        {method: "POST", mode: "no-cors", headers: {"content-type": "text/plain"}, body: job(66)});
    await tryFetch("start_json", base + "/api/eval/v2/start",
        {method: "POST", headers: {"content-type": "application/json"}, body: job(67)});
    await tryFetch("graph", base + "/api/graphs/planted", {method: "PUT",
        headers: {"content-type": "application/json"}, body: JSON.stringify(graph)});
    await tryFetch("delete_session", base + `/api/sessions/${seeded.session}`, {method: "DELETE"});
    out.ws = await new Promise((resolve) => {
        const ws = new WebSocket(wsBase + `/api/sessions/${seeded.session}/stream`);
        ws.onmessage = (event) => { resolve("read: " + String(event.data).slice(0, 40)); ws.close(); };
        ws.onerror = () => resolve("refused");
        setTimeout(() => resolve("timeout"), 10000);
    });
    return out;
}"""


def attack(page: Page, base: str, seeded: dict[str, Any], graph: dict[str, Any]) -> dict[str, Any]:
    ws_base = base.replace("http://", "ws://", 1)
    result: dict[str, Any] = page.evaluate(ATTEMPTS, [base, ws_base, seeded, {**graph, "name": "planted"}])
    return result


def assert_learned_nothing(outcome: dict[str, Any], seeded: dict[str, Any]) -> None:
    leaked = json.dumps({k: v for k, v in outcome.items() if k != "ws"})
    for secret in (seeded["run"], seeded["session"], seeded["job"]):
        assert secret not in leaked, f"the page read {secret}: {outcome}"
    assert outcome["ws"] != "timeout" and not outcome["ws"].startswith("read"), outcome["ws"]


def test_a_page_that_rebinds_its_name_to_loopback_can_neither_read_nor_change_anything(
    evil_page: Page, tmp_path: Path
) -> None:
    port = free_port()
    site = AttackerSite(port)
    evil_page.goto(site.url)  # the attacker's page, from the attacker's server...
    site.stop()
    server = HyloServe(tmp_path / "runs", port=port)  # ...and now its name's port is hylo's: same origin
    try:
        seeded = seed(server)
        graph = server.api.get("/api/graphs/babyai_expert").json()
        before, logged = state(server), server.log_path.stat().st_size
        outcome = attack(evil_page, f"http://evil.example:{port}", seeded, graph)
        # same origin, so the page reads every status: all are hylo's 403 for a foreign Host
        for name in ("runs", "sessions", "start_json", "graph", "delete_session"):
            assert outcome[name]["status"] == 403 and "does not answer to host" in outcome[name]["body"], outcome
        assert_learned_nothing(outcome, seeded)
        assert state(server) == before
        refused = refusals(server, logged)
        for line in (f"{API}/runs", f"{API}/start", "/api/graphs/planted", f"/api/sessions/{seeded['session']}"):
            assert any(line in entry for entry in refused), (line, refused)
        assert any(f"/api/sessions/{seeded['session']}/stream" in entry for entry in refused), refused
    finally:
        server.close()


def test_a_page_of_another_origin_can_neither_read_nor_change_anything(evil_page: Page, tmp_path: Path) -> None:
    server = HyloServe(tmp_path / "runs")
    site = AttackerSite(free_port())
    try:
        seeded = seed(server)
        graph = server.api.get("/api/graphs/babyai_expert").json()
        evil_page.goto(site.url)
        before, logged = state(server), server.log_path.stat().st_size
        outcome = attack(evil_page, server.url, seeded, graph)
        for name, answer in outcome.items():  # nothing readable: no CORS, and CORP blocks even opaque answers
            assert name == "ws" or answer == {"error": "TypeError: Failed to fetch"}, (name, answer)
        assert_learned_nothing(outcome, seeded)
        assert state(server) == before  # the job still runs, nothing was queued, saved or deleted
        refused = refusals(server, logged)
        for line in (f"{API}/runs/{seeded['running_run']}/cancel", f"{API}/start", f"{API}/runs", "/api/sessions"):
            assert any(line in entry for entry in refused), (line, refused)
        assert any(f"/api/sessions/{seeded['session']}/stream" in entry for entry in refused), refused
    finally:
        site.stop()
        server.api.post(f"{API}/runs/{seeded['running_run']}/cancel")
        server.close()
