"""What a run page's figures read: the histograms of episode length and return per status (the whole run's or one
task's, a task the run does not have refused by name) and a realtime run's figures per task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hylo.core.status import EpisodeStatus
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.store import EvalLog

API = "/api/eval/v2"
S, F, E = EpisodeStatus.SUCCESS, EpisodeStatus.FAILURE, EpisodeStatus.ERROR


def _row(task: str, index: int, status: EpisodeStatus, steps: int, metrics: dict[str, Any]) -> EpisodeRow:
    return EpisodeRow(
        episode_id=f"babyai/default/{task}/{index:04d}@s0",
        task=task,
        split="default",
        index=index,
        base_seed=0,
        seed=index,
        status=status,
        reason=status.value,
        success=status is S,
        steps=steps,
        metrics=metrics,
    )


def _write(log_dir: Path, run_id: str, rows: list[EpisodeRow], tasks: list[str]) -> None:
    spec = {"benchmark": "babyai", "agent": "random", "split": "default", "tasks": tasks}
    with EvalLog.create(
        log_dir / run_id, run_id=run_id, benchmark="babyai", split="default", agent="random", digest=run_id,
        spec=spec, n_planned=len(rows), versions={},
    ) as log:  # fmt: skip
        log.record_many([(row, []) for row in rows])
        log.update_run(status="complete")


def _realtime(latencies: list[float], dropped: int, holds: int) -> dict[str, Any]:
    n = len(latencies)
    return {
        "dt": 0.1,
        "steps": 10,
        "executed": 10 - holds,
        "holds": holds,
        "dropped": dropped,
        "chunks": n,
        "latency_s": latencies,
        "virtual_latency_s": [value * 10 for value in latencies],
        "delay_steps": [1] * n,
    }


@pytest.fixture
def client(make_server, log_dir: Path):
    rows = [
        _row("GoTo", 0, S, 4, {"return": 0.9}),
        _row("GoTo", 1, F, 6, {"return": 0.0}),
        _row("GoTo", 2, S, 4, {"return": 0.85}),
        _row("Open", 0, F, 6, {"return": 0.0}),
        _row("Open", 1, E, 5, {}),
    ]
    _write(log_dir, "mixed", rows, ["GoTo", "Open", "Unplayed"])
    _write(log_dir, "no-returns", [_row("GoTo", 0, S, 7, {}), _row("GoTo", 1, F, 9, {})], ["GoTo"])
    realtime = [
        _row("GoTo", 0, S, 10, {"return": 1.0, "realtime": _realtime([0.01, 0.02, 0.03], 1, 2)}),
        _row("GoTo", 1, F, 10, {"return": 0.0, "realtime": _realtime([0.04], 0, 0)}),
        _row("Open", 0, S, 10, {"return": 1.0, "realtime": _realtime([0.5], 3, 5)}),
    ]
    _write(log_dir, "realtime", realtime, ["GoTo", "Open"])
    return make_server(start=False).client


def test_the_whole_run_and_one_task_are_counted_per_status_in_each_bin(client) -> None:
    whole = client.get(f"{API}/runs/mixed/distributions").json()
    assert whole["task"] is None and whole["episodes"] == 5 and whole["tasks"] == ["GoTo", "Open", "Unplayed"]
    steps = whole["steps"]
    assert steps["edges"] == [4, 5, 6, 7] and steps["unit"] == "steps"
    assert steps["counts"] == {
        "success": [2, 0, 0],
        "failure": [0, 0, 2],
        "error": [0, 1, 0],
        "infra_invalid": [0, 0, 0],
        "safety_abort": [0, 0, 0],
    }
    returns = whole["returns"]
    assert (returns["n"], returns["missing"]) == (4, 1), "the error recorded no return"
    assert returns["edges"][0] == 0.0 and returns["edges"][-1] == 0.95 and len(returns["edges"]) == 20  # by 0.05
    assert returns["counts"]["failure"][0] == 2
    assert returns["counts"]["success"][17:] == [1, 1], "0.85 in [0.85, 0.9), 0.9 in [0.9, 0.95)"

    goto = client.get(f"{API}/runs/mixed/distributions", params={"task": "GoTo"}).json()
    assert goto["task"] == "GoTo" and goto["episodes"] == 3
    assert goto["steps"]["counts"]["success"] == [2, 0, 0] and goto["steps"]["counts"]["failure"] == [0, 0, 1]
    unplayed = client.get(f"{API}/runs/mixed/distributions", params={"task": "Unplayed"}).json()
    assert unplayed["episodes"] == 0 and unplayed["steps"]["edges"] == [] and unplayed["returns"] is None


def test_a_run_without_returns_answers_none_for_them(client) -> None:
    answer = client.get(f"{API}/runs/no-returns/distributions").json()
    assert answer["returns"] is None and answer["steps"]["n"] == 2


def test_a_task_the_run_does_not_have_is_refused_by_name(client) -> None:
    missing = client.get(f"{API}/runs/mixed/distributions", params={"task": "PickupLoc"})
    assert missing.status_code == 404 and "'PickupLoc'" in missing.json()["detail"]
    too_long = client.get(f"{API}/runs/mixed/distributions", params={"task": "x" * 300})
    assert too_long.status_code == 422 and "task" in too_long.text
    assert client.get(f"{API}/runs/nope/distributions").status_code == 404
    assert client.get(f"{API}/runs/..%2F..%2Fetc/distributions").status_code == 404


def test_a_realtime_run_gives_its_figures_per_task(client) -> None:
    per_task = client.get(f"{API}/runs/realtime/realtime/tasks").json()["per_task"]
    assert list(per_task) == ["GoTo", "Open"]
    goto, opened = per_task["GoTo"], per_task["Open"]
    assert goto["acts"] == 4 and goto["latency_s"]["p50"] == pytest.approx(0.025)  # of 0.01, 0.02, 0.03, 0.04
    assert goto["virtual_latency_s"]["p50"] == pytest.approx(0.25)
    assert goto["stale_ratio"] == pytest.approx(1 / 18) and goto["hold_ratio"] == pytest.approx(2 / 20)
    assert opened["latency_s"] == {"p50": 0.5, "p95": 0.5, "p99": 0.5}
    assert opened["stale_ratio"] == pytest.approx(3 / 5) and opened["hold_ratio"] == pytest.approx(5 / 10)
    assert client.get(f"{API}/runs/mixed/realtime/tasks").json()["per_task"] == {}
