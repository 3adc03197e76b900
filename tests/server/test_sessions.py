"""Interactive driving over a real server: place an episode through the env panel, Play / Pause / Step / Stop,
replay, change the episode, watch the stream."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from served_app import Served

from hylo.jobs import JobScheduler
from hylo.server import create_app
from hylo.sessions import SessionManager
from hylo.sessions.feed import LiveFeed


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    scheduler = JobScheduler(tmp_path / "runs")
    server = Served(create_app(scheduler))
    yield server
    for session in server.client.get("/api/sessions").json()["sessions"]:
        server.client.delete(f"/api/sessions/{session['id']}")
    server.close()
    scheduler.close()


def start(client: httpx.Client, **request: Any) -> dict[str, Any]:
    response = client.post("/api/sessions", json=request)
    assert response.status_code == 201, response.text
    session: dict[str, Any] = response.json()
    return session


def press(client: httpx.Client, panel: str, action: str, status: int = 200) -> dict[str, Any]:
    response = client.post(f"/api/env-panels/{panel}/action", json={"name": action})
    assert response.status_code == status, response.text
    result: dict[str, Any] = response.json()
    return result


def change(client: httpx.Client, panel: str, name: str, value: Any, status: int = 200) -> dict[str, Any]:
    response = client.post(f"/api/env-panels/{panel}/field", json={"name": name, "value": value})
    assert response.status_code == status, response.text
    result: dict[str, Any] = response.json()
    return result


def until(client: httpx.Client, session: str, test: Callable[[dict[str, Any]], bool], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state: dict[str, Any] = client.get(f"/api/sessions/{session}").json()
        if test(state):
            return state
        assert time.monotonic() < deadline, f"session {session} never got there: {state}"
        time.sleep(0.01)


def idle_after(client: httpx.Client, session: str, executions: int, timeout: float = 60) -> dict[str, Any]:
    return until(client, session, lambda s: s["state"] == "idle" and s["executions"] == executions, timeout)


def actions_of(client: httpx.Client, session: str) -> list[Any]:
    """The actions of the session's last execution, from its event feed."""
    events = client.get(f"/api/sessions/{session}/events", params={"after": 0, "limit": 2000}).json()["events"]
    starts = [i for i, e in enumerate(events) if e["event"] == "episode.start"]
    return [e["action"] for e in events[starts[-1] :] if e["event"] == "action"]


# -- the canonical path --------------------------------------------------------------------------------------------


def test_play_runs_the_placed_episode_to_its_outcome_and_shows_its_frames_and_trace(served: Served) -> None:
    client = served.client
    session = start(client, agent="expert", placement={"benchmark": "babyai", "task": "GoToLocal", "episode_index": 4})
    assert session["state"] == "idle" and session["panel"] == "env_babyai" and session["graph"] == "expert_on_babyai"
    panel = client.get("/api/env-panels/env_babyai").json()
    assert panel["session"]["id"] == session["id"]
    assert panel["state"]["episode_id"] == "babyai/default/GoToLocal/0004@s0"
    assert {a["name"] for a in panel["actions"]} == {"play", "pause", "step", "stop"}

    result = press(client, "env_babyai", "play")
    assert result["carried_out"] == "run_start" and result["side_effect"] == "run_start"
    done = idle_after(client, session["id"], 1)
    assert done["episode_id"] == "babyai/default/GoToLocal/0004@s0"
    assert done["last_outcome"]["status"] == "success" and done["last_outcome"]["reason"] == "success"
    assert done["step"] == done["last_outcome"]["steps"] > 0
    assert done["last_execution"]["steps"] == done["step"]

    frame = client.get(done["frame"]["url"])
    assert frame.status_code == 200 and frame.headers["content-type"] == "image/png"
    assert frame.content.startswith(b"\x89PNG") and int(frame.headers["X-Frame-Step"]) == done["step"]

    events = client.get(f"/api/sessions/{session['id']}/events", params={"limit": 2000}).json()
    kinds = [e["event"] for e in events["events"]]
    for kind in ("episode.start", "observation", "agent.chunk", "safety.review", "action", "step.result", "signal",
                 "episode.end", "session.outcome"):  # fmt: skip
        assert kind in kinds, kind
    assert kinds.count("step.result") == done["step"]
    assert events["dropped"] == 0 and events["position"] == len(events["events"])


