"""Every route that answers with a file of the log dir (a run's EvalLog and video, a sweep's record and plot, an A/B
record, a saved graph) serves only files written there: a symbolic link planted in the log dir, wherever it points,
is answered 404 and left out of every listing, as if it were not there."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_server import LiveServer, run_job

from hylo.graph.store import builtin_examples
from hylo.jobs import JobScheduler

API = "/api/eval/v2"
SVG = '<svg xmlns="http://www.w3.org/2000/svg"><text>{}</text></svg>'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, Path, str]]:
    """A server over a log dir holding one run with a video, and a directory outside it (`elsewhere`)."""
    root = tmp_path_factory.mktemp("files")
    scheduler = JobScheduler(root / "runs")
    scheduler.start()
    server = LiveServer(scheduler)
    run = run_job(server.client, episodes=1, video=1)
    (root / "elsewhere").mkdir()
    yield server, root, run
    server.close()
    scheduler.close()


def ab_record(ab_id: str, agent: str = "expert") -> dict[str, Any]:
    return {"ab_id": ab_id, "agent_a": agent, "agent_b": "random", "run_a": "a", "run_b": "b", "decision": None,
            "pairs_used": 1, "max_pairs": 10, "difference": 0.0, "confidence_sequence": [-1.0, 1.0],
            "flips": {"b_wins": 0, "a_wins": 0, "both": 1, "neither": 0}, "abstentions": 0, "alpha": 0.05,
            "log_evalue": 0.0, "threshold": 3.0, "path": [0.0]}  # fmt: skip


def sweep_record(sweep_id: str) -> dict[str, Any]:
    return {"sweep_id": sweep_id, "benchmark": "babyai", "agent": "expert", "latency_steps": [0],
            "execution_steps": None, "chunk_size": None, "split": None, "tasks": None, "agent_args": {}, "episodes": 1,
            "seeds": [0], "timing_options": {}, "points": [], "refused": [], "plot": {"svg": "plot.svg"}}  # fmt: skip


def test_a_run_linked_into_the_log_dir_is_no_run_of_it(served: tuple[LiveServer, Path, str]) -> None:
    server, root, run = served
    client = server.client
    episode = client.get(f"{API}/runs/{run}/episodes").json()["episodes"][0]["episode_id"]
    outside = root / "elsewhere" / "their-run"
    shutil.copytree(root / "runs" / run, outside)
    (root / "runs" / "linked-run").symlink_to(outside, target_is_directory=True)
    try:
        assert [r["run_id"] for r in client.get(f"{API}/runs").json()["runs"]] == [run]
        for path, params in (
            (f"{API}/runs/linked-run", {}),
            (f"{API}/runs/linked-run/episodes", {}),
            (f"{API}/runs/linked-run/episode", {"episode": episode}),
            (f"{API}/runs/linked-run/trace", {"episode": episode}),
            (f"{API}/runs/linked-run/video", {"episode": episode}),
            (f"{API}/compare", {"a": "linked-run", "b": run}),
        ):
            answer = client.get(path, params=params)
            assert answer.status_code == 404 and "linked-run" in answer.json()["detail"], (path, answer.text)
        assert client.post(f"{API}/runs/linked-run/cancel").status_code == 404
        assert client.get(f"{API}/runs/{run}/video", params={"episode": episode}).status_code == 200  # its own run
    finally:
        (root / "runs" / "linked-run").unlink()


def test_a_video_linked_into_a_run_is_not_served(served: tuple[LiveServer, Path, str]) -> None:
    server, root, run = served
    client = server.client
    row = client.get(f"{API}/runs/{run}/episodes").json()["episodes"][0]
    video = root / "runs" / run / row["video"]
    kept = root / "elsewhere" / "kept.mp4"
    shutil.copy(video, kept)
    try:
        video.unlink()
        video.symlink_to(kept)  # the file
        assert client.get(f"{API}/runs/{run}/video", params={"episode": row["episode_id"]}).status_code == 404
        video.unlink()
        directory = video.parent
        shutil.move(directory, root / "elsewhere" / "videos")
        directory.symlink_to(root / "elsewhere" / "videos", target_is_directory=True)  # the directory above it
        shutil.copy(kept, root / "elsewhere" / "videos" / video.name)
        assert client.get(f"{API}/runs/{run}/video", params={"episode": row["episode_id"]}).status_code == 404
        directory.unlink()
        shutil.move(root / "elsewhere" / "videos", directory)
        served_again = client.get(f"{API}/runs/{run}/video", params={"episode": row["episode_id"]})
        assert served_again.status_code == 200 and served_again.content == kept.read_bytes()
    finally:
        if not video.exists():
            video.parent.mkdir(exist_ok=True)
            shutil.copy(kept, video)


def test_sweep_records_and_plots_linked_into_the_log_dir_are_not_served(served: tuple[LiveServer, Path, str]) -> None:
    server, root, _ = served
    client = server.client
    sweeps, elsewhere = root / "runs" / "sweeps", root / "elsewhere" / "sweeps"
    for directory, sweep_id in ((sweeps, "sweep-aaaaaaaaaaaa"), (elsewhere, "sweep-bbbbbbbbbbbb"),
                                (elsewhere, "sweep-cccccccccccc")):  # fmt: skip
        (directory / sweep_id).mkdir(parents=True)
        (directory / sweep_id / "sweep.json").write_text(json.dumps(sweep_record(sweep_id)))
        (directory / sweep_id / "plot.svg").write_text(SVG.format(sweep_id))
    own = sweeps / "sweep-aaaaaaaaaaaa"
    (own / "plot.svg").rename(root / "elsewhere" / "plot.svg")
    (own / "plot.svg").symlink_to(root / "elsewhere" / "plot.svg")  # a record of its own, its plot a link
    (sweeps / "sweep-bbbbbbbbbbbb").mkdir()
    (sweeps / "sweep-bbbbbbbbbbbb" / "sweep.json").symlink_to(elsewhere / "sweep-bbbbbbbbbbbb" / "sweep.json")
    (sweeps / "sweep-cccccccccccc").symlink_to(elsewhere / "sweep-cccccccccccc", target_is_directory=True)

    assert [s["sweep_id"] for s in client.get(f"{API}/sweeps").json()["sweeps"]] == ["sweep-aaaaaaaaaaaa"]
    assert client.get(f"{API}/sweeps/sweep-aaaaaaaaaaaa").status_code == 200
    assert client.get(f"{API}/sweeps/sweep-aaaaaaaaaaaa/plot.svg").status_code == 404
    for linked in ("sweep-bbbbbbbbbbbb", "sweep-cccccccccccc"):
        for suffix in ("", "/plot.svg"):
            answer = client.get(f"{API}/sweeps/{linked}{suffix}")
            assert answer.status_code == 404 and linked in answer.json()["detail"], (linked, suffix, answer.text)
    (own / "plot.svg").unlink()
    (own / "plot.svg").write_text(SVG.format("own"))
    assert client.get(f"{API}/sweeps/sweep-aaaaaaaaaaaa/plot.svg").text == SVG.format("own")


def test_ab_records_linked_into_the_log_dir_are_not_served(served: tuple[LiveServer, Path, str]) -> None:
    server, root, _ = served
    client = server.client
    ab = root / "runs" / "ab"
    ab.mkdir(exist_ok=True)
    (ab / "ab-aaaaaaaaaaaa.json").write_text(json.dumps(ab_record("ab-aaaaaaaaaaaa")))
    (root / "elsewhere" / "theirs.json").write_text(json.dumps(ab_record("ab-bbbbbbbbbbbb", agent="their-agent")))
    (ab / "ab-bbbbbbbbbbbb.json").symlink_to(root / "elsewhere" / "theirs.json")

    assert [c["ab_id"] for c in client.get(f"{API}/ab").json()["comparisons"]] == ["ab-aaaaaaaaaaaa"]
    assert client.get(f"{API}/ab/ab-aaaaaaaaaaaa").json()["agent_a"] == "expert"
    linked = client.get(f"{API}/ab/ab-bbbbbbbbbbbb")
    assert linked.status_code == 404 and "ab-bbbbbbbbbbbb" in linked.json()["detail"]
    assert "their-agent" not in linked.text


def test_a_graph_linked_into_the_saved_graphs_is_not_served(served: tuple[LiveServer, Path, str]) -> None:
    server, root, _ = served
    client = server.client
    graphs = root / "runs" / "graphs"
    graphs.mkdir(exist_ok=True)
    impostor = {"description": "an impostor", "nodes": []}
    (root / "elsewhere" / "impostor.json").write_text(json.dumps(impostor))
    (graphs / "linked.json").symlink_to(root / "elsewhere" / "impostor.json")
    example = next(iter(builtin_examples()))
    (graphs / f"{example}.json").symlink_to(root / "elsewhere" / "impostor.json")  # in an example's place
    try:
        listed = {graph["name"]: graph for graph in client.get("/api/graphs").json()["graphs"]}
        assert "linked" not in listed and listed[example]["builtin"] and not listed[example]["shadows_builtin"]
        assert client.get("/api/graphs/linked").status_code == 404
        assert client.get(f"/api/graphs/{example}").json()["description"] != "an impostor"
        saved = client.put("/api/graphs/mine", json={"description": "mine", "nodes": []})
        assert saved.status_code == 200 and client.get("/api/graphs/mine").json()["description"] == "mine"
    finally:
        (graphs / "linked.json").unlink()
        (graphs / f"{example}.json").unlink()


def test_a_graphs_directory_linked_into_the_log_dir_is_neither_read_nor_written(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "theirs.json").write_text(json.dumps({"description": "theirs", "nodes": []}))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "graphs").symlink_to(elsewhere, target_is_directory=True)
    scheduler = JobScheduler(tmp_path / "runs")
    server = LiveServer(scheduler)
    try:
        client = server.client
        assert "theirs" not in {graph["name"] for graph in client.get("/api/graphs").json()["graphs"]}
        assert client.get("/api/graphs/theirs").status_code == 404
        assert client.delete("/api/graphs/theirs").status_code == 404
        refused = client.put("/api/graphs/mine", json={"description": "mine", "nodes": []})
        assert refused.status_code == 409 and "is a link" in refused.json()["detail"], refused.text
        assert sorted(path.name for path in elsewhere.iterdir()) == ["theirs.json"]
    finally:
        server.close()
        scheduler.close()
