"""Things found by name — benchmarks, agents, nodesets — through one mechanism, so that each kind finds, refuses and
caches its names the same way.

A `Registry` of one kind holds
- its built-ins: name → `module:attr`, listed first;
- the entry points of its group (a package adds its own with `[project.entry-points."hylo.<kind>s"]`); an entry point
  never shadows a built-in;
- whether an import path (`module:Class`) may name a thing of its kind directly (`import_paths`), and then only where
  the caller allows imports: never for what an HTTP request names.

Caching, the same for every kind: a group's entry points are read once per process (installed packages do not change
while it runs) and each target is loaded once (imported, then checked or converted by the kind's `load`). A failure
is not cached. `refresh()` forgets both (a test that fakes entry points, a process that installed a plugin).

`import_target("module:attr")` is the public resolver: it imports the module and walks the attribute path, naming
what is missing.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from hylo.core.errors import HyloError, UnknownChoice

T = TypeVar("T")


class RegistryError(HyloError, ValueError):
    """A registered name or an import path whose target cannot be loaded; the message names it and why."""


def import_target(target: str, *, kind: str = "object", error: type[Exception] = RegistryError) -> Any:
    """The object `module:attr` names (`attr` may be dotted: `module:Outer.Inner`). Raises `error` naming the
    `kind`, the target and what is wrong: not `module:attr`, a module that does not import, a missing attribute."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise error(f"bad {kind} import path {target!r}: expected module:Class")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise error(f"cannot import {kind} module {module_name!r} (from {target!r}): {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise error(f"module {module_name!r} has no {attr!r} (from {kind} {target!r})")
        obj = getattr(obj, part)
    return obj


class Registry(Generic[T]):
    """The names of one kind: built-ins, then entry points; `load` turns what a target names into a `T` (a check,
    or a call) and raises `error` when it cannot.

    - `kind`: the word messages use (`benchmark`, `agent`, `nodeset`)
    - `group`: the entry-point group (`hylo.benchmarks`, ...)
    - `sort`: list the names sorted (else the built-ins in their order, then the entry points sorted)
    - `forms`: what else a name may be, listed after the names when one is unknown (`gym:<id>`, `module:Class`)
    """

    def __init__(
        self,
        kind: str,
        group: str,
        builtin: Mapping[str, str],
        load: Callable[[str, Any], T],
        *,
        error: type[Exception] = RegistryError,
        import_paths: bool = False,
        sort: bool = False,
        forms: Iterable[str] = (),
    ) -> None:
        self.kind = kind
        self.group = group
        self.builtin = dict(builtin)
        self.error = error
        self.import_paths = import_paths
        self.forms = list(forms)
        self._load = load
        self._sort = sort
        self._lock = threading.Lock()
        self._entries: dict[str, str] | None = None
        self._loaded: dict[str, T] = {}

    def entries(self) -> dict[str, str]:
        """Name → `module:attr` of every registered name, in listing order."""
        return dict(self._read())

    def names(self) -> list[str]:
        return list(self._read())

    def target(self, name: str) -> str | None:
        """The `module:attr` registered as `name`, or None."""
        return self._read().get(name)

    def _read(self) -> dict[str, str]:
        with self._lock:
            if self._entries is None:
                plugins = {ep.name: ep.value for ep in entry_points(group=self.group) if ep.name not in self.builtin}
                found = {**self.builtin, **dict(sorted(plugins.items()))}
                self._entries = dict(sorted(found.items())) if self._sort else found
            return self._entries

    def load_target(self, target: str) -> T:
        """What `target` (`module:attr`) names, as the kind's `load` makes it; loaded once."""
        with self._lock:
            if target in self._loaded:
                return self._loaded[target]
        value = self._load(target, import_target(target, kind=self.kind, error=self.error))
        with self._lock:
            return self._loaded.setdefault(target, value)

    def get(self, name: str) -> T:
        """The registered `name`, loaded; `UnknownChoice` (naming the names and `forms`) when it is not registered."""
        target = self.target(name)
        if target is None:
            raise UnknownChoice(self.kind, name, [*self.names(), *self.forms])
        return self.load_target(target)

    def resolve(self, name: str, *, allow_import: bool = True) -> T:
        """A registered name, or (for a kind that takes import paths, and only with `allow_import`) the
        `module:attr` named. An import path where imports are not allowed is refused as an `UnknownChoice` that
        lists only the registered names."""
        if self.import_paths and ":" in name and self.target(name) is None:
            if not allow_import:
                what = f"{self.kind} (only registered {self.kind}s are accepted here)"
                raise UnknownChoice(what, name, self.names())
            return self.load_target(name)
        return self.get(name)

    def refresh(self) -> None:
        """Forget the entry points read and the targets loaded."""
        with self._lock:
            self._entries = None
            self._loaded.clear()