def test_step_pause_and_stop_control_a_live_execution(served: Served) -> None:
    client = served.client
    session = start(client, agent="random", placement={"benchmark": "metaworld", "task": "reach-v3"}, step_budget=400)
    sid = session["id"]
    press(client, "env_metaworld", "pause", status=409)  # nothing runs
    press(client, "env_metaworld", "step")
    paused = until(client, sid, lambda s: s["state"] == "paused")
    assert paused["step"] == 1 and paused["executions"] == 1
    press(client, "env_metaworld", "step")
    assert until(client, sid, lambda s: s["state"] == "paused" and s["step"] == 2)["step"] == 2
    time.sleep(0.2)
    assert client.get(f"/api/sessions/{sid}").json()["step"] == 2  # paused means paused

    press(client, "env_metaworld", "play")  # resumes
    running = until(client, sid, lambda s: s["state"] == "running" and s["step"] > 2)
    assert running["executions"] == 1
    press(client, "env_metaworld", "play", status=409)  # already running
    press(client, "env_metaworld", "pause")
    held = until(client, sid, lambda s: s["state"] == "paused")
    time.sleep(0.2)
    assert client.get(f"/api/sessions/{sid}").json()["step"] == held["step"] < 400

    press(client, "env_metaworld", "stop")
    stopped = idle_after(client, sid, 1)
    assert stopped["last_outcome"]["status"] == "infra_invalid"  # an abstention: neither success nor failure
    assert stopped["last_outcome"]["reason"].startswith("stopped: Stop pressed")
    assert stopped["last_outcome"]["steps"] == held["step"]
    press(client, "env_metaworld", "stop", status=409)  # nothing to stop


def test_an_episode_change_is_refused_while_running_and_accepted_while_paused(served: Served) -> None:
    client = served.client
    session = start(client, agent="random", placement={"benchmark": "metaworld", "task": "reach-v3"}, step_budget=400)
    sid = session["id"]
    press(client, "env_metaworld", "play")
    until(client, sid, lambda s: s["state"] == "running" and s["step"] > 0)
    refused = client.post("/api/env-panels/env_metaworld/field", json={"name": "episode_index", "value": 7})
    assert refused.status_code == 409
    assert "would move the episode while an execution is running" in refused.json()["detail"]
    assert client.get("/api/env-panels/env_metaworld").json()["state"]["episode_index"] == 0  # untouched

    press(client, "env_metaworld", "pause")
    until(client, sid, lambda s: s["state"] == "paused")
    moved = change(client, "env_metaworld", "episode_index", 7)
    assert moved["forwarded"] is True and moved["signal_name"] == "episode_reset"
    assert moved["session"]["state"] == "idle"
    assert moved["session"]["last_outcome"]["reason"].startswith("stopped: the episode was moved")
    assert client.get("/api/env-panels/env_metaworld").json()["state"]["episode_id"].endswith("/0007@s0")
    bad = client.post("/api/env-panels/env_metaworld/field", json={"name": "episode_index", "value": -1})
    assert bad.status_code == 422 and "-1" in bad.json()["detail"][0]["msg"]


def test_changing_the_episode_clears_episode_containers_and_keeps_run_ones(served: Served) -> None:
    client = served.client
    session = start(client, graph="babyai_memory", placement={"episode_index": 1})
    sid = session["id"]
    assert session["graph"] == "babyai_memory" and set(session["containers"]) == {"decisions", "return"}
    press(client, "env_babyai", "play")
    done = idle_after(client, sid, 1)
    assert done["last_outcome"]["status"] == "success"
    decisions, total = done["containers"]["decisions"], done["containers"]["return"]
    assert len(decisions) == done["step"] and total == pytest.approx(done["last_outcome"]["metrics"]["return"])

    same = change(client, "env_babyai", "episode_index", 1)  # not a change: nothing moves, nothing is cleared
    assert same["side_effect"] == "none" and same["session"]["containers"]["decisions"] == decisions

    moved = change(client, "env_babyai", "episode_index", 2)
    assert moved["forwarded"] is True
    assert moved["session"]["containers"]["decisions"] == []  # episode lifetime: cleared by episode_reset
    assert moved["session"]["containers"]["return"] == pytest.approx(total)  # run lifetime: kept
    events = client.get(f"/api/sessions/{sid}/events", params={"limit": 2000}).json()["events"]
    resets = [e for e in events if e["event"] == "signal" and e["signal"] == "episode_reset"]
    assert resets[-1]["episode_id"] == "babyai/default/GoToLocal/0002@s0"


