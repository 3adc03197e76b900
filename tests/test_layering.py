"""hylo's layers hold: no module imports upward or sideways, no package's modules import each other in a cycle.

The contracts live in pyproject.toml (`[tool.importlinter]`); import-linter reads every import statement, those inside
functions and under TYPE_CHECKING included.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
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
