"""A run is bounded as a whole (episodes × seeds × tasks), and planned lazily: what planning and starting it cost in
memory does not grow with its size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from hylo.cli import main
from hylo.eval import EvalSpec, evaluate, runner
from hylo.eval.resolve import EvalError, plan_run
from hylo.eval.spec import MAX_RUN_EPISODES

HERE = Path(__file__).parent
MB = 1024**2


def test_a_run_past_the_bound_as_a_whole_is_refused_naming_its_three_fields() -> None:
    with pytest.raises(ValidationError) as refused:  # each field within its own bound: 100,000 · 1,000 seeds · 16
        EvalSpec(benchmark="babyai", agent="random", episodes=100_000, seeds=list(range(1000)),
                 tasks=[f"T{i}" for i in range(16)])  # fmt: skip
    (error,) = refused.value.errors()
    assert error["loc"] == ("episodes",)
    assert error["msg"] == (
        "episodes × seeds × tasks = 100,000 × 1,000 × 16 = 1,600,000,000 episodes, more than the 10,000,000 a run "
        "may plan: lower episodes, seeds or tasks"
    )
    EvalSpec(benchmark="babyai", agent="random", episodes=MAX_RUN_EPISODES // 100, seeds=list(range(100)))  # at it


def test_a_split_whose_tasks_take_the_run_past_the_bound_is_refused_once_they_are_known(tmp_path: Path) -> None:
    spec = EvalSpec(benchmark="babyai", agent="random", episodes=100_000, seeds=list(range(7)), log_dir=str(tmp_path))
    with pytest.raises(EvalError, match=r"100,000 × 7 × 16 = 11,200,000 episodes, more than the 10,000,000") as exc:
        plan_run(spec, allow_import=False)  # BabyAI's split has 16 tasks: what a job's validation finds
    assert exc.value.field == "episodes"


@pytest.mark.parametrize(
    ("flags", "product"),
    [
        (["--task", "GoToLocal", "--seeds", *map(str, range(101))], "100,000 × 101 × 1"),
        (["--seeds", *"0123456"], "100,000 × 7 × 16"),
    ],
)
def test_hylo_eval_refuses_a_run_past_the_bound_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], product: str
) -> None:
    code = main(["eval", "babyai", "--agent", "random", "--episodes", "100000", "--log-dir", str(tmp_path), *flags])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("hylo: error: ")
    assert f"episodes × seeds × tasks = {product}" in err and "lower episodes, seeds or tasks" in err
    assert not any(tmp_path.iterdir())  # nothing ran


def _started(episodes: int, seeds: int, tmp_path: Path) -> dict[str, int]:
    """Start a run of episodes × seeds on workers that end each episode at once, stopped after 500 episodes: how its
    process's peak memory grew (`plan_memory.py`, in a process of its own)."""
    done = subprocess.run(
        [sys.executable, str(HERE / "plan_memory.py"), str(episodes), str(seeds), "500", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    figures: dict[str, int] = json.loads(done.stdout.splitlines()[-1])
    return figures


def test_planning_and_starting_a_million_episodes_costs_what_a_thousand_do(tmp_path: Path) -> None:
    small = _started(1000, 1, tmp_path / "small")
    large = _started(100_000, 10, tmp_path / "large")  # 10^6 episodes: listed, ~490 MB of TaskInstances and jobs
    assert small["finished"] == large["finished"] == 500
    assert large["growth"] - small["growth"] < 50 * MB  # under 50 bytes an episode: nothing is held per episode


def test_a_resumed_run_runs_exactly_its_missing_episodes_a_slice_of_the_plan_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "PLAN_SLICE", 3)  # the log is asked about 3 episodes at a time
    options = {"agent": "random", "tasks": ["GoToLocal", "PickupLoc"], "max_steps": 2, "log_dir": str(tmp_path)}
    first = evaluate("babyai", episodes=4, run_id="sliced", **options)
    more = evaluate("babyai", episodes=7, run_id="sliced", **options)
    assert (first.executed_now, more.executed_now) == (8, 6)
    assert [(row.task, row.index) for row in more.episodes] == [
        (task, index) for task in ("GoToLocal", "PickupLoc") for index in range(7)
    ]
    assert [row.attempt for row in more.episodes] == [1] * 14
