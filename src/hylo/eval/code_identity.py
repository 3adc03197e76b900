"""A run's code identity: the code and the files that define its agent, part of the run's digest, so that an edited
agent makes another run instead of reusing or extending the results of the old code.

What counts, for each agent of a run (the agent, or each `reason` node's agent of a graph run):
- its source: the module that defines it (`module:Class`, a registered agent's target, the benchmark's expert
  class) and every source module its imports reach, each by the sha256 of its file (`hylo.eval.source_closure`
  says which modules and why);
- the versioned distributions those imports reach, by name and version (their files are not read);
- every existing file or directory that a string among its arguments names (`~` expanded, relative to the working
  directory), by the hash of its content (`hylo.eval.content_hash`): a checkpoint, a config, a model directory.

The identity is a list of tagged parts per agent (`SourceFile`, `InstalledDistribution`, `ArgumentPath`), so a new
kind of evidence is one more member of the union: an agent handed over as a live object (its weights' digest, say)
would add its own part without changing how identities are stored, digested or compared. `diff_code` compares two
identities part by part; `code_changes` finds, for a run in a log dir, the latest other run of the same
configuration and what differs.

The identity is computed once per run, in the process that starts it (the runner, `plan_run`), never per worker or
episode.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hylo.agents.registry import AGENT_REGISTRY, agent_factory
from hylo.core.digest import state_digest
from hylo.core.errors import HyloError, shown
from hylo.eval.content_hash import TreeTooLarge, file_hash, tree_hash
from hylo.eval.source_closure import ClosureTooLarge, closure_of
from hylo.evallog.rows import RunInfo
from hylo.evallog.store import list_runs
from hylo.graph.agent_nodes import reason_agents

if TYPE_CHECKING:
    from hylo.envs.benchmark import Benchmark
    from hylo.eval.spec import EvalSpec
    from hylo.graph.compile import Plan

MAX_PATH_CHARS = 4096
"""An argument string longer than this is never taken for a path."""


class CodeIdentityError(HyloError, ValueError):
    """A run whose code identity cannot be taken (an argument's directory too large, a file that cannot be read);
    the message names the argument."""


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @property
    @abc.abstractmethod
    def key(self) -> str:
        """What names the part within a run (the same part in two runs has the same key)."""

    @property
    @abc.abstractmethod
    def value(self) -> str:
        """What changes when the part does."""


class SourceFile(_Part):
    """A source module of the agent's code: its path below its import root (`hylo/agents/basic.py`)."""

    kind: Literal["source"] = "source"
    path: str
    sha256: str

    @property
    def key(self) -> str:
        return self.path

    @property
    def value(self) -> str:
        return self.sha256


class InstalledDistribution(_Part):
    """A versioned, non-editable distribution the agent's code imports, by version (its files are not read)."""

    kind: Literal["distribution"] = "distribution"
    name: str
    version: str

    @property
    def key(self) -> str:
        return self.name

    @property
    def value(self) -> str:
        return self.version


class ArgumentPath(_Part):
    """A file or directory an argument names: `arg` says where among the arguments (`checkpoint`, `paths[1]`,
    `model.weights`; `node:arg` for a graph's `reason` node), `path` is the string as given. `files` counts a
    directory's files; `method` `stat` marks a directory too large to read (see `hylo.eval.content_hash`)."""

    kind: Literal["argument"] = "argument"
    arg: str
    path: str
    sha256: str
    size: int
    files: int | None = None
    method: Literal["content", "stat"] = "content"

    @property
    def key(self) -> str:
        return self.arg

    @property
    def value(self) -> str:
        return self.sha256


class LiveWeights(_Part):
    """The weights of a live agent object (`hylo.evaluate(agent=obj)`): the sha256 of its state (`state_digest`)."""

    kind: Literal["weights"] = "weights"
    sha256: str

    @property
    def key(self) -> str:
        return "weights"

    @property
    def value(self) -> str:
        return self.sha256


Part = SourceFile | InstalledDistribution | ArgumentPath | LiveWeights
CodePart = Annotated[Part, Field(discriminator="kind")]
KINDS = ("source", "distribution", "argument", "weights")
"""The kinds of part, in the order reports list them."""


class AgentCode(BaseModel):
    """One agent's code: `agent` as the spec names it, `node` the `reason` node of a graph run (None otherwise),
    `modules` those that define it (where the walk of its imports starts)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str
    node: str | None = None
    modules: list[str] = Field(default_factory=list)
    parts: list[CodePart]

    def own_sources(self) -> list[str]:
        """The source files of the modules that define the agent (not those they import)."""
        wanted = {name.replace(".", "/") for name in self.modules}
        return [p.path for p in self.parts if isinstance(p, SourceFile) and _module_path(p.path) in wanted]


def _module_path(path: str) -> str:
    """The module a source file holds, as a path: `pkg/mod` for `pkg/mod.py` (or a compiled `pkg/mod.*.so`),
    `pkg` for `pkg/__init__.py`."""
    folder, _, name = path.rpartition("/")
    stem = name.split(".", 1)[0]
    if stem == "__init__":
        return folder
    return f"{folder}/{stem}" if folder else stem


class CodeIdentity(BaseModel):
    """A run's code identity: each agent's code and the `digest` of them all (what enters the run's digest)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    digest: str
    agents: list[AgentCode]

    @classmethod
    def of(cls, agents: list[AgentCode]) -> CodeIdentity:
        data = [agent.model_dump(mode="json") for agent in agents]
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return cls(digest=hashlib.sha256(text.encode()).hexdigest()[:16], agents=agents)

    def parts(self) -> dict[tuple[str, str], Part]:
        """Every part of every agent by (kind, key); a graph's arguments are keyed `node:arg`."""
        found: dict[tuple[str, str], Part] = {}
        for agent in self.agents:
            for part in agent.parts:
                key = f"{agent.node}:{part.key}" if agent.node is not None and part.kind == "argument" else part.key
                found[(part.kind, key)] = part
        return found

    def sources(self) -> list[str]:
        return sorted({key for kind, key in self.parts() if kind == "source"})

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: object) -> CodeIdentity | None:
        """The identity a run recorded (None for a run made before runs recorded one, or an unreadable one)."""
        try:
            return cls.model_validate(data)
        except ValidationError:
            return None


# -- taking it -----------------------------------------------------------------------------------------------------


def run_code(
    spec: EvalSpec, benchmark: Benchmark, plan: Plan | None = None, *, allow_import: bool = True
) -> CodeIdentity:
    """The code identity of a resolved spec's run: its agent's, or each `reason` node's agent's for a graph run
    (`plan`, its compiled graph). Files inside the run's log dir are never part of it (a run writes there)."""
    exclude = spec.log_path.resolve()
    if plan is None:
        agents = [agent_code(spec.agent, spec.agent_args, benchmark, allow_import=allow_import, exclude=exclude)]
    else:
        agents = [
            agent_code(config.agent, config.args, benchmark, node=node, allow_import=allow_import, exclude=exclude)
            for node, config in sorted(reason_agents(plan).items())
        ]
    return CodeIdentity.of(agents)


def agent_code(
    name: str,
    args: dict[str, Any],
    benchmark: Benchmark | None,
    *,
    node: str | None = None,
    allow_import: bool = True,
    exclude: Path | None = None,
) -> AgentCode:
    """The code of agent `name` built with `args`: its sources, the distributions they import, the files its
    arguments name. Raises `CodeIdentityError` naming what could not be read."""
    modules = agent_modules(name, benchmark, allow_import=allow_import)
    try:
        closure = closure_of(modules)
    except (ClosureTooLarge, OSError) as exc:
        raise CodeIdentityError(f"cannot read the code of agent {name!r}: {exc}") from None
    parts: list[Part] = [SourceFile(path=path, sha256=digest) for path, digest in closure.sources.items()]
    parts += [InstalledDistribution(name=dist, version=version) for dist, version in closure.distributions.items()]
    parts += argument_paths(args, exclude=exclude)
    return AgentCode(agent=name, node=node, modules=modules, parts=parts)


def live_code(name: str, agent: object) -> CodeIdentity:
    """The code identity of a live agent object: the sources its class's module reaches (none for a class defined
    where no source is, a notebook's) and the digest of its weights (`weights_digest`)."""
    module = type(agent).__module__
    parts: list[Part] = []
    with contextlib.suppress(ClosureTooLarge, OSError, ImportError, ValueError, SyntaxError):
        closure = closure_of([module])
        parts += [SourceFile(path=path, sha256=digest) for path, digest in closure.sources.items()]
        parts += [InstalledDistribution(name=dist, version=version) for dist, version in closure.distributions.items()]
    parts.append(LiveWeights(sha256=weights_digest(agent)))
    return CodeIdentity.of([AgentCode(agent=name, modules=[module], parts=parts)])


def weights_digest(agent: object) -> str:
    """The digest of an agent object's weights: its own `weights_digest()`, else its `state_dict()` (a torch
    module), else its array attributes (a numpy policy)."""
    own = getattr(agent, "weights_digest", None)
    if callable(own):
        return str(own())
    state_dict = getattr(agent, "state_dict", None)
    if callable(state_dict):
        return state_digest(state_dict())
    arrays = {key: value for key, value in vars(agent).items() if isinstance(value, np.ndarray)}
    return state_digest(arrays)


def agent_modules(name: str, benchmark: Benchmark | None, *, allow_import: bool = True) -> list[str]:
    """The modules that define agent `name`: the one its target names (`module:Class`, a registered agent's
    `module:attr`) and the one its factory is defined in (the benchmark's expert class, a re-exported class)."""
    factory = agent_factory(name, benchmark, allow_import=allow_import)
    target = AGENT_REGISTRY.target(name) or (name if ":" in name else None)
    modules = [target.partition(":")[0]] if target is not None and ":" in target else []
    defined = getattr(factory, "__module__", None) or type(factory).__module__
    if isinstance(defined, str) and defined not in modules:
        modules.append(defined)
    return modules


def argument_paths(args: dict[str, Any], *, exclude: Path | None = None) -> list[ArgumentPath]:
    """The files and directories the string values of `args` name (in lists and objects too), hashed by content;
    a string that names nothing that exists is not a path, and one inside `exclude` (the log dir) is left out."""
    found: list[ArgumentPath] = []
    exclude = exclude.resolve() if exclude is not None else None
    for where, text in _strings(args, ""):
        path = named_path(text)
        if path is None or (exclude is not None and path.resolve().is_relative_to(exclude)):
            continue  # not a path, or one in the log dir, where runs write
        try:
            digest = tree_hash(path, exclude=exclude) if path.is_dir() else file_hash(path)
        except (OSError, TreeTooLarge) as exc:
            raise CodeIdentityError(
                f"agent argument {where}={shown(text)} names {'a directory' if path.is_dir() else 'a file'} whose "
                f"content cannot be hashed: {exc}"
            ) from None
        found.append(ArgumentPath(arg=where, path=text, sha256=digest.hash, size=digest.size, files=digest.files,
                                  method="stat" if digest.method == "stat" else "content"))  # fmt: skip
    return found


def _strings(value: object, where: str) -> Iterator[tuple[str, str]]:
    """Every string in `value` with where it lies (`a`, `a.b`, `a[2]`)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from _strings(value[key], f"{where}.{key}" if where else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")


def named_path(text: str) -> Path | None:
    """The existing file or directory `text` names (absolute, `~`-relative, or relative to the working
    directory), or None: the empty string, a multi-line or over-long string, or one that names nothing."""
    if not text or len(text) > MAX_PATH_CHARS or "\0" in text or "\n" in text:
        return None
    path = Path(os.path.expanduser(text))
    try:
        return path if path.is_file() or path.is_dir() else None
    except (OSError, ValueError):
        return None


# -- comparing it --------------------------------------------------------------------------------------------------


class CodeChange(BaseModel):
    """One part that differs between two runs' code: `change` is `changed` (in both, another hash or version),
    `added` (only in this run) or `removed` (only in the other); `was` / `now` its hash or version there."""

    kind: Literal["source", "distribution", "argument", "weights"]
    name: str
    change: Literal["changed", "added", "removed"]
    was: str | None
    now: str | None

    def text(self) -> str:
        if self.kind == "distribution":
            if self.change == "changed":
                return f"{self.name} {self.was} → {self.now}"
            return f"{self.name}=={self.now if self.change == 'added' else self.was} ({self.change})"
        what = f"argument {self.name}" if self.kind == "argument" else self.name
        what = "the live object's weights" if self.kind == "weights" else what
        return what if self.change == "changed" else f"{what} ({self.change})"


def diff_code(was: CodeIdentity, now: CodeIdentity) -> list[CodeChange]:
    """What differs from `was` to `now`, part by part, sources first, then distributions, then argument files."""
    before, after = was.parts(), now.parts()
    changes: list[CodeChange] = []
    for kind, name in sorted(before.keys() | after.keys(), key=lambda k: (KINDS.index(k[0]), k[1])):
        old, new = before.get((kind, name)), after.get((kind, name))
        if old is not None and new is not None and old.value == new.value:
            continue
        change = "changed" if old is not None and new is not None else "added" if old is None else "removed"
        changes.append(CodeChange.model_validate({"kind": kind, "name": name, "change": change,
                                                  "was": old.value if old else None,
                                                  "now": new.value if new else None}))  # fmt: skip
    return changes


def changes_text(changes: list[CodeChange], limit: int = 8) -> str:
    """The changes as one line: `myagents.py, hylo/core/kernel.py (added), numpy 2.1 → 2.2` (at most `limit`)."""
    texts = [change.text() for change in changes[:limit]]
    more = f" and {len(changes) - limit} more" if len(changes) > limit else ""
    return ", ".join(texts) + more


class CodeChanges(BaseModel):
    """How a run's code differs from that of `against`, the latest other run of the same configuration in its log
    dir (made before it when there is one)."""

    run_id: str
    against: str
    against_created_at: float
    changes: list[CodeChange]

    @property
    def same_code(self) -> bool:
        return not self.changes

    def text(self) -> str:
        made = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.against_created_at))
        if self.same_code:
            return f"same code as run {self.against} (same configuration, made {made})"
        return f"code differs from run {self.against} (same configuration, made {made}): {changes_text(self.changes)}"

    def to_json(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "same_code": self.same_code}


def code_changes(log_dir: Path, info: RunInfo) -> CodeChanges | None:
    """How run `info`'s code differs from the latest other run in `log_dir` with the same configuration digest
    (made before it if any was, else after it); None when the run recorded no code identity or no other run of its
    configuration did."""
    code = CodeIdentity.from_json(info.spec.get("code"))
    config = info.spec.get("config_digest")
    if code is None or config is None:
        return None
    others = [
        (run, identity)
        for run in list_runs(log_dir)
        if run.run_id != info.run_id and run.spec.get("config_digest") == config
        for identity in [CodeIdentity.from_json(run.spec.get("code"))]
        if identity is not None
    ]
    if not others:
        return None
    earlier = [entry for entry in others if entry[0].created_at <= info.created_at]
    other, identity = max(earlier or others, key=lambda entry: entry[0].created_at)
    return CodeChanges(run_id=info.run_id, against=other.run_id, against_created_at=other.created_at,
                       changes=diff_code(identity, code))  # fmt: skip


# -- showing it ----------------------------------------------------------------------------------------------------


def code_note(code: CodeIdentity | None, changes: CodeChanges | None) -> list[str]:
    """What `hylo runs show` says of a run's code: each agent's sources, distributions and argument files, then how
    they differ from the latest other run of the same configuration."""
    if code is None:
        return ["code: not recorded (a run made before runs recorded their agent's code)"]
    lines = [f"code {code.digest}"]
    for agent in code.agents:
        lines.append(f"  {agent_summary(agent)}")
    if changes is not None:
        lines.append(changes.text())
    return lines


def agent_summary(agent: AgentCode) -> str:
    """One agent's code in a line: `myagents:Reach: myagents.py + 43 imported source files · numpy 2.1.3, ...`."""
    sources = [p for p in agent.parts if isinstance(p, SourceFile)]
    own = agent.own_sources()
    others = len(sources) - len(own)
    parts = [", ".join(own) or "no source file", f"+ {others} imported source file{'s' * (others != 1)}"]
    text = f"{agent.node + ': ' if agent.node else ''}{agent.agent}: {' '.join(parts)}"
    dists = [f"{p.name} {p.version}" for p in agent.parts if isinstance(p, InstalledDistribution)]
    if dists:
        text += f" · {', '.join(dists)}"
    for p in agent.parts:
        if isinstance(p, ArgumentPath):
            what = f"{p.files:,} files, " if p.files is not None else ""
            how = ", by names, sizes and times" if p.method == "stat" else ""
            text += f" · {p.arg}={p.path} ({what}{_size(p.size)}{how}: {p.sha256[:12]})"
        elif isinstance(p, LiveWeights):
            text += f" · live object's weights {p.sha256[:12]}"
    return text


def _size(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"
