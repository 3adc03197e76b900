"""A run's identity includes its agent's code: an edited agent, helper module or checkpoint makes another run, as a
user notices it through `hylo eval` and `hylo runs show`; an unchanged one resumes its run."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hylo.cli import main
from hylo.eval import EvalSpec, Evaluation
from hylo.eval.code_identity import (
    ArgumentPath,
    CodeIdentity,
    InstalledDistribution,
    SourceFile,
    agent_code,
    argument_paths,
    diff_code,
)
from hylo.eval.content_hash import tree_hash
from hylo.eval.resolve import code_of, plan_run, resolve
from hylo.graph.builder import agent_graph

EXPERT = """\
from hylo.envs.babyai import BabyAIExpert


class Mine(BabyAIExpert):
    pass
"""
LEFT = """\
from hylo.core import ActionChunk
from hylo.envs.babyai import BabyAIExpert


class Mine(BabyAIExpert):
    def act(self, obs):
        return ActionChunk.single(0)  # turn left, forever
"""
CHECKPOINT_AGENT = """\
from pathlib import Path

from hylo.core import ActionChunk
from hylo.core.agent import AgentArgs
from hylo.envs.babyai import BabyAIExpert


class FromCheckpoint(BabyAIExpert):
    class Args(AgentArgs):
        checkpoint: str

    def __init__(self, checkpoint: str) -> None:
        self.mode = Path(checkpoint).read_text().strip()

    def act(self, obs):
        return super().act(obs) if self.mode == "expert" else ActionChunk.single(0)
"""


def hylo(*args: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "hylo", *args], capture_output=True, text=True, timeout=240,
                          cwd=cwd, env=env)  # fmt: skip


def evaluate(*args: str, cwd: Path, pythonpath: Path | None = None) -> dict:
    result = hylo("eval", "babyai", "--task", "GoToLocal", *args, "--json", cwd=cwd, pythonpath=pythonpath)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def statuses(result: dict) -> list[str]:
    return [episode["status"] for episode in result["episodes"]]


def show(run: str, cwd: Path, capsys: pytest.CaptureFixture[str], *, text: bool = False) -> Any:
    """`hylo runs show RUN [--json]` of a run in `cwd`'s log dir: its JSON, or (`text`) its lines."""
    assert main(["runs", "show", run, "--log-dir", str(cwd / "hylo-runs"), *([] if text else ["--json"])]) == 0
    out = capsys.readouterr().out
    return out.splitlines() if text else json.loads(out)


# -- end to end ----------------------------------------------------------------------------------------------------


def test_an_edited_agent_is_another_run_and_never_extends_the_old_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = tmp_path / "myagents.py"
    agent.write_text(EXPERT)
    first = evaluate("--agent", "myagents:Mine", "--episodes", "3", cwd=tmp_path)
    assert statuses(first) == ["success"] * 3
    again = evaluate("--agent", "myagents:Mine", "--episodes", "3", cwd=tmp_path)
    assert again["run_id"] == first["run_id"] and again["executed_now"] == 0  # unchanged code: the same run

    agent.write_text(LEFT)  # the same command after an edit
    edited = evaluate("--agent", "myagents:Mine", "--episodes", "3", cwd=tmp_path)
    assert edited["run_id"] != first["run_id"] and edited["executed_now"] == 3
    assert statuses(edited) == ["failure"] * 3  # the edited code ran: it never reaches the goal
    assert edited["spec"]["config_digest"] == first["spec"]["config_digest"]
    assert edited["spec"]["code"]["digest"] != first["spec"]["code"]["digest"]

    more = evaluate("--agent", "myagents:Mine", "--episodes", "5", cwd=tmp_path)
    assert more["run_id"] == edited["run_id"] and more["executed_now"] == 2
    assert statuses(more) == ["failure"] * 5  # one code version per run
    old = show(first["run_id"], tmp_path, capsys)
    assert old["n_done"] == 3 and old["summary"]["successes"] == 3

    refused = hylo("eval", "babyai", "--task", "GoToLocal", "--agent", "myagents:Mine", "--episodes", "5",
                   "--run-id", first["run_id"], cwd=tmp_path)  # fmt: skip
    assert refused.returncode == 2
    assert "the agent's code changed" in refused.stderr and "myagents.py" in refused.stderr
    assert show(first["run_id"], tmp_path, capsys)["n_done"] == 3  # nothing of the edited code was added to it

    shown = show(edited["run_id"], tmp_path, capsys)
    assert shown["code_changes"]["against"] == first["run_id"]
    assert shown["code_changes"]["same_code"] is False
    assert [(c["kind"], c["name"], c["change"]) for c in shown["code_changes"]["changes"]] == [
        ("source", "myagents.py", "changed")
    ]
    monkeypatch.setenv("COLUMNS", "300")  # a line of text is one line
    lines = show(edited["run_id"], tmp_path, capsys, text=True)
    line = next(line for line in lines if line.startswith("code differs from run"))
    assert first["run_id"] in line and line.endswith(": myagents.py")
    assert any(line.strip().startswith("myagents:Mine: myagents.py + ") for line in lines)


