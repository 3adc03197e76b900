"""A LeRobot ACT policy (random weights, ACT-sized: the default ResNet-18 backbone, 512-wide transformer, chunks of
100) on gym-pusht's pixels: what hylo costs around it, and what `--batch` gives.

- `raw_loop_s` vs `hylo_loop_s`: N episodes in LeRobot's own loop written out (gym env, `preprocess_observation`,
  the checkpoint's processors, `select_action`, one torch thread as hylo's agent has) and through `hylo.evaluate` in
  one process, hylo's taken as the time of a run of 2N episodes less that of a run of N (a run's fixed costs —
  resolve, code identity, log, checkpoint load, env build — cancel); the raw loop runs the same N episodes (the
  double run's last N, by their seeds: `steps_compared` shows both took as many steps); `hylo_share` =
  (hylo − raw) / hylo (goal: ≤ 0.05).
- `--workers 2` unbatched (a policy per worker) against `--workers 2 --batch 2` (one policy in a host): episodes/s,
  policy calls/s, the host's mean batch, the peak resident memory of this process and of its children (the workers,
  and the batched run's host).

    python benchmarks/lerobot_policy.py --json [--episodes 4] [--max-steps 100] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import psutil

ENV = "gym:gym_pusht/PushT-v0"
GOAL_SHARE = 0.05


def save_act(directory: Path, device: str) -> Path:
    import torch
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.factory import make_pre_post_processors

    torch.manual_seed(0)
    inputs = {"observation.image": PolicyFeature(FeatureType.VISUAL, (3, 96, 96)),
              "observation.state": PolicyFeature(FeatureType.STATE, (2,))}  # fmt: skip
    config = ACTConfig(input_features=inputs, output_features={"action": PolicyFeature(FeatureType.ACTION, (2,))},
                       pretrained_backbone_weights=None, device=device)  # fmt: skip
    stats: dict[str, dict[str, Any]] = {
        "observation.image": {"mean": torch.full((3, 1, 1), 0.5), "std": torch.full((3, 1, 1), 0.25)},
        "observation.state": {"mean": torch.full((2,), 256.0), "std": torch.full((2,), 128.0)},
        "action": {"mean": torch.full((2,), 256.0), "std": torch.full((2,), 128.0)},
    }
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    ACTPolicy(config).save_pretrained(directory)
    pre.save_pretrained(directory)
    post.save_pretrained(directory)
    return directory


def raw_loop(directory: Path, device: str, seeds: list[int], steps: int) -> tuple[float, int]:
    """LeRobot's eval loop, written out, on the same episodes (hylo's seeds) with the same torch thread count as
    hylo's agent (one): seconds, and the steps taken."""
    import gym_pusht  # noqa: F401
    import gymnasium
    import torch
    from lerobot.envs.utils import preprocess_observation

    from hylo.agents.lerobot import load_checkpoint

    torch.set_num_threads(1)
    policy, pre, post = load_checkpoint(directory, device, {})
    env = gymnasium.make("gym_pusht/PushT-v0", obs_type="pixels_agent_pos")
    taken = 0
    started = time.perf_counter()
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        policy.reset()
        for _ in range(steps):
            taken += 1
            batch = preprocess_observation({key: np.asarray(value)[None] for key, value in obs.items()})
            batch["task"] = [""]
            with torch.inference_mode():
                action = post(policy.select_action(pre(batch)))[0].cpu().numpy()
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    return time.perf_counter() - started, taken


class Memory:
    """The largest resident memory while a run goes: this process (`runner`, with a live object's host thread) and its
    child processes (`children`: the env workers, and a `--batch` run's policy host)."""

    def __init__(self) -> None:
        self.peak: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Memory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(0.2):
            now: dict[str, float] = {}
            for process in [me, *me.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    line = " ".join(process.cmdline())
                    role = "runner" if process.pid == me.pid or "resource_tracker" in line else "children"
                    now[role] = now.get(role, 0.0) + process.memory_info().rss / 2**20
            for role, mb in now.items():
                self.peak[role] = max(self.peak.get(role, 0.0), mb)


def evaluate(directory: Path, device: str, episodes: int, steps: int, log: Path, **options: Any) -> dict[str, Any]:
    import hylo

    with Memory() as memory:
        started = time.perf_counter()
        result = hylo.evaluate(ENV, agent="lerobot", agent_args={"path": str(directory), "device": device},
                               env_args={"obs_type": "pixels_agent_pos"}, episodes=episodes, max_steps=steps,
                               log_dir=str(log), fresh=True, **options)  # fmt: skip
        elapsed = time.perf_counter() - started
    steps_run = sum(row.steps for row in result.episodes)
    calls = result.batching["calls"] if result.batching else sum(-(-row.steps // 100) for row in result.episodes)
    return {
        "seconds": round(elapsed, 3),
        "episodes_per_s": round(len(result.episodes) / elapsed, 4),
        "steps": steps_run,
        "policy_calls_per_s": round(calls / elapsed, 3),
        "mean_batch": result.batching["mean_batch_size"] if result.batching else 1.0,
        "rss_by_role_mb": {role: round(mb, 1) for role, mb in sorted(memory.peak.items())},
        "returns": [row.metrics.get("return") for row in result.episodes],
        "seeds": [row.seed for row in result.episodes],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        directory = save_act(root / "act", args.device)
        import hylo

        hylo.evaluate(ENV, agent="lerobot", agent_args={"path": str(directory), "device": args.device},
                      env_args={"obs_type": "pixels_agent_pos"}, episodes=1, max_steps=5,
                      log_dir=str(root / "warm"))  # fmt: skip
        inline = evaluate(directory, args.device, args.episodes, args.max_steps, root / "inline")
        double = evaluate(directory, args.device, 2 * args.episodes, args.max_steps, root / "double")
        loop = double["seconds"] - inline["seconds"]  # the double run's last N episodes, which the raw loop runs
        raw, raw_steps = raw_loop(directory, args.device, double["seeds"][args.episodes :], args.max_steps)
        unbatched = evaluate(directory, args.device, args.episodes, args.max_steps, root / "w2", workers=2)
        batched = evaluate(directory, args.device, args.episodes, args.max_steps, root / "b2", workers=2, batch=2)
    result = {
        "device": args.device,
        "episodes": args.episodes,
        "max_steps": args.max_steps,
        "raw_loop_s": round(raw, 3),
        "hylo_loop_s": round(loop, 3),
        "hylo_share": round((loop - raw) / loop, 4),
        "steps_compared": {"raw": raw_steps, "hylo": double["steps"] - inline["steps"]},
        "goal_share": GOAL_SHARE,
        "inline": inline,
        "workers_2": unbatched,
        "workers_2_batch_2": batched,
        "batched_vs_unbatched": round(batched["episodes_per_s"] / unbatched["episodes_per_s"], 3),
        "same_returns_batched": batched["returns"] == unbatched["returns"],
    }
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
