"""The Agent interface (duck-typed) and the bind-time compatibility check."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Protocol, runtime_checkable

import gymnasium.spaces as spaces
from pydantic import BaseModel, ConfigDict, Field

from hylo.core.conventions import ActionConvention, compare_conventions
from hylo.core.errors import IncompatibleComponents
from hylo.core.features import feature_problems
from hylo.core.signals import ContainerSpec
from hylo.core.types import EnvCapabilities, EnvSpec, StepResult

if TYPE_CHECKING:
    from hylo.core.chunk import ActionChunk
    from hylo.core.context import EpisodeContext
    from hylo.core.status import EpisodeOutcome
    from hylo.core.types import Observation


@runtime_checkable
class Agent(Protocol):
    """Anything with `act` is an agent; `reset`, `on_step` and `on_episode_end` are optional.

    An agent may also declare:
    - `Args: type[AgentArgs]` — the arguments its class accepts, with their bounds (checked before it is built)
    - `requirements: AgentRequirements` — what it needs from the env (checked at bind time); read it with
      `requirements_of(agent)`, None for an agent that declares none
    - `containers: Sequence[ContainerSpec]` — its state containers (on `ctx.containers`); read them with
      `containers_of(agent)`, () for an agent that declares none
    - `on_signal(signal)` — to hear lifecycle signals (e.g. to forward them to another process)
    - `act_batch(observations, contexts) -> chunks` — see `BatchAgent`
    """

    def act(self, obs: Observation) -> ActionChunk: ...


@runtime_checkable
class BatchAgent(Agent, Protocol):
    """An agent that can also act for several episodes at once (`hylo eval --batch B`).

    `act_batch(observations, contexts)` gets one observation and the `EpisodeContext` of its episode for each of up
    to B episodes that run at the same time, and returns one chunk (or one action) per observation, in their order.
    For a batch of one it must return what `act` returns (`hylo.conformance` checks it): a batched evaluation
    then gives the episodes the actions an unbatched one gives, up to what floating-point batching changes (a matrix
    product over B rows may round differently from B products over one row; arithmetic that is exact per row, such
    as integer products, is unchanged).

    Under `--batch` one instance serves every episode: it is built once, in a policy-host process, and `reset(ctx)`,
    `on_step(result, ctx)` and `on_episode_end(outcome, ctx)` are called for each episode with that episode's own
    context (a hook that takes one argument is called with one). Per-episode state therefore lives in the context
    (`ctx.containers`, or a mapping keyed by `ctx.episode_id`), never on `self` alone; randomness comes from each
    episode's `ctx.rng`. `act` is never called on the shared instance: every request, a batch of one included,
    goes through `act_batch`.
    """

    def act_batch(self, observations: Sequence[Observation], contexts: Sequence[EpisodeContext]) -> Sequence[Any]: ...


def acts_in_batches(agent: object) -> bool:
    """Whether `agent` (an instance or a class) implements `act_batch`."""
    return callable(getattr(agent, "act_batch", None))


def shared_hook(agent: object, hook: str) -> Callable[[Any, EpisodeContext], Any] | None:
    """How one instance that serves many episodes is told about one of them (`BatchAgent`): `hook(arg, ctx)` when
    the agent's `on_step` / `on_episode_end` takes the context too, else `hook(arg)` with `agent.ctx` set to that
    episode's context first (what `AgentBase.reset` set it to for that episode: a one-argument hook that reads
    `self.ctx` reads its own episode); None when it has no such hook."""
    method = getattr(agent, hook, None)
    if not callable(method):
        return None
    try:
        parameters = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return lambda arg, ctx: method(arg, ctx)

    def told(arg: Any, ctx: EpisodeContext) -> Any:
        with contextlib.suppress(AttributeError):  # an agent with read-only attributes keeps its own
            agent.ctx = ctx  # type: ignore[attr-defined]
        return method(arg)

    return told


MAX_CHUNK = 10_000
"""The longest action chunk the built-in agents may be asked for (a chunk is held in memory for its episode)."""


class _RemoteUrlMark:
    """Marks an `AgentArgs` field whose value is a URL the agent connects to."""

    def __repr__(self) -> str:
        return "RemoteUrl"


REMOTE_URL = _RemoteUrlMark()

RemoteUrl = Annotated[str, Field(min_length=1, max_length=2048), REMOTE_URL]
"""The type of an `AgentArgs` field holding a URL the agent connects to (a policy server's): a server admits such
an agent from a request only when the operator allowed the URL (`hylo serve --allow-remote PREFIX`)."""


class AgentArgs(BaseModel):
    """The keyword arguments an agent class accepts, with their types and bounds, declared as the class's `Args`.

    They are checked before the agent is built, with errors naming the argument; a server checks them instead of
    building the agent while it handles a request, so a request can neither make the server allocate without bound
    (`chunk: 3000000`) nor connect anywhere (a `RemoteUrl` needs the operator's leave). Strict: `1.5` is not an int,
    `true` not a number, and an unknown argument is refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @classmethod
    def remote_fields(cls) -> tuple[str, ...]:
        """The fields that hold a URL the agent connects to."""
        return tuple(name for name, info in cls.model_fields.items() if REMOTE_URL in info.metadata)


class AgentBase:
    """Convenience base class: no-op hooks, so a subclass only writes `act`."""

    Args: ClassVar[type[AgentArgs] | None] = None
    name: str = ""
    requirements: AgentRequirements | None = None
    containers: Sequence[ContainerSpec] = ()

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx

    def on_step(self, result: StepResult) -> None:
        return None

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        return None


@dataclass(frozen=True, slots=True)
class AgentRequirements:
    """What an agent needs from an environment.

    `observation_keys` are paths into the observation space, `/`-separated for nested keys (`images/wrist`);
    `action_space` is compared by type and shape (and `n` for discrete spaces); `privileged_state` says the agent
    reads simulator state through `ctx.privileged` (a benchmark's own expert).

    `needs_images` decides whether the agent is given camera frames (`images`), the same way in every episode of a
    run, recorded or not: None (not declared) gives it the benchmark's whole observation, cameras included, as a
    harness hands a VLA its cameras; False gives it none, and no frame is rendered for it (a CPU-rendered frame costs
    more than a physics step: a state-only agent should say so); True gives it them and refuses an env that has none.

    `features` are named features (a dataset's names: `observation.state`, `observation.images.top`) the agent reads,
    each with its shape (images channel-first, C x H x W), found through the env's `feature_names`;
    `action_convention` says what its actions mean. Both are checked at bind time (`hylo.core.features`,
    `hylo.core.conventions`).
    """

    observation_keys: tuple[str, ...] = ()
    action_space: spaces.Space[Any] | None = None
    needs_images: bool | None = None
    privileged_state: bool = False
    features: tuple[tuple[str, tuple[int, ...]], ...] = ()
    action_convention: ActionConvention | None = None


def requirements_of(agent: object) -> AgentRequirements | None:
    """What `agent` declares it needs (its `requirements`), None when it declares nothing (the default of this
    optional member of the agent contract): a wrapper agent passes on what the agent it wraps declares with it.
    `check_compatible` refuses a declaration of another type."""
    requirements: AgentRequirements | None = getattr(agent, "requirements", None)
    return requirements


def containers_of(agent: object) -> tuple[ContainerSpec, ...]:
    """The state containers `agent` declares (its `containers`), () when it declares none."""
    return tuple(getattr(agent, "containers", ()) or ())


def gets_images(agent: object) -> bool:
    """Whether `agent` is given camera images: unless it declares `needs_images=False` (an agent that declares
    nothing gets the whole observation)."""
    requirements = requirements_of(agent)
    return not (isinstance(requirements, AgentRequirements) and requirements.needs_images is False)


def requires_images(agent: object) -> bool:
    """Whether `agent` declares `needs_images=True`: an env, or a run, without camera images cannot serve it."""
    requirements = requirements_of(agent)
    return isinstance(requirements, AgentRequirements) and requirements.needs_images is True


def notify(parts: Sequence[object], hook: str, arg: Any) -> None:
    """Call `hook(arg)` on each part that has it: how wrapper agents pass the lifecycle on to what they wrap."""
    for part in parts:
        method = getattr(part, hook, None)
        if method is not None:
            method(arg)


def agent_name(agent: object) -> str:
    name = getattr(agent, "name", "")
    return name if isinstance(name, str) and name else type(agent).__name__


def _has_key(space: spaces.Space[Any], path: str) -> bool:
    node: spaces.Space[Any] = space
    for part in path.split("/"):
        if not isinstance(node, spaces.Dict) or part not in node.spaces:
            return False
        node = node.spaces[part]
    return True


def _same_action_space(wanted: spaces.Space[Any], have: spaces.Space[Any]) -> bool:
    if type(wanted) is not type(have):
        return False
    if isinstance(wanted, spaces.Discrete) and isinstance(have, spaces.Discrete):
        return bool(wanted.n == have.n and wanted.start == have.start)
    if isinstance(wanted, spaces.Box):
        return wanted.shape == have.shape
    return bool(wanted == have)


def check_compatible(env_spec: EnvSpec, agent: object, capabilities: EnvCapabilities | None = None) -> tuple[str, ...]:
    """Raise IncompatibleComponents naming everything the agent needs that the env does not provide; return what
    could not be checked (an action convention unknown on one side; a frame or unit that differs), for the record."""
    if not callable(getattr(agent, "act", None)):
        raise IncompatibleComponents(f"{agent_name(agent)} is not an agent: it has no callable `act`")
    requirements = getattr(agent, "requirements", None)
    if requirements is None:  # an agent that declares nothing is not checked, nor warned about
        return ()
    if not isinstance(requirements, AgentRequirements):
        raise IncompatibleComponents(
            f"{agent_name(agent)}.requirements must be AgentRequirements, got {type(requirements).__name__}"
        )
    problems: list[str] = []
    obs_space = env_spec.observation_space
    provided = sorted(obs_space.spaces) if isinstance(obs_space, spaces.Dict) else []
    for key in requirements.observation_keys:
        if not _has_key(obs_space, key):
            problems.append(
                f"{agent_name(agent)} needs observation key {key!r}; env {env_spec.name!r} provides {provided}"
            )
    if requirements.needs_images is True and not _has_key(obs_space, "images"):
        problems.append(f"{agent_name(agent)} needs camera images; env {env_spec.name!r} provides {provided}")
    wanted = requirements.action_space
    if wanted is not None and not _same_action_space(wanted, env_spec.action_space):
        problems.append(f"{agent_name(agent)} acts in {wanted} but env {env_spec.name!r} takes {env_spec.action_space}")
    if requirements.privileged_state and capabilities is not None and not capabilities.privileged_state:
        problems.append(f"{agent_name(agent)} reads privileged state; env {env_spec.name!r} exposes none")
    problems += feature_problems(
        agent_name(agent), env_spec.name, requirements.features, obs_space, env_spec.feature_names
    )
    conventions = compare_conventions(
        agent_name(agent), env_spec.name, requirements.action_convention, env_spec.action_convention
    )
    problems += conventions.problems
    if problems:
        raise IncompatibleComponents(problems)
    return conventions.warnings
