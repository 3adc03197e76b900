"""What the runs dashboard reads: the runs with their health and agent arguments, a run with its summary per task,
an episode by its id, its trace and video, two runs compared, and the web UI's own files served at `/` (without the
token, which guards every API route)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from live_server import run_job

from hylo.core.status import EpisodeStatus
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.store import EvalLog
from hylo.server import web
from hylo.stats.success import mcnemar_exact, wilson_interval

API = "/api/eval/v2"


def test_a_run_is_served_with_its_summary_per_task_trace_and_video(make_server):
    client = make_server().client
    run = run_job(client, tasks=["GoToLocal", "PickupLoc"], episodes=2, video=1)

    detail = client.get(f"{API}/runs/{run}").json()
    assert detail["run"]["run_id"] == run and detail["run"]["status"] == "complete" and detail["job"] is None
    summary = detail["summary"]
    assert summary["n"] == 4 and set(summary["per_task"]) == {"GoToLocal", "PickupLoc"}
    for task, per_task in summary["per_task"].items():
        rows = client.get(f"{API}/runs/{run}/episodes", params={"task": task}).json()
        assert rows["total"] == per_task["n"] == 2
        successes = sum(row["status"] == "success" for row in rows["episodes"])
        assert per_task["successes"] == successes and per_task["status_counts"]["success"] == successes
        assert per_task["success_ci"] == list(wilson_interval(successes, per_task["scored"]))
        assert per_task["conservative_success_rate"] == successes / 2
    assert summary["status_counts"]["success"] == sum(s["successes"] for s in summary["per_task"].values())

    episode = client.get(f"{API}/runs/{run}/episodes", params={"task": "GoToLocal"}).json()["episodes"][0]
    trace = client.get(f"{API}/runs/{run}/trace", params={"episode": episode["episode_id"]}).json()
    assert trace["episode_id"] == episode["episode_id"] and trace["attempt"] == 1 and trace["attempts"] == [1]
    kinds = [event["event"] for event in trace["events"]]
    assert kinds[:2] == ["signal", "episode.start"] and kinds[-2:] == ["episode.end", "signal"] and "action" in kinds
    assert (
        client.get(f"{API}/runs/{run}/trace", params={"episode": episode["episode_id"], "attempt": 2}).status_code
        == 404
    )
    assert client.get(f"{API}/runs/{run}/trace", params={"episode": "no/such/episode"}).status_code == 404

    assert episode["video"], "the first episode of each task is recorded"
    video = client.get(f"{API}/runs/{run}/video", params={"episode": episode["episode_id"]})
    assert video.status_code == 200 and video.headers["content-type"] == "video/mp4" and len(video.content) > 1000
    second = client.get(f"{API}/runs/{run}/episodes", params={"task": "GoToLocal", "offset": 1}).json()["episodes"][0]
    missing = client.get(f"{API}/runs/{run}/video", params={"episode": second["episode_id"]})
    assert missing.status_code == 404 and "no video" in missing.json()["detail"]
    assert client.get(f"{API}/runs/nope").status_code == 404


def test_two_runs_of_the_same_episodes_are_compared_with_mcnemar(make_server):
    client = make_server().client
    expert = run_job(client, episodes=6)
    randomly = run_job(client, agent="random", episodes=6)

    compared = client.get(f"{API}/compare", params={"a": randomly, "b": expert})
    assert compared.status_code == 200, compared.text
    result = compared.json()
    assert (result["run_a"], result["run_b"]) == (randomly, expert)
    assert result["timing_a"] == result["timing_b"] == {"protocol": None, "timing": "sync", "timing_options": {}}
    statuses = {}
    for run in (randomly, expert):
        for row in client.get(f"{API}/runs/{run}/episodes").json()["episodes"]:
            statuses.setdefault(row["episode_id"], []).append(row["status"] == "success")
    b_only = sum(not a and b for a, b in statuses.values())
    a_only = sum(a and not b for a, b in statuses.values())
    assert result["n_pairs"] == 6 and (result["a_only"], result["b_only"]) == (a_only, b_only)
    assert result["p_value"] == mcnemar_exact(a_only, b_only)
    assert sorted(flip["episode_id"] for flip in result["flips"]) == sorted(
        episode for episode, (a, b) in statuses.items() if a != b
    )
    unknown = client.get(f"{API}/compare", params={"a": randomly, "b": "nope"})
    assert unknown.status_code == 404 and "nope" in unknown.json()["detail"]


def test_the_web_ui_is_served_at_root_without_the_token_and_the_api_still_needs_it(make_server):
    server = make_server(token="s3cret-token", start=False)
    bare = httpx.Client(base_url=server.url, timeout=30)
    try:
        page = bare.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.headers["cache-control"] == "no-cache"
        assets = [part.split('"')[0] for part in page.text.split('src="./')[1:]]
        assert assets and assets[0].startswith("assets/")
        script = bare.get(f"/{assets[0]}")
        assert script.status_code == 200 and "immutable" in script.headers["cache-control"]
        assert bare.get(f"{API}/runs").status_code == 401
        assert bare.get("/openapi.json").status_code == 401
        assert bare.post("/", json={}).status_code == 401
        assert bare.get("/assets/../openapi.json").status_code == 401
    finally:
        bare.close()


def test_a_server_without_a_built_ui_says_how_to_build_it(make_server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv(web.WEB_DIR_ENV, str(tmp_path / "empty"))
    client = make_server(start=False).client
    missing = client.get("/")
    assert missing.status_code == 404 and "make web" in missing.text
    assert client.get(f"{API}/runs").status_code == 200


def _write_run(log_dir: Path, run_id: str, statuses: list[EpisodeStatus], agent_args: dict[str, object]) -> None:
    """A run of one episode per status, as `hylo eval` logs it (without running anything)."""
    rows = [
        EpisodeRow(
            episode_id=f"babyai/default/GoToLocal/{index:04d}@s0",
            task="GoToLocal",
            split="default",
            index=index,
            base_seed=0,
            seed=index,
            status=status,
            reason="success" if status is EpisodeStatus.SUCCESS else "agent raised RuntimeError: boom",
            success=status is EpisodeStatus.SUCCESS,
            steps=3,
        )
        for index, status in enumerate(statuses)
    ]
    spec = {"benchmark": "babyai", "agent": "random", "agent_args": agent_args, "split": "default"}
    with EvalLog.create(
        log_dir / run_id, run_id=run_id, benchmark="babyai", split="default", agent="random", digest=run_id,
        spec=spec, n_planned=len(rows), versions={},
    ) as log:  # fmt: skip
        log.record_many([(row, []) for row in rows])
        log.update_run(status="complete")


def test_the_runs_list_says_how_each_run_went_and_an_episode_is_served_by_its_id(make_server, log_dir: Path):
    error, success = EpisodeStatus.ERROR, EpisodeStatus.SUCCESS
    _write_run(log_dir, "crashed", [error, error, error], {"gain": 10})
    _write_run(log_dir, "mostly", [error, EpisodeStatus.INFRA_INVALID, success], {"gain": 20})
    _write_run(log_dir, "fine", [success, EpisodeStatus.FAILURE, success], {})
    client = make_server(start=False).client

    runs = {run["run_id"]: run for run in client.get(f"{API}/runs").json()["runs"]}
    assert {run_id: run["health"] for run_id, run in runs.items()} == {
        "crashed": "all_errors",
        "mostly": "mostly_errors",
        "fine": "ok",
    }
    assert all(run["status"] == "complete" for run in runs.values())
    crashed, fine = runs["crashed"], runs["fine"]
    assert crashed["status_counts"]["error"] == 3 and crashed["scored"] == 0 and crashed["success_rate"] is None
    assert (fine["scored"], fine["successes"], fine["success_rate"]) == (3, 2, 2 / 3)
    assert fine["success_ci"] == list(wilson_interval(2, 3))
    assert runs["mostly"]["spec"]["agent_args"] == {"gain": 20} != crashed["spec"]["agent_args"]
    assert client.get(f"{API}/runs/mostly").json()["run"]["health"] == "mostly_errors"

    answer = client.get(f"{API}/runs/mostly/episode", params={"episode": "babyai/default/GoToLocal/0001@s0"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["run_id"] == "mostly"
    episode = answer.json()["episode"]
    listed = client.get(f"{API}/runs/mostly/episodes", params={"status": "infra_invalid"}).json()["episodes"]
    assert episode == listed[0] and episode["status"] == "infra_invalid"
    missing = client.get(f"{API}/runs/mostly/episode", params={"episode": "babyai/default/GoToLocal/0009@s0"})
    assert missing.status_code == 404 and "0009" in missing.json()["detail"]
    assert client.get(f"{API}/runs/mostly/episode").status_code == 422  # the episode is named


def test_a_run_is_served_with_its_code_and_how_it_differs_from_the_same_configuration(make_server, log_dir: Path):
    client = make_server().client
    run_job(client, run_id="code-a")
    run_job(client, run_id="code-b")
    detail = client.get(f"{API}/runs/code-b").json()
    code = detail["code"]
    assert code == detail["run"]["spec"]["code"] and len(code["digest"]) == 16
    (agent,) = code["agents"]
    assert agent["agent"] == "expert" and any(part["kind"] == "source" for part in agent["parts"])
    changes = detail["code_changes"]
    assert changes["against"] == "code-a" and changes["same_code"] is True and changes["changes"] == []
    listed = {run["run_id"]: run for run in client.get(f"{API}/runs").json()["runs"]}
    assert listed["code-b"]["spec"]["code"] == {"digest": code["digest"]}  # the whole identity is the run's own

    _write_run(log_dir, "before-code", [EpisodeStatus.SUCCESS], {})  # a run made before runs recorded their code
    older = client.get(f"{API}/runs/before-code").json()
    assert older["code"] is None and older["code_changes"] is None
