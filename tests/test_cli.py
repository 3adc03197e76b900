import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

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


# -- the operator's own code, from the current directory ---------------------------------------------------------------

HYLO_SCRIPT = Path(sys.executable).with_name("hylo")
POLICY = '''
from hylo.core import ActionChunk


class MyPolicy:
    """Turns left forever (BabyAI's action 0): it never reaches the goal."""

    def act(self, obs):
        return ActionChunk.single(0)
'''
HAS_RAY = importlib.util.find_spec("ray") is not None


@pytest.fixture
def operator_dir(tmp_path: Path) -> Path:
    """A directory holding the package `mypkg` (and nothing on the import path pointing at it)."""
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "policies.py").write_text(POLICY)
    return tmp_path


def _console(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """The `hylo` console script (unlike `python -m`, Python puts no current directory on its path), with the test
    process's PYTHONPATH less any empty entry (which would mean the current directory)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)
    return subprocess.run([str(HYLO_SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    ("options", "workers"),
    [
        ((), {"main"}),
        (("--workers", "2"), {"w0", "w1"}),
        pytest.param(("--workers", "2", "--backend", "ray"), {"ray0", "ray1"},
                     marks=pytest.mark.skipif(not HAS_RAY, reason="needs ray")),
    ],
)  # fmt: skip
def test_an_agent_in_the_current_directory_is_found_inline_in_process_workers_and_on_ray(
    operator_dir: Path, options: tuple[str, ...], workers: set[str]
):
    result = _console("eval", "babyai", "--task", "GoToLocal", "--agent", "mypkg.policies:MyPolicy", "--episodes", "4",
                      "--max-steps", "5", *options, "--json", cwd=operator_dir)  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert [(e["status"], e["steps"]) for e in out["episodes"]] == [("failure", 5)] * 4  # it acted, every step
    exported = _console("runs", "export", out["run_id"], cwd=operator_dir)
    ran_on = {attempt["worker"] for attempt in json.loads(exported.stdout)["attempts"]}
    assert ran_on and ran_on <= workers


def test_an_agent_in_another_directory_is_not_found(operator_dir: Path):
    elsewhere = operator_dir / "elsewhere"
    elsewhere.mkdir()
    result = _console("eval", "babyai", "--agent", "mypkg.policies:MyPolicy", "--episodes", "1", cwd=elsewhere)
    assert result.returncode == 2 and "No module named 'mypkg'" in result.stderr


def test_a_graph_run_finds_its_agent_in_the_current_directory(operator_dir: Path):
    from hylo.graph.store import find_graph

    graph = find_graph("babyai_expert").to_json()
    for node in graph["nodes"]:
        if node["type"] == "reason":
            node["config"]["agent"] = "mypkg.policies:MyPolicy"
    (operator_dir / "mine.json").write_text(json.dumps({**graph, "name": "mine"}))
    result = _console("graph", "run", "mine.json", "--episodes", "2", "--max-steps", "5", "--json", cwd=operator_dir)
    assert result.returncode == 0, result.stderr
    assert [e["status"] for e in json.loads(result.stdout)["episodes"]] == ["failure", "failure"]


def test_the_bridge_serves_an_agent_from_the_current_directory(operator_dir: Path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)
    bridge = subprocess.Popen(
        [str(HYLO_SCRIPT), "bridge", "vlaeval", "--agent", "mypkg.policies:MyPolicy", "--port", "0"],
        cwd=operator_dir, env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert bridge.stderr is not None
        line = bridge.stderr.readline()  # the bridge says where it serves once the agent is built, or exits
    finally:
        bridge.send_signal(signal.SIGTERM)
        code = bridge.wait(timeout=60)
    assert "serving mypkg.policies:MyPolicy on ws://127.0.0.1:" in line, line
    assert code == 0


def test_serve_does_not_put_the_current_directory_on_the_import_path(tmp_path, monkeypatch):
    """The server refuses import paths, and it does not import from wherever it was started either."""
    from hylo import cli
    from hylo.cli import serve as command

    seen: list[str] = []

    def serve(args: object) -> int:
        seen.extend(sys.path)
        return 0

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(command, "run", serve)
    assert cli.main(["serve", "--log-dir", str(tmp_path / "runs")]) == 0
    assert seen and str(tmp_path) not in seen and "" not in seen
