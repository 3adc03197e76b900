"""One observation contract per run: what an agent is given depends on what it declares and on `--no-images`, never
on whether its episode is recorded; a recorded video plays at the env's own rate, at the size asked."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import gymnasium as gym
import metaworld.env_dict
import minigrid  # noqa: F401  (registers the BabyAI-* gymnasium ids)
import pytest

import hylo
from hylo.cli import build_parser
from hylo.cli.evaluate import run_options
from hylo.core.errors import IncompatibleComponents
from hylo.core.status import EpisodeStatus
from hylo.eval import EvalResult
from hylo.eval.resolve import EvalError
from hylo.graph.builder import agent_graph

UNDECLARED = "contract_agents:Undeclared"
STATE_ONLY = "contract_agents:StateOnly"
CASES = [("metaworld", "reach-v3"), ("babyai", "GoToLocal"), ("gym:CartPole-v1", "CartPole-v1")]


def run(tmp_path: Path, name: str, benchmark: str, task: str, agent: str, **options: Any) -> tuple[EvalResult, list]:
    """Evaluate `agent` for two short episodes; the result and what the agent was given at each act."""
    out = tmp_path / f"{name}.jsonl"
    result = hylo.evaluate(benchmark, agent=agent, agent_args={"out": str(out)}, tasks=[task], episodes=2,
                           max_steps=3, log_dir=str(tmp_path / name), **options)  # fmt: skip
    assert all(row.status is not EpisodeStatus.ERROR for row in result.episodes), result.episodes
    return result, [json.loads(line) for line in out.read_text().splitlines()]


def by_episode(seen: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    episodes: dict[str, list[dict[str, Any]]] = {}
    for act in seen:
        episodes.setdefault(act.pop("episode"), []).append(act)
    return episodes


def videos(result: EvalResult) -> list[Path]:
    return sorted((Path(result.log_dir) / "videos").glob("*.mp4"))


@pytest.mark.parametrize(("benchmark", "task"), CASES)
@pytest.mark.parametrize("agent", [UNDECLARED, STATE_ONLY])
def test_a_recorded_episode_gives_the_agent_what_an_unrecorded_one_gives(
    tmp_path: Path, benchmark: str, task: str, agent: str
) -> None:
    plain, unrecorded = run(tmp_path, "plain", benchmark, task, agent)
    recorded, with_video = run(tmp_path, "video", benchmark, task, agent, video=1)
    assert len(videos(recorded)) == 1 and not videos(plain)  # the first episode was recorded, the second not
    episodes = by_episode(with_video)
    assert by_episode(unrecorded) == episodes and len(episodes) == 2
    views = [act for acts in episodes.values() for act in acts]
    assert all(view == views[0] for view in views)  # every act of every episode: the same keys, the same cameras
    assert views[0]["keys"] == views[0]["declared"]  # and the spec the agent is given declares them
    assert ("images" in views[0]["keys"]) == (agent == UNDECLARED)


def test_an_undeclared_agent_gets_the_cameras_and_no_images_removes_them(tmp_path: Path) -> None:
    given, seen = run(tmp_path, "given", "metaworld", "reach-v3", UNDECLARED)
    assert {json.dumps(act["cameras"]) for act in seen} == {json.dumps({"corner": [128, 128, 3]})}
    withheld, seen = run(tmp_path, "withheld", "metaworld", "reach-v3", UNDECLARED, no_images=True, video=1)
    assert all(act["keys"] == act["declared"] == ["instruction", "state"] for act in seen) and len(seen) == 6
    assert len(videos(withheld)) == 1  # the recorder still renders what it needs
    assert withheld.run_id != given.run_id  # the agent saw something else: another run


def test_an_agent_that_needs_images_is_refused_when_the_run_withholds_them(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="agent NeedsImages needs camera images, and --no-images withholds them"):
        run(tmp_path, "refused", "babyai", "GoToLocal", "contract_agents:NeedsImages", no_images=True)


def test_a_graph_gives_its_agents_what_the_kernel_gives_them(tmp_path: Path) -> None:
    """Also when another node renders: an `observe_image` node's frames never reach an agent that needs none."""
    for agent, images in ((UNDECLARED, True), (STATE_ONLY, False)):
        for camera in (False, True):
            out = tmp_path / f"{agent}-{camera}.jsonl"
            graph = agent_graph("babyai", agent, {"out": str(out)}, name="contract", step_budget=3).to_json()
            if camera:
                graph["nodes"].append({"id": "camera", "type": "babyai.observe_image", "config": {}})
                graph["edges"].append(
                    {"source": "iterIn", "sourceHandle": "step", "target": "camera", "targetHandle": "trigger"}
                )
            hylo.evaluate("babyai", agent="graph:contract", graph=graph, tasks=["GoToLocal"], episodes=1,
                          video=int(camera), log_dir=str(tmp_path / out.stem))  # fmt: skip
            seen = [json.loads(line) for line in out.read_text().splitlines()]
            assert len(seen) == 3
            assert all(("images" in act["keys"]) == images and act["keys"] == act["declared"] for act in seen)