# -- sticky placement: a replay re-arms the finished episode, for every built-in benchmark -------------------------


@pytest.mark.parametrize(
    ("benchmark", "agent", "task"),
    [("babyai", "expert", "GoToLocal"), ("metaworld", "expert", "reach-v3"), ("gym:CartPole-v1", "random", None)],
)
def test_play_again_replays_the_same_episode(served: Served, benchmark: str, agent: str, task: str | None) -> None:
    client = served.client
    placement = {"benchmark": benchmark, "episode_index": 3} | ({"task": task} if task else {})
    session = start(client, agent=agent, placement=placement, step_budget=150, render=False)
    sid, panel = session["id"], session["panel"]
    press(client, panel, "play")
    first = idle_after(client, sid, 1)
    first_actions = actions_of(client, sid)
    press(client, panel, "play")  # without touching the panel: the same episode, re-armed by reset
    second = idle_after(client, sid, 2, timeout=60)
    assert second["episode_id"] == first["episode_id"]
    assert second["last_outcome"] == first["last_outcome"]
    assert actions_of(client, sid) == first_actions and len(first_actions) == first["step"] > 0


# -- the stream ------------------------------------------------------------------------------------------------------


def test_the_stream_carries_the_trace_and_the_state_and_a_silent_client_never_holds_the_run(served: Served) -> None:
    client = served.client
    session = start(client, agent="expert", placement={"benchmark": "babyai", "task": "GoToLocal"})
    sid = session["id"]
    with served.websocket(f"/api/sessions/{sid}/stream") as ws:
        hello = json.loads(ws.recv(timeout=20))
        assert hello["type"] == "hello" and hello["session"]["id"] == sid
        press(client, "env_babyai", "play")
        events: list[dict[str, Any]] = []
        while True:
            message = json.loads(ws.recv(timeout=20))
            assert message["type"] == "update" and message["dropped"] == 0
            events += message["events"]
            if message["session"]["state"] == "idle" and message["session"]["executions"] == 1:
                break
        kinds = [e["event"] for e in events]
        assert kinds.count("step.result") == message["session"]["step"] > 0
        assert "container.checkpoint" not in kinds  # this graph has no containers
        assert message["session"]["last_outcome"]["status"] == "success"
        assert message["session"]["frame"]["url"].startswith(f"/api/sessions/{sid}/frame")

    with served.websocket(f"/api/sessions/{sid}/stream"):  # connected, never reading
        press(client, "env_babyai", "play")
        idle_after(client, sid, 2, timeout=30)


def test_a_reader_that_falls_behind_is_told_what_it_missed() -> None:
    feed = LiveFeed(size=4)
    for i in range(10):
        feed.write_fields({"event": "step.result", "step": i}, "step.result")
    batch = feed.read(0)
    assert batch.dropped == 6 and [e["step"] for e in batch.events] == [6, 7, 8, 9] and batch.position == 10
    assert feed.read(batch.position).events == []
    assert [e["step"] for e in feed.read(7, limit=1).events] == [7]


# -- refusals ----------------------------------------------------------------------------------------------------


