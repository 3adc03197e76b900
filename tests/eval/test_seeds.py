"""Several seeds per run (`--seeds`): every (task, index) under each seed, ids still pure functions of their key, a
run of one seed the same run as `--seed`, and reports that treat one (task, index) under its seeds as a cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from hylo.cli import main
from hylo.core.status import EpisodeStatus
from hylo.eval import evaluate
from hylo.eval.spec import EvalSpec
from hylo.stats.success import EpisodeRecord, seed_clusters, wilson_interval


def test_one_seed_in_seeds_is_the_run_of_that_seed() -> None:
    single = EvalSpec(benchmark="babyai", agent="random", seed=3)
    listed = EvalSpec(benchmark="babyai", agent="random", seeds=[3])
    assert listed.seeds is None and listed.seed == 3 and listed.digest() == single.digest()
    several = EvalSpec(benchmark="babyai", agent="random", seeds=[3, 4])
    assert several.seed == 3 and several.seed_list == [3, 4] and several.digest() != single.digest()
    with pytest.raises(ValidationError, match=r"repeated: \[4\]"):
        EvalSpec(benchmark="babyai", agent="random", seeds=[4, 5, 4])
    with pytest.raises(ValidationError, match="a seed must be in"):
        EvalSpec(benchmark="babyai", agent="random", seeds=[1, -2])


def test_every_key_runs_under_each_seed_and_resumes(tmp_path: Path) -> None:
    command = {"agent": "random", "tasks": ["GoToLocal"], "episodes": 3, "max_steps": 4, "log_dir": str(tmp_path)}
    result = evaluate("babyai", **command, seeds=[0, 7])
    ids = sorted(row.episode_id for row in result.episodes)
    assert ids == sorted(f"babyai/default/GoToLocal/{i:04d}@s{s}" for i in range(3) for s in (0, 7))
    single = evaluate("babyai", **command, seed=7)
    by_id = {row.episode_id: row for row in result.episodes}
    for row in single.episodes:  # the same key under the same seed is the same episode
        assert (by_id[row.episode_id].seed, by_id[row.episode_id].steps) == (row.seed, row.steps)
    assert single.run_id != result.run_id
    again = evaluate("babyai", **command, seeds=[0, 7])
    assert again.run_id == result.run_id and again.executed_now == 0
    clusters = result.seed_clusters
    assert clusters is not None and (clusters.seeds, clusters.clusters) == (2, 3)
    assert set(clusters.per_seed) == {0, 7} and set(clusters.pass_at_k) == {1, 2}
    assert result.to_json()["seed_clusters"]["per_seed"].keys() == {"0", "7"}
    assert single.seed_clusters is None and "seed_clusters" not in single.to_json()


def _records(outcomes: dict[tuple[str, int], list[bool]]) -> list[EpisodeRecord]:
    records = []
    for (task, index), runs in outcomes.items():
        for seed, ok in enumerate(runs):
            status = EpisodeStatus.SUCCESS if ok else EpisodeStatus.FAILURE
            records.append(
                EpisodeRecord(f"{task}/{index}@s{seed}", task, index, seed, status, "r", 5, ok, base_seed=seed)
            )
    return records


def test_episodes_of_one_key_that_succeed_together_count_as_fewer_trials() -> None:
    together = seed_clusters(_records({("t", 0): [True] * 3, ("t", 1): [True] * 3, ("t", 2): [False] * 3,
                                       ("t", 3): [False] * 3}))  # fmt: skip
    assert together is not None
    assert together.design_effect == pytest.approx(4.0)  # (4/3 · 9/144) / (0.25/12)
    assert together.success_ci == pytest.approx(wilson_interval(1.5, 3.0))
    assert together.pass_at_k == pytest.approx({1: 0.5, 2: 0.5, 3: 0.5})
    mixed = seed_clusters(_records({("t", 0): [True, False, False], ("t", 1): [False, True, False],
                                    ("t", 2): [False, False, True], ("t", 3): [True, True, False]}))  # fmt: skip
    assert mixed is not None and mixed.design_effect == 1.0  # less alike than chance: never narrower than Wilson
    assert mixed.success_ci == pytest.approx(wilson_interval(5, 12))
    assert mixed.pass_at_k[1] == pytest.approx(5 / 12)
    assert mixed.pass_at_k[3] == 1.0 and mixed.pass_at_k[2] == pytest.approx((3 * (1 - 1 / 3) + 1) / 4)
    assert mixed.per_seed == pytest.approx({0: 0.5, 1: 0.5, 2: 0.25})


def test_the_command_line_takes_seeds_and_reports_the_clusters(tmp_path: Path, capsys) -> None:
    args = ["eval", "babyai", "--agent", "random", "--task", "GoToLocal", "--episodes", "2", "--max-steps", "3",
            "--log-dir", str(tmp_path)]  # fmt: skip
    assert main([*args, "--seeds", "1", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["spec"]["seeds"] == [1, 2] and len(data["episodes"]) == 4
    assert data["seed_clusters"]["seeds"] == 2
    assert main(["runs", "show", data["run_id"], "--log-dir", str(tmp_path)]) == 0
    assert "2 seeds over 2 episode keys" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit) as refused:
        main([*args, "--seed", "1", "--seeds", "1", "2"])
    assert refused.value.code == 2 and "not allowed with argument --seed" in capsys.readouterr().err
