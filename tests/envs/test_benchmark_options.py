"""A benchmark declares the options a request may set, with their types and bounds: `get_benchmark(request=True)` (how
every HTTP route builds one) takes those and nothing else, deciding from names and values alone, while the command
line (the operator) still passes any keyword argument the env takes, files included."""

from __future__ import annotations

import shutil
from pathlib import Path

import gymnasium
import pydantic
import pytest

from hylo.cli import main
from hylo.envs.benchmark import BenchmarkOption, OptionRefused, UnknownChoice
from hylo.envs.gym_adapter import CompatIdRefused
from hylo.envs.registry import describe_benchmark, get_benchmark

PENDULUM = "gym:InvertedPendulum-v5"


def test_a_declared_number_has_bounds_and_a_declared_string_its_values() -> None:
    with pytest.raises(pydantic.ValidationError, match="'size': an int option declares its minimum and maximum"):
        BenchmarkOption(name="size", type="int", minimum=1)
    with pytest.raises(pydantic.ValidationError, match="'mode': a str option declares its choices"):
        BenchmarkOption(name="mode", type="str")
    size = BenchmarkOption.integer("size", 16, 4096)
    assert [size.refusal(v) for v in (16, 4096)] == [None, None]
    assert size.refusal(4097) == "must be an integer from 16 to 4096, got 4097"
    assert size.refusal(10**5000) == "must be an integer from 16 to 4096, got an integer of about 5001 digits"
    assert size.refusal(True) is not None and size.refusal(64.0) is not None  # the type is the declared one
    rate = BenchmarkOption.number("rate", 0.0, 1.0)
    assert rate.refusal(1) is None and rate.refusal(float("nan")) is not None and rate.refusal(float("inf")) is not None
    assert BenchmarkOption.choice("obs", ["a", "b"]).refusal("c") == "must be one of 'a', 'b', got 'c'"


@pytest.mark.parametrize(
    ("name", "options", "named"),
    [
        (PENDULUM, {"xml_file": "/etc/shadow"}, "option 'xml_file' is not accepted over HTTP (it names a file or path"),
        (PENDULUM, {"width": 10**12}, "option 'width' must be an integer from 16 to 4096"),
        (PENDULUM, {"max_geom": 10**12}, "option 'max_geom' is not accepted over HTTP"),
        (PENDULUM, {"frame_skip": 10**12}, "option 'frame_skip' must be an integer from 1 to 100"),
        ("gym:FrozenLake-v1", {"desc": ["F" * 240] * 250}, "option 'desc' is not accepted over HTTP"),
        ("gym:CartPole-v1", {"env_id": "CartPole-v1"}, "option 'env_id' is not accepted over HTTP (it names another"),
        ("libero", {"image_size": 8}, "option 'image_size' must be an integer from 16 to 1024, got 8"),
        ("metaworld", {"seed": 1}, "option 'seed' is not accepted over HTTP"),
    ],
)
def test_a_request_gets_only_the_declared_options(name: str, options: dict[str, object], named: str) -> None:
    with pytest.raises(OptionRefused, match=r"the options a request may set|a request may set none|must be") as exc:
        get_benchmark(name, allow_import=False, options=options)
    assert named in str(exc.value)
    with pytest.raises(OptionRefused):  # a request even where the operator allows import paths
        get_benchmark(name, allow_import=True, request=True, options=options)


@pytest.mark.parametrize(
    "name",
    ["gym:GymV26Environment-v0", "gym:GymV21Environment-v0", "gym:gymnasium.envs:GymV26Environment-v0"],
)
def test_the_old_gym_compatibility_ids_are_refused_to_a_request(name: str) -> None:
    with pytest.raises(CompatIdRefused, match="only the command line may name it") as exc:
        get_benchmark(name, allow_import=True, request=True, options={"env_id": "CartPole-v1"})
    assert isinstance(exc.value, UnknownChoice) and exc.value.what == "benchmark"  # 422 on `benchmark`, 404 a panel
    if ":" not in name.removeprefix("gym:"):
        with pytest.raises(CompatIdRefused):
            get_benchmark(name, allow_import=False)


def test_allowed_options_within_bounds_reach_the_env() -> None:
    bench = get_benchmark("gym:FrozenLake-v1", allow_import=False, options={"map_name": "8x8", "is_slippery": False})
    env = bench.make_env()
    try:
        assert env.spec.observation_space["state"] == gymnasium.spaces.Discrete(64)  # an 8x8 lake
    finally:
        env.close()
    assert get_benchmark(PENDULUM, allow_import=False, options={"max_episode_steps": 7}).default_step_budget("") == 7


def test_the_declared_options_are_described_and_listed(capsys: pytest.CaptureFixture[str]) -> None:
    assert [option.summary() for option in describe_benchmark("libero").options] == ["image_size: int 16-1024"]
    assert describe_benchmark("babyai").options == []
    assert main(["list", "benchmarks"]) == 0
    listed = " ".join(capsys.readouterr().out.split())
    assert "options over HTTP: image_size: int 16-1024" in listed
    assert "options over HTTP: (those the env takes) max_episode_steps: int 1-1000000;" in listed


def test_the_command_line_still_passes_any_option_the_env_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = get_benchmark("gym:FrozenLake-v1", options={"desc": ["SFF", "FHF", "FFG"]}).make_env()
    try:
        assert lake.spec.observation_space["state"] == gymnasium.spaces.Discrete(9)  # the lake it was given
    finally:
        lake.close()
    model = tmp_path / "pendulum.xml"
    shutil.copy(Path(gymnasium.__file__).parent / "envs/mujoco/assets/inverted_pendulum.xml", model)
    args = ["--agent", "random", "--episodes", "1", "--max-steps", "3", "--log-dir", str(tmp_path / "runs"), "--json"]
    assert main(["eval", PENDULUM, "-E", f"xml_file={model}", "-E", "max_geom=2000", *args]) == 0, capsys.readouterr()