def test_bad_requests_are_refused_naming_the_problem(served: Served) -> None:
    client = served.client

    def refused(status: int, **request: Any) -> str:
        response = client.post("/api/sessions", json=request)
        assert response.status_code == status, response.text
        return json.dumps(response.json())

    assert "'nosuch'" in refused(422, agent="nosuch", placement={"benchmark": "babyai"})
    assert "'os:system'" in refused(422, agent="os:system", placement={"benchmark": "babyai"})
    assert "needs a benchmark" in refused(422, agent="random")
    assert "exactly one" in refused(422, agent="random", graph="babyai_expert", placement={"benchmark": "babyai"})
    assert "'nope'" in refused(422, agent="random", placement={"benchmark": "nope"})
    assert "gym:os:Env" in refused(422, agent="random", placement={"benchmark": "gym:os:Env"})
    assert "'Nowhere'" in refused(422, agent="random", placement={"benchmark": "babyai", "task": "Nowhere"})
    assert "'missing'" in refused(422, graph="missing")

    start(client, agent="random", placement={"benchmark": "babyai"})
    assert "belongs to session" in refused(409, agent="expert", placement={"benchmark": "babyai"})
    assert client.get("/api/sessions/nosuch").status_code == 404
    assert client.get("/api/env-panels/env_nosuch").status_code == 404
    assert client.post("/api/env-panels/env_babyai/action", json={"name": "fly"}).status_code == 422


def test_a_panel_without_a_session_places_episodes_but_cannot_play(served: Served) -> None:
    client = served.client
    listed = {p["name"]: p for p in client.get("/api/env-panels").json()["panels"]}
    assert {"env_babyai", "env_metaworld"} <= set(listed) and listed["env_babyai"]["session"] is None
    moved = change(client, "env_babyai", "episode_index", 5)
    assert moved["signal_name"] == "episode_reset" and moved["forwarded"] is False
    options = client.get("/api/env-panels/env_babyai/options/task").json()["options"]
    assert "GoToLocal" in options
    refused = client.post("/api/env-panels/env_babyai/action", json={"name": "play"})
    assert refused.status_code == 409 and "POST /api/sessions" in refused.json()["detail"]
    session = start(client, agent="expert", placement={"benchmark": "babyai"})  # the panel's placement is kept
    assert client.get("/api/env-panels/env_babyai").json()["state"]["episode_index"] == 5
    assert session["panel"] == "env_babyai"


# -- a remote panel (the env nodeset in a subprocess) behaves exactly like the local one ----------------------------


def _same(answer: dict[str, Any], name: str) -> dict[str, Any]:
    """An answer with what differs between a local and a remote panel taken out (names, ids, times, context)."""
    answer = {k: v for k, v in answer.items() if k not in ("session", "name", "context")}
    return json.loads(json.dumps(answer).replace(name, "<panel>"))


def test_a_remote_panel_answers_and_drives_exactly_like_the_local_one(served: Served) -> None:
    client = served.client
    placement = {"benchmark": "babyai", "task": "GoToLocal", "episode_index": 2, "seed": 3}
    local = start(client, agent="random", placement=placement)
    remote = start(client, agent="random", placement=placement, env_mode="server")
    assert local["panel"] == "env_babyai" and remote["panel"].startswith("env_babyai#")
    listed = {p["name"]: p for p in client.get("/api/env-panels").json()["panels"]}
    assert listed[remote["panel"]]["session"] == remote["id"] and listed[remote["panel"]]["context"]["mode"] == "server"

    def script(panel: str) -> list[Any]:
        path = f"/api/env-panels/{panel.replace('#', '%23')}"
        answers: list[Any] = []
        info = client.get(path).json()
        answers.append((info["display_name"], info["fields"], info["actions"], _same(info["state"], panel)))
        answers.append(client.get(f"{path}/options/task").json()["options"][:5])
        for name, value in (("episode_index", 5), ("episode_index", "x"), ("task", "Nowhere"), ("seed", 3),
                            ("split", "nope"), ("episode_index", 1)):  # fmt: skip
            response = client.post(f"{path}/field", json={"name": name, "value": value})
            answers.append((response.status_code, _same(response.json(), panel)))
        session = client.get(path).json()["session"]["id"]
        for action in ("pause", "step", "step", "play"):
            response = client.post(f"{path}/action", json={"name": action})
            answers.append((response.status_code, _same(response.json(), panel)))
            if action == "step":
                until(client, session, lambda s: s["state"] == "paused")
        done = idle_after(client, session, 1)
        answers.append((done["episode_id"], done["last_outcome"], actions_of(client, session)))
        response = client.post(f"{path}/action", json={"name": "play"})
        answers.append(response.status_code)
        replay = idle_after(client, session, 2)
        answers.append((replay["episode_id"], replay["last_outcome"], actions_of(client, session)))
        return answers

    local_answers, remote_answers = script(local["panel"]), script(remote["panel"])
    assert remote_answers == local_answers
    assert local_answers[-1][1]["steps"] > 2 and local_answers[3][0] == 422  # it did run, and refused "x"

    client.delete(f"/api/sessions/{remote['id']}")
    names = {p["name"] for p in client.get("/api/env-panels").json()["panels"]}
    assert remote["panel"] not in names  # the proxy goes with its session


