"""`GET /runs/{run}/timeline`: an episode's trace step by step, with its video's frame of each step, and the trace
events of one step through `/trace`'s sequence range; refusals name what was wrong."""

from __future__ import annotations

from typing import Any

import av
import httpx
from live_server import run_job

API = "/api/eval/v2"


def get(client: httpx.Client, path: str, **params: Any) -> Any:
    response = client.get(f"{API}{path}", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_an_episode_timeline_matches_its_trace_and_maps_each_step_to_a_video_frame(make_server, log_dir) -> None:
    client = make_server().client
    run = run_job(client, episodes=2, video=1)
    episodes = get(client, f"/runs/{run}/episodes")["episodes"]
    recorded = next(e for e in episodes if e["video"])
    episode = recorded["episode_id"]

    line = get(client, f"/runs/{run}/timeline", episode=episode)
    trace = get(client, f"/runs/{run}/trace", episode=episode)["events"]
    actions = [e for e in trace if e["event"] == "action"]
    results = [e for e in trace if e["event"] == "step.result"]
    assert (line["run_id"], line["episode_id"], line["attempt"], line["attempts"]) == (run, episode, 1, [1])
    assert line["total_steps"] == len(line["steps"]) == recorded["steps"] == len(results) > 0
    assert [[a["action"]] for a in actions] == [row["action"] for row in line["steps"]]  # BabyAI: one discrete number
    assert [r["reward"] for r in results] == [row["reward"] for row in line["steps"]]
    assert line["end"]["status"] == recorded["status"] and line["cut"] is None
    assert len(line["chunks"]) == len([e for e in trace if e["event"] == "agent.chunk"])

    [video] = line["videos"]
    with av.open(str(log_dir / run / recorded["video"])) as container:
        stream = container.streams.video[0]
        assert video["frames"] == stream.frames == recorded["steps"] + 1, "the reset's frame, then one per step"
        assert video["fps"] == float(stream.average_rate)
    assert video["frame_offset"] == 0

    step = line["steps"][1]
    one = get(client, f"/runs/{run}/trace", episode=episode, from_seq=step["seq_first"], to_seq=step["seq_last"])
    assert [e["seq"] for e in one["events"]] == list(range(step["seq_first"], step["seq_last"] + 1))
    assert [e["step"] for e in one["events"] if e["event"] == "action"] == [1]

    other = next(e for e in episodes if not e["video"])
    assert get(client, f"/runs/{run}/timeline", episode=other["episode_id"])["videos"] == []


def test_a_timeline_refuses_what_the_run_does_not_have(make_server) -> None:
    client = make_server().client
    run = run_job(client, episodes=1)
    episode = get(client, f"/runs/{run}/episodes")["episodes"][0]
    url = f"{API}/runs/{run}/timeline"
    missing = client.get(url, params={"episode": "no/such/episode"})
    assert missing.status_code == 404 and "no/such/episode" in missing.json()["detail"]
    assert client.get(url, params={"episode": episode["episode_id"], "attempt": 2}).status_code == 404
    past = client.get(url, params={"episode": episode["episode_id"], "first_step": 10_000})
    assert past.status_code == 422 and "first_step 10000" in past.text
    assert client.get(url, params={"episode": episode["episode_id"], "first_step": -1}).status_code == 422
    assert client.get(f"{API}/runs/..%2F..%2Fetc/timeline", params={"episode": "x"}).status_code == 404
