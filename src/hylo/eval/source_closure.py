"""The code an agent's module runs, found by reading its `import` statements: the source files to hash and the
installed distributions to name by version.

A run's results depend on the code that defines its agent, so a run records that code (`hylo.eval.code_identity`).
Starting from the agent's module, every `import` and `from ... import` statement is followed, at any depth
(function-level ones too, and the `__init__.py` of each package on the way, whose module-level imports run when a
submodule is imported; a function there, such as a module `__getattr__`, is a lazy loader and is not followed), as
long as the module it names is source: a file on the import path that no versioned distribution
installed, or one of an editable install (its `direct_url.json` says `dir_info.editable`). A module of a versioned,
non-editable distribution is not read: the distribution is named with its version (`numpy==2.1.3`), and the walk
stops there. The standard library is neither (the run records Python's version). Imports under
`if TYPE_CHECKING:` never run, and are skipped.

The walk reads files, never imports them (finding a submodule does not run its package), so it is the same in every
process, and covers what Python would import to load the agent as far as its statements show it: a module imported
by a name computed at run time (`importlib.import_module(name)`, a plugin found by entry point) is not followed,
unless a statement imports it too.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import Distribution, PackageNotFoundError, PathDistribution, distribution
from pathlib import Path

from hylo.core.errors import HyloError

MAX_SOURCES = 5000
"""The most source files one agent's closure may hold: an import path that reaches further is refused, not walked
for minutes."""


class ClosureTooLarge(HyloError, ValueError):
    """An agent whose source closure holds more than `MAX_SOURCES` files."""


@dataclass
class Closure:
    """An agent's code: source file (path relative to its import root, `pkg/mod.py`) → sha256, and distribution
    name → version."""

    sources: dict[str, str] = field(default_factory=dict)
    distributions: dict[str, str] = field(default_factory=dict)


def closure_of(modules: list[str]) -> Closure:
    """The source closure of `modules` (dotted names): their files and every source module their imports reach."""
    closure = Closure()
    seen: set[str] = set()
    pending = sorted(set(modules), reverse=True)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for imported in _visit(name, closure):
            if imported not in seen:
                pending.append(imported)
        if len(closure.sources) > MAX_SOURCES:
            raise ClosureTooLarge(
                f"the code of module {modules[0]!r} reaches more than {MAX_SOURCES:,} source files through its "
                "imports; install the packages it uses (a versioned install is named by its version, not read)"
            )
    closure.sources = dict(sorted(closure.sources.items()))
    closure.distributions = dict(sorted(closure.distributions.items()))
    return closure


def _visit(name: str, closure: Closure) -> list[str]:
    """Record module `name` in `closure` (its file's hash, or its distribution's version); the modules its
    statements import when it is source. Packages above it are visited too: importing it runs them."""
    top = name.partition(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return []
    spec = find_module(name)
    if spec is None:
        return []  # not importable here (an optional dependency): nothing of it runs
    parent = name.rpartition(".")[0]
    found = [parent] if parent else []
    path = _origin(spec)
    if path is None:
        return found  # a namespace package: no file of its own
    relative = relative_path(name, path)
    owner = installed_by(path, relative)
    if owner is not None:
        closure.distributions[owner[0]] = owner[1]
        return []
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    closure.sources[relative] = digest
    if path.suffix == ".py":
        found += imports_of(name, spec.submodule_search_locations is not None, digest, data)
    return found


def relative_path(name: str, path: Path) -> str:
    """Where module `name`'s file lies below its import root (`hylo/agents/basic.py`): the same wherever the
    package is checked out."""
    parts = name.split(".")
    if path.stem == "__init__":
        return "/".join([*parts, path.name])
    return "/".join([*parts[:-1], path.name])


def find_module(name: str) -> importlib.machinery.ModuleSpec | None:
    """Where module `name` is, without importing it or its packages (a loaded one by its own spec)."""
    loaded = sys.modules.get(name)
    spec = getattr(loaded, "__spec__", None) if loaded is not None else None
    if isinstance(spec, importlib.machinery.ModuleSpec):
        return spec
    file = getattr(loaded, "__file__", None)
    if isinstance(file, str):  # a script run as `__main__` has a file and no spec
        return importlib.util.spec_from_file_location(name, file)
    parent, _, _ = name.rpartition(".")
    try:
        if not parent:
            return importlib.util.find_spec(name)
        package = find_module(parent)
        if package is None or package.submodule_search_locations is None:
            return None
        return importlib.machinery.PathFinder.find_spec(name, list(package.submodule_search_locations))
    except (ImportError, ValueError):
        return None


def _origin(spec: importlib.machinery.ModuleSpec) -> Path | None:
    """The file a module is loaded from (None for a namespace package or a built-in)."""
    if not spec.has_location or spec.origin is None:
        return None
    path = Path(spec.origin)
    return path if path.is_file() else None


_IMPORTS: dict[tuple[str, bool, str], list[str]] = {}
"""What each file imports, by module and the file's sha256: a file is read once per process, an edited one again."""