def test_sessions_work_in_python_without_http() -> None:
    from hylo.sessions import SessionGone, SessionRequest, SessionState

    sessions = SessionManager()
    try:
        session = sessions.create(
            SessionRequest(agent="expert", placement={"benchmark": "babyai", "task": "GoToLocal"})  # type: ignore[arg-type]
        )
        assert session.act("step").result().carried_out == "run_step"
        deadline = time.monotonic() + 30
        while session.state is not SessionState.PAUSED:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert session.step == 1
        session.act("play").result()
        while session.state is not SessionState.IDLE:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert session.last_outcome is not None and session.last_outcome.status.value == "success"
    finally:
        sessions.close()
    assert session.state is SessionState.CLOSED
    with pytest.raises(SessionGone, match="closed"):
        session.act("play").result()


def test_a_graph_saved_over_the_api_runs_in_a_session(served: Served) -> None:
    client = served.client
    graph = client.get("/api/graphs/babyai_memory").json()
    graph["step_budget"] = 3  # the graph's own budget: the panel reports it, the execution keeps it
    graph["name"] = "short_memory"
    assert client.put("/api/graphs/short_memory", json=graph).status_code == 200
    session = start(client, graph="short_memory", placement={"task": "GoToObj"})
    assert client.get("/api/env-panels/env_babyai").json()["state"]["step_budget"] == 3
    press(client, "env_babyai", "play")
    done = idle_after(client, session["id"], 1)
    assert done["last_outcome"]["steps"] <= 3 and done["episode_id"].startswith("babyai/default/GoToObj/")
    client.delete(f"/api/sessions/{session['id']}")
    assert client.get("/api/env-panels/env_babyai").json()["state"]["step_budget"] == 64  # GoToObj's default again


def test_with_a_token_every_route_and_the_stream_need_it(tmp_path: Path) -> None:
    from websockets.exceptions import InvalidStatus

    scheduler = JobScheduler(tmp_path / "runs")
    server = Served(create_app(scheduler, token="s3cret"), token="s3cret")
    try:
        session = start(server.client, agent="random", placement={"benchmark": "babyai"})
        bare = httpx.get(f"{server.url}/api/sessions/{session['id']}")
        assert bare.status_code == 401
        assert httpx.post(f"{server.url}/api/env-panels/env_babyai/action", json={"name": "play"}).status_code == 401
        with pytest.raises(InvalidStatus) as refused:
            server.websocket(f"/api/sessions/{session['id']}/stream").close()
        assert refused.value.response.status_code == 403
        with server.websocket(f"/api/sessions/{session['id']}/stream?access_token=s3cret") as ws:
            assert json.loads(ws.recv(timeout=20))["type"] == "hello"
    finally:
        server.client.delete(f"/api/sessions/{session['id']}")
        server.close()
        scheduler.close()


