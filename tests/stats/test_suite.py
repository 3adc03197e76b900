"""Suite-level aggregates (`hylo.stats.suite`): the mean over tasks, the IQM and the probability of improvement
against hand-computed cases and rliable's definitions, the stratified bootstrap's determinism, strata, units and
coverage, abstentions and refusals; and what `hylo runs show`, `hylo compare` and the API report of them."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from hylo.cli import main
from hylo.core.status import EpisodeStatus
from hylo.evallog.run_status import RunStatus
from hylo.evallog.store import EpisodeRow, EvalLog
from hylo.jobs import JobScheduler
from hylo.server import create_app
from hylo.stats.success import EpisodeRecord
from hylo.stats.suite import (
    Bootstrap,
    improvement,
    improvement_probability,
    interquartile_mean,
    suite_figures,
    suite_units,
    units_from_tallies,
)

scipy_stats = pytest.importorskip("scipy.stats")


def record(task: str, index: int, status: str, seed: int | None = None) -> EpisodeRecord:
    """A scored or abstaining episode of `task` at `index` (under `seed` in a run of several seeds)."""
    suffix = "" if seed is None else f"@s{seed}"
    return EpisodeRecord(f"b/t/{task}/{index:04d}{suffix}", task, index, 0, EpisodeStatus(status), status, 1,
                         status == "success", base_seed=seed)  # fmt: skip


def tasks_of(successes: dict[str, tuple[int, int]]) -> list[EpisodeRecord]:
    """A run of one seed: task → (successes, scored episodes)."""
    return [
        record(task, i, "success" if i < won else "failure") for task, (won, n) in successes.items() for i in range(n)
    ]


def seeded(rates: Mapping[str, Sequence[int]], keys: int) -> list[EpisodeRecord]:
    """A run of several seeds: task → the successes under each seed (seed s succeeds on its first ones of `keys`
    indices), so the per-(seed, task) rates are `successes / keys`."""
    return [
        record(task, i, "success" if i < won else "failure", seed=seed)
        for task, per_seed in rates.items()
        for seed, won in enumerate(per_seed)
        for i in range(keys)
    ]


# IQM: rliable's aggregate_iqm is scipy.stats.trim_mean(scores, proportiontocut=0.25, axis=None).


def test_the_iqm_is_the_quarter_trimmed_mean_of_the_flattened_matrix_by_hand_and_as_scipy_computes_it() -> None:
    matrix = [[0.1, 0.5, 0.9, 0.3], [0.2, 0.7, 1.0, 0.0]]
    # sorted: 0, .1, .2, .3, .5, .7, .9, 1; two cut from each end: (.2 + .3 + .5 + .7) / 4
    assert interquartile_mean(matrix) == pytest.approx(0.425)
    assert interquartile_mean(matrix) == pytest.approx(scipy_stats.trim_mean(matrix, 0.25, axis=None))
    five = [0.0, 0.2, 0.4, 0.6, 1.0]  # int(5 / 4) = 1 cut from each end
    assert interquartile_mean(five) == pytest.approx(0.4) == pytest.approx(scipy_stats.trim_mean(five, 0.25))
    assert interquartile_mean([0.0, 0.3, 0.9]) == pytest.approx(0.4)  # below four scores: the mean


def test_a_runs_iqm_is_over_its_per_seed_and_task_rates() -> None:
    rates = {"a": (0, 1), "b": (2, 4), "c": (3, 3), "d": (4, 2)}  # successes of 4 keys under seeds 0 and 1
    figures = suite_figures(seeded(rates, keys=4))
    matrix = np.array([[won / 4 for won in per_seed] for per_seed in rates.values()]).T  # seeds × tasks
    assert figures.seeds == 2 and figures.tasks == 4 and figures.unit == "(task, index) cluster"
    assert figures.iqm == pytest.approx(scipy_stats.trim_mean(matrix, 0.25, axis=None))
    assert figures.iqm == pytest.approx((0.5 + 0.5 + 0.75 + 0.75) / 4)  # the middle of 0, .25, .5, .5, .75, .75, 1, 1


# The mean over tasks: rliable's aggregate_mean, the mean over tasks of each task's mean score.


def test_the_mean_over_tasks_weighs_each_task_the_same_unlike_the_pooled_rate() -> None:
    figures = suite_figures(tasks_of({"easy": (1, 2), "hard": (6, 8)}))
    assert figures.mean == pytest.approx((1 / 2 + 6 / 8) / 2)  # 0.625; pooled: 7 / 10
    assert figures.mean is not None and figures.mean_ci is not None
    assert figures.mean_ci[0] <= figures.mean <= figures.mean_ci[1]


def test_with_seeds_the_mean_over_tasks_is_the_mean_of_each_tasks_rate_over_its_seeds() -> None:
    rates = {"a": (1, 3), "b": (4, 2)}
    figures = suite_figures(seeded(rates, keys=4))
    assert figures.mean == pytest.approx(np.mean([[1 / 4, 3 / 4], [4 / 4, 2 / 4]]))


# The probability of improvement: rliable's probability_of_improvement, the mean over tasks of the Mann–Whitney U
# of X's scores against Y's over the pairs, 0.5 where both runs' scores are the same.


def test_the_probability_of_improvement_of_a_task_is_the_mann_whitney_u_over_the_pairs() -> None:
    b, a = [0.1, 0.5, 0.5], [0.5, 0.2]
    expected = scipy_stats.mannwhitneyu(b, a, alternative="greater").statistic / (len(b) * len(a))
    assert improvement_probability(b, a) == pytest.approx(expected) == pytest.approx((2 + 0.5 * 2) / 6)
    assert improvement_probability(a, a) == 0.5


def test_with_seeds_p_improvement_is_hand_counted_mann_whitney_over_per_seed_rates_averaged_over_tasks() -> None:
    a = seeded({"t1": (1, 2), "t2": (2, 2)}, keys=4)  # per-seed rates: t1 .25, .5; t2 .5, .5
    b = seeded({"t1": (2, 3), "t2": (2, 0)}, keys=4)  # t1 .5, .75; t2 .5, 0
    # t1: (.5 vs .25) >, (.5 vs .5) =, (.75 vs .25) >, (.75 vs .5) >: 3.5 / 4; t2: two ties, two losses: 1 / 4
    found = improvement(a, b)
    assert found.scores == "seed" and found.tasks == 2
    assert found.per_task == pytest.approx({"t1": 0.875, "t2": 0.25})
    assert found.probability == pytest.approx((0.875 + 0.25) / 2)
    assert found.ci is not None and 0.0 <= found.ci[0] <= found.ci[1] <= 1.0


def test_with_one_seed_p_improvement_of_a_task_is_half_plus_half_the_difference() -> None:
    a = tasks_of({"t1": (1, 4), "t2": (2, 4)})
    b = tasks_of({"t1": (3, 4), "t2": (1, 4)})
    found = improvement(a, b)
    assert found.scores == "episode"
    assert found.per_task == pytest.approx({"t1": 0.5 + 0.5 * (3 / 4 - 1 / 4), "t2": 0.5 + 0.5 * (1 / 4 - 2 / 4)})
    # the same as the Mann–Whitney probability over the episodes' 0/1 outcomes
    assert found.per_task["t1"] == pytest.approx(improvement_probability([1, 1, 1, 0], [1, 0, 0, 0]))
    assert found.probability == pytest.approx((0.75 + 0.375) / 2)


def test_p_improvement_of_a_run_against_itself_is_one_half_and_reversing_the_runs_mirrors_it() -> None:
    a = seeded({"t1": (1, 2), "t2": (3, 0)}, keys=4)
    b = seeded({"t1": (4, 2), "t2": (1, 1)}, keys=4)
    assert improvement(a, a).probability == 0.5
    forward, backward = improvement(a, b).probability, improvement(b, a).probability
    assert forward is not None and backward is not None and forward + backward == pytest.approx(1.0)


# rliable's StratifiedBootstrap: tasks are strata, a task's runs resampled within it; percentile intervals.


def test_the_bootstrap_resamples_within_tasks_so_constant_tasks_give_a_point_interval() -> None:
    figures = suite_figures(tasks_of({"solved": (10, 10), "never": (0, 10)}))
    # pooled resampling would move the share of each task's episodes; within tasks, each keeps its rate
    assert figures.mean == 0.5 and figures.mean_ci == (0.5, 0.5)


def test_with_seeds_a_cluster_is_resampled_whole_so_agreeing_seeds_add_no_precision() -> None:
    outcomes = {"a": [1, 0, 0, 1, 1, 0, 1, 0], "b": [0, 0, 1, 0, 0, 0, 1, 1]}
    one_seed = [record(t, i, "success" if won else "failure") for t, ws in outcomes.items() for i, won in enumerate(ws)]
    two_seeds = [
        record(t, i, "success" if won else "failure", seed=seed)
        for t, ws in outcomes.items()
        for i, won in enumerate(ws)
        for seed in (0, 1)
    ]
    alone, clustered = suite_figures(one_seed), suite_figures(two_seeds)
    assert clustered.unit == "(task, index) cluster" and alone.unit == "episode"
    assert clustered.mean == alone.mean and clustered.mean_ci == alone.mean_ci  # not narrower: same information


def test_the_intervals_are_the_same_on_every_computation_and_follow_the_generator_seed() -> None:
    records = tasks_of({"a": (3, 10), "b": (7, 10), "c": (5, 10), "d": (9, 12)})
    first, again = suite_figures(records), suite_figures(list(reversed(records)))
    assert first == again
    other = suite_figures(records, Bootstrap(seed=1))
    assert (other.mean_ci, other.iqm_ci) != (first.mean_ci, first.iqm_ci)
    assert improvement(records, records[5:]) == improvement(records, records[5:])


def test_the_mean_over_tasks_interval_covers_the_true_mean_of_simulated_suites() -> None:
    rng = np.random.default_rng(7)
    covered = 0
    suites = 300
    for _ in range(suites):
        p = rng.uniform(0.2, 0.8, size=5)
        records = [
            record(f"t{t}", i, "success" if rng.random() < p[t] else "failure") for t in range(5) for i in range(20)
        ]
        ci = suite_figures(records).mean_ci
        assert ci is not None
        covered += ci[0] <= p.mean() <= ci[1]
    assert covered / suites >= 0.90


def test_the_bootstrap_refuses_a_count_or_confidence_out_of_range() -> None:
    with pytest.raises(ValueError, match="resamples must be in"):
        Bootstrap(resamples=0)
    with pytest.raises(ValueError, match="confidence must be in"):
        Bootstrap(confidence=1.0)


# Abstentions, tasks left out, runs of one task.


def test_abstentions_are_not_scored_and_a_task_without_a_scored_episode_is_left_out_and_named() -> None:
    clean = tasks_of({"a": (2, 4), "b": (3, 4)})
    noisy = [*clean, record("a", 9, "error"), record("b", 9, "infra_invalid"), record("crashed", 0, "error")]
    figures = suite_figures(noisy)
    assert figures.left_out == ("crashed",) and figures.tasks == 2
    assert (figures.mean, figures.mean_ci, figures.iqm, figures.iqm_ci) == (
        suite_figures(clean).mean, suite_figures(clean).mean_ci, suite_figures(clean).iqm, suite_figures(clean).iqm_ci
    )  # fmt: skip


def test_a_run_of_one_task_has_no_suite_figures_and_says_why() -> None:
    figures = suite_figures(tasks_of({"only": (3, 5)}))
    assert figures.mean is None and figures.iqm is None and figures.mean_ci is None
    assert figures.reason is not None and figures.reason.startswith("one task")
    json_ = figures.to_json()
    assert json_["mean"] is None and "one task" in json_["reason"]
    left = suite_figures([*tasks_of({"only": (3, 5)}), record("broken", 0, "infra_invalid")])
    assert left.mean is None and left.reason is not None and "broken" in left.reason


def test_p_improvement_needs_two_tasks_scored_in_both_runs_and_names_those_left_out() -> None:
    a = tasks_of({"t1": (1, 4), "t2": (2, 4)})
    b = [*tasks_of({"t1": (3, 4), "t3": (1, 4)}), record("t2", 0, "error")]
    found = improvement(a, b)
    assert found.probability is None and found.reason is not None and "one task in common" in found.reason
    assert found.left_out == {"t2": "nothing scored in B", "t3": "not in A"}


def test_a_reward_only_env_has_no_suite_figures() -> None:
    records = [
        EpisodeRecord(f"x/{t}/{i}", t, i, 0, EpisodeStatus.FAILURE, "truncated", 5, False, 1.0, success_signal=False)
        for t in ("a", "b")
        for i in range(3)
    ]
    figures = suite_figures(records)
    assert figures.mean is None and figures.reason is not None and "no success" in figures.reason


# What a user sees: hylo runs show, hylo compare, the API.


def write_run(log_dir: Path, run_id: str, per_task: dict[str, Sequence[str]], seeds: Sequence[int] = (0,)) -> None:
    """A finished run: task → each index's status (the same under every seed)."""
    spec: dict[str, Any] = {"benchmark": "babyai", "split": "test", "seed": seeds[0], "tasks": list(per_task)}
    if len(seeds) > 1:
        spec["seeds"] = list(seeds)
    n = sum(len(statuses) for statuses in per_task.values()) * len(seeds)
    with EvalLog.create(log_dir / run_id, run_id=run_id, benchmark="babyai", split="test", agent="random",
                        digest=run_id, spec=spec | {"agent": "random"}, n_planned=n, versions={}) as log:  # fmt: skip
        for task, statuses in per_task.items():
            for index, value in enumerate(statuses):
                for seed in seeds:
                    status = EpisodeStatus(value)
                    episode_id = f"babyai/test/{task}/{index:04d}@s{seed}"
                    log.record(EpisodeRow(episode_id, task, "test", index, seed, index, status, status.value,
                                          status is EpisodeStatus.SUCCESS, 5))  # fmt: skip
        log.update_run(status=RunStatus.COMPLETE)