def test_a_changed_checkpoint_is_another_run_and_the_same_content_resumes_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ckpt_agents.py").write_text(CHECKPOINT_AGENT)
    checkpoint = tmp_path / "weights" / "policy.ckpt"
    checkpoint.parent.mkdir()
    checkpoint.write_text("expert")
    args = ("--agent", "ckpt_agents:FromCheckpoint", "-A", "checkpoint=weights/policy.ckpt", "--episodes", "2")
    good = evaluate(*args, cwd=tmp_path)
    assert statuses(good) == ["success"] * 2
    (argument,) = [p for p in good["spec"]["code"]["agents"][0]["parts"] if p["kind"] == "argument"]
    assert argument["arg"] == "checkpoint" and argument["path"] == "weights/policy.ckpt"

    checkpoint.write_text("left")
    bad = evaluate(*args, cwd=tmp_path)
    assert bad["run_id"] != good["run_id"] and statuses(bad) == ["failure"] * 2
    changes = show(bad["run_id"], tmp_path, capsys)["code_changes"]["changes"]
    assert [(c["kind"], c["name"], c["change"]) for c in changes] == [("argument", "checkpoint", "changed")]

    checkpoint.write_text("expert")  # the first checkpoint again: its run, resumed
    back = evaluate(*args, cwd=tmp_path)
    assert back["run_id"] == good["run_id"] and back["executed_now"] == 0


def install(site: Path, *, version: str, editable: bool = False) -> None:
    """A distribution `mypkg` installed into `site` as pip would leave it: the package, its dist-info with RECORD,
    and an entry point that registers its agent as `mine`."""
    package = site / "mypkg"
    package.mkdir(parents=True, exist_ok=True)
    if not (package / "__init__.py").exists():
        (package / "__init__.py").write_text("from hylo.agents.basic import HoldAgent as Agent\n")
    for old in site.glob("mypkg-*.dist-info"):
        for file in old.iterdir():
            file.unlink()
        old.rmdir()
    info = site / f"mypkg-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: mypkg\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[hylo.agents]\nmine = mypkg:Agent\n")
    (info / "top_level.txt").write_text("mypkg\n")
    (info / "RECORD").write_text(f"mypkg/__init__.py,,\n{info.name}/METADATA,,\n{info.name}/RECORD,,\n")
    if editable:
        (info / "direct_url.json").write_text(json.dumps({"url": "file:///src/mypkg", "dir_info": {"editable": True}}))


def code_of_run(result: dict) -> tuple[list[str], dict[str, str]]:
    """A run's recorded sources and distributions."""
    parts = result["spec"]["code"]["agents"][0]["parts"]
    sources = [p["path"] for p in parts if p["kind"] == "source"]
    return sources, {p["name"]: p["version"] for p in parts if p["kind"] == "distribution"}


def test_an_installed_distribution_counts_by_its_version_and_an_editable_one_by_its_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site, work = tmp_path / "site", tmp_path / "work"
    work.mkdir()
    install(site, version="1.2.3")
    args = ("--agent", "mine", "--episodes", "1")
    first = evaluate(*args, cwd=work, pythonpath=site)
    sources, dists = code_of_run(first)
    assert dists["mypkg"] == "1.2.3" and not any(path.startswith("mypkg/") for path in sources)
    assert dists["numpy"] == importlib.metadata.version("numpy")  # what hylo's own code imports, by version too

    (site / "mypkg" / "__init__.py").write_text("from hylo.agents.basic import HoldAgent as Agent  # edited\n")
    assert evaluate(*args, cwd=work, pythonpath=site)["run_id"] == first["run_id"]  # a versioned install: its version
    install(site, version="1.2.4")
    upgraded = evaluate(*args, cwd=work, pythonpath=site)
    assert upgraded["run_id"] != first["run_id"] and code_of_run(upgraded)[1]["mypkg"] == "1.2.4"
    changes = show(upgraded["run_id"], work, capsys)["code_changes"]["changes"]
    assert {"kind": "distribution", "name": "mypkg", "change": "changed", "was": "1.2.3", "now": "1.2.4"} in changes

    install(site, version="1.2.4", editable=True)
    editable = evaluate(*args, cwd=work, pythonpath=site)
    sources, dists = code_of_run(editable)
    assert "mypkg/__init__.py" in sources and "mypkg" not in dists
    assert editable["run_id"] != upgraded["run_id"]


