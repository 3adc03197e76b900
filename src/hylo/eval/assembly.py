"""An episode's parts, built in one place: the env (inside the wrappers its owner puts around it), the agent or the
graph's agents, the shield, the Kernel or the graph's runner, and the env panel that places the episodes.

A run's worker (`hylo.eval.worker`) and an interactive session (`hylo.sessions`) both build theirs with `assemble`,
so that they agree on what an env is built with. The one real difference between them is `Use`:

- `Use.BATCH`: a worker places the episodes of its plan itself, through a panel of its own that starts where the
  plan starts; it meters and records its env as the run asks (`wrap`, `on_images`, `env_calls`).
- `Use.INTERACTIVE`: a user places the episodes field by field, on the panel the server shares (the session's own,
  not built here) or, when the env nodeset runs apart, on its subprocess' panel; a viewer may watch the frames.

Which env renders camera frames (`render_images`):

- what the graph's nodes need (an agent that gets images, an `observe_image` node) is rendered by the worker's env
  whether or not the env nodeset runs apart: its spec is the one the worker's agents are checked against and given,
  so it must declare the images they will be handed; a subprocess renders it for its own env too.
- what no node asks for (`render`: a session's live view, a run's recorded rollouts) is rendered where the env
  steps: the worker's env, or the subprocess of an env nodeset that runs apart for a session's live view. A run
  records only its own env, so it asks a subprocess for nothing more than its nodes need.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from hylo.core.agent import agent_name, gets_images, requires_images
from hylo.core.bus import EventBus
from hylo.core.environment import Environment
from hylo.core.errors import HyloError, IncompatibleComponents
from hylo.core.kernel import Kernel
from hylo.core.shield import SafetyShield
from hylo.core.timing import Timing
from hylo.core.types import TaskInstance
from hylo.envs.benchmark import Benchmark
from hylo.graph.agent_nodes import build_agents, close_agents, graph_needs_images
from hylo.graph.assemble import assemble_runner, env_in_server_mode
from hylo.graph.compile import Plan
from hylo.graph.executor import GraphRunner
from hylo.graph.node import EnvCalls
from hylo.panels.benchmark import BenchmarkPanel
from hylo.panels.remote import RemoteEnvPanelProxy

Panel = BenchmarkPanel | RemoteEnvPanelProxy
"""A panel that places planned episodes (`place`): a local one, or the proxy of a subprocess' one."""


class Use(enum.Enum):
    """Who the parts are for (see the module's docstring)."""

    BATCH = "batch"
    INTERACTIVE = "interactive"


class ImagesWithheld(IncompatibleComponents):
    """The run withholds camera images (`--no-images`) from an agent that requires them."""


class PanelUnavailable(HyloError):
    """The parts were built, their env panel could not be (they are closed again); the message says why."""


@dataclass
class EpisodeParts:
    """What runs one owner's episodes, built once and closed once.

    - `env`: the env the executor drives (the outermost of its wrappers); in server mode it only gives the spec
    - `executor`: the Kernel of an agent run, or the graph's runner (which owns its server-mode subprocesses)
    - `panel`: the panel that places the episodes; None for a session whose env is local (the server's panel, the
      session's own, places them)
    - `remote_panel`: whether `panel` is the proxy of the panel in the env nodeset's subprocess
    """

    env: Environment
    executor: Kernel | GraphRunner
    panel: Panel | None
    remote_panel: bool = False

    def close(self) -> None:
        """Close the executor (its subprocesses, its agent when it owns it), then the env, even when the first
        fails (whose error is raised)."""
        try:
            self.executor.close()
        finally:
            self.env.close()


