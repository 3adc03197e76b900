"""Planning an A/B comparison: each count `hylo plan` prints reaches its power in simulated tests of its kind, and
a correlation the two rates cannot have is refused naming the range; without a stated correlation none is assumed."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hylo.cli import main
from hylo.eval import evaluate
from hylo.stats.planning import (
    detectable_difference,
    mcnemar_pairs,
    mcnemar_power,
    sequential_plan,
    two_proportion_per_side,
    two_proportion_power,
)
from hylo.stats.sequential import pair_probabilities, simulate
from hylo.stats.success import mcnemar_exact

ALPHA = 0.05
RUNS = 3000


@pytest.mark.parametrize(("p_a", "p_b", "correlation"), [(0.5, 0.7, 0.0), (0.2, 0.4, 0.3)])
def test_the_paired_count_gives_its_power_in_simulated_mcnemar_tests(p_a: float, p_b: float, correlation: float):
    n = mcnemar_pairs(p_a, p_b, correlation=correlation, power=0.8)
    power = mcnemar_power(p_a, p_b, n, correlation=correlation)
    assert power >= 0.8 > mcnemar_power(p_a, p_b, n - 1, correlation=correlation)
    cells = np.random.default_rng(2).choice(4, size=(RUNS, n), p=pair_probabilities(p_a, p_b, correlation))
    a_wins, b_wins = (cells == 1).sum(axis=1), (cells == 2).sum(axis=1)
    decided = [mcnemar_exact(int(a), int(b)) <= ALPHA and b > a for a, b in zip(a_wins, b_wins, strict=True)]
    assert abs(float(np.mean(decided)) - power) < 0.03


def test_the_unpaired_count_gives_its_power_in_simulated_z_tests() -> None:
    p_a, p_b = 0.6, 0.75
    n = two_proportion_per_side(p_a, p_b, power=0.8)
    power = two_proportion_power(p_a, p_b, n)
    assert power >= 0.8 > two_proportion_power(p_a, p_b, n - 1)
    rng = np.random.default_rng(4)
    a, b = rng.binomial(n, p_a, RUNS), rng.binomial(n, p_b, RUNS)
    pooled = (a + b) / (2 * n)
    z = (b - a) / n / np.sqrt(pooled * (1 - pooled) * 2 / n)
    assert abs(float((z >= 1.959964).mean()) - power) < 0.03


def test_the_sequential_plan_holds_in_fresh_simulations() -> None:
    plan = sequential_plan(0.5, 0.7, correlation=0.2, power=0.8, runs=2000)
    fresh = simulate(0.5, 0.7, correlation=0.2, max_pairs=plan.max_pairs, runs=RUNS, seed=99)
    assert float((fresh.decisions == 1).mean()) > 0.8 - 0.03
    assert abs(float(fresh.pairs_used.mean()) - plan.mean_pairs) < 0.05 * plan.mean_pairs
    assert plan.mean_pairs < plan.max_pairs and plan.p90_pairs <= plan.max_pairs


def test_pairing_correlated_outcomes_needs_fewer_episodes() -> None:
    paired = mcnemar_pairs(0.6, 0.7, correlation=0.5)
    assert paired < two_proportion_per_side(0.6, 0.7) < mcnemar_pairs(0.6, 0.7, correlation=0.0) * 1.1


def test_hylo_plan_prints_every_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--p-a", "0.6", "--p-b", "0.8", "--correlation", "0.3", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["correlation"] == 0.3
    assert plan["paired_mcnemar"]["pairs"] == mcnemar_pairs(0.6, 0.8, correlation=0.3)
    assert plan["paired_by_correlation"] == [{"correlation": 0.3, **plan["paired_mcnemar"]}]
    assert plan["unpaired_two_proportion"]["per_side"] == two_proportion_per_side(0.6, 0.8)
    assert plan["unpaired_two_proportion"]["episodes"] == 2 * plan["unpaired_two_proportion"]["per_side"]
    sequential = plan["sequential"]
    assert 0 < sequential["mean_pairs"] <= sequential["p90_pairs"] <= sequential["max_pairs"]
    assert main(["plan", "--p-a", "0.6", "--p-b", "0.8", "--correlation", "0.3"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(correlation 0.3, as given)" in text
    assert f"{plan['unpaired_two_proportion']['per_side']} episodes per side" in text
    assert f"{plan['paired_mcnemar']['pairs']} pairs (A and B on the same episode keys)" in text
    assert f"{math.ceil(sequential['mean_pairs'])} pairs on average" in text
    assert f"with --max-episodes {sequential['max_pairs']}" in text
    assert "hylo compare RUN_A RUN_B prints it" in text


def test_without_a_correlation_the_paired_count_is_given_at_several_and_none_is_assumed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "--p-a", "0.6", "--p-b", "0.8", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["correlation"] is None and plan["paired_mcnemar"] is None and plan["sequential"] is None
    counts = {entry["correlation"]: entry["pairs"] for entry in plan["paired_by_correlation"]}
    assert set(counts) == {0.0, 0.25, 0.5}  # 0.6 and 0.8 cannot correlate at 0.75 (at most 0.61)
    assert counts == {r: mcnemar_pairs(0.6, 0.8, correlation=r) for r in counts}
    assert counts[0.5] < plan["unpaired_two_proportion"]["per_side"] < counts[0.0]  # pairing pays only through r
    assert main(["plan", "--p-a", "0.6", "--p-b", "0.8"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(correlation not given)" in text and "No r is assumed" in text
    assert " · ".join(f"r = {r:g}: {n}" for r, n in counts.items()) in text
    assert "sequential paired test (hylo ab): simulated at one r; give --correlation r" in text
    assert "hylo compare RUN_A RUN_B prints it" in text


def test_rates_that_cannot_be_planned_exit_2_naming_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--p-a", "0.9", "--p-b", "0.1", "--correlation", "0.5"]) == 2
    assert "cannot have correlation 0.5: it must lie in [-1.000, 0.111]" in capsys.readouterr().err
    assert main(["plan", "--p-a", "0.5", "--p-b", "0.5"]) == 2
    assert "equal success rates (0.5)" in capsys.readouterr().err
    assert main(["plan", "--p-a", "1.2", "--p-b", "0.5"]) == 2
    assert "p_a must be in [0, 1], got 1.2" in capsys.readouterr().err


def test_the_detectable_difference_agrees_with_the_unpaired_count() -> None:
    per_side = two_proportion_per_side(0.6, 0.7)
    assert detectable_difference(0.6, per_side) == pytest.approx(0.1, abs=0.005)
    assert detectable_difference(0.6, 4 * per_side) == pytest.approx(0.05, abs=0.005)  # four times the episodes
    assert detectable_difference(0.5, 0) is None and detectable_difference(0.5, 2) is None  # nothing is detectable


def test_runs_show_states_what_the_runs_size_can_detect(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    result = evaluate("babyai", agent="expert", tasks=["GoToLocal"], episodes=30, max_steps=40, log_dir=str(tmp_path))
    summary = result.summary
    assert summary.success_rate is not None
    expected = detectable_difference(summary.success_rate, summary.scored)
    assert expected is not None
    capsys.readouterr()  # what the run printed (minigrid writes to stdout)
    assert main(["runs", "show", result.run_id, "--log-dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["detectable_difference"] == expected
    assert main(["runs", "show", result.run_id, "--log-dir", str(tmp_path)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"with {summary.scored} scored episodes, the smallest difference" in text and f"±{expected:.3f}" in text


def test_hylo_plan_plans_each_design_and_says_which(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--p-a", "0.5", "--p-b", "0.7", "--correlation", "0", "--min-effect", "0.15", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    designs = {(entry["design"], entry["min_effect"]): entry for entry in plan["designs"]}
    assert set(designs) == {("anytime", None), ("anytime", 0.15), ("capped", None), ("capped", 0.15)}
    for entry in designs.values():
        assert 0 < entry["mean_pairs"] <= entry["p90_pairs"] <= entry["max_pairs"]
        assert entry["power"] >= 0.8 and abs(entry["type_ii"] - (1 - entry["power"])) < 1e-9
    assert designs[("capped", None)]["mean_pairs"] < designs[("anytime", None)]["mean_pairs"]
    assert designs[("capped", None)]["max_pairs"] < designs[("anytime", None)]["max_pairs"]
    assert main(["plan", "--p-a", "0.5", "--p-b", "0.7", "--correlation", "0"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "futility at δ = 0.2" in text  # δ defaults to the difference planned for
    capped = plan["designs"][2]
    assert f"with --max-episodes {capped['max_pairs']}" in text
    assert "capped: calibrated to its --max-episodes, fewer pairs, valid up to that cap only" in text
    assert main(["plan", "--p-a", "0.5", "--p-b", "0.7", "--correlation", "0", "--min-effect", "2"]) == 2
    assert "--min-effect must be a difference in (0, 1), got 2" in capsys.readouterr().err


def test_each_designs_plan_holds_in_fresh_simulations() -> None:
    for design, min_effect in (("capped", None), ("capped", 0.2), ("anytime", 0.2)):
        plan = sequential_plan(0.5, 0.7, power=0.8, runs=2000, design=design, min_effect=min_effect)  # type: ignore[arg-type]
        fresh = simulate(0.5, 0.7, max_pairs=plan.max_pairs, runs=RUNS, seed=98, design=design, min_effect=min_effect)  # type: ignore[arg-type]
        assert float((fresh.decisions == 1).mean()) > 0.8 - 0.03
        assert abs(float(fresh.pairs_used.mean()) - plan.mean_pairs) < 0.05 * plan.mean_pairs
