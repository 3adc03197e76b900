"""`--workers N`: isolated worker processes, a dynamic queue, fault isolation, wall-clock limits, infra retries."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from hylo.eval import EvalLog, EvalSpec, evaluate
from hylo.eval.runner import EvalError, Evaluation
from hylo.evallog.rows import repeatable_metrics
from hylo.evallog.writer import RunAborted

HERE = Path(__file__).parent
COUNTED = "gym:pool_fixtures:Counted-v0"


def _keys(result):
    """What must not depend on the worker count: ids, seeds, statuses, reasons, steps, metrics but wall time."""
    return [
        (r.episode_id, r.task, r.index, r.seed, r.status.value, r.reason, r.steps, r.success,
         repeatable_metrics(r.metrics))
        for r in result.episodes
    ]  # fmt: skip


@pytest.mark.parametrize("agent", ["expert", "random"])
def test_two_workers_give_the_same_results_as_one(tmp_path, agent):
    common = dict(agent=agent, tasks=["GoToLocal", "GoToObj", "PickupLoc"], episodes=6, log_dir=str(tmp_path))
    one = evaluate("babyai", **common, run_id="one")
    two = evaluate("babyai", **common, run_id="two", workers=2)
    assert len(one.episodes) == 18 and one.executed_now == two.executed_now == 18
    assert _keys(two) == _keys(one)
    assert two.summary.to_json() == one.summary.to_json()
    assert {r.worker for r in two.episodes} == {"w0", "w1"}
    assert {r.worker for r in one.episodes} == {"main"}


def test_work_is_handed_out_one_episode_at_a_time_and_json_keeps_task_index_order(tmp_path):
    # Episode 0 is slow: a fixed split (0-3 | 4-7) would give each worker four; a dynamic queue lets the other
    # worker take everything else while episode 0 runs.
    result = evaluate("babyai", agent="pool_fixtures:IndexSleeper", agent_args={"slow_index": 0, "seconds": 0.25},
                      tasks=["GoToLocal"], episodes=8, max_steps=6, workers=2, log_dir=str(tmp_path))  # fmt: skip
    rows = result.episodes
    assert [r.index for r in rows] == list(range(8))
    slow_worker = rows[0].worker
    per_worker = {w: sum(r.worker == w for r in rows) for w in {r.worker for r in rows}}
    assert per_worker[slow_worker] < per_worker[next(w for w in per_worker if w != slow_worker)]
    assert rows[0].ended_at > max(r.ended_at for r in rows[1:] if r.worker != slow_worker)  # finished last...
    listed = [e["episode_id"] for e in result.to_json()["episodes"]]
    assert listed == [r.episode_id for r in sorted(rows, key=lambda r: r.index)]  # ...listed first


def test_each_worker_builds_its_env_once_and_closes_it_once(tmp_path, monkeypatch):
    log = tmp_path / "envs.log"
    monkeypatch.setenv("HYLO_TEST_ENV_LOG", str(log))
    result = evaluate(COUNTED, agent="pool_fixtures:Forward", episodes=10, max_steps=5, workers=2,
                      log_dir=str(tmp_path))  # fmt: skip
    assert result.summary.status_counts["success"] == 10
    lines = [line.split() for line in log.read_text().splitlines()]
    worker_pids = {int(pid) for _, pid in lines} - {os.getpid()}
    assert len(worker_pids) == 2
    for pid in worker_pids:
        assert sorted(what for what, p in lines if int(p) == pid) == ["close", "open"]


def test_a_worker_killed_mid_episode_costs_that_episode_only(tmp_path, monkeypatch):
    envs = tmp_path / "envs.log"
    monkeypatch.setenv("HYLO_TEST_ENV_LOG", str(envs))
    marker = tmp_path / "killed"
    # the surviving worker's next reset waits until the replacement has placed an episode: else, on a loaded machine,
    # it could run every remaining episode while the replacement starts (a reset's wait: --env-timeout covers it)
    monkeypatch.setenv("HYLO_TEST_AWAIT_REPLACEMENT", str(marker))
    args = {"marker": str(marker), "index": 1, "seconds": 0.1}
    result = evaluate(COUNTED, agent="pool_fixtures:KillOnce", agent_args=args, episodes=12, max_steps=5, workers=2,
                      env_timeout=300.0, log_dir=str(tmp_path))  # fmt: skip
    by_index = {r.index: r for r in result.episodes}
    lost = by_index[1]
    assert lost.status.value == "infra_invalid" and lost.reason.startswith("worker died: SIGKILL")
    assert lost.steps == 0 and not lost.success
    assert all(by_index[i].status.value == "success" for i in range(12) if i != 1)
    assert len(result.episodes) == 12 and result.summary.status_counts["infra_invalid"] == 1
    opened = {pid for what, pid in (line.split() for line in envs.read_text().splitlines()) if what == "open"}
    assert len(opened) == 3  # the killed worker was replaced by a third...
    assert any(r.worker == f"{lost.worker}.2" for r in result.episodes)  # ...which took episodes
    with EvalLog.open(result.log_dir) as log:
        assert log.info().status == "complete"


def test_retry_infra_reruns_the_lost_episode_and_keeps_the_failed_attempt(tmp_path):
    marker = tmp_path / "killed"
    result = evaluate(COUNTED, agent="pool_fixtures:KillOnce", agent_args={"marker": str(marker), "index": 2},
                      episodes=5, max_steps=5, workers=2, retry_infra=1, log_dir=str(tmp_path))  # fmt: skip
    assert result.summary.status_counts["success"] == 5
    final = next(r for r in result.episodes if r.index == 2)
    assert final.attempt == 2 and final.status.value == "success"
    with EvalLog.open(result.log_dir) as log:
        attempts = log.attempts(final.episode_id)
    assert [(a.attempt, a.status.value) for a in attempts] == [(1, "infra_invalid"), (2, "success")]
    assert attempts[0].reason.startswith("worker died")


def test_a_hung_env_is_infra_invalid_env_timeout_and_a_hung_agent_is_error_agent_timeout(tmp_path, monkeypatch):
    # The env's step may take --env-timeout; the agent, the step budget × the benchmark's per-step allowance
    # (4 × 0.5 s for a Gymnasium env) outside env calls.
    monkeypatch.setenv("HYLO_TEST_HANG_MARKER", str(tmp_path / "env-hung"))
    env_run = evaluate("gym:pool_fixtures:HangOnce-v0", agent="pool_fixtures:Forward", episodes=4, max_steps=4,
                       workers=2, env_timeout=2.0, log_dir=str(tmp_path))  # fmt: skip
    hung = [r for r in env_run.episodes if r.status.value != "success"]
    assert [(r.status.value, r.reason) for r in hung] == [("infra_invalid", "env timeout")]
    assert "a step ran 2." in hung[0].detail and "past --env-timeout 2 s; --env-timeout sets it" in hung[0].detail
    assert sum(r.status.value == "success" for r in env_run.episodes) == 3

    agent_run = evaluate(COUNTED, agent="pool_fixtures:HangOnceAgent", agent_args={"marker": str(tmp_path / "a")},
                         episodes=4, max_steps=4, workers=2, log_dir=str(tmp_path))  # fmt: skip
    hung = [r for r in agent_run.episodes if r.status.value != "success"]
    assert [(r.status.value, r.reason) for r in hung] == [("error", "agent timeout")]
    assert "past its allowance of 2 s (4 steps × 0.5 s" in hung[0].detail
    assert sum(r.status.value == "success" for r in agent_run.episodes) == 3


def test_max_infra_failures_stops_a_broken_run_which_resumes_once_fixed(tmp_path):
    broken = tmp_path / "broken"
    broken.touch()
    spec = dict(agent="pool_fixtures:KillWhileBroken", agent_args={"broken": str(broken)}, episodes=10,
                max_steps=5, workers=2, max_infra_failures=3, log_dir=str(tmp_path))  # fmt: skip
    with pytest.raises(RunAborted, match="3 infra_invalid attempts reached --max-infra-failures 3"):
        evaluate(COUNTED, **spec)
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    with EvalLog.open(run_dir) as log:
        info = log.info()
        lost = log.attempts()
    assert info.status == "aborted" and "infrastructure looks broken" in info.message
    assert 3 <= len(lost) < 10 and all(r.status.value == "infra_invalid" for r in lost)

    broken.unlink()  # fixed: the same command resumes, running only what is missing
    result = evaluate(COUNTED, **spec)
    assert len(result.episodes) == 10 and result.executed_now == 10 - len(lost)
    assert result.summary.status_counts["success"] == 10 - len(lost)


def test_a_worker_that_cannot_start_refuses_the_run_before_it_is_created(tmp_path):
    with pytest.raises(EvalError, match="'sideways'"):
        evaluate(COUNTED, agent="pool_fixtures:IndexSleeper", agent_args={"sideways": 1}, workers=2,
                 log_dir=str(tmp_path))  # fmt: skip
    assert not any(tmp_path.iterdir())


def test_inline_backend_runs_one_worker_only(tmp_path):
    with pytest.raises(EvalError, match="--backend inline runs one worker, not 2"):
        Evaluation(EvalSpec(benchmark="babyai", agent="random", workers=2, backend="inline", log_dir=str(tmp_path)))


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))


def test_killing_hylo_eval_kills_its_workers_and_the_rerun_resumes_without_duplicates(tmp_path):
    args = [sys.executable, "-m", "hylo", "eval", "babyai", "--task", "GoToLocal", "--agent",
            "eval_agents:SleepyKillable", "--episodes", "24", "--max-steps", "8", "--workers", "2",
            "--json"]  # fmt: skip
    first = subprocess.Popen(args, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        found = list((tmp_path / "hylo-runs").glob("*/evallog.sqlite"))
        if found:
            db = found[0]
            with contextlib.suppress(sqlite3.OperationalError), sqlite3.connect(db) as conn:  # until its schema exists
                if conn.execute("SELECT COUNT(*) FROM episodes").fetchone()[0] >= 4:
                    break
        time.sleep(0.1)
    assert db is not None
    children = psutil.Process(first.pid).children()
    assert sum("spawn_main" in " ".join(c.cmdline()) for c in children) == 2  # the two workers
    first.kill()
    first.wait()
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive  # the workers died with their parent

    second = subprocess.run(args, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=180)
    assert second.returncode == 0, second.stderr
    out = json.loads(second.stdout)
    assert len(out["episodes"]) == 24 and 0 < out["executed_now"] < 24
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT episode_id, attempt FROM episodes").fetchall()
    assert len(rows) == 24 and len({eid for eid, _ in rows}) == 24 and {a for _, a in rows} == {1}


def test_cli_workers_flag_and_a_bad_value(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "hylo", "eval", "babyai", "--task", "GoToLocal", "--agent", "expert",
                         "--episodes", "4", "--workers", "2", "--json"], cwd=tmp_path, env=_env(),
                        capture_output=True, text=True, timeout=120)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert {e["status"] for e in json.loads(ok.stdout)["episodes"]} == {"success"}
    bad = subprocess.run([sys.executable, "-m", "hylo", "eval", "babyai", "--agent", "expert", "--workers", "0"],
                         cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "--workers" in bad.stderr and "'0'" in bad.stderr


def test_sigterm_to_the_process_group_interrupts_the_run_not_its_episodes(tmp_path):
    args = [sys.executable, "-m", "hylo", "eval", "babyai", "--task", "GoToLocal", "--agent",
            "eval_agents:SleepyKillable", "--episodes", "40", "--max-steps", "8", "--workers", "2"]  # fmt: skip
    proc = subprocess.Popen(args, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not list((tmp_path / "hylo-runs").glob("*/evallog.sqlite")):
        time.sleep(0.1)
    time.sleep(1.5)
    os.killpg(proc.pid, signal.SIGTERM)  # what a scheduler's cancel does: the whole group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    run_dir = next((tmp_path / "hylo-runs").iterdir())
    with EvalLog.open(run_dir) as log:
        assert log.info().status == "interrupted"
        assert all(r.status.value != "infra_invalid" for r in log.attempts())


def test_a_spec_file_runs_like_the_flags_and_refuses_flags_beside_it(tmp_path):
    spec = EvalSpec(benchmark="babyai", agent="expert", tasks=["GoToLocal"], episodes=3, workers=2,
                    log_dir=str(tmp_path / "runs"))  # fmt: skip
    path = tmp_path / "spec.json"
    path.write_text(spec.model_dump_json())
    run = subprocess.run([sys.executable, "-m", "hylo", "eval", "--spec", str(path), "--json"], cwd=tmp_path,
                         env=_env(), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert len(out["episodes"]) == 3 and out["spec"]["workers"] == 2 and out["log_dir"].startswith(str(tmp_path))
    both = subprocess.run([sys.executable, "-m", "hylo", "eval", "babyai", "--spec", str(path)], cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert both.returncode == 2 and "drop benchmark" in both.stderr
    path.write_text('{"benchmark": "babyai", "agent": "expert", "workers": 0}')
    bad = subprocess.run([sys.executable, "-m", "hylo", "eval", "--spec", str(path)], cwd=tmp_path, env=_env(),
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "workers must be >= 1, got 0" in bad.stderr


def test_an_address_without_the_ray_backend_is_refused(tmp_path):
    with pytest.raises(EvalError, match="--address 'ray://head:10001' is a Ray address: it needs --backend ray"):
        Evaluation(EvalSpec(benchmark="babyai", agent="random", address="ray://head:10001", log_dir=str(tmp_path)))


@pytest.mark.parametrize(
    ("how", "reason"), [("segfault", "worker died: SIGSEGV"), ("exit", "worker died: exit code 0")]
)
def test_a_segfault_or_an_early_exit_costs_one_episode(tmp_path, how, reason):
    result = evaluate(COUNTED, agent="pool_fixtures:KillOnce", agent_args={"marker": str(tmp_path / "m"), "how": how},
                      episodes=4, max_steps=5, workers=2, log_dir=str(tmp_path))  # fmt: skip
    assert [(r.index, r.status.value) for r in result.episodes if r.status.value != "success"] == [(1, "infra_invalid")]
    assert result.episodes[1].reason.startswith(reason)


def test_a_replacement_that_fails_to_build_is_tried_again(tmp_path, monkeypatch):
    marker = str(tmp_path / "killed")
    monkeypatch.setenv("HYLO_TEST_AWAIT_REPLACEMENT", marker)  # the survivor leaves episodes to the replacements
    result = evaluate(COUNTED, agent="pool_fixtures:KillOnceThenFailToBuild", episodes=12, max_steps=5, workers=2,
                      agent_args={"marker": marker, "index": 1, "seconds": 0.1}, env_timeout=300.0,
                      log_dir=str(tmp_path))  # fmt: skip
    assert Path(marker + ".build-failed").exists()  # a replacement did fail to build...
    assert result.summary.status_counts == {**result.summary.status_counts, "success": 11, "infra_invalid": 1}


def test_an_idle_worker_that_dies_costs_no_episode(tmp_path):
    from hylo.eval.pool import ProcessPool
    from hylo.eval.worker import EpisodeJob, WorkerConfig

    evaluation = Evaluation(EvalSpec(benchmark=COUNTED, agent="pool_fixtures:Forward", episodes=6, max_steps=5,
                                     workers=2, log_dir=str(tmp_path)))  # fmt: skip
    config = WorkerConfig(evaluation.spec, evaluation.run_id, tmp_path, evaluation.resolved.budgets)
    pool = ProcessPool(config, 2, evaluation.episode_limits())
    pool.start()
    try:
        victim = psutil.Process(pool._slots[0].process.pid)
        victim.kill()
        victim.wait(10)
        jobs = [EpisodeJob(task) for task in evaluation._plan()]
        results = []
        while jobs or pool.busy():
            while jobs and pool.idle():
                job = jobs.pop(0)
                if not pool.submit(job):
                    jobs.insert(0, job)
            results += pool.poll(0.5)
    finally:
        pool.close()
    assert sorted(r.row.index for r in results) == list(range(6))
    assert {r.row.status.value for r in results} == {"success"}


def test_a_timed_out_worker_is_killed_with_the_processes_it_started(tmp_path):
    pidfile = tmp_path / "helper.pid"
    result = evaluate(COUNTED, agent="pool_fixtures:SpawnAndHang", agent_args={"pidfile": str(pidfile)}, episodes=1,
                      max_steps=2, workers=2, log_dir=str(tmp_path))  # fmt: skip
    assert (result.episodes[0].status.value, result.episodes[0].reason) == ("error", "agent timeout")
    helper = int(pidfile.read_text())
    assert not psutil.pid_exists(helper) or psutil.Process(helper).status() == psutil.STATUS_ZOMBIE


def test_the_command_exits_1_with_one_line_when_the_infrastructure_is_broken(tmp_path):
    broken = tmp_path / "broken"
    broken.touch()
    run = subprocess.run([sys.executable, "-m", "hylo", "eval", COUNTED, "--agent", "pool_fixtures:KillWhileBroken",
                          "-A", f"broken={broken}", "--episodes", "4", "--max-steps", "5", "--workers", "2",
                          "--max-infra-failures", "2"], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("hylo: error: run ") and "reached --max-infra-failures 2" in last
    assert last.count("resume") == 1
