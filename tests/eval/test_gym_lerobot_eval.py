"""gym-pusht end to end through `hylo eval`, as a user runs it: `gym:gym_pusht/PushT-v0` found by its namespace,
`-E` options recorded in the run and part of its configuration, LeRobot's keys mapped in the recorded observations,
success read from `info["is_success"]`, short episode ids, and a run logged with the earlier long ids resumed."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hylo.cli import main
from hylo.envs.gym_adapter import GymBenchmark
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec
from hylo.evallog.store import EvalLog

pytest.importorskip("gym_pusht")

HERE = Path(__file__).parent
ENVS = HERE.parent / "envs"  # pusht_at_goal.py: the namespace module of `pusht_at_goal/PushT-v0`
PUSHT = "gym:gym_pusht/PushT-v0"


def hylo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ENVS), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "hylo", *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


def eval_json(*args: str, cwd: Path) -> dict:
    result = hylo("eval", *args, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def observations(run_id: str, cwd: Path) -> list[dict]:
    exported = hylo("runs", "export", run_id, "--traces", cwd=cwd)
    assert exported.returncode == 0, exported.stderr
    attempts = json.loads(exported.stdout)["attempts"]
    return [event["obs"] for attempt in attempts for event in attempt["trace"] if event["event"] == "observation"]


def test_pusht_by_its_namespace_with_pixels_and_agent_pos(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    agent = "camera_agents:RandomWithCameras"  # random actions, and every camera in its observations
    args = (PUSHT, "-E", "obs_type=pixels_agent_pos", "--agent", agent, "--episodes", "2", "--max-steps", "4")
    out = eval_json(*args, "--run-id", "pixels", cwd=tmp_path)
    assert out["spec"]["env_args"] == {"obs_type": "pixels_agent_pos"}
    assert [e["episode_id"] for e in out["episodes"]] == [f"gym/default/pusht-v0/{i:04d}@s0" for i in range(2)]
    assert {(e["task"], e["status"], e["reason"], e["steps"]) for e in out["episodes"]} == {
        ("gym_pusht/PushT-v0", "failure", "max_steps", 4)
    }
    seen = observations("pixels", tmp_path)
    assert len(seen) == 2 * 5  # each episode's reset and 4 steps
    for obs in seen:
        assert set(obs) == {"images", "state"} and len(obs["state"]) == 2  # agent_pos → state
        assert obs["images"]["pixels"]["shape"] == [96, 96, 3]  # pixels → images/pixels

    # the options are part of the run's configuration: the same run with others is refused
    other = [*args[:2], "obs_type=environment_state_agent_pos", *args[3:], "--run-id", "pixels"]
    assert main(["eval", *other, "--log-dir", str(tmp_path / "hylo-runs")]) == 2
    assert "run 'pixels' was made with a different configuration" in capsys.readouterr().err


def test_success_comes_from_is_success(tmp_path: Path) -> None:
    # the T starts on its goal; holding (the pusher moves to the corner, away from it) covers it on the first step
    args = ("gym:pusht_at_goal/PushT-v0", "--agent", "hold", "--episodes", "2", "--run-id", "goal")
    out = eval_json(*args, cwd=tmp_path)
    assert [(e["status"], e["steps"], e["success"]) for e in out["episodes"]] == [("success", 1, True)] * 2
    assert out["summary"]["success_rate"] == 1.0
    results = [
        ast.literal_eval(event["info"]) if isinstance(event["info"], str) else event["info"]
        for attempt in json.loads(hylo("runs", "export", "goal", "--traces", cwd=tmp_path).stdout)["attempts"]
        for event in attempt["trace"]
        if event["event"] == "step.result"
    ]
    assert [(info["is_success"], info["coverage"] > 0.95) for info in results] == [(True, True)] * 2


def test_a_run_logged_with_the_long_episode_ids_resumes_under_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.syspath_prepend(str(ENVS))  # camera_agents.py, for this process and its workers
    spec = EvalSpec(
        benchmark=PUSHT,
        env_args={"obs_type": "pixels_agent_pos"},
        agent="camera_agents:RandomWithCameras",
        episodes=2,
        max_steps=3,
        log_dir=str(tmp_path / "runs"),
        run_id="old",
    )
    long_ids = [f"gym:gym_pusht/PushT-v0/default/gym_pusht/PushT-v0/{i:04d}@s0" for i in range(4)]
    with monkeypatch.context() as before:  # how the run was logged before gym benchmarks had a short form
        before.setattr(GymBenchmark, "episode_prefix", lambda self, split, task: "")
        first = Evaluation(spec).run()
    assert [e.episode_id for e in first.episodes] == long_ids[:2]

    # resumed with more episodes, in worker processes: the two logged are kept, two more run under the same form
    more = Evaluation(spec.model_copy(update={"episodes": 4, "workers": 2})).run()
    assert more.executed_now == 2
    assert sorted(e.episode_id for e in more.episodes) == long_ids
    assert {e.seed for e in more.episodes[:2]} == {e.seed for e in first.episodes}
    with EvalLog.open(tmp_path / "runs" / "old") as log:  # the worker processes made the env with the options
        for episode_id in long_ids[2:]:
            obs = next(event["obs"] for event in log.trace(episode_id) if event["event"] == "observation")
            assert set(obs) == {"images", "state"} and obs["images"]["pixels"]["shape"] == [96, 96, 3]

    fresh = Evaluation(spec.model_copy(update={"run_id": "new", "episodes": 1})).run()
    assert [e.episode_id for e in fresh.episodes] == ["gym/default/pusht-v0/0000@s0"]
    assert fresh.episodes[0].seed == first.episodes[0].seed  # the short id changes no seed

    # `hylo compare` pairs the episode logged under the long id with the same episode under the short one
    assert main(["compare", "old", "new", "--json", "--log-dir", str(tmp_path / "runs")]) == 0
    compared = json.loads(capsys.readouterr().out)
    assert (compared["n_pairs"], compared["n_a"], compared["n_b"]) == (1, 4, 1)
