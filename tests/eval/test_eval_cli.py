"""`hylo eval` end to end, as a user runs it: real simulators, real processes, real files."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hylo.cli import main

HERE = Path(__file__).parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    return env


def hylo(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hylo", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=_env()
    )


def eval_json(*args: str, cwd: Path) -> dict:
    result = hylo("eval", *args, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, f"stdout must hold exactly one JSON object, got: {result.stdout[:500]!r}"
    return json.loads(lines[0])


def test_babyai_expert_json_is_one_object_and_resumes(tmp_path):
    first = eval_json("babyai", "--task", "GoToLocal", "--agent", "expert", "--episodes", "4", cwd=tmp_path)
    assert set(first) == {"run_id", "log_dir", "spec", "executed_now", "episodes", "summary"}
    assert first["executed_now"] == 4
    assert [e["episode_id"] for e in first["episodes"]] == [f"babyai/default/GoToLocal/{i:04d}@s0" for i in range(4)]
    assert all(e["status"] == "success" for e in first["episodes"])
    assert first["summary"]["n"] == 4 and first["summary"]["success_rate"] == 1.0
    assert first["summary"]["per_task"]["GoToLocal"]["status_counts"]["success"] == 4
    lo, hi = first["summary"]["success_ci"]
    assert 0.3 < lo < 1.0 and hi == 1.0
    assert Path(first["log_dir"]).is_relative_to(tmp_path / "hylo-runs")
    assert not list(tmp_path.glob("MUJOCO_LOG.TXT"))

    again = eval_json("babyai", "--task", "GoToLocal", "--agent", "expert", "--episodes", "4", cwd=tmp_path)
    assert again["run_id"] == first["run_id"] and again["executed_now"] == 0
    assert again["episodes"] == first["episodes"]

    more = eval_json("babyai", "--task", "GoToLocal", "--agent", "expert", "--episodes", "6", cwd=tmp_path)
    assert more["run_id"] == first["run_id"] and more["executed_now"] == 2
    assert more["episodes"][:4] == first["episodes"] and len(more["episodes"]) == 6

    fresh = eval_json("babyai", "--task", "GoToLocal", "--agent", "expert", "--episodes", "4", "--fresh", cwd=tmp_path)
    assert fresh["run_id"] != first["run_id"] and fresh["executed_now"] == 4
    # Same command, fresh run: identical per-episode results.
    assert fresh["episodes"] == first["episodes"]


def test_random_on_babyai_stays_low_and_runs_show_and_compare(tmp_path):
    common = ("babyai", "--task", "GoToLocal", "--episodes", "8", "--seed", "3")
    expert = eval_json(*common, "--agent", "expert", "--run-id", "exp", cwd=tmp_path)
    rand = eval_json(*common, "--agent", "random", "--run-id", "rnd", cwd=tmp_path)
    assert expert["summary"]["success_rate"] == 1.0
    assert rand["summary"]["success_rate"] < 0.5
    assert [e["seed"] for e in rand["episodes"]] == [e["seed"] for e in expert["episodes"]]

    listed = hylo("runs", "list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    runs = {r["run_id"]: r for r in json.loads(listed.stdout)}
    created = runs["exp"].pop("created_at"), runs["exp"].pop("updated_at")
    assert all(isinstance(t, float) for t in created)
    lo, hi = runs["exp"].pop("success_ci")
    assert 0.6 < lo < 1.0 and hi == 1.0
    assert runs["exp"] == {
        "run_id": "exp",
        "status": "complete",
        "n_done": 8,
        "n_planned": 8,
        "benchmark": "babyai",
        "split": "default",
        "agent": "expert",
        "agent_args": {},
        "digest": expert["spec"]["digest"],
        "status_counts": {"success": 8, "failure": 0, "error": 0, "infra_invalid": 0, "safety_abort": 0},
        "scored": 8,
        "successes": 8,
        "abstained": 0,
        "success_rate": 1.0,
        "health": "ok",
    }

    shown = hylo("runs", "show", "rnd", cwd=tmp_path)
    assert shown.returncode == 0 and "GoToLocal" in shown.stdout and "conservative" in shown.stdout

    compared = hylo("compare", "exp", "rnd", "--json", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    comparison = json.loads(compared.stdout)
    n_rand_success = sum(e["success"] for e in rand["episodes"])
    assert comparison["n_pairs"] == 8
    assert comparison["a_only"] == 8 - n_rand_success and comparison["b_only"] == 0
    assert len(comparison["flips"]) == 8 - n_rand_success

    exported = hylo("runs", "export", "exp", "--format", "json", "--traces", cwd=tmp_path)
    data = json.loads(exported.stdout)
    assert data["digest"] == expert["spec"]["digest"] and len(data["episodes"]) == 8
    second = data["attempts"][1]["trace"]
    assert {e["episode_id"] for e in second} == {"babyai/default/GoToLocal/0001@s3"}
    assert [e["seq"] for e in second] == list(range(len(second)))
    kinds = [e["event"] for e in second]
    assert kinds[0] == "signal" and second[0]["signal"] == "episode_reset"  # the panel's placement, traced
    assert "episode.start" in kinds and kinds[-2] == "episode.end" and "step.result" in kinds

    deleted = hylo("runs", "delete", "rnd", cwd=tmp_path)
    assert deleted.returncode == 0 and not (tmp_path / "hylo-runs" / "rnd").exists()


def test_failures_get_honest_statuses(tmp_path):
    raising = eval_json("babyai", "--task", "GoToLocal", "--agent", "eval_agents:RaisingAgent", "-A", "fail_at=2",
                        "--episodes", "2", cwd=tmp_path)  # fmt: skip
    assert [e["status"] for e in raising["episodes"]] == ["error", "error"]
    assert "policy exploded" in raising["episodes"][0]["reason"]
    assert raising["summary"]["success_rate"] is None and raising["summary"]["conservative_success_rate"] == 0.0

    slow = eval_json("babyai", "--task", "GoToLocal", "--agent", "eval_agents:SlowAgent", "-A", "seconds=0.3",
                     "--act-timeout", "0.05", "--episodes", "1", cwd=tmp_path)  # fmt: skip
    assert slow["episodes"][0]["status"] == "error" and slow["episodes"][0]["reason"] == "timeout"

    nan = eval_json("gym:MountainCarContinuous-v0", "--agent", "eval_agents:NaNAgent", "--episodes", "2", cwd=tmp_path)
    assert [e["status"] for e in nan["episodes"]] == ["safety_abort", "safety_abort"]
    assert nan["summary"]["success_rate"] == 0.0  # a safety abort is scored, as a failure

    strict = hylo("eval", "babyai", "--task", "GoToLocal", "--agent", "eval_agents:RaisingAgent", "--episodes", "1",
                  "--strict", cwd=tmp_path)  # fmt: skip
    assert strict.returncode == 3


def test_the_summary_says_why_episodes_did_not_succeed_and_where_the_videos_are(tmp_path):
    common = ("eval", "babyai", "--task", "GoToLocal", "--episodes", "2")
    raising = hylo(*common, "--agent", "eval_agents:RaisingAgent", "-A", "fail_at=2", "--video", "1", cwd=tmp_path)
    assert raising.returncode == 0, raising.stderr
    out = raising.stdout
    first = r"\(first: babyai/default/GoToLocal/0000@s0\)"
    assert re.search(rf"error ×2 +agent raised RuntimeError: policy exploded +{first}", out), out
    run_id = re.search(r"each episode's reason and detail: hylo runs export (\S+)$", out, re.MULTILINE)
    assert run_id, out
    videos = re.search(r"^videos: (\S+) \(1 mp4 files", out, re.MULTILINE)
    assert videos and len(list(Path(videos.group(1)).glob("*.mp4"))) == 1, out
    limited = hylo(*common, "--agent", "random", "--max-steps", "3", cwd=tmp_path)
    assert re.search(r"failure ×2 +max_steps .*\n.*--max-steps sets it", limited.stdout), limited.stdout
    shown = hylo("runs", "show", run_id.group(1), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "error ×2" in shown.stdout and "policy exploded" in shown.stdout


def test_runs_list_has_a_header_the_rate_and_the_agents_arguments(tmp_path):
    for fail_at in ("1", "2"):
        eval_json("babyai", "--task", "GoToLocal", "--agent", "eval_agents:RaisingAgent", "-A", f"fail_at={fail_at}",
                  "--episodes", "2", cwd=tmp_path)  # fmt: skip
    eval_json("babyai", "--task", "GoToLocal", "--agent", "expert", "--episodes", "3", cwd=tmp_path)
    listed = hylo("runs", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    header = listed.stdout.split("──")[0].split()
    for word in ("run", "status", "done", "success", "created"):
        assert word in header, listed.stdout
    assert "fail_at=1" in listed.stdout and "fail_at=2" in listed.stdout
    assert listed.stdout.count("complete, 2/2 error") == 2
    assert "1.000 [0.439, 1.000]" in listed.stdout
    (run_id,) = [line.split()[0] for line in listed.stdout.splitlines() if "fail_at=2" in line]
    shown = hylo("runs", "show", run_id, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "eval_agents:RaisingAgent fail_at=2 on babyai" in shown.stdout.splitlines()[0], shown.stdout


def test_cartpole_runs_through_the_generic_adapter(tmp_path):
    out = eval_json("gym:CartPole-v1", "--agent", "random", "--episodes", "3", cwd=tmp_path)
    assert [e["task"] for e in out["episodes"]] == ["CartPole-v1"] * 3
    assert all(e["status"] in ("failure", "success") and e["steps"] > 0 for e in out["episodes"])
    assert out["spec"]["step_budget"] == {"CartPole-v1": 500}


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["nosuchbench", "--agent", "random"], ["'nosuchbench'", "babyai", "metaworld"]),
        (["babyai", "--task", "GoToMars", "--agent", "random"], ["'GoToMars'", "GoToLocal"]),
        (["babyai", "--split", "nope", "--agent", "random"], ["'nope'", "default"]),
        (["babyai", "--agent", "wizard"], ["'wizard'", "expert", "module:Class"]),
        (["babyai", "--agent", "random", "-A", "chunk"], ["'chunk'", "key=value"]),
        (["babyai", "--agent", "random", "-A", "chunks=3"], ["chunks"]),
        (["babyai", "--agent", "random", "--max-steps", "0"], ["0", "step budget"]),
        (["babyai", "--agent", "random", "--episodes", "0"], ["'0'"]),
        (["babyai", "--agent", "random", "--env-timeout", "0"], ["--env-timeout", "'0'"]),
        (["babyai", "--agent", "nomodule_xyz:Agent"], ["nomodule_xyz"]),
    ],
)
def test_bad_input_is_one_clear_line(tmp_path, capsys, args, named):
    try:
        code = main(["eval", *args, "--log-dir", str(tmp_path)])
    except SystemExit as exc:  # argparse's refusal
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for word in named:
        assert word in lines[0]
    assert out == ""
    assert not list(tmp_path.glob("*/evallog.sqlite"))  # nothing started


EVAL_GOTOLOCAL = ["eval", "babyai", "--task", "GoToLocal", "--agent", "random", "--episodes", "1"]


@pytest.mark.parametrize(
    "command",
    [EVAL_GOTOLOCAL, ["graph", "run", "babyai_expert", "--episodes", "1"], ["runs", "list"], ["runs", "show", "x"],
     ["compare", "a", "b"]],
)  # fmt: skip
@pytest.mark.parametrize("under_it", [False, True])
def test_a_log_dir_that_is_a_file_or_under_one_is_one_line_naming_it(tmp_path, capsys, command, under_it):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not runs")
    log_dir = a_file / "runs" if under_it else a_file
    code = main([*command, "--log-dir", str(log_dir)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"hylo: error: log dir {str(log_dir)!r} ")
    assert "aborted" not in err and a_file.read_text() == "not runs"


def test_a_spec_files_log_dir_is_checked_before_anything_runs(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not runs")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"benchmark": "babyai", "agent": "random", "tasks": ["GoToLocal"], "episodes": 1,
                                "log_dir": str(a_file)}))  # fmt: skip
    result = hylo("eval", "--spec", str(spec), "--json", cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"hylo: error: log dir {str(a_file)!r} is not a directory\n"


@pytest.mark.parametrize(
    ("command", "run_id"),
    [(EVAL_GOTOLOCAL, "graphs"), (EVAL_GOTOLOCAL, "jobs.sqlite-wal"), (EVAL_GOTOLOCAL, "jobs.lock"),
     (["graph", "run", "babyai_expert", "--episodes", "1"], "graphs")],
)  # fmt: skip
def test_a_run_id_the_log_dir_uses_for_its_own_files_is_refused(tmp_path, capsys, command, run_id):
    code = main([*command, "--run-id", run_id, "--log-dir", str(tmp_path / "runs")])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == (
        f"hylo: error: run id {run_id!r} is reserved: the log dir keeps its own files by that name; choose another\n"
    )
    assert not (tmp_path / "runs" / run_id).exists()


def test_sigkill_midway_then_rerun_finishes_every_episode_once(tmp_path):
    args = ["eval", "babyai", "--task", "GoToLocal", "--agent", "eval_agents:SleepyKillable", "-A", "seconds=0.01",
            "--episodes", "12", "--run-id", "killed", "--json"]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "hylo", *args], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    db = tmp_path / "hylo-runs" / "killed" / "evallog.sqlite"
    _wait_for_episodes(db, 3)
    assert proc.poll() is None, "the run finished before it could be killed; make episodes slower"
    live = json.loads(hylo("runs", "list", "--json", cwd=tmp_path).stdout)  # readable while the run writes
    assert live[0]["run_id"] == "killed" and live[0]["status"] == "running" and live[0]["n_planned"] == 12
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
    assert 3 <= before < 12

    listed = json.loads(hylo("runs", "list", "--json", cwd=tmp_path).stdout)
    assert listed[0]["status"] == "stopped" and listed[0]["n_done"] == before

    resumed = hylo(*args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout)
    assert out["executed_now"] == 12 - before
    ids = [e["episode_id"] for e in out["episodes"]]
    assert ids == [f"babyai/default/GoToLocal/{i:04d}@s0" for i in range(12)]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT episode_id, COUNT(*) FROM episodes GROUP BY episode_id").fetchall()
    assert len(rows) == 12 and all(count == 1 for _, count in rows)


def _wait_for_episodes(db: Path, n: int) -> None:
    """Until the EvalLog at `db` holds `n` episodes (read while the run writes, as any reader may)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if db.exists():
            try:
                with sqlite3.connect(db) as conn:
                    if conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] >= n:
                        return
            except sqlite3.Error:  # the run is creating its schema: read again
                continue
    raise AssertionError(f"{db} never held {n} episodes")