def assemble(
    benchmark: Benchmark,
    use: Use,
    *,
    worker: str,
    bus: EventBus,
    max_steps: int,
    plan: Plan | None = None,
    agent: object = None,
    shield: bool = True,
    act_timeout_s: float | None = None,
    timing: Timing | None = None,
    allow_import: bool = True,
    render: bool = False,
    images_withheld: bool = False,
    wrap: Callable[[Environment, bool], Environment] | None = None,
    on_images: Callable[[], None] | None = None,
    env_calls: EnvCalls | None = None,
    start: TaskInstance | None = None,
) -> EpisodeParts:
    """Build the parts that run `benchmark`'s episodes: `plan`'s runner (its agents built here), else a Kernel
    around `agent`. On a failure, what was built is closed again.

    - `worker`: the tag of the owner (`w0`, `s3`); a server-mode nodeset's subprocess is tagged with its index
    - `max_steps`: the step budget until the owner sets another; `timing`: an agent run's (a graph runs in sync)
    - `render`: camera frames no node asks for (a session's live view, a run's recorded rollouts; see the module's
      docstring for which env renders them); `images_withheld`: no agent is given any (`--no-images`), and one that
      requires them is refused (`ImagesWithheld` for an agent run's, `IncompatibleComponents` for a graph's)
    - `wrap(env, images)`: puts the owner's wrappers around the env it built (`images`: whether the agents are given
      camera frames); `on_images`: a graph node asks for frames; `env_calls`: sees the calls into a server-mode env
      nodeset's subprocess
    - `start` (`Use.BATCH`, required): where the panel starts, the plan's first task
    """
    if use is Use.BATCH and start is None:
        raise ValueError("a batch owner's panel starts where its plan starts: give `start`")
    agents = build_agents(plan, benchmark, allow_import=allow_import) if plan is not None else {}
    try:
        if plan is not None:
            images = graph_needs_images(plan, agents, withheld=images_withheld)
            apart = env_in_server_mode(plan, benchmark)
        else:
            images, apart = _agent_images(agent, withheld=images_withheld), False
        base = benchmark.make_env(render_images=images or (render and not apart))
    except BaseException:
        close_agents(agents)
        raise
    env = base
    try:
        env = wrap(base, images) if wrap is not None else base
        executor: Kernel | GraphRunner
        guard = SafetyShield() if shield else SafetyShield.permissive()
        if plan is None:
            executor = Kernel(env, agent, shield=guard, timing=timing, act_timeout_s=act_timeout_s,
                              max_steps=max_steps, bus=bus, auto_episode_reset=False)  # fmt: skip
        else:
            executor = assemble_runner(
                plan,
                benchmark,
                env,
                worker=worker,
                shield=guard,
                bus=bus,
                max_steps=max_steps,
                act_timeout_s=act_timeout_s,
                agents=agents,
                allow_import=allow_import,
                on_images=on_images,
                render_images=render and use is Use.INTERACTIVE,
                images_withheld=images_withheld,
                env_calls=env_calls,
            )
    except BaseException:
        close_agents(agents)
        env.close()  # its wrappers' too
        raise
    parts = EpisodeParts(env, executor, None)
    try:
        parts.panel, parts.remote_panel = _panel(parts, benchmark, use, apart, start)
    except BaseException as exc:
        parts.close()
        if isinstance(exc, HyloError):
            raise PanelUnavailable(str(exc)) from exc
        raise
    return parts


def _agent_images(agent: object, *, withheld: bool) -> bool:
    """Whether an agent run gives `agent` camera images (`gets_images`, unless the run withholds them); an agent that
    requires them where they are withheld is refused."""
    if not withheld:
        return gets_images(agent)
    if requires_images(agent):
        raise ImagesWithheld(f"agent {agent_name(agent)} needs camera images, and --no-images withholds them")
    return False


def _panel(
    parts: EpisodeParts, benchmark: Benchmark, use: Use, apart: bool, start: TaskInstance | None
) -> tuple[Panel | None, bool]:
    """The panel of `parts` and whether it is a subprocess' (see `EpisodeParts.panel`); a batch owner's is placed at
    `start` (nothing is signalled: nothing runs yet)."""
    runner = parts.executor
    remote = runner.remote if isinstance(runner, GraphRunner) else None
    served = remote.env_panel(benchmark.name) if remote is not None else None
    if use is Use.INTERACTIVE:
        if apart and served is None:
            raise HyloError(f"the {benchmark.name} env nodeset of this graph has no panel")
        return served, served is not None
    assert start is not None
    panel: Panel = served or BenchmarkPanel(benchmark, split=start.split, task=start.task)
    panel.place(start)
    return panel, served is not None