def test_a_panels_own_signal_action_and_a_field_that_does_not_move_the_episode() -> None:
    """A panel of its own: a `forget` button (a signal intent) and a `speed` slider that does not move the episode."""
    from hylo.envs.registry import get_benchmark
    from hylo.graph import compile_graph
    from hylo.graph.store import GraphStore
    from hylo.panels import BenchmarkPanel, EnvPanelAction, EnvPanelField, PanelReply, intent
    from hylo.sessions import Session, SessionSetup, SessionState

    class TunedPanel(BenchmarkPanel):
        def __init__(self, benchmark: Any) -> None:
            super().__init__(benchmark)
            self.fields = (*self.fields, EnvPanelField("speed", "slider", "Speed", min=0, max=1, moves_episode=False))
            self.actions = (*self.actions, EnvPanelAction("forget", "Forget", "signal", signal_name="episode_reset"))
            self.speed = 0.5

        async def on_field_change(self, name: str, value: Any) -> PanelReply:
            if name == "speed":
                self.speed = float(value)
                return intent()
            return await super().on_field_change(name, value)

    benchmark = get_benchmark("babyai")
    plan = compile_graph(GraphStore(Path("unused")).get("babyai_memory"))
    panel = TunedPanel(benchmark)
    session = Session("tuned", SessionSetup(plan=plan, benchmark=benchmark), panel, number=1)
    session.start()

    def wait(state: SessionState) -> None:
        deadline = time.monotonic() + 30
        while session.state is not state:
            assert time.monotonic() < deadline, session.state
            time.sleep(0.01)

    try:
        session.act("step").result()
        wait(SessionState.PAUSED)
        session.act("step").result()
        while session.step < 2:
            time.sleep(0.01)
        wait(SessionState.PAUSED)
        assert session.change_field("speed", 0.9).result().reply.effect == "none"
        assert session.state is SessionState.PAUSED and panel.speed == 0.9  # the execution goes on
        decisions = session.describe()["containers"]["decisions"]
        assert len(decisions) == 2
        forgot = session.act("forget").result()
        assert forgot.forwarded is True and session.describe()["containers"]["decisions"] == []
        assert session.state is SessionState.PAUSED
        session.act("play").result()
        wait(SessionState.IDLE)
        assert session.executions == 1 and session.last_outcome is not None
        assert session.last_outcome.status.value == "success"
        assert len(session.containers["decisions"]) == session.last_outcome.steps - 2  # only what came after
    finally:
        session.close()


def test_a_refused_or_idle_field_change_leaves_a_paused_execution_alone(served: Served) -> None:
    client = served.client
    session = start(client, agent="expert", placement={"benchmark": "babyai", "task": "GoToLocal"})
    sid = session["id"]
    began = time.monotonic()
    press(client, "env_babyai", "step")
    until(client, sid, lambda s: s["state"] == "paused")
    for name, value, status in (("episode_index", -3, 422), ("bogus", 1, 422), ("episode_index", 0, 200)):
        answer = client.post("/api/env-panels/env_babyai/field", json={"name": name, "value": value})
        assert answer.status_code == status, answer.text
        assert client.get(f"/api/sessions/{sid}").json()["state"] == "paused"
    time.sleep(1.0)  # paused time is not the execution's time
    press(client, "env_babyai", "play")
    done = idle_after(client, sid, 1)
    elapsed = time.monotonic() - began
    assert done["last_outcome"]["status"] == "success"
    assert done["last_execution"]["wall_s"] <= elapsed - 1.0


def test_step_then_play_at_once_runs_to_the_end_and_steps_add_up(served: Served) -> None:
    client = served.client
    session = start(client, agent="expert", placement={"benchmark": "babyai", "task": "GoToLocal", "episode_index": 1})
    sid = session["id"]
    press(client, "env_babyai", "step")
    press(client, "env_babyai", "step")  # a step in progress counts as paused: one more after it
    assert until(client, sid, lambda s: s["state"] == "paused")["step"] == 2
    press(client, "env_babyai", "step")
    press(client, "env_babyai", "play")  # right behind a step: resumes
    assert idle_after(client, sid, 1)["last_outcome"]["status"] == "success"


def test_concurrent_requests_for_one_panel_start_one_session(served: Served) -> None:
    import concurrent.futures

    def create(index: int) -> httpx.Response:
        request = {"agent": "random", "placement": {"benchmark": "babyai", "episode_index": index}}
        return httpx.post(f"{served.url}/api/sessions", json=request, timeout=120)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(create, (3, 7, 8, 9)))
    assert sorted(a.status_code for a in answers) == [201, 409, 409, 409]
    (won,) = [a for a in answers if a.status_code == 201]
    index = [3, 7, 8, 9][answers.index(won)]
    state = served.client.get("/api/env-panels/env_babyai").json()["state"]
    assert state["episode_index"] == index  # the winner's placement, no other
    assert len(served.client.get("/api/sessions").json()["sessions"]) == 1


