"""hylo's layers hold: no module imports upward or sideways, no package's modules import each other in a cycle.

The contracts live in pyproject.toml (`[tool.importlinter]`); import-linter reads every import statement, those inside
functions and under TYPE_CHECKING included.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint_imports(source_root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LINT, str(config), "--no-cache"],
        cwd=source_root,
        env={"PYTHONPATH": str(source_root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_source_keeps_every_layering_contract() -> None:
    result = lint_imports(ROOT / "src", ROOT / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def copy_of_the_source(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "src" / "hylo", tmp_path / "hylo", ignore=shutil.ignore_patterns("__pycache__", "web"))
    return tmp_path


def test_an_upward_import_inside_a_function_breaks_the_layers(tmp_path: Path) -> None:
    source = copy_of_the_source(tmp_path)
    chunk = source / "hylo" / "core" / "chunk.py"
    chunk.write_text(chunk.read_text() + "\n\ndef _sneak() -> None:\n    from hylo.cli import main  # noqa\n")
    result = lint_imports(source, ROOT / "pyproject.toml")
    assert result.returncode != 0
    assert "hylo.core is not allowed to import hylo.cli" in result.stdout
    assert "hylo.core.chunk -> hylo.cli" in result.stdout


def test_a_cycle_between_two_modules_of_a_package_breaks_the_contract(tmp_path: Path) -> None:
    source = copy_of_the_source(tmp_path)
    lazy = "def f() -> None:\n    from hylo.eval import zzz_loop  # noqa\n"
    (source / "hylo" / "eval" / "aaa_loop.py").write_text(lazy)
    (source / "hylo" / "eval" / "zzz_loop.py").write_text("from hylo.eval import aaa_loop  # noqa\n")
    result = lint_imports(source, ROOT / "pyproject.toml")
    assert result.returncode != 0
    assert "No cycles are allowed in hylo.eval" in result.stdout


def test_a_module_outside_every_layer_is_refused(tmp_path: Path) -> None:
    source = copy_of_the_source(tmp_path)
    (source / "hylo" / "stray.py").write_text('"""A new top-level module that names no layer."""\n')
    result = lint_imports(source, ROOT / "pyproject.toml")
    assert result.returncode != 0
    assert "hylo.stray" in result.stdout


def layer_ranks() -> dict[str, int]:
    """Each top-level package or module of hylo and its layer's rank (0 the lowest), from the contract itself."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    return {name.strip(): rank for rank, layer in enumerate(reversed(layers)) for name in layer.split("|")}


TARGET = re.compile(r"^hylo\.([a-z_0-9]+)(\.[a-z_0-9]+)*:[A-Za-z_][A-Za-z_0-9.]*$")


def string_targets(path: Path) -> list[tuple[int, str]]:
    """The `hylo.pkg.module:Name` strings of a source file: imports a registry makes by name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and TARGET.match(node.value)
    ]


def test_no_registry_names_a_module_of_a_higher_layer() -> None:
    """A registry's `module:Name` string is an import the contract cannot see: it may only point down or sideways
    into its own package, as an import statement could."""
    ranks = layer_ranks()
    source = ROOT / "src" / "hylo"
    upward = []
    for path in sorted(source.rglob("*.py")):
        own = path.relative_to(source).parts[0].removesuffix(".py")
        for line, target in string_targets(path):
            match = TARGET.match(target)
            assert match is not None
            theirs = match.group(1)
            if own in ranks and theirs in ranks and theirs != own and ranks[theirs] > ranks[own]:
                upward.append(f"{path.relative_to(ROOT)}:{line}: {target}")
    assert not upward, "\n".join(upward)
    assert any(t.endswith(":OpenPiRemoteAgent") for _, t in string_targets(source / "agents" / "registry.py"))


REASON = re.compile(r"#.*\b(optional|start-up)\b", re.IGNORECASE)
"""The two reasons an import may sit inside a function: an optional dependency (an extra that may be missing) or
start-up time (a heavy module only one path needs), said in a comment on the import, or on a comment line or a `try:`
just above it."""


def function_level_imports(path: Path) -> list[tuple[int, str]]:
    """The imports inside the functions of a source file that give no reason, with their line and text."""
    text = path.read_text()
    lines = text.splitlines()
    found = []
    for function in ast.walk(ast.parse(text, filename=str(path))):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            span = lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
            above = lines[node.lineno - 2].strip()
            if above.startswith(("#", "try:")):  # a comment line, or the `try:` around it, says it for this import
                span.append(above)
            if not any(REASON.search(line) for line in span):
                found.append((node.lineno, lines[node.lineno - 1].strip()))
    return found


def test_every_function_level_import_says_why() -> None:
    source = ROOT / "src" / "hylo"
    unexplained = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in sorted(source.rglob("*.py"))
        for line, text in function_level_imports(path)
    ]
    assert not unexplained, "imports inside functions without '# optional ...' or '# start-up ...':\n" + "\n".join(
        unexplained
    )


def test_an_import_inside_a_function_without_a_reason_is_found(tmp_path: Path) -> None:
    module = tmp_path / "lazy.py"
    module.write_text(
        "def fine() -> None:\n    import torch  # optional: the lerobot extra\n\n"
        "def lazy() -> None:\n    from hylo.core import types\n"
    )
    assert function_level_imports(module) == [(5, "from hylo.core import types")]
