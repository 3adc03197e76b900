"""`lerobot`: a LeRobot `PreTrainedPolicy` (ACT, diffusion, SmolVLA, pi0, ...) evaluated in-process.

`hylo eval libero --agent lerobot -A path=DIR` loads the policy saved in `DIR` (its `config.json`, `model.safetensors`
and its saved pre/post processor pipelines) offline; `LeRobotAgent(policy, preprocessor, postprocessor)` wraps a
policy object a training loop holds (`hylo.evaluate(..., agent=LeRobotAgent(policy))`).

What the policy is given is LeRobot's own pipeline: the env's observation renamed by the benchmark's declared
feature names (`EnvSpec.feature_names`: `images/agentview` is `observation.images.image`, `instruction` is `task`),
images as float32 C x H x W in [0, 1] with a batch dimension (`lerobot.envs.utils.preprocess_observation`), then the
checkpoint's preprocessor, `select_action`, its postprocessor. The policy's input and output features are checked
against the env at bind time (`AgentRequirements.features`, `action_space`), so a missing camera or a wrong state or
action size refuses the run before any episode.

Chunks: when `select_action` predicts a chunk, the actions it queued are returned as one `ActionChunk` (its
`n_action_steps`, `-A n_action_steps=` to change), so hylo's chunk executor, the shield and the realtime protocols
see a real chunk. Per-episode state: LeRobot keeps one action queue (and diffusion one observation history) per
policy object; this agent keeps each episode's own and swaps it in for that episode's calls, so episodes that run
side by side in one policy host (`--batch`) or start at different steps are each exactly what an unbatched run gives
(one forward pass per episode: the same actions to the last bit). A policy that keeps an observation history is
shown every step's observation, as LeRobot's loop shows it. Randomness (diffusion's noise, flow matching's) is drawn
from a torch generator seeded from the episode's seed, never from the caller's global RNG.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import gymnasium.spaces as spaces
import numpy as np
from pydantic import Field

from hylo.core.agent import AgentArgs, AgentBase, AgentRequirements
from hylo.core.chunk import ActionChunk
from hylo.core.conventions import ActionConvention, ConventionError
from hylo.core.digest import state_digest
from hylo.core.errors import HyloError
from hylo.core.features import FeatureSource, resolve_features

if TYPE_CHECKING:
    from hylo.core.context import EpisodeContext
    from hylo.core.status import EpisodeOutcome
    from hylo.core.types import Observation, StepResult

INSTALL = "pip install 'hylo[lerobot]' (Python >= 3.12)"
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
_STATE_ATTRIBUTES = ("_action_queue", "_queues", "temporal_ensembler")
"""The attributes in which LeRobot's policies keep what `reset()` clears (queued actions, observation history, a
temporal ensemble): the state this agent keeps per episode."""


class LeRobotError(HyloError):
    """A LeRobot checkpoint or policy hylo cannot evaluate; the message says what to change."""


def _torch() -> Any:
    try:
        import torch  # optional: the lerobot extra
    except ImportError as exc:
        raise LeRobotError(f"the lerobot agent needs torch and lerobot ({exc}): {INSTALL}") from None
    return torch


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """No hub access while a checkpoint loads: a checkpoint that would download refuses instead."""
    saved = {name: os.environ.get(name) for name in OFFLINE_VARIABLES}
    os.environ.update(dict.fromkeys(OFFLINE_VARIABLES, "1"))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _Episode:
    """One episode's share of the policy: its queues and history, and its random generator."""

    def __init__(self, state: dict[str, Any], seed: int) -> None:
        self.state = state
        self.seed = seed
        self.calls = 0