def test_changed_configuration_under_the_same_run_id_is_refused(tmp_path):
    eval_json("babyai", "--task", "GoToLocal", "--agent", "random", "--episodes", "1", "--run-id", "r1", cwd=tmp_path)
    other = hylo("eval", "babyai", "--task", "GoToLocal", "--agent", "random", "--seed", "9", "--episodes", "1",
                 "--run-id", "r1", cwd=tmp_path)  # fmt: skip
    assert other.returncode == 2
    assert "different configuration" in other.stderr and "--fresh" in other.stderr


def test_video_is_written_for_the_first_episodes_named_by_id_and_status(tmp_path):
    out = eval_json("babyai", "--task", "GoToLocal", "--agent", "expert", "--episodes", "3", "--video", "1",
                    cwd=tmp_path)  # fmt: skip
    videos = sorted((Path(out["log_dir"]) / "videos").glob("*.mp4"))
    assert [v.name for v in videos] == ["babyai_default_GoToLocal_0000@s0.success.mp4"]
    import av

    with av.open(str(videos[0])) as container:
        frames = sum(1 for _ in container.decode(video=0))
    assert frames == out["episodes"][0]["steps"] + 1  # the reset frame and one per step


@pytest.mark.parametrize(
    ("benchmark", "task", "agent"),
    [("metaworld", "reach-v3", "expert"), ("gym:CartPole-v1", "CartPole-v1", "random")],
)
def test_video_on_mujoco_and_gym_benchmarks(tmp_path, benchmark, task, agent):
    out = eval_json(benchmark, "--task", task, "--agent", agent, "--episodes", "2", "--video", "1", "--max-steps",
                    "30", cwd=tmp_path)  # fmt: skip
    first = out["episodes"][0]
    videos = list((Path(out["log_dir"]) / "videos").glob("*.mp4"))
    assert len(videos) == 1 and videos[0].name.endswith(f".{first['status']}.mp4")
    import av
    import numpy as np

    with av.open(str(videos[0])) as container:
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    assert len(frames) == first["steps"] + 1
    assert np.std(frames[0]) > 5  # a picture, not a blank frame


