"""Benchmark options over HTTP are data: a job sets only the options its benchmark declares, within their bounds; an
option that names a file, another env or an unbounded size is refused naming it, without the server touching the
filesystem; the ids that build another library's env are refused wherever a request names a benchmark."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from live_server import LiveServer, wait_final
from test_api import refused_fields

from hylo.evallog.store import EvalLog
from hylo.server import ServerAccess

API = "/api/eval/v2"
PENDULUM = "gym:InvertedPendulum-v5"
MakeServer = Callable[..., LiveServer]


def job(benchmark: str, env_args: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"benchmark": benchmark, "agent": "random", "env_args": env_args, "episodes": 1, "max_steps": 3, **more}


def refusal(server: LiveServer, body: dict[str, Any], field: str) -> str:
    """The message of a 422 naming `field` alone; nothing is queued."""
    answer = server.client.post(f"{API}/start", json=body)
    assert refused_fields(answer) == [field], answer.text
    assert server.client.get(f"{API}/queue").json()["jobs"] == []
    return str(answer.json()["detail"][0]["msg"])


@pytest.mark.parametrize("access", [None, ServerAccess.of(allow_import=True)], ids=["default", "allow-import"])
def test_a_file_option_is_refused_alike_whether_the_file_exists_or_not(
    make_server: MakeServer, tmp_path: Path, access: ServerAccess | None
) -> None:
    server = make_server(start=False, access=access)
    absent = tmp_path / "absent.xml"
    messages = {
        path: refusal(server, job(PENDULUM, {"xml_file": path}), "env_args")
        for path in ("/etc/shadow", "/etc/passwd", str(absent), "inverted_pendulum.xml")
    }
    assert len(set(messages.values())) == 1, messages  # the answer says nothing about which paths exist
    message = messages["/etc/shadow"]
    assert "'xml_file'" in message and "file or path" in message and "not accepted over HTTP" in message
    assert "XML" not in message and "does not exist" not in message


@pytest.mark.parametrize(
    ("benchmark", "env_args", "named"),
    [
        (PENDULUM, {"width": 10**12}, "'width' must be an integer from 16 to 4096"),
        (PENDULUM, {"height": 10**12}, "'height' must be an integer from 16 to 4096"),
        (PENDULUM, {"frame_skip": 10**12}, "'frame_skip' must be an integer from 1 to 100"),
        (PENDULUM, {"width": "64"}, "'width' must be an integer"),
        (PENDULUM, {"max_geom": 10**12}, "'max_geom' is not accepted over HTTP"),
        (PENDULUM, {"max_episode_steps": 10**9}, "'max_episode_steps' must be an integer from 1 to 1000000"),
        ("gym:FrozenLake-v1", {"desc": ["F" * 240] * 250}, "'desc' is not accepted over HTTP"),
        ("gym:FrozenLake-v1", {"map_name": "100x100"}, "'map_name' must be one of '4x4', '8x8'"),
        ("gym:CartPole-v1", {"env_id": "CartPole-v1"}, "'env_id' is not accepted over HTTP (it names another env"),
        ("gym:CartPole-v1", {"env": "CartPole-v1"}, "'env' is not accepted over HTTP (it names another env"),
        ("gym:CartPole-v1", {"render_mode": "human"}, "'render_mode' is not accepted over HTTP (hylo sets it"),
        ("babyai", {"tile_size": 8}, "'tile_size' is not accepted over HTTP"),
        ("libero", {"image_size": 10**6}, "'image_size' must be an integer from 16 to 1024"),
    ],
)
def test_an_undeclared_or_out_of_bounds_option_is_refused_naming_it(
    make_server: MakeServer, benchmark: str, env_args: dict[str, Any], named: str
) -> None:
    if benchmark == "libero":
        pytest.importorskip("libero")
    server = make_server(start=False)
    assert named in refusal(server, job(benchmark, env_args), "env_args")


@pytest.mark.parametrize("env_id", ["GymV26Environment-v0", "GymV21Environment-v0", "GymV26Environment-v7"])
def test_the_old_gym_compatibility_ids_are_refused_for_a_job_a_session_and_a_panel(
    make_server: MakeServer, env_id: str
) -> None:
    server = make_server(start=False, access=ServerAccess.of(allow_import=True))
    message = refusal(server, job(f"gym:{env_id}", {"env_id": "CartPole-v1"}), "benchmark")
    assert f"'gym:{env_id}' is refused over HTTP" in message
    assert f"'gym:{env_id}' is refused" in refusal(server, job(f"gym:{env_id}", {}), "benchmark")

    session = server.client.post("/api/sessions", json={"agent": "random", "placement": {"benchmark": f"gym:{env_id}"}})
    assert session.status_code == 422 and f"gym:{env_id}" in session.text, session.text
    panel = server.client.get(f"/api/env-panels/env_gym:{env_id}")
    assert panel.status_code == 404, panel.text


def test_the_declared_options_are_listed(make_server: MakeServer) -> None:
    listed = {b["name"]: b for b in make_server(start=False).client.get("/api/benchmarks").json()["benchmarks"]}
    assert listed["babyai"]["options"] == [] and listed["metaworld"]["options"] == []
    (image_size,) = listed["libero"]["options"]  # declared by its class, listed whether it is installed or not
    bounds = {key: image_size[key] for key in ("name", "type", "minimum", "maximum")}
    assert bounds == {"name": "image_size", "type": "int", "minimum": 16, "maximum": 1024}
    pusht = {option["name"]: option for option in listed["gym:gym_pusht/PushT-v0"]["options"]}
    if listed["gym:gym_pusht/PushT-v0"]["available"]:
        assert pusht["obs_type"]["choices"] == ["state", "environment_state_agent_pos", "pixels", "pixels_agent_pos"]
        assert (pusht["observation_width"]["minimum"], pusht["observation_width"]["maximum"]) == (16, 4096)
        assert "render_mode" not in pusht


def test_allowed_options_within_bounds_reach_the_env(make_server: MakeServer, log_dir: Path) -> None:
    pytest.importorskip("gym_pusht")
    server = make_server()
    env_args = {"obs_type": "environment_state_agent_pos", "max_episode_steps": 4}
    started = server.client.post(f"{API}/start", json=job("gym:gym_pusht/PushT-v0", env_args, max_steps=None))
    assert started.status_code == 200, started.text
    status = wait_final(server.client, started.json()["job_id"])
    assert status["state"] == "done", status["message"]
    with EvalLog.open(log_dir / started.json()["run_id"]) as log:
        (episode,) = log.final_episodes()
        obs = next(event["obs"] for event in log.trace(episode.episode_id) if event["event"] == "observation")
    assert set(obs) == {"environment_state", "state"}  # the obs_type the job asked for (the default is `state` alone)
    assert episode.steps == 4  # its max_episode_steps, the step budget