# -- what counts ---------------------------------------------------------------------------------------------------


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> tuple[str, Path]:
    """A fresh package on the import path, named for the test (so no other test imported it)."""
    name = f"pkg_{request.node.name.replace('-', '_')}"[:60]
    root = tmp_path / "src"
    (root / name).mkdir(parents=True)
    monkeypatch.syspath_prepend(str(root))
    return name, root


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def sources_of(agent: str) -> dict[str, str]:
    return {p.path: p.sha256 for p in agent_code(agent, {}, None).parts if isinstance(p, SourceFile)}


def test_the_sources_are_what_the_agents_imports_reach(package: tuple[str, Path]) -> None:
    name, root = package
    write(root, f"{name}/__init__.py", "")
    write(root, f"{name}/policy.py", f"""\
        from typing import TYPE_CHECKING

        from hylo.agents.basic import HoldAgent
        from . import layers

        if TYPE_CHECKING:
            from {name} import typing_only


        class Agent(HoldAgent):
            def act(self, obs):
                from {name}.helpers import scale  # imported when it runs: part of the agent's code

                return super().act(obs)

            def plugin(self):
                import importlib

                return importlib.import_module("{name}.plugin")  # by a name computed at run time: not followed
        """)  # fmt: skip
    for module in ("layers", "helpers", "typing_only", "plugin", "unused"):
        write(root, f"{name}/{module}.py", "import json\nimport numpy\n")
    found = agent_code(f"{name}.policy:Agent", {}, None)
    sources = sorted(p.path for p in found.parts if isinstance(p, SourceFile))
    ours = [path for path in sources if path.startswith(f"{name}/")]
    assert ours == [f"{name}/{module}.py" for module in ("__init__", "helpers", "layers", "policy")]
    assert "hylo/agents/basic.py" in sources and "hylo/eval/runner.py" not in sources  # hylo: what it imports
    dists = {p.name: p.version for p in found.parts if isinstance(p, InstalledDistribution)}
    assert dists["numpy"] == importlib.metadata.version("numpy") and "json" not in dists  # stdlib: not recorded
    assert found.modules == [f"{name}.policy"] and found.own_sources() == [f"{name}/policy.py"]

    before = CodeIdentity.of([found])
    write(root, f"{name}/plugin.py", "VALUE = 2\n")  # not reached: the same identity
    assert CodeIdentity.of([agent_code(f"{name}.policy:Agent", {}, None)]).digest == before.digest
    write(root, f"{name}/helpers.py", "def scale(x):\n    return 2 * x\n")
    after = CodeIdentity.of([agent_code(f"{name}.policy:Agent", {}, None)])
    assert after.digest != before.digest
    assert [(c.kind, c.name, c.change) for c in diff_code(before, after)] == [("source", f"{name}/helpers.py",
                                                                                "changed")]  # fmt: skip


def test_a_module_beside_the_agents_and_a_package_init_count(package: tuple[str, Path]) -> None:
    name, root = package
    write(root, f"{name}/__init__.py", "from .impl import Agent\n")  # a re-export: the package's own import runs
    write(
        root, f"{name}/impl.py", f"from {name}_tools import helper\nfrom hylo.agents.basic import HoldAgent as Agent\n"
    )
    write(root, f"{name}_tools.py", "def helper():\n    return 1\n")
    assert {f"{name}/__init__.py", f"{name}/impl.py", f"{name}_tools.py"} <= set(sources_of(f"{name}:Agent"))


def test_a_package_init_s_lazy_loaders_are_not_followed(package: tuple[str, Path]) -> None:
    """A module `__getattr__` runs when its name is asked for, not when the package is imported."""
    name, root = package
    write(root, f"{name}/__init__.py", f"""\
        def __getattr__(attr):
            import {name}.heavy

            return getattr({name}.heavy, attr)
        """)  # fmt: skip
    write(root, f"{name}/heavy.py", "")
    write(root, f"{name}/agent.py", "from hylo.agents.basic import HoldAgent as Agent\n")
    assert f"{name}/heavy.py" not in sources_of(f"{name}.agent:Agent")


