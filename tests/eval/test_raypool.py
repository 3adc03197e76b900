"""`--backend ray`: the same pool as Ray actors, on a local Ray with 2 CPUs; same results, same fault handling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from hylo.eval import EvalLog, evaluate  # noqa: E402

HERE = Path(__file__).parent
COUNTED = "gym:pool_fixtures:Counted-v0"


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    """One local Ray for the module (2 CPUs); its workers find the fixtures and the hang marker through the env."""
    markers = tmp_path_factory.mktemp("markers")
    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    os.environ["HYLO_TEST_HANG_MARKER"] = str(markers / "env-hung")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield markers
    finally:
        ray.shutdown()
        os.environ.clear()
        os.environ.update(saved)


def _keys(episodes):
    return [(e["episode_id"], e["seed"], e["status"], e["reason"], e["steps"], e["success"]) for e in episodes]


def test_ray_gives_the_same_results_as_one_local_worker(tmp_path):
    # The command line, starting its own local Ray and shutting it down after.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    args = [sys.executable, "-m", "hylo", "eval", "babyai", "--task", "GoToLocal", "GoToObj", "--agent", "random",
            "--episodes", "5", "--json"]  # fmt: skip
    ray_run = subprocess.run([*args, "--backend", "ray", "--workers", "2"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=180)  # fmt: skip
    assert ray_run.returncode == 0, ray_run.stderr
    local = subprocess.run([*args, "--fresh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    ray_out, local_out = json.loads(ray_run.stdout), json.loads(local.stdout)
    assert len(ray_out["episodes"]) == 10
    assert _keys(ray_out["episodes"]) == _keys(local_out["episodes"])
    assert ray_out["summary"] == local_out["summary"]
    with EvalLog.open(Path(ray_out["log_dir"])) as log:
        assert {row.worker for row in log.attempts()} <= {"ray0", "ray1"}


def test_a_ray_actor_killed_mid_episode_costs_that_episode_only(local_ray, tmp_path):
    result = evaluate(COUNTED, agent="pool_fixtures:KillOnce", agent_args={"marker": str(tmp_path / "k"), "index": 2},
                      episodes=6, max_steps=5, workers=2, backend="ray", log_dir=str(tmp_path))  # fmt: skip
    by_index = {r.index: r for r in result.episodes}
    assert by_index[2].status.value == "infra_invalid" and by_index[2].reason.startswith("worker died")
    assert all(by_index[i].status.value == "success" for i in range(6) if i != 2)
    assert ray.is_initialized()  # the pool leaves a Ray it did not start running


def test_ray_timeouts_blame_the_env_or_the_agent_and_retries_keep_attempts(local_ray, tmp_path):
    env_run = evaluate("gym:pool_fixtures:HangOnce-v0", agent="pool_fixtures:Forward", episodes=3, max_steps=4,
                       workers=2, backend="ray", retry_infra=1, env_timeout=2.0, log_dir=str(tmp_path))  # fmt: skip
    assert env_run.summary.status_counts["success"] == 3  # the hung attempt was retried
    with EvalLog.open(env_run.log_dir) as log:
        failed = [a for a in log.attempts() if a.status.value != "success"]
    assert [(a.status.value, a.reason, a.attempt) for a in failed] == [("infra_invalid", "env timeout", 1)]

    agent_run = evaluate(COUNTED, agent="pool_fixtures:HangOnceAgent", agent_args={"marker": str(tmp_path / "a")},
                         episodes=3, max_steps=4, workers=2, backend="ray", log_dir=str(tmp_path))  # fmt: skip
    hung = [r for r in agent_run.episodes if r.status.value != "success"]
    assert [(r.status.value, r.reason) for r in hung] == [("error", "agent timeout")]