class LeRobotAgent(AgentBase):
    """A LeRobot policy object with its pre/post processors (a training loop's: `hylo.evaluate(agent=...)`).

    `rename` maps the env's feature names to the policy's (`{"observation.images.image": "observation.images.top"}`,
    LeRobot's `rename_map`); `n_action_steps` overrides how many actions of each chunk run before it is asked again;
    `action_convention` declares what its actions mean (`ee_delta/axis_angle/close_positive`).
    """

    name = "lerobot"

    def __init__(
        self,
        policy: Any,
        preprocessor: Any = None,
        postprocessor: Any = None,
        *,
        rename: Mapping[str, str] | None = None,
        n_action_steps: int | None = None,
        action_convention: ActionConvention | str | Mapping[str, Any] | None = None,
        threads: int | None = None,
    ) -> None:
        self._torch = _torch()
        self.threads = threads
        self.policy = policy
        self.config = policy.config
        self.preprocessor = preprocessor
        self.postprocessor = postprocessor
        self.rename = dict(rename or {})
        if n_action_steps is not None:
            horizon = getattr(self.config, "chunk_size", None) or getattr(self.config, "horizon", None)
            if horizon is not None and n_action_steps > horizon:
                raise LeRobotError(
                    f"n_action_steps {n_action_steps} is more than the policy's chunk of {horizon} actions"
                )
            self.config.n_action_steps = n_action_steps
        self.name = f"lerobot:{getattr(self.config, 'type', type(policy).__name__)}"
        try:
            convention = None if action_convention is None else ActionConvention.parse(action_convention)
        except ConventionError as exc:
            raise LeRobotError(f"action_convention: {exc}") from None
        self.requirements = self._requirements(convention)
        self.history = int(getattr(self.config, "n_obs_steps", 1) or 1) > 1
        self._episodes: dict[int, _Episode] = {}
        self._sources: dict[str, FeatureSource] | None = None
        self.policy.eval()

    # -- what it needs -----------------------------------------------------------------------------------------------

    def _requirements(self, convention: ActionConvention | None) -> AgentRequirements:
        back = {policy_name: env_name for env_name, policy_name in self.rename.items()}
        features: list[tuple[str, tuple[int, ...]]] = []
        images = False
        for name, feature in self.config.input_features.items():
            images = images or _is_visual(feature)
            features.append((back.get(name, name), tuple(int(n) for n in feature.shape)))
        action = self.config.output_features.get("action")
        if action is None:
            raise LeRobotError(f"the policy declares no `action` output feature: {list(self.config.output_features)}")
        size = int(np.prod(action.shape))
        return AgentRequirements(
            needs_images=images,
            action_space=spaces.Box(-np.inf, np.inf, (size,), np.float32),
            features=tuple(features),
            action_convention=convention,
        )

    # -- episodes ----------------------------------------------------------------------------------------------------

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        if self._sources is None:
            self._sources = resolve_features(ctx.env_spec.observation_space, ctx.env_spec.feature_names)
        self.policy.reset()
        state = {name: getattr(self.policy, name) for name in _STATE_ATTRIBUTES if hasattr(self.policy, name)}
        seed = int(np.random.default_rng(ctx.seed).integers(2**63))
        self._episodes[id(ctx)] = _Episode(copy.deepcopy(state), seed)

    def on_episode_end(self, outcome: EpisodeOutcome) -> None:
        self._episodes.pop(id(self.ctx), None)

    def act(self, obs: Observation) -> ActionChunk:
        return self._act_one(obs, self.ctx)

    def act_batch(self, observations: Sequence[Observation], contexts: Sequence[EpisodeContext]) -> list[ActionChunk]:
        """One forward pass per episode, each with its own state: the actions an unbatched run gives, to the bit."""
        return [self._act_one(obs, ctx) for obs, ctx in zip(observations, contexts, strict=True)]

    def on_step(self, result: StepResult, ctx: EpisodeContext | None = None) -> None:
        """A policy with an observation history sees every step's observation (as LeRobot's own loop shows it); the
        action its queue gives for it is the one the chunk already holds."""
        if not self.history:
            return
        ctx = ctx if ctx is not None else self.ctx
        episode = self._episodes.get(id(ctx))
        if episode is None or not self._queued(episode):
            return  # the next act takes this observation
        with self._swapped(episode):
            self.policy.select_action(self._batch(result.obs))

    # -- the calls -----------------------------------------------------------------------------------------------------

    def _act_one(self, obs: Observation, ctx: EpisodeContext) -> ActionChunk:
        episode = self._episodes.get(id(ctx))
        if episode is None:
            raise LeRobotError("act before reset: the agent holds no state for this episode")
        self._set_threads()
        with self._swapped(episode):
            self._drop_queued()  # asked again before its chunk ran out (a replan): it acts on this observation
            batch = self._batch(obs)
            with self._seeded(episode):
                first = self.policy.select_action(batch)
            rest = list(_action_queue(vars(self.policy)) or ())
            actions = self._torch.stack([first[0], *(a[0] for a in rest)]) if rest else first
            if not self.history:
                self._drop_queued()  # it runs the chunk; the next act is asked at its end
            actions = self._post(actions)
        return ActionChunk(actions.astype(np.float32, copy=False))

    def _batch(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """The observation as LeRobot's loop hands it to the preprocessor: named features, batch of one."""
        torch = self._torch
        assert self._sources is not None
        batch: dict[str, Any] = {}
        for name, source in self._sources.items():
            if not self._reads(name):
                continue
            value = source.read(obs)
            if source.kind == "text":
                batch["task"] = [str(value or "")]
            elif source.kind == "image":
                image = torch.from_numpy(np.ascontiguousarray(value)).unsqueeze(0)
                batch[name] = image.permute(0, 3, 1, 2).contiguous().type(torch.float32) / 255
            else:
                batch[name] = torch.from_numpy(np.asarray(value)).float().unsqueeze(0)
        batch.setdefault("task", [""])
        batch = {self.rename.get(key, key): value for key, value in batch.items()}
        return self.preprocessor(batch) if self.preprocessor is not None else batch

    def _reads(self, name: str) -> bool:
        return name == "task" or self.rename.get(name, name) in self.config.input_features

    def _post(self, actions: Any) -> np.ndarray[Any, Any]:
        if self.postprocessor is not None:
            actions = self.postprocessor(actions)
        return np.asarray(actions.detach().to("cpu").numpy())

    @contextlib.contextmanager
    def _swapped(self, episode: _Episode) -> Iterator[None]:
        for name, value in episode.state.items():
            setattr(self.policy, name, value)
        try:
            yield
        finally:
            episode.state = {name: getattr(self.policy, name) for name in episode.state}

    @contextlib.contextmanager
    def _seeded(self, episode: _Episode) -> Iterator[None]:
        """The episode's own random stream for one call; the caller's global torch RNG is left as it was."""
        torch = self._torch
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed((episode.seed + episode.calls) % 2**63)
            episode.calls += 1
            with torch.inference_mode():
                yield

    def _queued(self, episode: _Episode) -> bool:
        return bool(_action_queue(episode.state))

    def _drop_queued(self) -> None:
        queue = _action_queue(vars(self.policy))
        if isinstance(queue, deque):
            queue.clear()

    def _set_threads(self) -> None:
        """Torch's CPU threads for this call: `threads` when given. A CPU forward pass rounds differently with another
        thread count, so a run whose workers, host and inline process must give the same actions uses the same count
        in each (a checkpoint's default: 1); None leaves the process's own (a training loop's). Checked at every call:
        torch's count is per thread (OpenMP's), and the Kernel may call an agent from more than one thread."""
        if self.threads is not None and self._torch.get_num_threads() != self.threads:
            self._torch.set_num_threads(self.threads)

    def weights_digest(self) -> str:
        """A digest of the policy's weights (its state dict) and processors' state: a live object's identity."""
        parts: list[Any] = [self.policy.state_dict()]
        for pipeline in (self.preprocessor, self.postprocessor):
            if pipeline is not None and hasattr(pipeline, "state_dict"):
                with contextlib.suppress(Exception):
                    parts.append(pipeline.state_dict())
        return state_digest(parts)


def _action_queue(state: Mapping[str, Any]) -> Any:
    """The queue of predicted actions in a policy's state (its attributes, or an episode's copy of them): ACT's
    `_action_queue`, diffusion's `_queues["action"]`; None for a policy without one."""
    if "_action_queue" in state:
        return state["_action_queue"]
    queues = state.get("_queues")
    return queues.get("action") if isinstance(queues, dict) else None


def _is_visual(feature: Any) -> bool:
    kind = getattr(feature, "type", None)
    return str(getattr(kind, "value", kind)).upper() == "VISUAL"


class LeRobotCheckpoint(LeRobotAgent):
    """A LeRobot policy saved in a directory (`save_pretrained`: config.json, model.safetensors, its processors),
    loaded offline and evaluated in-process (`-A path=DIR`)."""

    class Args(AgentArgs):
        path: str = Field(min_length=1, max_length=4096, description="the directory the policy was saved in")
        device: Literal["cpu", "cuda", "auto"] = Field(default="auto", description="auto: cuda when there is one")
        n_action_steps: int | None = Field(default=None, ge=1, le=10_000, description="actions run of each chunk")
        rename: dict[str, str] = Field(default_factory=dict, description="env feature name → the policy's")
        action_convention: str | dict[str, Any] | None = Field(
            default=None, description="control/rotation/gripper, e.g. ee_delta/axis_angle/close_positive"
        )
        threads: int = Field(
            default=1, ge=1, le=1024,
            description="torch's CPU threads per call, the same in every process of the run (another count rounds "
            "differently: the actions would depend on the worker count)",
        )  # fmt: skip

    local_paths: ClassVar[tuple[str, ...]] = ("path",)
    """Arguments naming files that are loaded, and may import code (a processor names its class): a request may set
    them only on a server started with --allow-import."""

    def __init__(
        self,
        path: str,
        device: str = "auto",
        n_action_steps: int | None = None,
        rename: Mapping[str, str] | None = None,
        action_convention: str | Mapping[str, Any] | None = None,
        threads: int = 1,
    ) -> None:
        directory = Path(path).expanduser()
        check_checkpoint(directory)
        torch = _torch()
        where = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        if where == "cuda" and not torch.cuda.is_available():
            raise LeRobotError(f"device 'cuda' asked for, but torch {torch.__version__} sees no CUDA device here")
        policy, pre, post = load_checkpoint(directory, where, dict(rename or {}))
        declared = action_convention if action_convention is not None else declared_convention(directory)
        super().__init__(
            policy, pre, post, rename=rename, n_action_steps=n_action_steps, action_convention=declared, threads=threads
        )
        self.path = str(directory)


def check_checkpoint(directory: Path) -> None:
    """Refuse a directory that is not a saved LeRobot policy, naming what is missing."""
    if not directory.is_dir():
        raise LeRobotError(f"lerobot checkpoint {str(directory)!r} is not a directory")
    missing = [name for name in ("config.json", "model.safetensors") if not (directory / name).is_file()]
    if missing:
        raise LeRobotError(
            f"lerobot checkpoint {str(directory)!r} has no {' or '.join(missing)}: pass the directory "
            "save_pretrained wrote (a training run's checkpoints/<step>/pretrained_model)"
        )


def declared_convention(directory: Path) -> dict[str, Any] | None:
    """The action convention a checkpoint's config declares in its metadata (`hylo_action_convention`), if any."""
    try:
        data = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = data.get("hylo_action_convention") if isinstance(data, dict) else None
    return value if isinstance(value, dict | str) else None  # type: ignore[return-value]


def load_checkpoint(directory: Path, device: str, rename: dict[str, str]) -> tuple[Any, Any, Any]:
    """The policy and its processors from `directory`, offline, with every weight accounted for."""
    try:  # optional: the lerobot extra
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors  # optional: as above
    except ImportError as exc:
        raise LeRobotError(f"the lerobot agent needs lerobot ({exc}): {INSTALL}") from None
    with _offline(), contextlib.redirect_stdout(sys.stderr):  # lerobot prints while it loads
        try:
            config = PreTrainedConfig.from_pretrained(str(directory), local_files_only=True)
        except Exception as exc:
            raise LeRobotError(f"lerobot checkpoint {str(directory)!r}: config.json cannot be read: {exc}") from None
        config.device = device
        if getattr(config, "pretrained_backbone_weights", None):
            # the weights are in model.safetensors: the backbone's ImageNet download would only be overwritten
            config.pretrained_backbone_weights = None
        try:
            policy_class = get_policy_class(config.type)
            policy = policy_class.from_pretrained(str(directory), config=config, strict=True, local_files_only=True)
        except RuntimeError as exc:
            raise LeRobotError(_weights_problem(directory, exc)) from None
        except OSError as exc:
            raise LeRobotError(_download_problem(directory, exc)) from None
        overrides = {"device_processor": {"device": device}, "rename_observations_processor": {"rename_map": rename}}
        try:
            pre, post = make_pre_post_processors(config, pretrained_path=str(directory),
                                                 preprocessor_overrides=overrides)  # fmt: skip
        except FileNotFoundError as exc:
            raise LeRobotError(
                f"lerobot checkpoint {str(directory)!r} has no saved processors ({exc}): save the preprocessor and "
                "postprocessor beside the policy (their save_pretrained(DIR)), as lerobot-train does"
            ) from None
        except OSError as exc:
            raise LeRobotError(_download_problem(directory, exc)) from None
    return policy, pre, post


def _weights_problem(directory: Path, exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return (
        f"lerobot checkpoint {str(directory)!r}: its model.safetensors does not hold the policy's weights exactly "
        f"({text[:600]}); a checkpoint of another policy type or configuration, or a partial save"
    )


def _download_problem(directory: Path, exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return (
        f"lerobot checkpoint {str(directory)!r} needs a file from the Hugging Face hub, and hylo loads offline "
        f"({text[:400]}): put that model (a VLM backbone, a tokenizer) in a local directory and name it in the "
        "checkpoint's config.json, or set HF_HOME to a cache that holds it"
    )
