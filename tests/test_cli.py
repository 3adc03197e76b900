import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import hylo
from hylo.core import EpisodeStatus, parse_event


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
    def demo():
        return subprocess.run([sys.executable, "-m", "hylo", "demo", "--episodes", "2"], capture_output=True,
                              text=True, timeout=300, cwd=tmp_path)  # fmt: skip

    def in_log_dir(*args):
        return subprocess.run([sys.executable, "-m", "hylo", *args], capture_output=True, text=True, timeout=60,
                              cwd=tmp_path)  # fmt: skip

    result = demo()
    assert result.returncode == 0, result.stderr
    for words in ("expert on BabyAI", "random on BabyAI", "expert on Meta-World", "random on Meta-World", "McNemar"):
        assert words in result.stdout
    assert f"the demo's runs are in {tmp_path / 'hylo-runs'}" in result.stdout  # kept, in ./hylo-runs
    listed = in_log_dir("runs", "list", "--json")
    runs = json.loads(listed.stdout)
    assert sorted((r["benchmark"], r["agent"]) for r in runs) == [
        ("babyai", "expert"),
        ("babyai", "random"),
        ("metaworld", "expert"),
        ("metaworld", "random"),
    ]
    assert all(r["status"] == "complete" and r["n_done"] == r["n_planned"] for r in runs)
    assert not list(tmp_path.glob("MUJOCO_LOG.TXT"))
    # the commands it suggests work as printed
    hints = re.findall(r"(hylo (?:compare|runs) [^)\n]+)", result.stdout)
    assert any("--all-flips" in hint for hint in hints) and any(hint.startswith("hylo runs show") for hint in hints)
    for hint in hints:
        followed = in_log_dir(*hint.split()[1:])
        assert followed.returncode == 0, (hint, followed.stderr)
    attempts = {
        r["run_id"]: len(json.loads(in_log_dir("runs", "export", r["run_id"]).stdout)["attempts"]) for r in runs
    }
    # a second demo finds its runs complete: it runs no episode again
    assert demo().returncode == 0
    again = {r["run_id"]: len(json.loads(in_log_dir("runs", "export", r["run_id"]).stdout)["attempts"]) for r in runs}
    assert again == attempts and len(json.loads(in_log_dir("runs", "list", "--json").stdout)) == 4


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


# -- the command table -------------------------------------------------------------------------------------------------


def test_every_command_is_in_the_table_and_added_by_the_module_that_runs_it():
    import argparse

    from hylo.cli import COMMANDS, build_parser
    from hylo.cli.arguments import Parser

    parser = build_parser()
    (commands,) = (action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    assert list(commands.choices) == list(COMMANDS)  # `hylo --help` lists them in the table's order
    for module in set(COMMANDS.values()):
        alone = Parser(prog="hylo").add_subparsers(dest="command", parser_class=Parser)
        module.add_parser(alone)
        assert set(alone.choices) == {name for name, runs in COMMANDS.items() if runs is module}, module.__name__


def test_no_command_prints_the_help(capsys):
    from hylo.cli import main

    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: hylo") and "eval" in out and "bridge" in out


# -- small commands and the width of output ---------------------------------------------------------------------------


def test_list_tasks_of_a_benchmark_and_of_one_split(capsys):
    from hylo.cli import main

    assert main(["list", "tasks", "metaworld", "--split", "mt10"]) == 0
    out = capsys.readouterr().out
    assert "metaworld split mt10 (the default split): 10 tasks" in out
    assert "reach-v3" in out and "pick-place-v3" in out and "reach the red goal position" in out
    assert main(["list", "tasks", "metaworld", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["default_split"] == "mt10" and [s["name"] for s in listed["splits"]] == ["mt10", "mt50"]
    mt10 = listed["splits"][0]["tasks"]
    assert len(mt10) == 10 and mt10[0] == {"name": "reach-v3", "step_budget": 500,
                                           "instruction": "reach the red goal position"}  # fmt: skip


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["list", "tasks", "nope"], ["'nope'", "babyai", "metaworld"]),
        (["list", "tasks", "metaworld", "--split", "mt11"], ["'mt11'", "mt10, mt50"]),
        (["list", "tasks"], ["needs a benchmark", "babyai", "metaworld"]),
        (["list", "agents", "babyai"], ["'babyai'", "hylo list tasks BENCH"]),
    ],
)
def test_list_tasks_refuses_a_bad_benchmark_or_split_in_one_line(capsys, args, named):
    from hylo.cli import main

    assert main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert all(word in err for word in named), err


def test_output_that_no_terminal_shows_is_as_wide_as_the_terminal_typed_in_else_unbound(monkeypatch):
    import io

    from hylo.cli import output

    def no_terminal(fd):
        raise OSError("not a terminal")

    monkeypatch.setattr(sys, "stdout", io.StringIO())  # redirected: not a terminal
    monkeypatch.setenv("COLUMNS", "80")  # what a parent that loaded readline exports, whatever its terminal
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((101, 40)))
    assert output.console().width == 101  # `hylo eval ... | tee log` in a terminal of 101 columns
    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    assert output.console().width == output.UNBOUND_WIDTH  # a job's log: no terminal anywhere


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_builtin_demos_table_keeps_every_count_whole(width):
    import io

    from rich.console import Console

    from hylo.cli.builtin_demo import render, run_demo

    rows = run_demo(episodes=2)
    out = io.StringIO()
    render(rows, Console(file=out, width=width, color_system=None))
    text = out.getvalue()
    assert "…" not in text and all(len(line) <= width for line in text.splitlines())
    for row in rows:
        tokens = [t for line in text.splitlines() if line.startswith(f"{row.env} ") and f" {row.agent} " in line
                  for t in line.split()]  # fmt: skip
        counts = [str(len(row.outcomes)), *(str(row.counts.get(s, 0)) for s in EpisodeStatus)]
        assert tokens[2 : 2 + len(counts)] == counts, (row.env, row.agent, text)
