import json
import subprocess
import sys

import hylo
from hylo.core import parse_event


def _hylo(*args):
    return subprocess.run([sys.executable, "-m", "hylo", *args], capture_output=True, text=True, timeout=120)


def test_version_and_help():
    version = _hylo("--version")
    assert version.returncode == 0
    assert version.stdout.strip() == f"hylo {hylo.__version__}"
    help_ = _hylo("--help")
    assert help_.returncode == 0
    assert "demo" in help_.stdout


def test_demo_shows_every_status_column_and_writes_a_readable_trace(tmp_path):
    trace = tmp_path / "trace.jsonl"
    result = _hylo("demo", "--builtin", "--episodes", "3", "--trace", str(trace))
    assert result.returncode == 0, result.stderr
    for word in ("success", "failure", "error", "infra_invalid", "safety_abort", "point_reach", "grid_goal", "expert"):
        assert word in result.stdout
    events = [parse_event(line) for line in trace.read_text().splitlines()]
    ends = [e for e in events if e.event == "episode.end"]
    assert len(ends) == 3 * 6
    # The experts solve every episode.
    expert_ends = [e for e in ends if "expert" in e.run_id]
    assert expert_ends and all(e.status == "success" for e in expert_ends)
    json.dumps([e.model_dump() for e in events[:5]])


def test_demo_rejects_a_bad_episode_count():
    result = _hylo("demo", "--builtin", "--episodes", "0")
    assert result.returncode != 0
    assert "'0'" in result.stderr


def test_demo_evaluates_experts_and_random_agents_on_real_benchmarks(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "hylo", "demo", "--episodes", "2", "--log-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    for words in ("expert on BabyAI", "random on BabyAI", "expert on Meta-World", "random on Meta-World", "McNemar"):
        assert words in result.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "hylo", "runs", "list", "--json", "--log-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    runs = json.loads(listed.stdout)
    assert sorted((r["benchmark"], r["agent"]) for r in runs) == [
        ("babyai", "expert"),
        ("babyai", "random"),
        ("metaworld", "expert"),
        ("metaworld", "random"),
    ]
    assert all(r["status"] == "complete" and r["n_done"] == r["n_planned"] for r in runs)
    assert not list(tmp_path.glob("MUJOCO_LOG.TXT"))