def test_the_session_limit_holds_under_concurrent_requests(tmp_path: Path) -> None:
    import concurrent.futures

    from hylo.sessions import SessionConflict, SessionRequest

    sessions = SessionManager(max_sessions=1)
    requests = [SessionRequest(agent="random", placement={"benchmark": b}) for b in ("babyai", "gym:CartPole-v1")]  # type: ignore[arg-type]
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(sessions.create, r) for r in requests]
            outcomes = [f.exception() for f in futures]
        assert outcomes.count(None) == 1
        assert isinstance(next(o for o in outcomes if o is not None), SessionConflict)
        assert len(sessions.all()) == 1
    finally:
        sessions.close()


def test_a_command_withdrawn_before_the_session_took_it_is_never_carried_out() -> None:
    import threading

    from hylo.sessions import SessionRequest

    sessions = SessionManager()
    try:
        session = sessions.create(SessionRequest(agent="random", placement={"benchmark": "babyai"}))  # type: ignore[arg-type]
        gate, ran = threading.Event(), []
        busy = session.submit(gate.wait)  # the session's thread is busy with this
        later = session.submit(lambda: ran.append("later"))
        assert later.cancel()
        gate.set()
        assert busy.result(timeout=10) is True
        assert session.submit(lambda: "alive").result(timeout=10) == "alive"
        assert ran == []
    finally:
        sessions.close()


def test_a_stream_asked_for_events_beyond_the_feed_starts_at_its_end(served: Served) -> None:
    client = served.client
    session = start(client, agent="expert", placement={"benchmark": "babyai", "task": "GoToLocal"})
    with served.websocket(f"/api/sessions/{session['id']}/stream?after=1000000") as ws:
        assert json.loads(ws.recv(timeout=20))["type"] == "hello"
        press(client, "env_babyai", "play")
        kinds: list[str] = []
        while "session.outcome" not in kinds:
            kinds += [e["event"] for e in json.loads(ws.recv(timeout=20))["events"]]
        assert "step.result" in kinds


def test_the_live_answers_are_what_the_session_and_the_panel_say_of_themselves(tmp_path: Path) -> None:
    """The response models describe the live answers without changing them: a session's answers are its own views
    (`describe()`, its feed), a panel's its declaration, as JSON."""
    from hylo.core.jsonable import jsonable

    def as_json(value: Any) -> Any:
        return json.loads(json.dumps(jsonable(value)))

    with JobScheduler(tmp_path / "runs") as scheduler:
        app = create_app(scheduler)
        served = Served(app)
        try:
            client = served.client
            sid = start(client, agent="expert", placement={"benchmark": "babyai", "task": "GoToLocal"})["id"]
            press(client, "env_babyai", "step")
            until(client, sid, lambda s: s["state"] == "paused" and s["frame"] is not None)
            session = app.state.sessions.get(sid)
            assert client.get(f"/api/sessions/{sid}").json() == as_json(session.describe())
            assert client.get("/api/sessions").json() == {"sessions": [as_json(session.describe())]}
            batch = session.feed.read(3, 10)
            events = client.get(f"/api/sessions/{sid}/events", params={"after": 3, "limit": 10}).json()
            assert events == as_json({"position": batch.position, "dropped": batch.dropped, "events": batch.events})
            panel = app.state.sessions.panels.get("env_babyai")
            info = client.get("/api/env-panels/env_babyai").json()
            state = as_json(asyncio.run(panel.on_load()).to_json())  # the panel's own state, as the session left it
            assert info == {**as_json(panel.info()), "state": state, "session": as_json(session.describe())}
            assert info["state"]["task"] == "GoToLocal" and info["state"]["available"] is True
            listed = {p["name"]: p for p in client.get("/api/env-panels").json()["panels"]}
            assert listed["env_babyai"] == {"name": "env_babyai", "display_name": panel.display_name,
                                            "context": as_json(panel.info()["context"]), "session": sid,
                                            "state": "paused"}  # fmt: skip
            frame = client.get(f"/api/sessions/{sid}/frame")
            assert frame.headers["content-type"] == "image/png" and frame.content.startswith(b"\x89PNG")
            assert client.delete(f"/api/sessions/{sid}").json() == {"id": sid, "state": "closed"}
        finally:
            served.close()
