"""gym-hil (`hylo[hil]`) as gym benchmarks: headless ids, episodes placed by the seed (the package samples with numpy's
global generator), the scripted pick through the privileged channel, and the cheap-render option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hylo
from hylo.core.types import TaskInstance
from hylo.envs.benchmark import BenchmarkOptionError
from hylo.envs.registry import get_benchmark
from hylo.eval import EvalLog

pytest.importorskip("gym_hil", reason="the hil extra")  # after hylo.envs: MuJoCo renders through EGL

PICK = "gym:gym_hil/PandaPickCube-v0"
SAMPLED = {"random_block_position": True}


def _first_state(env_args: dict[str, Any], index: int) -> np.ndarray[Any, Any]:
    bench = get_benchmark(PICK, options=env_args)
    with bench.make_env() as env:
        return np.asarray(env.reset(bench.task_instance(bench.default_split, bench.tasks(bench.default_split)[0],
                                                        index))["environment_state"])  # fmt: skip


def test_the_seed_places_the_block_and_leaves_numpys_global_generator_alone() -> None:
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    first, again, other = _first_state(SAMPLED, 0), _first_state(SAMPLED, 0), _first_state(SAMPLED, 1)
    np.testing.assert_array_equal(first, again)
    assert np.abs(first - other).max() > 1e-3
    np.testing.assert_array_equal(np.random.get_state()[1], before)


def test_the_scripted_pick_lifts_the_block_reading_privileged_state(tmp_path: Path) -> None:
    result = hylo.evaluate(PICK, agent="expert", env_args=SAMPLED, episodes=2, log_dir=str(tmp_path))
    assert [row.status.value for row in result.episodes] == ["success"] * 2
    with EvalLog.open(Path(result.log_dir)) as log:
        reads = {e["name"] for e in log.trace(result.episodes[0].episode_id) if e["event"] == "privileged.state"}
    assert reads == {"tcp_pos", "block_pos"}


def test_cheap_render_gives_both_cameras_and_is_refused_where_it_does_not_apply() -> None:
    bench = get_benchmark(PICK, options={"image_obs": True, "cheap_render": True})
    with bench.make_env(render_images=True) as env:
        obs = env.reset(TaskInstance(bench.name, bench.tasks(bench.default_split)[0], 0))
        assert {name: frame.shape for name, frame in obs["images"].items()} == {
            "front": (128, 128, 3),
            "wrist": (128, 128, 3),
        }
        assert env.gym_env.unwrapped.model.vis.quality.shadowsize == 0
    with pytest.raises(BenchmarkOptionError, match="no cheap_render option"):
        get_benchmark("gym:CartPole-v1", options={"cheap_render": True})
