"""`hylo.evaluate()`, entry-point benchmarks, stdout hygiene, realtime runs and registry listings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import hylo
from hylo.eval import EvalSpec, evaluate

HERE = Path(__file__).parent


def _run(*args: str, cwd: Path, extra_path: Path | None = None, timeout: float = 240):
    env = dict(os.environ)
    paths = [str(HERE), *([str(extra_path)] if extra_path else []), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return subprocess.run(
        [sys.executable, "-m", "hylo", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


def test_python_api_and_command_share_one_spec_and_give_the_same_results(tmp_path):
    result = hylo.evaluate(
        "babyai", agent="random", tasks=["GoToLocal", "PickupLoc"], episodes=3, seed=5, log_dir=str(tmp_path / "a")
    )
    assert isinstance(result.spec, dict) and result.spec["tasks"] == ["GoToLocal", "PickupLoc"]
    cli = _run("eval", "babyai", "--agent", "random", "--task", "GoToLocal", "PickupLoc", "--episodes", "3",
               "--seed", "5", "--log-dir", str(tmp_path / "b"), "--json", cwd=tmp_path)  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    from_cli = json.loads(cli.stdout)
    from_api = result.to_json()
    assert from_api["run_id"] == from_cli["run_id"]  # same configuration, same digest
    assert from_api["episodes"] == from_cli["episodes"]
    assert from_api["summary"] == from_cli["summary"]
    assert [e["task"] for e in from_api["episodes"]] == ["GoToLocal"] * 3 + ["PickupLoc"] * 3

    spec = EvalSpec(benchmark="babyai", agent="random", tasks=["GoToLocal", "PickupLoc"], episodes=3, seed=5)
    again = evaluate(spec, log_dir=str(tmp_path / "a"))  # a ready spec, resumed: nothing runs again
    assert again.executed_now == 0 and again.to_json()["episodes"] == from_api["episodes"]


def test_a_benchmark_registered_by_another_package_is_found_through_its_entry_point(tmp_path):
    site = tmp_path / "site"
    (site / "toybench-0.1.dist-info").mkdir(parents=True)
    (site / "toybench-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toybench\nVersion: 0.1\n")
    (site / "toybench-0.1.dist-info" / "entry_points.txt").write_text(
        "[hylo.benchmarks]\ntoy = toybench:ToyBenchmark\nbroken = toybench:BrokenBenchmark\n"
    )
    (site / "toybench.py").write_text(
        textwrap.dedent(
            """
            from hylo.envs.benchmark import Benchmark
            from hylo.envs import GridGoal

            class ToyBenchmark(Benchmark):
                name = "toy"
                display_name = "Toy grid"

                def splits(self):
                    return ["train", "test"]

                def tasks(self, split):
                    return ["grid"]

                def make_env(self, *, render_images=False):
                    return GridGoal()

                def default_step_budget(self, task):
                    return 30

            class BrokenBenchmark(ToyBenchmark):
                name = "broken"

                def make_env(self, *, render_images=False):
                    raise RuntimeError("simulator license expired")
            """
        )
    )
    listed = _run("list", "benchmarks", "--json", cwd=tmp_path, extra_path=site)
    assert listed.returncode == 0, listed.stderr
    toy = next(row for row in json.loads(listed.stdout) if row["name"] == "toy")
    assert toy["target"] == "toybench:ToyBenchmark" and toy["splits"] == {"train": 1, "test": 1}

    out = _run("eval", "toy", "--split", "test", "--agent", "random", "--episodes", "2", "--json", cwd=tmp_path,
               extra_path=site)  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [e["episode_id"] for e in data["episodes"]] == ["toy/test/grid/0000@s0", "toy/test/grid/0001@s0"]
    assert data["spec"]["step_budget"] == {"grid": 30}

    broken = _run("eval", "broken", "--agent", "random", "--episodes", "1", cwd=tmp_path,
                  extra_path=site)  # fmt: skip
    assert broken.returncode == 1  # an aborted run, not bad input
    assert broken.stderr.strip().splitlines() == [
        next(line for line in broken.stderr.splitlines() if "simulator license expired" in line)
    ]


def test_whatever_an_agent_or_library_prints_never_reaches_stdout_with_json(tmp_path):
    out = _run("eval", "babyai", "--task", "GoToLocal", "--agent", "eval_agents:NoisyAgent", "--episodes", "2",
               "--max-steps", "3", "--json", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 1
    assert json.loads(out.stdout)["summary"]["n"] == 2
    assert "noisy agent says hello" in out.stderr and "C-level noise on fd 1" in out.stderr


def test_a_nan_control_reaching_a_mujoco_gym_env_is_the_agents_error_and_prints_nothing(tmp_path):
    out = _run("eval", "gym:Ant-v5", "--agent", "eval_agents:NaNAgent", "-A", "dim=8", "--no-shield", "--episodes",
               "1", "--max-steps", "5", "--json", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    episode = json.loads(out.stdout)["episodes"][0]
    assert episode["status"] == "error" and "BADCTRL" in episode["reason"]
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_realtime_timing_runs_on_an_env_with_a_hold_action_and_is_refused_without_one(tmp_path):
    out = _run("eval", "metaworld", "--task", "reach-v3", "--agent", "expert", "--episodes", "2", "--timing",
               "realtime", "--latency", "0", "--json", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["spec"]["timing"] == "realtime" and data["spec"]["timing_options"] == {"latency_s": 0.0}
    assert [e["status"] for e in data["episodes"]] == ["success", "success"]  # no latency: no stale action

    # With latency, a one-action chunk is stale when it lands: the arm holds until the watchdog ends the episode.
    late = _run("eval", "metaworld", "--task", "reach-v3", "--agent", "expert", "--episodes", "1", "--timing",
                "realtime", "--latency", "0.05", "--max-hold-steps", "10", "--json", cwd=tmp_path)  # fmt: skip
    assert late.returncode == 0, late.stderr
    episode = json.loads(late.stdout)["episodes"][0]
    assert (episode["status"], episode["reason"]) == ("failure", "watchdog")

    refused = _run("eval", "babyai", "--agent", "random", "--timing", "realtime", cwd=tmp_path)
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1 and "hold action" in refused.stderr
    assert not list(tmp_path.glob("hylo-runs/babyai-*"))  # refused at bind time: no run was started

    bad = _run("eval", "babyai", "--agent", "random", "--latency", "0.1", cwd=tmp_path)
    assert bad.returncode == 2 and "--timing realtime" in bad.stderr


def test_list_agents_and_benchmarks(tmp_path):
    agents = _run("list", "agents", "--json", cwd=tmp_path)
    assert {"random", "hold", "expert"} <= set(json.loads(agents.stdout))
    text = _run("list", "benchmarks", cwd=tmp_path)
    assert "babyai" in text.stdout and "metaworld" in text.stdout and "mt50 (50 tasks)" in text.stdout