def imports_of(name: str, is_package: bool, digest: str, source: bytes) -> list[str]:
    """The modules the source of module `name` imports, absolute: `import a.b` names `a` and `a.b`; `from a import
    b` names `a` and `a.b` (`a.b` is then visited if it is a module rather than a name `a` defines). A package's
    `__init__.py` is read for its module-level imports only: a function there (a module `__getattr__`) is a lazy
    loader that runs when its name is asked for, not when the package is imported."""
    key = (name, is_package, digest)
    if key not in _IMPORTS:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):  # it would not import either
            tree = ast.Module(body=[], type_ignores=[])
        _IMPORTS[key] = _imported(name, is_package, tree)
    return _IMPORTS[key]


def _imported(name: str, is_package: bool, tree: ast.Module) -> list[str]:
    package = name if is_package else name.rpartition(".")[0]
    found: list[str] = []
    for node in _statements(tree.body, in_functions=not is_package):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _with_parents(alias.name)
        else:
            base = _absolute(node.module, node.level, package)
            if base is None:
                continue
            found += _with_parents(base)
            found += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return [module for module in found if module]


def _statements(body: list[ast.stmt], *, in_functions: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of `body` and the blocks it holds (an import is a statement: expressions are not
    walked), less those under `if TYPE_CHECKING:` (they never run) and, unless `in_functions`, those in function
    bodies."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if in_functions:
                yield from _statements(node.body, in_functions=in_functions)
        elif isinstance(node, ast.If) and _type_checking(node.test):
            yield from _statements(node.orelse, in_functions=in_functions)
        else:
            for block in _blocks(node):
                yield from _statements(block, in_functions=in_functions)


def _blocks(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement blocks a compound statement holds (`if`, `for`, `while`, `with`, `try`, `match`, `class`)."""
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list):
            yield block
    for handler in getattr(node, "handlers", ()):
        yield handler.body
    for case in getattr(node, "cases", ()):
        yield case.body


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(module: str | None, level: int, package: str) -> str | None:
    """The absolute name of `from <level dots><module> import ...` in `package` (None when it reaches above the top)."""
    if level == 0:
        return module
    parts = package.split(".") if package else []
    if level - 1 > len(parts) or (level - 1 == len(parts) and not module):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, module] if module else base) or None


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def installed_by(path: Path, relative: str) -> tuple[str, str] | None:
    """The versioned, non-editable distribution that installed the module file `path` (`relative` below its import
    root), as (name, version); None when none did (a file of the working tree, of `PYTHONPATH`, of an editable
    install's project: its distribution's metadata is not beside it) or an editable one did."""
    text = path.as_posix()
    if not text.endswith(relative):
        return None
    root = text[: len(text) - len(relative)]
    top = relative.partition("/")[0].partition(".")[0]
    for metadata in _by_likelihood(_metadata_dirs(root), top):
        if _lists(metadata, relative, top):
            return _versioned(metadata)
    return None


@functools.cache  # the installed packages do not change under a running process (as the registries assume)
def _metadata_dirs(root: str) -> tuple[str, ...]:
    """The distributions' metadata directories (`*.dist-info`, `*.egg-info`) in import root `root`."""
    try:
        names = sorted(os.listdir(root or "."))
    except OSError:
        return ()
    return tuple(str(Path(root, n)) for n in names if n.endswith((".dist-info", ".egg-info")))


def _by_likelihood(dirs: tuple[str, ...], top: str) -> list[str]:
    """`dirs` with the distributions named like `top` (`numpy` for `numpy`) first: the one that installed it, most
    often, found without reading the others' file lists."""
    wanted = _normal(top)
    return sorted(dirs, key=lambda d: _normal(Path(d).name.partition("-")[0].rpartition(".")[0] or d) != wanted)


def _normal(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def _lists(metadata: str, relative: str, top: str) -> bool:
    """Whether the distribution at `metadata` installed file `relative` (by its RECORD, else its top_level.txt)."""
    files, tops = _installed(metadata)
    return relative in files if files else top in tops


@functools.cache
def _installed(metadata: str) -> tuple[frozenset[str], frozenset[str]]:
    """The files a distribution's RECORD lists and the packages its top_level.txt names."""
    dist = PathDistribution(Path(metadata))
    record = dist.read_text("RECORD") or dist.read_text("installed-files.txt") or ""
    files = frozenset(line.partition(",")[0] for line in record.splitlines() if line)
    tops = frozenset((dist.read_text("top_level.txt") or "").split())
    return files, tops


@functools.cache
def _versioned(metadata: str) -> tuple[str, str] | None:
    """The distribution at `metadata` as (name, version); None when it is an editable install (`pip install -e`:
    its `direct_url.json` says `dir_info.editable`), whose files are source. The metadata found beside a module
    may be a build's leftover (`src/<name>.egg-info` of a project installed editable): the distribution by that
    name that Python finds first is the one that counts."""
    dist = PathDistribution(Path(metadata))
    name = str(dist.metadata["Name"] or Path(metadata).stem)
    try:
        installed: Distribution = distribution(name)
    except PackageNotFoundError:
        installed = dist
    if _editable(installed.read_text("direct_url.json")):
        return None
    return name, str(dist.version)


def _editable(direct_url: str | None) -> bool:
    try:
        info = json.loads(direct_url or "{}")
    except ValueError:
        return False
    dir_info = info.get("dir_info") if isinstance(info, dict) else None
    return isinstance(dir_info, dict) and dir_info.get("editable") is True
