"""LeRobot's Gymnasium envs (gym-pusht) through `gym:<namespace>/<id>`: the namespace's module is imported (over HTTP
only for hylo's extras), `-E` options reach `gymnasium.make` or a benchmark's factory and are refused by name when
they are not taken, LeRobot's observation keys become hylo's, and a missing package says what to install."""

from __future__ import annotations

import json
import re
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import gymnasium
import gymnasium.spaces as spaces
import numpy as np
import pytest

from hylo.cli import main
from hylo.core import registry as core_registry
from hylo.core.errors import HyloError
from hylo.envs.benchmark import BenchmarkOptionError
from hylo.envs.gym_adapter import NamespaceRefused, ObservationKeys, short_env_name
from hylo.envs.registry import BENCHMARK_REGISTRY, ENTRY_POINT_GROUP, describe_benchmark, get_benchmark

pytest.importorskip("gym_pusht")

PUSHT = "gym:gym_pusht/PushT-v0"
AT_GOAL = "pusht_at_goal/PushT-v0"  # registered by importing tests/envs/pusht_at_goal.py, its namespace


@pytest.fixture
def unimported(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither `gym_pusht` nor `pusht_at_goal` imported in this process yet, nor their ids registered (restored
    after the test)."""
    for module in [m for m in sys.modules if m.split(".")[0] in ("gym_pusht", "pusht_at_goal")]:
        monkeypatch.delitem(sys.modules, module)
    for env_id in ("gym_pusht/PushT-v0", AT_GOAL):
        monkeypatch.delitem(gymnasium.registry, env_id, raising=False)


@pytest.mark.usefixtures("unimported")
def test_a_namespaced_id_imports_its_namespace_module() -> None:
    bench = get_benchmark(f"gym:{AT_GOAL}")
    assert "pusht_at_goal" in sys.modules and AT_GOAL in gymnasium.registry
    assert bench.tasks("default") == [AT_GOAL] and bench.default_step_budget(AT_GOAL) == 300


@pytest.mark.usefixtures("unimported")
def test_over_http_only_the_extras_namespaces_are_imported() -> None:
    with pytest.raises(NamespaceRefused, match=r"namespace module 'pusht_at_goal' is imported only from the command"):
        get_benchmark(f"gym:{AT_GOAL}", allow_import=False)
    assert "pusht_at_goal" not in sys.modules  # refused before anything was imported
    assert get_benchmark(PUSHT, allow_import=False).name == PUSHT  # gym_pusht is hylo[pusht]'s
    assert "gym_pusht" in sys.modules


def test_lerobot_observation_keys_become_hylos() -> None:
    def keys(obs_type: str) -> dict[str, object]:
        env = get_benchmark(PUSHT, options={"obs_type": obs_type}).make_env()
        try:
            obs = env.reset(get_benchmark(PUSHT).task_instance("default", "gym_pusht/PushT-v0", 0))
            assert set(obs) == set(env.spec.observation_space.spaces)
            return {k: sorted(v) if isinstance(v, dict) else v.shape for k, v in obs.items()}
        finally:
            env.close()

    assert keys("pixels_agent_pos") == {"images": ["pixels"], "state": (2,)}
    assert keys("pixels") == {"images": ["pixels"]}  # an image observation is an image, not `state`
    assert keys("environment_state_agent_pos") == {"environment_state": (16,), "state": (2,)}
    assert keys("state") == {"state": (5,)}


@pytest.mark.parametrize(
    ("obs_type", "expected"),
    [
        ("pixels", {"images": {"top": (480, 640, 3)}}),
        ("pixels_agent_pos", {"images": {"top": (480, 640, 3)}, "state": (14,)}),
    ],
)
def test_gym_alohas_observations_become_hylos(obs_type: str, expected: dict[str, object]) -> None:
    # gym-aloha 0.1.5's observation spaces and observations, as its AlohaEnv builds them (without the package)
    top = spaces.Box(0, 255, (480, 640, 3), np.uint8)
    qpos = spaces.Box(-np.inf, np.inf, (14,), np.float64)
    if obs_type == "pixels":
        space, raw = spaces.Dict({"top": top}), {"top": top.sample()}
    else:
        space = spaces.Dict({"pixels": spaces.Dict({"top": top}), "agent_pos": qpos})
        raw = {"pixels": {"top": top.sample()}, "agent_pos": qpos.sample()}
    keys = ObservationKeys(space)
    obs = keys.observation(raw)
    shapes = {k: {n: i.shape for n, i in v.items()} if k == "images" else v.shape for k, v in obs.items()}
    assert shapes == expected
    assert set(keys.spaces()) == set(expected)
    assert np.array_equal(obs["images"]["top"], raw["pixels"]["top"] if "pixels" in raw else raw["top"])


def test_an_env_with_cameras_of_its_own_gives_those_and_renders_nothing_more(monkeypatch) -> None:
    """gym-pusht's pixels are what LeRobot's PushT policies take; its 680x680 render would cost a frame a step (as
    long as the step itself) that no agent reads. An env without a camera still renders one for an agent."""
    task = get_benchmark(PUSHT).task_instance("default", "gym_pusht/PushT-v0", 0)
    env = get_benchmark(PUSHT, options={"obs_type": "pixels_agent_pos"}).make_env(render_images=True)
    try:
        renders = []
        monkeypatch.setattr(type(env._env.unwrapped), "render", lambda self: renders.append(1))
        obs = env.reset(task)
        env.step(np.array([200.0, 200.0]))
        assert {name: image.shape for name, image in obs["images"].items()} == {"pixels": (96, 96, 3)}
        assert "render" not in env.spec.observation_space["images"].spaces
        assert (env.render_images, renders) == (False, [])
    finally:
        env.close()
    monkeypatch.undo()
    env = get_benchmark(PUSHT).make_env(render_images=True)  # the default, state only
    try:
        assert env.reset(task)["images"]["render"].shape == (680, 680, 3)
    finally:
        env.close()


def test_make_options_the_env_does_not_take_are_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    with pytest.raises(BenchmarkOptionError, match=r"takes no option 'obs_typ'; its options: obs_type, "):
        get_benchmark(PUSHT, options={"obs_typ": "pixels"})
    with pytest.raises(BenchmarkOptionError, match="hylo sets render_mode itself"):
        get_benchmark(PUSHT, options={"render_mode": "human"})
    assert main(["eval", PUSHT, "-E", "obs_typ=pixels", "--agent", "random", "--log-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "takes no option 'obs_typ'" in err[0] and "obs_type" in err[0]
    assert main(["eval", PUSHT, "-E", "=1", "--agent", "random", "--log-dir", str(tmp_path)]) == 2
    assert "bad -E value '=1'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before anything ran


def test_max_episode_steps_option_sets_the_step_budget() -> None:
    bench = get_benchmark(PUSHT, options={"max_episode_steps": 20})
    assert bench.default_step_budget("gym_pusht/PushT-v0") == 20


@pytest.fixture
def sized(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """A package registers benchmark `sized` (tests/envs/sized_benchmark.py), which takes the option `tile_size`."""
    plugin = EntryPoint("sized", "sized_benchmark:SizedBabyAI", ENTRY_POINT_GROUP)
    monkeypatch.setattr(core_registry, "entry_points", lambda *, group: [plugin] if group == ENTRY_POINT_GROUP else [])
    BENCHMARK_REGISTRY.refresh()
    request.addfinalizer(BENCHMARK_REGISTRY.refresh)


@pytest.mark.usefixtures("sized")
def test_a_registered_benchmarks_options_are_its_factorys_keyword_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = get_benchmark("sized", options={"tile_size": 4}).make_env(render_images=True)
    assert env.spec.observation_space["images"]["view"].shape == (88, 88, 3)  # 22 cells of 4 pixels
    env.close()
    with pytest.raises(BenchmarkOptionError, match=re.escape("'sized' takes no option 'image_size'; its options: "
                                                             "tile_size")):  # fmt: skip
        get_benchmark("sized", options={"image_size": 4})
    args = ["--task", "GoToLocal", "--agent", "random", "--episodes", "1", "--log-dir", str(tmp_path)]
    assert main(["eval", "babyai", "-E", "image_size=3", *args]) == 2
    refused = "hylo: error: benchmark 'babyai' takes no option 'image_size'; it takes none"
    assert capsys.readouterr().err.strip() == refused


def test_short_names_of_gym_ids() -> None:
    assert short_env_name("gym_pusht/PushT-v0") == "pusht-v0"
    assert short_env_name("gym_aloha/AlohaInsertion-v0") == "alohainsertion-v0"
    assert short_env_name("CartPole-v1") == "cartpole-v1"
    assert short_env_name("gym_plugin_env:PluginEnv-v0") == "pluginenv-v0"
    assert short_env_name("ALE/Pong-v5") == "ale.pong-v5"
    task = get_benchmark(PUSHT).task_instance("default", "gym_pusht/PushT-v0", 3, 7)
    assert task.episode_id == "gym/default/pusht-v0/0003@s7"


def test_a_missing_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gym_aloha", None)  # as if it were not installed
    monkeypatch.delitem(gymnasium.registry, "gym_aloha/AlohaInsertion-v0", raising=False)
    info = describe_benchmark("gym:gym_aloha/AlohaInsertion-v0")
    assert not info.available and info.reason is not None
    assert info.reason.endswith("install it with: pip install 'hylo[aloha]'")
    for module in [m for m in sys.modules if m == "metaworld" or m.startswith(("metaworld.", "hylo.envs.metaworld"))]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "metaworld", None)
    with pytest.raises(HyloError, match=re.escape("install it with: pip install 'hylo[metaworld]'")):
        get_benchmark("metaworld")
    info = describe_benchmark("metaworld")
    assert not info.available and info.reason is not None and "pip install 'hylo[metaworld]'" in info.reason


def test_list_benchmarks_shows_the_lerobot_envs_and_the_key_mapping(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "gym_aloha", None)
    monkeypatch.delitem(gymnasium.registry, "gym_aloha/AlohaInsertion-v0", raising=False)
    monkeypatch.delitem(gymnasium.registry, "gym_aloha/AlohaTransferCube-v0", raising=False)
    assert main(["list", "benchmarks", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows[PUSHT]["available"] and rows[PUSHT]["splits"] == {"default": 1}
    aloha = rows["gym:gym_aloha/AlohaInsertion-v0"]
    assert not aloha["available"] and aloha["reason"].endswith("pip install 'hylo[aloha]'")
    mapping = rows["gym:<id>"]["observation_keys"]
    assert {"state", "images/pixels", "images/<camera>", "environment_state"} <= set(mapping)
    assert "`agent_pos`" in mapping["state"] and "`pixels`" in mapping["images/pixels"]
    assert main(["list", "benchmarks"]) == 0
    text = capsys.readouterr().out
    assert "observations of gym:<id>:" in text and "images/<camera>: each image of a LeRobot" in text
