"""The eval REST API driven over HTTP, as a client sees it: a real uvicorn server, real `hylo eval` jobs."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import httpx
import pytest
from live_server import ONE_CPU, quick_spec, slow_spec, wait_final

from hylo.jobs import Gpu, Machine

API = "/api/eval/v2"


def start(client: httpx.Client, body: dict) -> dict:
    response = client.post(f"{API}/start", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def refused_fields(response: httpx.Response) -> list[str]:
    """The fields named by a 422's detail (FastAPI's validation shape)."""
    assert response.status_code == 422, response.text
    return [str(error["loc"][-1]) for error in response.json()["detail"] if len(error["loc"]) > 1]


def test_a_job_runs_to_done_and_its_run_and_episodes_are_served(make_server):
    server = make_server()
    client = server.client
    started = start(client, quick_spec())
    assert set(started) == {"job_id", "run_id", "state"}
    assert started["state"] in ("queued", "running")
    assert started["run_id"].startswith("babyai-expert-")

    status = wait_final(client, started["job_id"])
    assert status["state"] == "done", status["message"]
    assert status["run_id"] == started["run_id"] and status["exit_code"] == 0 and status["executed_now"] == 3
    progress = status["progress"]
    assert progress["status"] == "complete" and progress["n_done"] == 3 and progress["n_planned"] == 3
    assert progress["status_counts"]["success"] == 3 and progress["status_counts"]["failure"] == 0

    runs = client.get(f"{API}/runs").json()["runs"]
    assert [(r["run_id"], r["status"], r["n_done"]) for r in runs] == [(started["run_id"], "complete", 3)]

    first = client.get(f"{API}/runs/{started['run_id']}/episodes", params={"limit": 2}).json()
    rest = client.get(f"{API}/runs/{started['run_id']}/episodes", params={"offset": 2, "limit": 2}).json()
    assert first["total"] == 3 and len(first["episodes"]) == 2 and len(rest["episodes"]) == 1
    ids = [e["episode_id"] for e in first["episodes"] + rest["episodes"]]
    assert ids == [f"babyai/default/GoToLocal/{i:04d}@s0" for i in range(3)]
    assert all(e["status"] == "success" for e in first["episodes"])
    failures = client.get(f"{API}/runs/{started['run_id']}/episodes", params={"status": "failure"}).json()
    assert failures["total"] == 0 and failures["episodes"] == []

    unknown = client.get(f"{API}/runs/no-such-run/episodes")
    assert unknown.status_code == 404 and "no-such-run" in unknown.json()["detail"]
    assert client.get(f"{API}/runs/.hidden/episodes").status_code == 404  # a run name, never a path
    assert refused_fields(client.get(f"{API}/runs/{started['run_id']}/episodes", params={"status": "great"})) == [
        "status"
    ]
    missing = client.get(f"{API}/status/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]


def test_the_queue_is_served_by_priority_then_submission_one_job_at_a_time_on_one_cpu(make_server):
    server = make_server(machine=ONE_CPU, start=False)
    client = server.client
    low = start(client, quick_spec(seed=1, priority=-1))
    first_normal = start(client, quick_spec(seed=2))
    high = start(client, quick_spec(seed=3, priority=5))
    second_normal = start(client, quick_spec(seed=4))
    dropped = start(client, quick_spec(seed=5, priority=9))

    queue = client.get(f"{API}/queue").json()["jobs"]
    expected = [dropped, high, first_normal, second_normal, low]
    assert [job["job_id"] for job in queue] == [job["job_id"] for job in expected]
    assert {job["state"] for job in queue} == {"queued"}

    ambiguous = client.post(f"{API}/runs/babyai-expert/cancel")
    assert ambiguous.status_code == 409 and "ambiguous" in ambiguous.json()["detail"]
    cancelled = client.post(f"{API}/runs/{dropped['run_id'][:-3]}/cancel")  # a unique prefix names the run
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert cancelled.json()["progress"] is None  # it never started: no run
    assert [job["job_id"] for job in client.get(f"{API}/queue").json()["jobs"]] == [
        job["job_id"] for job in expected[1:]
    ]

    server.scheduler.start()
    finals = [wait_final(client, job["job_id"]) for job in expected[1:]]
    assert [status["state"] for status in finals] == ["done"] * 4
    for before, after in itertools.pairwise(finals):  # in order, and never two at once on one CPU
        assert before["ended_at"] <= after["started_at"]
    assert client.get(f"{API}/queue").json()["jobs"] == []
    again = client.post(f"{API}/runs/{high['run_id']}/cancel")
    assert again.status_code == 409 and high["run_id"] in again.json()["detail"]


def test_a_job_that_can_never_fit_is_refused_naming_the_field(make_server):
    gpu_box = Machine(cpus=2, ram_total_gb=8.0, ram_available_gb=8.0, gpus=(Gpu(0, "Simulated", 24.0, 24.0),))
    client = make_server(machine=gpu_box, start=False).client
    assert refused_fields(client.post(f"{API}/start", json=quick_spec(cpus=3))) == ["cpus"]
    assert refused_fields(client.post(f"{API}/start", json=quick_spec(workers=4))) == ["cpus"]
    assert refused_fields(client.post(f"{API}/start", json=quick_spec(ram_gb=64))) == ["ram_gb"]
    too_big = client.post(f"{API}/start", json=quick_spec(gpu_mem_gb=40))
    assert refused_fields(too_big) == ["gpu_mem_gb"] and "24" in too_big.json()["detail"][0]["msg"]
    assert client.get(f"{API}/queue").json()["jobs"] == []
    assert start(client, quick_spec(gpu_mem_gb=20, exclusive_gpu=True))["state"] == "queued"


def test_a_gpu_request_on_a_machine_without_gpu_is_refused(make_server):
    client = make_server(machine=ONE_CPU, start=False).client
    assert refused_fields(client.post(f"{API}/start", json=quick_spec(gpu_mem_gb=2))) == ["gpu_mem_gb"]
    assert refused_fields(client.post(f"{API}/start", json=quick_spec(exclusive_gpu=True))) == ["exclusive_gpu"]
    assert client.get(f"{API}/queue").json()["jobs"] == []


def test_a_token_protected_server_refuses_requests_without_the_token(make_server):
    server = make_server(token="s3cret-token", start=False)
    bare = httpx.Client(base_url=server.url, timeout=30)
    wrong = httpx.Client(base_url=server.url, headers={"Authorization": "Bearer guess"}, timeout=30)
    try:
        for client in (bare, wrong):
            assert client.get(f"{API}/queue").status_code == 401
            assert client.get("/openapi.json").status_code == 401
            refused = client.post(f"{API}/start", json=quick_spec())
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert server.client.get(f"{API}/queue").json()["jobs"] == []  # nothing was queued
        assert start(server.client, quick_spec())["state"] == "queued"
    finally:
        bare.close()
        wrong.close()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"agent": "os:system"}, "agent"),
        ({"agent": "subprocess:run", "agent_args": {"args": ["touch", "{marker}"]}}, "agent"),
        ({"benchmark": "gym:os:system", "agent": "random"}, "benchmark"),
    ],
)
def test_import_paths_are_refused_over_http_and_nothing_runs(make_server, tmp_path: Path, body: dict, field: str):
    marker = tmp_path / "pwned"
    server = make_server()
    request = {"benchmark": "babyai", "agent_args": {"command": f"touch {marker}"}, **body}
    request = json.loads(json.dumps(request).replace("{marker}", str(marker)))
    response = server.client.post(f"{API}/start", json=request)
    assert refused_fields(response) == [field]
    assert "registered" in response.json()["detail"][0]["msg"]
    assert server.client.get(f"{API}/queue").json()["jobs"] == []
    assert server.scheduler.jobs() == []
    time.sleep(0.5)  # a scheduler pass or two: still nothing ran
    assert not marker.exists()


@pytest.mark.parametrize(
    ("overrides", "field", "named"),
    [
        ({"episodes": 0}, "episodes", "episodes"),
        ({"tasks": ["NoSuchTask"]}, "tasks", "NoSuchTask"),
        ({"split": "nope"}, "split", "nope"),
        ({"agent": "nobody"}, "agent", "nobody"),
        ({"benchmark": "nowhere"}, "benchmark", "nowhere"),
        ({"agent": "random", "agent_args": {"wings": 2}}, "agent_args", "wings"),
        ({"env_args": {"image_size": 2}}, "env_args", "image_size"),
        ({"env_args": {"not a name": 2}}, "env_args", "identifier"),
        ({"benchmark": "gym:gym_pusht/PushT-v0", "tasks": [], "env_args": {"obs_typ": 1}}, "env_args", "obs_typ"),
        ({"benchmark": "gym:antigravity/Fly-v0", "tasks": []}, "benchmark", "'antigravity' is imported only"),
        ({"timing_options": {"latency_s": 0.1}}, "timing_options", "realtime"),
        ({"log_dir": "/somewhere/else"}, "log_dir", "/somewhere/else"),
        ({"priority": "high"}, "priority", "integer"),
        ({"cpus": 0}, "cpus", "1"),
        ({"colour": "blue"}, "colour", "Extra"),
    ],
)
def test_a_bad_field_is_named_and_nothing_is_queued(make_server, overrides: dict, field: str, named: str):
    client = make_server(start=False).client
    response = client.post(f"{API}/start", json=quick_spec(**overrides))
    assert refused_fields(response) == [field]
    assert named in response.json()["detail"][0]["msg"]
    assert client.get(f"{API}/queue").json()["jobs"] == []


def test_a_gym_pusht_job_is_queued_with_its_options(make_server):
    pytest.importorskip("gym_pusht")
    client = make_server(start=False).client
    body = {"benchmark": "gym:gym_pusht/PushT-v0", "agent": "random", "env_args": {"obs_type": "pixels_agent_pos"}}
    queued = start(client, {**body, "episodes": 1, "max_steps": 3})
    assert queued["state"] == "queued"
    job = next(job for job in client.get(f"{API}/queue").json()["jobs"] if job["job_id"] == queued["job_id"])
    assert job["spec"]["env_args"] == {"obs_type": "pixels_agent_pos"}


def test_the_same_run_cannot_be_queued_twice(make_server):
    client = make_server(start=False).client
    first = start(client, quick_spec())
    again = client.post(f"{API}/start", json=quick_spec())
    assert again.status_code == 409 and first["job_id"] in again.json()["detail"]
    assert len(client.get(f"{API}/queue").json()["jobs"]) == 1


def test_cancelling_a_running_job_leaves_a_resumable_run(make_server):
    server = make_server(grace_s=10)
    client = server.client
    job = start(client, slow_spec())
    deadline = time.monotonic() + 60
    while True:
        status = client.get(f"{API}/status/{job['job_id']}").json()
        if status["state"] == "running" and (status["progress"] or {}).get("n_done", 0) >= 2:
            break
        assert status["state"] in ("queued", "running") and time.monotonic() < deadline, status
        time.sleep(0.1)

    cancelled = client.post(f"{API}/runs/{job['run_id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled"
    run = {r["run_id"]: r for r in client.get(f"{API}/runs").json()["runs"]}[job["run_id"]]
    assert run["status"] == "cancelled" and "resume" in run["message"]
    done_before = run["n_done"]
    assert 2 <= done_before < 12
    assert client.post(f"{API}/runs/{job['run_id']}/cancel").status_code == 409

    resumed = start(client, slow_spec())
    assert resumed["run_id"] == job["run_id"] and resumed["job_id"] != job["job_id"]
    final = wait_final(client, resumed["job_id"])
    assert final["state"] == "done", final["message"]
    assert final["executed_now"] == 12 - done_before
    assert final["progress"]["n_done"] == 12 and final["progress"]["status"] == "complete"


def test_cancelling_an_unknown_run_is_404_naming_it(make_server):
    response = make_server(start=False).client.post(f"{API}/runs/ghost-run/cancel")
    assert response.status_code == 404 and "ghost-run" in response.json()["detail"]


def test_the_event_stream_sends_each_change_and_ends_when_the_job_is_final(make_server):
    server = make_server(start=False)
    job = start(server.client, slow_spec(episodes=3))
    events = []
    with server.client.stream("GET", f"{API}/status/{job['job_id']}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
                if len(events) == 1:
                    server.scheduler.start()  # the first event saw it queued; now let it run
    states = [event["state"] for event in events]
    assert states[0] == "queued" and states[-1] == "done"
    assert "running" in states
    assert events[-1]["progress"]["n_done"] == 3 and events[-1]["progress"]["status"] == "complete"
    assert all(a != b for a, b in itertools.pairwise(events))  # only changes are sent
    assert server.client.get(f"{API}/status/nope/events").status_code == 404


def test_the_openapi_document_lists_every_endpoint(make_server):
    document = make_server(start=False).client.get("/openapi.json").json()
    assert set(document["paths"]) >= {
        f"{API}/start",
        f"{API}/status/{{job}}",
        f"{API}/status/{{job}}/events",
        f"{API}/queue",
        f"{API}/runs",
        f"{API}/runs/{{run}}/episodes",
        f"{API}/runs/{{run}}/cancel",
    }
    start_body = document["paths"][f"{API}/start"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert start_body["$ref"].endswith("/JobRequest")
    assert {"benchmark", "agent", "priority", "cpus", "gpu_mem_gb"} <= set(
        document["components"]["schemas"]["JobRequest"]["properties"]
    )


def test_an_ab_comparison_is_listed_and_served_as_recorded_and_an_unknown_id_is_404(make_server, log_dir: Path):
    from hylo.eval.spec import EvalSpec
    from hylo.experiments.ab import run_ab

    client = make_server().client
    assert client.get(f"{API}/ab").json() == {"comparisons": []}
    sides = [
        EvalSpec(benchmark="babyai", agent=agent, tasks=["GoToLocal"], max_steps=30, log_dir=str(log_dir))
        for agent in ("expert", "random")
    ]
    result = run_ab(*sides, max_pairs=40)
    recorded = json.loads(result.record.read_text())

    (log_dir / "ab" / "ab-ffffffffffff.json").write_text('{"ab_id": "ab-ffffffffffff"}')  # no record: left out
    listed = client.get(f"{API}/ab").json()["comparisons"]
    summary = (
        "ab_id",
        "agent_a",
        "agent_b",
        "run_a",
        "run_b",
        "decision",
        "pairs_used",
        "max_pairs",
        "design",
        "min_effect",
    )
    assert listed == [{key: recorded[key] for key in summary}]
    served = client.get(f"{API}/ab/{result.ab_id}")
    assert served.status_code == 200 and served.json() == recorded
    assert recorded["decision"] == "A better"
    assert len(recorded["path"]) == recorded["pairs_used"] - recorded["abstentions"]

    missing = client.get(f"{API}/ab/ab-000000000000")
    assert missing.status_code == 404
    assert "ab-000000000000" in missing.json()["detail"] and result.ab_id in missing.json()["detail"]
    assert client.get(f"{API}/ab/..%2Fx").status_code == 404  # an A/B id, never a path
    for bad in ("ab-..", "x", f"{result.ab_id}0", "ab-" + "0" * 200, f"{result.ab_id}.json", result.ab_id.upper()):
        refused = client.get(f"{API}/ab/{bad}")
        assert refused.status_code == 404 and bad in refused.json()["detail"], bad