def test_sigterm_interrupts_cleanly_and_the_run_resumes(tmp_path):
    args = ["eval", "babyai", "--task", "GoToLocal", "--agent", "eval_agents:SleepyKillable", "-A", "seconds=0.01",
            "--episodes", "12", "--run-id", "termed", "--json"]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "hylo", *args], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _wait_for_episodes(tmp_path / "hylo-runs" / "termed" / "evallog.sqlite", 2)
    assert proc.poll() is None, "the run finished before it could be stopped"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and out == b""
    assert b"interrupted; re-run the same command to resume" in err
    listed = json.loads(hylo("runs", "list", "--json", cwd=tmp_path).stdout)
    assert listed[0]["status"] == "interrupted" and 0 < listed[0]["n_done"] < 12
    resumed = hylo(*args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["executed_now"] == 12 - listed[0]["n_done"]


def test_a_reward_only_env_reports_its_return_and_says_it_has_no_success_signal(tmp_path):
    common = ("gym:CartPole-v1", "--episodes", "3", "--max-steps", "40", "--run-id", "pole")
    summary = eval_json(*common, "--agent", "random", cwd=tmp_path)["summary"]
    assert summary["success_signal"] is False and summary["successes"] == 0
    assert summary["mean_return"] > 0 and summary["return_std"] is not None  # CartPole pays 1 per step it stands
    shown = hylo("runs", "show", "pole", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "no signal" in shown.stdout and "no success signal" in shown.stdout and "0.000" not in shown.stdout
    signalled = eval_json("babyai", "--task", "GoToLocal", "--episodes", "2", "--agent", "random", cwd=tmp_path)
    assert signalled["summary"]["success_signal"] is True  # BabyAI says when a mission is done, even at 0 %
