"""Every command works on the install that `make demo` makes: hylo, its base dependencies and the extras the demo
runs (`RUN_EXTRAS` in the Makefile), and nothing else.

Building that venv here would take minutes and a network. Instead each command runs in a subprocess that sees only
that install: a `sitecustomize` hides from the import system and from `importlib.metadata` every installed
distribution outside the dependency closure of `hylo[RUN_EXTRAS]` (pyproject.toml's requirements, then each installed
distribution's own, markers evaluated, plus what a new venv holds: ensurepip's bundle). A module of a hidden
distribution is not found, as in that venv; so a command that needs one fails here as it would there.
"""

from __future__ import annotations

import argparse
import ensurepip
import importlib.metadata
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from hylo.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent

SITECUSTOMIZE = '''
import importlib.machinery, json, os, re, sys

def _hide():
    with open(os.environ["HYLO_DEMO_INSTALL"]) as stream:
        config = json.load(stream)
    blocked, hidden = frozenset(config["blocked"]), frozenset(config["hidden"])

    def shown(dist):
        name = dist.metadata["Name"] or ""
        return re.sub(r"[-_.]+", "-", name).lower() not in hidden

    class DemoInstallFinder:
        """The path finder, blind to the modules and the metadata of the hidden distributions."""

        def __init__(self, inner):
            self.inner = inner

        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in blocked:
                return None
            return self.inner.find_spec(name, path, target)

        def find_distributions(self, *args, **kwargs):
            return filter(shown, self.inner.find_distributions(*args, **kwargs))

        def __getattr__(self, name):
            return getattr(self.inner, name)

    finder = importlib.machinery.PathFinder
    sys.meta_path[:] = [DemoInstallFinder(f) if f is finder else f for f in sys.meta_path]

if os.environ.get("HYLO_DEMO_INSTALL"):
    _hide()
'''


def run_extras() -> list[str]:
    """The extras `make demo` installs."""
    found = re.search(r"^RUN_EXTRAS\s*:=\s*(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found, "the Makefile names no RUN_EXTRAS"
    return [extra.strip() for extra in found.group(1).split(",")]


def hylo_requirements(extras: list[str]) -> list[Requirement]:
    """What `pip install -e '.[extras]'` asks for, as this checkout's pyproject.toml says."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    texts = [*project["dependencies"], *(text for extra in extras for text in project["optional-dependencies"][extra])]
    return [Requirement(text) for text in texts]


def new_venv_distributions() -> set[str]:
    """What a venv holds before anything is installed into it: ensurepip's bundled wheels (pip; setuptools before
    Python 3.12)."""
    bundled = Path(ensurepip.__file__).parent / "_bundled"
    return {canonicalize_name(wheel.name.split("-")[0]) for wheel in bundled.glob("*.whl")}


def closure(requirements: list[Requirement]) -> set[str]:
    """The installed distributions `requirements` bring in, transitively; a requirement whose marker is false (for
    this interpreter, and the extras asked of its distribution) brings nothing. One not installed here is not in
    the result: it cannot be imported here either."""
    found: set[str] = {"hylo"}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(requirement, "") for requirement in requirements]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.add(name)
        for text in dist.requires or []:
            inner = Requirement(text)
            todo += [(inner, wanted) for wanted in ("", *sorted(requirement.extras))]
    return found


@pytest.fixture(scope="module")
def demo_install(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment variables of a subprocess that sees only the demo's install."""
    allowed = closure(hylo_requirements(run_extras())) | new_venv_distributions()
    owners = importlib.metadata.packages_distributions()
    blocked = sorted(  # a distribution that writes a standard-library module (PyPI's argparse) hides nothing
        module
        for module, dists in owners.items()
        if module not in sys.stdlib_module_names and not any(canonicalize_name(d) in allowed for d in dists)
    )
    installed = {canonicalize_name(d.metadata["Name"] or "") for d in importlib.metadata.distributions()}
    root = tmp_path_factory.mktemp("demo-install")
    (root / "sitecustomize.py").write_text(SITECUSTOMIZE)
    config = root / "hidden.json"
    config.write_text(json.dumps({"blocked": blocked, "hidden": sorted(installed - allowed)}))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    env["HYLO_DEMO_INSTALL"] = str(config)
    return env


def hylo(env: dict[str, str], cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hylo", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
    )


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from _commands(sub, (*prefix, name))


COMMANDS = sorted(_commands(build_parser()))


