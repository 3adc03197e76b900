"""What the runner does when something goes wrong around the episodes, not inside them."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

import hylo.eval.runner as runner
import hylo.evallog.writer as writer
from hylo.core import parse_event
from hylo.eval import EvalError, EvalLog, EvalSpec, RunAborted, evaluate, mcnemar_exact

HERE = Path(__file__).parent


def test_an_unencodable_trace_value_costs_neither_the_episode_nor_the_run(tmp_path):
    result = evaluate("babyai", agent="eval_agents:SurrogateAgent", tasks=["GoToLocal"], episodes=3, max_steps=2,
                      log_dir=str(tmp_path))  # fmt: skip
    assert len(result.episodes) == 3 and result.executed_now == 3
    with EvalLog.open(result.log_dir) as log:
        trace = log.trace("babyai/default/GoToLocal/0001@s0")
    decisions = [e for e in trace if e["event"] == "agent.decision"]
    assert decisions and decisions[0]["content"] == {"text": "bad \udc80 text", "index": 1}
    assert all(parse_event(json.dumps(e)).seq == e["seq"] for e in trace if e["event"] != "agent.decision")


def test_an_agent_failing_on_the_placements_episode_reset_errs_that_episode_only(tmp_path):
    result = evaluate("babyai", agent="eval_agents:ResetHater", agent_args={"fail_on": 2}, tasks=["GoToLocal"],
                      episodes=4, max_steps=3, log_dir=str(tmp_path))  # fmt: skip
    statuses = [(row.index, row.status.value) for row in result.episodes]
    assert statuses == [(0, "failure"), (1, "failure"), (2, "error"), (3, "failure")]
    failed = result.episodes[2]
    assert "cannot forget" in failed.reason and failed.steps == 0
    assert result.summary.status_counts["error"] == 1 and result.summary.scored == 3


def test_a_task_switch_sends_one_episode_reset_traced_under_the_placed_episode(tmp_path):
    result = evaluate("babyai", agent="random", tasks=["GoToLocal", "GoToObj"], episodes=2, max_steps=2,
                      log_dir=str(tmp_path))  # fmt: skip
    with EvalLog.open(result.log_dir) as log:
        first_of_second_task = log.trace("babyai/default/GoToObj/0000@s0")
    resets = [e for e in first_of_second_task if e["event"] == "signal" and e["signal"] == "episode_reset"]
    assert len(resets) == 1
    assert {e["episode_id"] for e in first_of_second_task} == {"babyai/default/GoToObj/0000@s0"}
    assert [e["seq"] for e in first_of_second_task] == list(range(len(first_of_second_task)))


def test_a_failing_log_write_aborts_the_run_which_resumes_later(tmp_path, monkeypatch):
    real = EvalLog.record_many
    calls = {"n": 0}

    def flaky(self, items):
        calls["n"] += 1
        if calls["n"] >= 2:
            raise sqlite3.OperationalError("disk I/O error")
        real(self, items)

    monkeypatch.setattr(EvalLog, "record_many", flaky)
    monkeypatch.setattr(writer, "COMMIT_WINDOW_S", 0.0)  # one transaction per episode
    monkeypatch.setattr(writer.EvalLogWriter, "put", _slow_put(writer.EvalLogWriter.put))
    with pytest.raises(RunAborted, match="disk I/O error"):
        evaluate("babyai", agent="random", tasks=["GoToLocal"], episodes=5, max_steps=2, log_dir=str(tmp_path))
    runs = list(tmp_path.iterdir())
    with EvalLog.open(runs[0]) as log:
        info = log.info()
        assert info.status == "aborted" and "disk I/O error" in (info.message or "")
        kept = info.n_done
    assert 1 <= kept < 5
    monkeypatch.setattr(EvalLog, "record_many", real)
    resumed = evaluate("babyai", agent="random", tasks=["GoToLocal"], episodes=5, max_steps=2, log_dir=str(tmp_path))
    assert resumed.executed_now == 5 - kept and len(resumed.episodes) == 5


def _slow_put(put):
    def slow(self, row, trace):
        put(self, row, trace)
        time.sleep(0.05)  # let the writer thread commit this episode alone

    return slow


def test_resuming_under_other_package_versions_is_refused(tmp_path, monkeypatch):
    evaluate("babyai", agent="random", tasks=["GoToLocal"], episodes=1, max_steps=2, log_dir=str(tmp_path))
    newer = {**runner.package_versions(), "minigrid": "99.0"}
    monkeypatch.setattr(runner, "package_versions", lambda: newer)
    with pytest.raises(EvalError, match=r"minigrid .* → 99\.0.*--fresh"):
        evaluate("babyai", agent="random", tasks=["GoToLocal"], episodes=2, max_steps=2, log_dir=str(tmp_path))


def test_overrides_of_a_ready_spec_are_validated(tmp_path):
    spec = EvalSpec(benchmark="babyai", agent="random", tasks=["GoToLocal"], log_dir=str(tmp_path))
    with pytest.raises(ValidationError, match="episodes must be >= 1"):
        evaluate(spec, episodes=0)
    with pytest.raises(ValidationError, match="run id"):
        evaluate(spec, run_id="../escaped")
    assert not (tmp_path.parent / "escaped").exists()


def test_a_second_invocation_of_a_live_run_is_refused(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    args = [sys.executable, "-m", "hylo", "eval", "babyai", "--task", "GoToLocal", "--agent",
            "eval_agents:SleepyKillable", "-A", "seconds=0.01", "--episodes", "40", "--run-id", "busy"]  # fmt: skip
    first = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        db = tmp_path / "hylo-runs" / "busy" / "evallog.sqlite"
        deadline = time.monotonic() + 60
        while not db.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        assert first.poll() is None, "the first run ended too soon"
        second = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2
        assert "being run by process" in second.stderr and len(second.stderr.strip().splitlines()) == 1
    finally:
        first.kill()
        first.wait(timeout=30)


def test_the_same_command_twice_takes_the_same_actions(tmp_path):
    command = {"agent": "random", "tasks": ["reach-v3"], "episodes": 2, "max_steps": 15, "log_dir": str(tmp_path)}
    runs = [evaluate("metaworld", **command, fresh=True) for _ in range(2)]
    assert runs[0].run_id != runs[1].run_id
    traces = []
    for result in runs:
        with EvalLog.open(result.log_dir) as log:
            traces.append([[e["action"] for e in log.trace(row.episode_id) if e["event"] == "action"]
                           for row in result.episodes])  # fmt: skip
    assert traces[0] == traces[1] and len(traces[0][0]) == 15
    assert traces[0][0] != traces[0][1]  # and different episodes act differently
    assert runs[0].to_json()["episodes"] == runs[1].to_json()["episodes"]


def test_mcnemar_in_compare_matches_the_discordant_counts(tmp_path):
    a = evaluate("babyai", agent="expert", tasks=["GoToLocal"], episodes=6, log_dir=str(tmp_path))
    b = evaluate("babyai", agent="random", tasks=["GoToLocal"], episodes=6, log_dir=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "hylo", "compare", a.run_id, b.run_id, "--json", "--log-dir",
                          str(tmp_path)], capture_output=True, text=True, timeout=60)  # fmt: skip
    data = json.loads(out.stdout)
    only_expert = sum(1 for x, y in zip(a.episodes, b.episodes, strict=True) if x.success and not y.success)
    assert data["a_only"] == only_expert and data["b_only"] == 0
    assert data["p_value"] == pytest.approx(mcnemar_exact(only_expert, 0))


def test_a_hung_act_under_the_wall_clock_never_stalls_placement(tmp_path):
    started = time.monotonic()
    result = evaluate("metaworld", agent="eval_agents:HangOnce", agent_args={"seconds": 6.0}, tasks=["reach-v3"],
                      episodes=3, max_steps=100, act_timeout=0.2, timing="realtime",
                      timing_options={"clock": "wall", "max_hold_steps": 400}, log_dir=str(tmp_path))  # fmt: skip
    took = time.monotonic() - started
    assert [(row.index, row.status.value, row.reason) for row in result.episodes] == [
        (0, "error", "timeout"),  # the act overran its 0.2 s while the arm held
        (1, "error", "timeout"),  # still hung when the next episode was placed: its episode_reset could not land
        (2, "error", "timeout"),
    ]
    assert took < 3 * 6.0  # each later placement gave up at the act timeout instead of waiting for the hung act
