"""The eval modules import one another without a cycle, function-level imports counted: a worker resolves its spec
through `hylo.eval.resolve`, never through the runner that dispatches to it."""

from __future__ import annotations

import ast
from pathlib import Path

import hylo.eval

EVAL = Path(hylo.eval.__file__).parent


def _imports(path: Path) -> set[str]:
    """The `hylo.eval.*` modules a module imports anywhere in it (outside `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found |= {name for name in names if name.startswith("hylo.eval.") and (EVAL / f"{name[10:]}.py").is_file()}
    return found


def test_the_eval_modules_import_one_another_without_a_cycle():
    graph = {f"hylo.eval.{path.stem}": _imports(path) for path in EVAL.glob("*.py") if path.stem != "__init__"}
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            assert state.get(target) != "open", f"import cycle: {' -> '.join([*path, module, target])}"
            if target not in state:
                visit(target, [*path, module])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_a_worker_does_not_import_the_runner():
    assert "hylo.eval.runner" not in _imports(EVAL / "worker.py")
