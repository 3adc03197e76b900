"""Tests for hylo.stats.success: Wilson intervals, summaries with abstentions, exact McNemar, paired comparisons."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from hylo.core.status import EpisodeStatus
from hylo.stats.success import (
    Comparison,
    EpisodeRecord,
    Flip,
    NoPairs,
    compare_runs,
    holm,
    mcnemar_exact,
    summarize,
    summarize_by_task,
    wilson_interval,
)

S = EpisodeStatus


def rec(episode_id: str, status: EpisodeStatus, task: str = "t", steps: int = 10) -> EpisodeRecord:
    return EpisodeRecord(
        episode_id=episode_id,
        task=task,
        index=0,
        seed=0,
        status=status,
        reason=status.value,
        steps=steps,
        success=status is S.SUCCESS,
    )


# --- Wilson -------------------------------------------------------------------------------------------------------


def test_wilson_known_values() -> None:
    assert wilson_interval(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-3)
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(0.2775, abs=1e-3)
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.7225, abs=1e-3)
    assert high == 1.0


@pytest.mark.parametrize("k,n", [(0, 1), (1, 1), (3, 7), (8, 10), (50, 100), (1, 1000), (999, 1000)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_matches_scipy(k: int, n: int, confidence: float) -> None:
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert wilson_interval(k, n, confidence) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_wilson_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        wilson_interval(0, 0)
    with pytest.raises(ValueError):
        wilson_interval(5, 4)
    with pytest.raises(ValueError):
        wilson_interval(-1, 4)
    with pytest.raises(ValueError):
        wilson_interval(1, 4, confidence=1.0)


# --- records and summaries ----------------------------------------------------------------------------------------


def test_record_rejects_contradiction_and_converts_strings() -> None:
    with pytest.raises(ValueError):
        EpisodeRecord("e", "t", 0, 0, S.FAILURE, "max_steps", 3, True)
    record = EpisodeRecord("e", "t", 0, 0, "success", "success", 3, True)  # type: ignore[arg-type]
    assert record.status is S.SUCCESS


def test_summarize_keeps_abstentions_visible() -> None:
    records = [
        rec("a", S.SUCCESS, steps=4),
        rec("b", S.SUCCESS, steps=6),
        rec("c", S.FAILURE, steps=20),
        rec("d", S.SAFETY_ABORT, steps=2),
        rec("e", S.ERROR, steps=0),
        rec("f", S.INFRA_INVALID, steps=8),
    ]
    summary = summarize(records)
    assert summary.n == 6
    assert summary.status_counts == {
        "success": 2,
        "failure": 1,
        "error": 1,
        "infra_invalid": 1,
        "safety_abort": 1,
    }
    assert list(summary.status_counts) == [s.value for s in EpisodeStatus]
    assert summary.scored == 4  # error and infra_invalid abstain
    assert summary.successes == 2
    assert summary.success_rate == pytest.approx(2 / 4)
    assert summary.success_ci == pytest.approx(wilson_interval(2, 4))
    assert summary.conservative_success_rate == pytest.approx(2 / 6)  # abstentions count as failures
    assert summary.mean_steps == pytest.approx(40 / 6)
    assert summary.to_json() == {
        "n": 6,
        "status_counts": summary.status_counts,
        "scored": 4,
        "successes": 2,
        "success_rate": 0.5,
        "success_ci": list(wilson_interval(2, 4)),
        "conservative_success_rate": pytest.approx(1 / 3),
        "mean_steps": pytest.approx(40 / 6),
        "mean_return": None,
        "return_std": None,
        "success_signal": True,
    }


def test_summarize_empty_and_all_abstained() -> None:
    empty = summarize([])
    assert empty.n == 0
    assert set(empty.status_counts.values()) == {0}
    assert len(empty.status_counts) == len(EpisodeStatus)
    assert (empty.success_rate, empty.success_ci, empty.conservative_success_rate, empty.mean_steps) == (
        None,
        None,
        None,
        None,
    )
    assert empty.to_json()["success_ci"] is None

    crashed = summarize([rec("a", S.ERROR), rec("b", S.INFRA_INVALID)])
    assert crashed.scored == 0
    assert crashed.success_rate is None
    assert crashed.success_ci is None
    assert crashed.conservative_success_rate == 0.0


def test_summarize_by_task_first_seen_order() -> None:
    records = [
        rec("z1", S.SUCCESS, task="zeta"),
        rec("a1", S.FAILURE, task="alpha"),
        rec("z2", S.ERROR, task="zeta"),
        rec("a2", S.SUCCESS, task="alpha"),
        rec("z3", S.SUCCESS, task="zeta"),
    ]
    by_task = summarize_by_task(records)
    assert list(by_task) == ["zeta", "alpha"]
    zeta = by_task["zeta"]
    assert (zeta.n, zeta.scored, zeta.successes) == (3, 2, 2)
    assert zeta.success_rate == 1.0
    assert zeta.conservative_success_rate == pytest.approx(2 / 3)
    assert zeta.status_counts["error"] == 1
    assert by_task["alpha"].success_rate == 0.5


# --- McNemar ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "b,c", [(0, 1), (1, 0), (0, 5), (1, 9), (2, 8), (3, 3), (4, 5), (10, 30), (0, 60), (17, 23), (100, 140), (400, 480)]
)
def test_mcnemar_matches_scipy(b: int, c: int) -> None:
    expected = binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300)
    assert mcnemar_exact(c, b) == mcnemar_exact(b, c)


def test_mcnemar_edges() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(4, 5) == 1.0  # capped, not 2 * P(X <= 4) > 1
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(0, 2000) == 0.0  # 2 / 2**2000 underflows cleanly, no OverflowError
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


# --- paired comparison --------------------------------------------------------------------------------------------


def test_compare_runs_pairs_and_flips() -> None:
    a = [
        rec("t1/0", S.SUCCESS, task="t1"),  # both success
        rec("t1/1", S.SUCCESS, task="t1"),  # a only
        rec("t2/0", S.FAILURE, task="t2"),  # b only
        rec("t2/1", S.SAFETY_ABORT, task="t2"),  # neither
        rec("t0/0", S.SUCCESS, task="t0"),  # a only
        rec("t1/2", S.SUCCESS, task="t1"),  # abstained in b
        rec("t1/3", S.INFRA_INVALID, task="t1"),  # abstained in a
        rec("t3/0", S.SUCCESS, task="t3"),  # only in a
    ]
    b = [
        rec("t2/1", S.FAILURE, task="t2"),
        rec("t2/0", S.SUCCESS, task="t2"),
        rec("t1/1", S.FAILURE, task="t1"),
        rec("t1/0", S.SUCCESS, task="t1"),
        rec("t0/0", S.SAFETY_ABORT, task="t0"),
        rec("t1/2", S.ERROR, task="t1"),
        rec("t1/3", S.SUCCESS, task="t1"),
        rec("t4/0", S.SUCCESS, task="t4"),  # only in b
        rec("t4/1", S.FAILURE, task="t4"),  # only in b
    ]
    cmp = compare_runs(a, b)
    assert isinstance(cmp, Comparison)
    assert cmp.n_pairs == 5
    assert (cmp.only_in_a, cmp.only_in_b, cmp.abstained) == (1, 2, 2)
    assert (cmp.both_success, cmp.a_only, cmp.b_only, cmp.neither) == (1, 2, 1, 1)
    assert cmp.rate_a == pytest.approx(3 / 5)
    assert cmp.rate_b == pytest.approx(2 / 5)
    assert cmp.difference == pytest.approx(-1 / 5)
    assert cmp.p_value == mcnemar_exact(2, 1) == 1.0
    assert cmp.flips == [
        Flip("t0/0", "t0", S.SUCCESS, S.SAFETY_ABORT),
        Flip("t1/1", "t1", S.SUCCESS, S.FAILURE),
        Flip("t2/0", "t2", S.FAILURE, S.SUCCESS),
    ]
    data = cmp.to_json()
    assert data["flips"][0] == {"episode_id": "t0/0", "task": "t0", "status_a": "success", "status_b": "safety_abort"}
    assert data["n_pairs"] == 5 and data["p_value"] == 1.0
    assert cmp.partial and (data["paired"], data["n_a"], data["n_b"]) == (7, 8, 9)  # 7 in both, 2 of them abstained


def test_compare_runs_significant_and_empty() -> None:
    a = [rec(f"e{i}", S.FAILURE) for i in range(12)]
    b = [rec(f"e{i}", S.SUCCESS) for i in range(12)]
    cmp = compare_runs(a, b)
    assert (cmp.rate_a, cmp.rate_b, cmp.difference) == (0.0, 1.0, 1.0)
    assert cmp.p_value == pytest.approx(2 / 2**12)
    assert len(cmp.flips) == 12

    assert not cmp.partial and (cmp.paired, cmp.n_a, cmp.n_b) == (12, 12, 12)

    abstaining = compare_runs([rec("x", S.ERROR)], [rec("x", S.SUCCESS)])  # paired, but nothing scored on both sides
    assert (abstaining.n_pairs, abstaining.abstained, abstaining.paired, abstaining.p_value) == (0, 1, 1, 1.0)


@pytest.mark.parametrize(("a", "b"), [(["x", "z"], ["y"]), ([], ["y"]), ([], [])])
def test_runs_without_an_episode_in_common_cannot_be_compared(a: list[str], b: list[str]) -> None:
    """Nothing paired is nothing tested: not p = 1 and "no episode flipped"."""
    with pytest.raises(NoPairs, match="share no episode") as refused:
        compare_runs([rec(e, S.SUCCESS) for e in a], [rec(e, S.FAILURE) for e in b])
    assert isinstance(refused.value, ValueError)  # what the HTTP API answers with 422
    assert (refused.value.n_a, refused.value.n_b) == (len(a), len(b))


def test_compare_runs_rejects_ambiguous_pairing() -> None:
    with pytest.raises(ValueError, match="more than once"):
        compare_runs([rec("e", S.SUCCESS), rec("e", S.FAILURE)], [rec("e", S.SUCCESS)])
    with pytest.raises(ValueError, match="task"):
        compare_runs([rec("e", S.SUCCESS, task="x")], [rec("e", S.SUCCESS, task="y")])


# --- returns and the success signal ---------------------------------------------------------------------------------


def test_mean_return_and_spread_are_over_scored_episodes() -> None:
    def ret(episode_id: str, status: EpisodeStatus, value: float | None) -> EpisodeRecord:
        return EpisodeRecord(episode_id, "t", 0, 0, status, status.value, 5, status is S.SUCCESS, episode_return=value)

    summary = summarize(
        [ret("a", S.SUCCESS, 3.0), ret("b", S.FAILURE, 1.0), ret("c", S.SAFETY_ABORT, 2.0), ret("d", S.ERROR, 99.0)]
    )
    assert summary.mean_return == pytest.approx(2.0)  # the error's 99 says nothing of the agent
    assert summary.return_std == pytest.approx(1.0)  # sample standard deviation of 3, 1, 2
    assert summary.to_json()["mean_return"] == pytest.approx(2.0)
    single = summarize([ret("a", S.FAILURE, 4.5), ret("b", S.FAILURE, float("nan"))])
    assert (single.mean_return, single.return_std) == (4.5, None)  # a NaN return is left out, one is no spread


def test_an_env_without_success_signal_is_reported_as_such() -> None:
    def reward_only(episode_id: str) -> EpisodeRecord:
        return EpisodeRecord(episode_id, "t", 0, 0, S.FAILURE, "truncated", 500, False, 500.0, success_signal=False)

    summary = summarize([reward_only("a"), reward_only("b")])
    assert summary.success_signal is False
    assert summary.success_rate == 0.0  # still computed, but the report shows the return instead
    assert (summary.mean_return, summary.return_std) == (500.0, 0.0)
    assert summary.to_json()["success_signal"] is False
    assert summarize([rec("a", S.FAILURE)]).success_signal is True


def test_holm_adjusts_step_down_in_the_inputs_order() -> None:
    # sorted: 0.005 × 4 = 0.02, 0.01 × 3 = 0.03, 0.03 × 2 = 0.06, 0.04 × 1 → kept at 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.6, 0.5]) == [1.0, 1.0]  # capped at 1
    assert holm([0.2]) == [0.2] and holm([]) == []


def test_compare_runs_tests_each_task_and_adjusts_for_testing_them_all() -> None:
    a = [rec(f"t1/{i}", S.FAILURE, task="t1") for i in range(10)] + [rec("t2/0", S.SUCCESS, task="t2")]
    b = [rec(f"t1/{i}", S.SUCCESS, task="t1") for i in range(10)] + [rec("t2/0", S.FAILURE, task="t2")]
    per_task = compare_runs(a, b).per_task
    assert list(per_task) == ["t1", "t2"]
    t1, t2 = per_task["t1"], per_task["t2"]
    assert (t1.n_pairs, t1.b_only, t1.rate_a, t1.rate_b, t1.difference) == (10, 10, 0.0, 1.0, 1.0)
    assert t1.p_value == pytest.approx(2 / 2**10) and t1.p_holm == pytest.approx(2 * 2 / 2**10)
    assert (t2.n_pairs, t2.a_only, t2.difference, t2.p_value, t2.p_holm) == (1, 1, -1.0, 1.0, 1.0)
    assert compare_runs(a, b).to_json()["per_task"]["t1"]["p_holm"] == t1.p_holm