def test_builtin_agents_are_covered_by_the_modules_they_import(tmp_path: Path) -> None:
    spec = EvalSpec(benchmark="babyai", agent="random", tasks=["GoToLocal"], episodes=1, log_dir=str(tmp_path))
    random = code_of(resolve(spec))
    sources = random.sources()
    assert "hylo/agents/basic.py" in sources and "hylo/core/kernel.py" in sources
    assert not any(path.startswith(("hylo/eval/", "hylo/cli/", "hylo/server/")) for path in sources)
    assert code_of(resolve(spec)) == random  # the same each time it is taken
    expert = code_of(resolve(spec.model_copy(update={"agent": "expert"})))
    assert expert.agents[0].own_sources() == ["hylo/envs/babyai.py"]


def test_every_place_that_names_a_run_agrees(tmp_path: Path) -> None:
    for agent, allow_import in (("random", False), ("hylo.agents.basic:HoldAgent", True)):
        spec = EvalSpec(benchmark="babyai", agent=agent, tasks=["GoToLocal"], episodes=1, log_dir=str(tmp_path))
        planned = plan_run(spec, allow_import=allow_import)
        evaluation = Evaluation(spec)
        assert planned.run_id == evaluation.run_id
        assert evaluation.run_id.endswith(evaluation.digest) and evaluation.digest != evaluation.config_digest
        assert evaluation.spec_json()["code"] == evaluation.code.to_json()
        assert evaluation.spec_json()["config_digest"] == evaluation.spec.digest(evaluation.resolved.budgets)


def test_a_graph_run_records_each_reason_nodes_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "graph_ckpt_agents.py").write_text(CHECKPOINT_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    checkpoint = tmp_path / "policy.ckpt"
    checkpoint.write_text("expert")
    agent = "graph_ckpt_agents:FromCheckpoint"
    graph = agent_graph("babyai", agent, {"checkpoint": str(checkpoint)}, name="g", step_budget=3)
    spec = EvalSpec(benchmark="babyai", agent="graph:g", graph=graph.to_json(), tasks=["GoToLocal"], episodes=1,
                    log_dir=str(tmp_path / "runs"))  # fmt: skip
    first = code_of(resolve(spec))
    assert [(agent.node, agent.agent) for agent in first.agents] == [("reason", agent)]
    assert ("argument", "reason:checkpoint") in first.parts() and "graph_ckpt_agents.py" in first.sources()
    checkpoint.write_text("left!")
    second = Evaluation(spec)
    assert second.code.digest != first.digest
    assert [(c.kind, c.name) for c in diff_code(first, second.code)] == [("argument", "reason:checkpoint")]


# -- argument files ------------------------------------------------------------------------------------------------


def test_arguments_name_files_and_directories_by_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "sub" / "weights.bin").write_bytes(b"\x01" * 1000)
    outside = tmp_path / "outside.txt"
    outside.write_text("a")
    (model / "link").symlink_to(outside)
    (tmp_path / "runs").mkdir()
    args = {"model": "model", "paths": ["not/a/path", str(outside)], "cfg": {"weights": "~/../../no-such-file"},
            "log": "runs/agent.log", "prompt": "pick up the cube", "empty": ""}  # fmt: skip
    (tmp_path / "runs" / "agent.log").write_text("written by the agent")
    found = {p.arg: p for p in argument_paths(args, exclude=tmp_path / "runs")}
    assert sorted(found) == ["model", "paths[1]"]  # strings that name nothing, and the log dir, are not paths
    tree = found["model"]
    assert isinstance(tree, ArgumentPath) and tree.files == 2 and tree.size == 1002 and tree.method == "content"

    rewrite(outside, b"b")  # the link is not followed out of the tree
    assert tree_hash(model).hash == tree.sha256
    rewrite(model / "sub" / "weights.bin", b"\x02" * 1000)
    assert tree_hash(model).hash != tree.sha256
    assert found["paths[1]"].sha256 != argument_paths({"p": str(outside)})[0].sha256


def rewrite(path: Path, data: bytes) -> None:
    """`path` rewritten with `data` (the same size) a second later, as an edit made after a run would be."""
    before = path.stat().st_mtime_ns
    path.write_bytes(data)
    os.utime(path, ns=(before + 1_000_000_000, before + 1_000_000_000))


def test_a_tree_is_the_same_whatever_order_it_was_written_in(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for root, names in ((one, ["a", "b/c", "b/d"]), (two, ["b/d", "b/c", "a"])):
        for name in names:
            write(root, name, name)
    assert tree_hash(one).hash == tree_hash(two).hash
    (two / "b" / "c").rename(two / "b" / "e")
    assert tree_hash(one).hash != tree_hash(two).hash  # names count, not only contents
