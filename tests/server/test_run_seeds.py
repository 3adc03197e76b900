"""A run of several seeds is served with its episodes clustered by (task, index), as `hylo runs show --json` gives
them; a run of one seed has none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from live_server import run_job

from hylo.cli import main

API = "/api/eval/v2"


def runs_show(log_dir: Path, run: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["runs", "show", run, "--json", "--log-dir", str(log_dir)]) == 0
    shown: dict[str, object] = json.loads(capsys.readouterr().out)
    return shown


def test_a_run_of_several_seeds_is_served_with_its_clusters(make_server, log_dir: Path, capsys) -> None:
    client = make_server().client
    run = run_job(client, agent="random", episodes=4, max_steps=40, seeds=[0, 1, 2])

    detail = client.get(f"{API}/runs/{run}").json()
    assert detail["run"]["spec"]["seeds"] == [0, 1, 2] and detail["summary"]["n"] == 12
    clusters = detail["seed_clusters"]
    assert clusters == runs_show(log_dir, run, capsys)["seed_clusters"]
    assert (clusters["seeds"], clusters["clusters"]) == (3, 4)
    assert set(clusters["per_seed"]) == {"0", "1", "2"} and set(clusters["pass_at_k"]) == {"1", "2", "3"}
    assert 0 < clusters["pass_at_k"]["1"] < 1, "random moves within 40 steps find some goals, not all"
    successes = detail["summary"]["successes"]
    assert clusters["pass_at_k"]["1"] == pytest.approx(successes / 12)
    low, high = clusters["success_ci"]
    plain_low, plain_high = detail["summary"]["success_ci"]
    assert low <= plain_low and plain_high <= high, "a clustered interval is never narrower than Wilson's"


def test_a_run_of_one_seed_has_no_clusters(make_server, log_dir: Path, capsys) -> None:
    client = make_server().client
    for request in ({"seed": 4}, {"seeds": [4]}):
        run = run_job(client, **request)
        detail = client.get(f"{API}/runs/{run}").json()
        assert detail["seed_clusters"] is None and detail["summary"]["n"] == 3
        assert "seed_clusters" not in runs_show(log_dir, run, capsys)