def test_the_demo_install_hides_what_other_extras_bring(demo_install, tmp_path):
    """The check below can fail: pytest (an extra's) is not found there, matplotlib (a base dependency) is."""
    probe = "import importlib.util as u; print(u.find_spec('pytest') is None, u.find_spec('matplotlib') is not None)"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=demo_install, cwd=tmp_path, timeout=60
    )
    assert result.stdout.split() == ["True", "True"], result.stderr
    listed = subprocess.run(
        [sys.executable, "-c", "import importlib.metadata as m; m.version('pytest')"],
        capture_output=True, text=True, env=demo_install, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert "PackageNotFoundError" in listed.stderr


HELP = """
import contextlib, io, json, sys
from hylo.cli import main
helps = {}
for command in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*command, "--help"])
    helps[" ".join(command)] = out.getvalue()
print(json.dumps(helps))
"""


def test_every_commands_help(demo_install, tmp_path):
    """`hylo COMMAND --help` for every command and action (in one process: help imports no command's module)."""
    result = subprocess.run([sys.executable, "-c", HELP, json.dumps(COMMANDS)], capture_output=True, text=True,
                            env=demo_install, cwd=tmp_path, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    helps = json.loads(result.stdout)
    top = {"eval", "runs", "compare", "ab", "sweep", "plan", "list", "demo", "graph", "nodes", "serve", "bridge"}
    assert top <= {command[0] for command in COMMANDS} and len(helps) == len(COMMANDS)
    for command, text in helps.items():
        assert text.startswith(f"usage: hylo {command}"), (command, text[:200])


@pytest.fixture(scope="module")
def log_dir(demo_install, tmp_path_factory) -> Path:
    """A log dir with two BabyAI runs (`exp`, `rnd`) made on the demo install."""
    cwd = tmp_path_factory.mktemp("runs")
    for agent, run_id in (("expert", "exp"), ("random", "rnd")):
        made = hylo(demo_install, cwd, "eval", "babyai", "--task", "GoToLocal", "--agent", agent, "--episodes", "2",
                    "--run-id", run_id)  # fmt: skip
        assert made.returncode == 0, made.stderr
    return cwd / "hylo-runs"


MINIMAL = [
    ["eval", "metaworld", "--task", "reach-v3", "--agent", "expert", "--episodes", "1", "--video", "1"],
    ["runs", "list"],
    ["runs", "show", "exp"],
    ["runs", "export", "exp"],
    ["compare", "exp", "rnd"],
    ["ab", "babyai", "--task", "GoToLocal", "--a", "expert", "--b", "random", "--max-episodes", "2"],
    ["sweep", "metaworld", "--task", "reach-v3", "--agent", "expert", "-A", "chunk_size=4", "--latency-steps", "0",
     "1", "--episodes", "1"],
    ["sweep", "list"],
    ["plan", "--p-a", "0.5", "--p-b", "0.7"],
    ["list", "benchmarks"],
    ["list", "agents"],
    ["list", "protocols"],
    ["list", "tasks", "metaworld"],
    ["demo", "--builtin", "--episodes", "1"],
    ["demo", "--episodes", "1"],
    ["graph", "validate", "babyai_expert"],
    ["graph", "run", "babyai_expert", "--episodes", "1"],
    ["nodes"],
]  # fmt: skip


@pytest.mark.parametrize("args", MINIMAL, ids=" ".join)
def test_every_command_runs(demo_install, log_dir, args):
    result = hylo(demo_install, log_dir.parent, *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout.strip()


def test_runs_delete(demo_install, log_dir):
    made = hylo(demo_install, log_dir.parent, "eval", "babyai", "--task", "GoToLocal", "--agent", "random",
                "--episodes", "1", "--run-id", "gone")  # fmt: skip
    assert made.returncode == 0, made.stderr
    deleted = hylo(demo_install, log_dir.parent, "runs", "delete", "gone")
    assert deleted.returncode == 0, deleted.stderr
    assert not (log_dir / "gone").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.parametrize(
    "args", [["serve"], ["bridge", "vlaeval", "--agent", "random"]], ids=["serve", "bridge vlaeval"]
)
def test_the_servers_start_and_answer(demo_install, tmp_path, args):
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "hylo", *args, "--port", str(port), "--log-dir", str(tmp_path / "runs")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=demo_install,
    )  # fmt: skip
    try:
        answer = None
        deadline = time.monotonic() + 90
        while answer is None and server.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                    answer = response.status
            except urllib.error.HTTPError as exc:  # the bridge answers plain HTTP with 426: it speaks WebSocket
                answer = exc.code
            except OSError:
                time.sleep(0.2)
        assert answer in (200, 426), f"no answer; exit {server.poll()}"
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=60)
    assert "Traceback" not in err, err