S, F = "success", "failure"


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    write_run(runs, "suite-a", {"GoTo": [S, F, F, F], "Open": [S, S, F, F], "Pickup": [F, F, F, "error"]})
    write_run(runs, "suite-b", {"GoTo": [S, S, S, F], "Open": [S, S, S, F], "Pickup": [S, F, F, F]})
    write_run(runs, "seeds-a", {"GoTo": [S, F, F], "Open": [S, S, F]}, seeds=(0, 1))
    write_run(runs, "seeds-b", {"GoTo": [S, S, F], "Open": [S, S, S]}, seeds=(0, 1))
    write_run(runs, "one-task", {"GoTo": [S, F, S]})
    return runs


def cli(log_dir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main([*args, "--log-dir", str(log_dir)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def api_get(log_dir: Path, path: str, **params: str) -> dict[str, Any]:
    with JobScheduler(log_dir) as scheduler:
        app = create_app(scheduler)

        async def get() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                return await client.get(path, params=params)

        try:
            answer = asyncio.run(get())
        finally:
            app.state.sessions.close()
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_runs_show_prints_the_suite_block_and_its_json_the_same_figures(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = json.loads(cli(log_dir, capsys, "runs", "show", "suite-a", "--json"))["suite"]
    assert suite["tasks"] == 3 and suite["seeds"] == 1 and suite["unit"] == "episode"
    assert suite["mean"] == pytest.approx((1 / 4 + 2 / 4 + 0 / 3) / 3)  # Pickup's error abstains
    assert suite["bootstrap"] == {"resamples": 2000, "seed": 0, "confidence": 0.95}
    text = cli(log_dir, capsys, "runs", "show", "suite-a")
    low, high = suite["mean_ci"]
    assert f"suite over 3 tasks, 1 seed: mean over tasks {suite['mean']:.3f} [{low:.3f}, {high:.3f}]" in text
    assert f"IQM {suite['iqm']:.3f}" in text and "stratified bootstrap" in " ".join(text.split())


def test_runs_show_of_one_task_gives_no_suite_figures_saying_why_in_json(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = json.loads(cli(log_dir, capsys, "runs", "show", "one-task", "--json"))["suite"]
    assert suite["mean"] is None and suite["iqm"] is None and suite["reason"].startswith("one task")
    assert "suite" not in cli(log_dir, capsys, "runs", "show", "one-task")


def test_runs_show_of_several_seeds_resamples_clusters(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = json.loads(cli(log_dir, capsys, "runs", "show", "seeds-a", "--json"))["suite"]
    assert suite["seeds"] == 2 and suite["unit"] == "(task, index) cluster"
    assert "(task, index) clusters" in " ".join(cli(log_dir, capsys, "runs", "show", "seeds-a").split())


def test_compare_prints_the_probability_of_improvement_and_its_json_gives_it(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = json.loads(cli(log_dir, capsys, "compare", "suite-a", "suite-b", "--json"))["improvement"]
    expected = np.mean([0.5 + 0.5 * (3 / 4 - 1 / 4), 0.5 + 0.5 * (3 / 4 - 2 / 4), 0.5 + 0.5 * (1 / 4 - 0 / 3)])
    assert found["probability"] == pytest.approx(expected) and found["scores"] == "episode" and found["tasks"] == 3
    text = " ".join(cli(log_dir, capsys, "compare", "suite-a", "suite-b").split())
    low, high = found["ci"]
    assert f"probability of improvement P(B > A) over 3 tasks: {expected:.3f} [{low:.3f}, {high:.3f}]" in text
    assert "½ + ½ (rate B − rate A) per task" in text
    seeds = json.loads(cli(log_dir, capsys, "compare", "seeds-a", "seeds-b", "--json"))["improvement"]
    # GoTo: A's seeds 1/3, 1/3 against B's 2/3, 2/3: 1; Open: 2/3, 2/3 against 1, 1: 1
    assert seeds["scores"] == "seed" and seeds["probability"] == 1.0


def test_the_api_answers_the_same_suite_figures_and_improvement_as_the_cli(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for run in ("suite-a", "seeds-a", "one-task"):
        shown = json.loads(cli(log_dir, capsys, "runs", "show", run, "--json"))["suite"]
        assert api_get(log_dir, f"/api/eval/v2/runs/{run}")["suite"] == shown
    compared = json.loads(cli(log_dir, capsys, "compare", "suite-a", "suite-b", "--json"))["improvement"]
    assert api_get(log_dir, "/api/eval/v2/compare", a="suite-a", b="suite-b")["improvement"] == compared


def test_a_run_of_one_seed_reads_the_same_figures_from_its_tallies_as_from_its_episodes(log_dir: Path) -> None:
    with EvalLog.open(log_dir / "suite-a") as log:
        tallies, rows = log.tallies(), log.final_episodes()
    assert suite_figures(units_from_tallies(tallies)) == suite_figures(suite_units(row.record() for row in rows))
    assert math.isfinite(suite_figures(units_from_tallies(tallies)).mean or math.nan)