def test_a_graph_node_that_observes_images_is_refused_when_the_run_withholds_them(tmp_path: Path) -> None:
    graph = agent_graph("babyai", "random", name="watching", step_budget=3).to_json()
    graph["nodes"].append({"id": "camera", "type": "babyai.observe_image", "config": {}})
    graph["edges"].append({"source": "iterIn", "sourceHandle": "step", "target": "camera", "targetHandle": "trigger"})
    with pytest.raises(IncompatibleComponents, match="node 'camera' needs camera images, and --no-images withholds"):
        hylo.evaluate("babyai", agent="graph:watching", graph=graph, tasks=["GoToLocal"], episodes=1, no_images=True,
                      log_dir=str(tmp_path))  # fmt: skip


def metaworld_rate() -> float:
    sim = metaworld.env_dict.ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE["reach-v3-goal-observable"]
    assert sim.metadata["render_fps"] == 80
    return float(sim.metadata["render_fps"])


def gym_rate(env_id: str) -> float:
    return float(gym.make(env_id).metadata["render_fps"])


@pytest.mark.parametrize(
    ("benchmark", "task", "agent", "size", "shown", "rate"),
    [
        ("metaworld", "reach-v3", STATE_ONLY, (256, 256), (256, 256), metaworld_rate),
        ("metaworld", "reach-v3", UNDECLARED, (96, 64), (96, 64), metaworld_rate),
        ("metaworld", "reach-v3", STATE_ONLY, None, (128, 128), metaworld_rate),
        ("babyai", "GoToLocal", STATE_ONLY, (320, 240), (320, 240), lambda: gym_rate("BabyAI-GoToLocal-v0")),
        ("babyai", "GoToLocal", UNDECLARED, None, (176, 176), lambda: gym_rate("BabyAI-GoToLocal-v0")),
        ("gym:CartPole-v1", "CartPole-v1", STATE_ONLY, (64, 48), (64, 48), lambda: gym_rate("CartPole-v1")),
    ],
)
def test_a_video_plays_at_the_env_rate_at_the_size_asked(
    tmp_path: Path, benchmark: str, task: str, agent: str, size: tuple[int, int] | None, shown: tuple[int, int],
    rate: Any,
) -> None:  # fmt: skip
    result, seen = run(tmp_path, "sized", benchmark, task, agent, video=1, video_size=size)
    (video,) = videos(result)
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
        assert (stream.width, stream.height) == shown
        assert stream.average_rate == Fraction(rate()).limit_denominator(1001)
    assert len(frames) == result.episodes[0].steps + 1 and frames[0].shape == (shown[1], shown[0], 3)
    assert frames[-1].std() > 5  # a picture, not a blank frame
    if agent == UNDECLARED:  # the agent's own frames keep their size
        assert all(act["cameras"] == seen[0]["cameras"] != {} for act in seen)
        assert next(iter(seen[0]["cameras"].values()))[:2] in ([128, 128], [176, 176])


def test_the_flags_reach_the_spec_and_a_bad_size_is_refused_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    def options(*argv: str) -> dict[str, Any]:
        return run_options(build_parser().parse_args(["eval", "babyai", "--agent", "random", *argv]))

    assert (options()["no_images"], options()["video_size"]) == (False, None)
    chosen = options("--no-images", "--video-size", "320x240")
    assert (chosen["no_images"], chosen["video_size"]) == (True, (320, 240))
    assert options("--video-size", "256")["video_size"] == (256, 256)
    for bad in ("8", "256x9000", "wide"):
        with pytest.raises(SystemExit) as exit_info:
            options("--video-size", bad)
        assert exit_info.value.code == 2
        error = capsys.readouterr().err
        assert "argument --video-size: a video size is SIDE or WIDTHxHEIGHT" in error and f"got {bad!r}" in error
