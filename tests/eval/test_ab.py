"""`hylo ab`: two runs of its own on the same episode keys, pair by pair, stopped when the sequential test decides;
the same decision whatever the worker count, abstentions counted, a re-run that resumes to the same record, an
interval that agrees with the decision, and a `hylo eval` run of the same configuration left alone unless asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hylo.cli import main
from hylo.cli.ab import bound
from hylo.eval import EvalLog
from hylo.eval.spec import EvalSpec
from hylo.experiments.ab import run_ab

TASKS = ["GoToLocal", "GoToObj"]


def spec(log_dir: Path, agent: str, **more: object) -> EvalSpec:
    fields: dict[str, object] = {"benchmark": "babyai", "agent": agent, "tasks": TASKS, "max_steps": 30, **more}
    return EvalSpec(log_dir=str(log_dir), **fields)  # type: ignore[arg-type]


def ab(log_dir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object] | str]:
    code = main(["ab", *args, "--log-dir", str(log_dir)])
    out, err = capsys.readouterr()
    if code != 0:
        return code, err
    return code, json.loads(out) if "--json" in args else out


def test_a_clear_difference_stops_early_with_two_ordinary_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    code, record = ab(tmp_path, capsys, "babyai", "--a", "expert", "--b", "random", "--task", *TASKS,
                      "--max-episodes", "60", "--max-steps", "30", "--json")  # fmt: skip
    assert code == 0 and isinstance(record, dict)
    assert record["decision"] == "A better"
    pairs = record["pairs_used"]
    assert isinstance(pairs, int) and pairs < 20  # of the 60 allowed
    flips = record["flips"]
    assert isinstance(flips, dict) and flips["a_wins"] >= 8 and record["abstentions"] == 0
    low, high = record["confidence_sequence"]  # type: ignore[misc]
    assert -1.0 <= low <= record["difference"] <= high < 0  # type: ignore[operator]  # A better: all below 0
    assert record["confidence_sequence_kind"] == "test" and record["reuse_runs"] is False
    assert record["run_a"] == f"{record['ab_id']}-a" and record["run_b"] == f"{record['ab_id']}-b"
    for side in ("run_a", "run_b"):
        with EvalLog.open(tmp_path / str(record[side])) as log:
            rows = log.final_episodes()
        assert len(rows) == pairs  # one worker a side: no episode past the deciding pair
        indexes = sorted((row.index, TASKS.index(row.task)) for row in rows)
        assert indexes == [(i // 2, i % 2) for i in range(pairs)]  # key by key, each task in turn
    assert (tmp_path / "ab" / f"{record['ab_id']}.json").is_file()

    code, shown = ab(tmp_path, capsys, "show", str(record["ab_id"]), "--json")
    assert code == 0 and shown == record
    code, text = ab(tmp_path, capsys, "show", str(record["ab_id"]))
    assert code == 0 and f"decision: A better (after {pairs} pairs, alpha 0.05)" in str(text)
    text = " ".join(str(text).split())
    assert f"confidence sequence [{bound(low)}, {bound(high)}]" in text
    assert "not ruled out at alpha 0.05; it leaves out 0 exactly because the test decided" in text


def test_the_decision_does_not_depend_on_the_worker_count(tmp_path: Path) -> None:
    one = run_ab(spec(tmp_path / "one", "expert"), spec(tmp_path / "one", "random"), max_pairs=40)
    two = run_ab(spec(tmp_path / "two", "expert", workers=2), spec(tmp_path / "two", "random", workers=2), max_pairs=40)
    assert two.run_a.spec["workers"] == two.run_b.spec["workers"] == 2 and two.run_a.spec["backend"] == "auto"
    assert (one.test.decision, one.pairs_used) == (two.test.decision, two.pairs_used) == ("A better", one.pairs_used)
    assert one.test.to_json()["flips"] == two.test.to_json()["flips"]
    assert one.test.path == two.test.path
    for result in (two.run_a, two.run_b):  # two workers a side: at most one pair more ran, and was committed
        assert two.pairs_used <= len(result.episodes) <= two.pairs_used + 2


def test_no_difference_runs_to_the_cap_undecided(tmp_path: Path) -> None:
    result = run_ab(spec(tmp_path, "hold", max_steps=4), spec(tmp_path, "random", max_steps=4), max_pairs=6)
    assert result.test.decision is None and result.pairs_used == 6
    assert len(result.run_a.episodes) == len(result.run_b.episodes) == 6
    record = result.to_json()
    assert record["decision"] is None
    low, high = record["confidence_sequence"]
    assert low <= 0 <= high  # no decision: 0 is among the differences the test has not ruled out


def test_a_larger_cap_continues_the_same_comparison_on_the_same_runs(tmp_path: Path) -> None:
    first = run_ab(spec(tmp_path, "hold", max_steps=4), spec(tmp_path, "random", max_steps=4), max_pairs=4)
    more = run_ab(spec(tmp_path, "hold", max_steps=4), spec(tmp_path, "random", max_steps=4), max_pairs=6)
    assert more.ab_id == first.ab_id and more.record == first.record
    assert (more.run_a.run_id, more.run_b.run_id) == (first.run_a.run_id, first.run_b.run_id)
    assert more.run_a.executed_now == more.run_b.executed_now == 2  # the first 4 pairs are not run again
    assert more.pairs_used == 6 and json.loads(more.record.read_text())["max_pairs"] == 6


def run_info(log_dir: Path, run_id: str) -> tuple[object, ...]:
    with EvalLog.open(log_dir / run_id) as log:
        info = log.info()
        episodes = [(row.episode_id, row.status.value) for row in log.final_episodes()]
    return info.status, info.n_done, info.n_planned, info.updated_at, episodes


def test_a_hylo_eval_run_of_the_same_configuration_is_left_alone_unless_reused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--task", *TASKS, "--max-steps", "30", "--log-dir", str(tmp_path)]
    assert main(["eval", "babyai", "--agent", "expert", "--episodes", "2", *flags, "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)["run_id"]
    before = run_info(tmp_path, evaluated)

    code, record = ab(tmp_path, capsys, "babyai", "--a", "expert", "--b", "random", "--task", *TASKS,
                      "--max-episodes", "30", "--max-steps", "30", "--json")  # fmt: skip
    assert code == 0 and isinstance(record, dict)
    assert evaluated not in (record["run_a"], record["run_b"])
    assert run_info(tmp_path, evaluated) == before  # not extended, not even opened for writing

    code = main(["ab", "babyai", "--a", "expert", "--b", "random", "--max-episodes", "30", "--reuse-runs", *flags])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0
    assert f"A: --reuse-runs: reusing run {evaluated} (4 episodes already in it), extending it" in out
    assert "B: --reuse-runs: no run of this configuration yet; made babyai-random-" in out
    assert f"A = expert ({evaluated})" in out and "(--reuse-runs: the runs hylo eval made)" in out
    reused = run_info(tmp_path, evaluated)
    assert reused[1] > before[1]  # asked for: extended
    reused_id = out.split("A/B ")[1].split(":")[0]
    assert reused_id != record["ab_id"]  # another comparison, beside the first
    assert sorted(p.stem for p in (tmp_path / "ab").glob("*.json")) == sorted([reused_id, str(record["ab_id"])])

    code = main(["ab", "babyai", "--a", "expert", "--b", "random", "--max-episodes", "30", "--reuse-runs", "--fresh",
                 *flags])  # fmt: skip
    assert code == 2 and "--reuse-runs takes the runs hylo eval made, --fresh starts new ones" in capsys.readouterr()[1]


def test_an_older_record_says_its_interval_is_not_the_tests(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    record = run_ab(spec(tmp_path, "expert"), spec(tmp_path, "random"), max_pairs=40).to_json()
    older = {key: value for key, value in record.items() if key not in ("confidence_sequence_kind", "reuse_runs")}
    older["confidence_sequence"] = [-1.0, 0.578]  # a betting interval beside "A better", as older records hold
    (tmp_path / "ab" / f"{record['ab_id']}.json").write_text(json.dumps(older))
    code, text = ab(tmp_path, capsys, "show", str(record["ab_id"]))
    text = " ".join(str(text).split())
    assert code == 0 and "confidence sequence [-1.000, +0.578]" in text
    assert "an older record: its interval is a separate betting confidence sequence" in text


EDITED = """\
from hylo.envs.babyai import BabyAIExpert


class Mine(BabyAIExpert):
    pass{comment}
"""


def test_an_edited_agent_is_another_comparison_on_runs_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "ab_edited_agents.py").write_text(EDITED.format(comment=""))
    monkeypatch.syspath_prepend(str(tmp_path))
    sides = (spec(tmp_path, "ab_edited_agents:Mine", max_steps=4), spec(tmp_path, "random", max_steps=4))
    first = run_ab(*sides, max_pairs=4)
    assert run_ab(*sides, max_pairs=4).ab_id == first.ab_id  # unchanged code: the same comparison
    (tmp_path / "ab_edited_agents.py").write_text(EDITED.format(comment="  # edited"))
    edited = run_ab(*sides, max_pairs=4)
    assert edited.ab_id != first.ab_id and edited.run_a.run_id == f"{edited.ab_id}-a"
    assert edited.run_a.executed_now == 4  # fresh results, the first comparison's runs untouched
    assert len(run_info(tmp_path, first.run_a.run_id)[4]) == 4


def test_a_bound_near_0_never_reads_as_0() -> None:
    assert (bound(0.0876), bound(-0.4), bound(0.0)) == ("+0.088", "-0.400", "+0.000")
    assert bound(0.000187) == "+1.9e-04" and bound(-0.0004) == "-4.0e-04"


def test_a_pair_with_an_abstention_is_counted_and_never_decides(tmp_path: Path) -> None:
    hater = EvalSpec(benchmark="babyai", agent="eval_agents:ResetHater", agent_args={"fail_on": 2},
                     tasks=["GoToLocal"], max_steps=30, log_dir=str(tmp_path))  # fmt: skip
    expert = EvalSpec(benchmark="babyai", agent="expert", tasks=["GoToLocal"], max_steps=30, log_dir=str(tmp_path))
    result = run_ab(hater, expert, max_pairs=30)
    errored = [row for row in result.run_a.episodes if row.status.value == "error"]
    assert len(errored) == 1 and result.test.abstentions == 1
    assert result.test.decision == "B better"
    assert result.test.pairs == result.pairs_used - 1  # every pair but the abstained one is scored


def test_running_the_same_comparison_again_resumes_to_the_same_record(tmp_path: Path) -> None:
    first = run_ab(spec(tmp_path, "expert"), spec(tmp_path, "random"), max_pairs=40)
    again = run_ab(spec(tmp_path, "expert"), spec(tmp_path, "random"), max_pairs=40)
    assert again.run_a.executed_now == again.run_b.executed_now == 0
    assert again.to_json() == first.to_json()
    assert json.loads(first.record.read_text()) == again.to_json()


def test_bad_comparisons_exit_2_saying_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = ab(tmp_path, capsys, "babyai", "--a", "expert", "--max-episodes", "4")
    assert code == 2 and "hylo ab needs --b" in str(err)
    code, err = ab(tmp_path, capsys, "babyai", "--a", "expert", "--b", "expert", "--max-episodes", "4")
    assert code == 2 and "A and B are the same run" in str(err)
    code, err = ab(tmp_path, capsys, "babyai", "--a", "expert", "--b", "random")
    assert code == 2 and "--max-episodes" in str(err)
    code, err = ab(tmp_path, capsys, "show", "ab-000000000000")
    assert code == 2 and "no A/B comparison 'ab-000000000000'" in str(err)


def test_with_several_seeds_each_key_is_paired_under_each_seed(tmp_path: Path) -> None:
    result = run_ab(spec(tmp_path, "expert", seeds=[0, 5]), spec(tmp_path, "random", seeds=[0, 5]), max_pairs=40)
    assert result.test.decision == "A better"
    ids = [row.episode_id for row in result.run_a.episodes]
    assert {row.episode_id for row in result.run_b.episodes} == set(ids)
    assert any(i.endswith("@s0") for i in ids) and any(i.endswith("@s5") for i in ids)


def test_a_retried_attempt_completes_its_pair_whatever_was_queued_after_it(tmp_path: Path) -> None:
    # A's worker dies in episode 1: its retry goes to the back of A's queue, behind keys the pairing holds back
    common = {"benchmark": "gym:pool_fixtures:Counted-v0", "episodes": 1, "max_steps": 5, "workers": 2,
              "retry_infra": 1, "log_dir": str(tmp_path)}  # fmt: skip
    killer = EvalSpec(agent="pool_fixtures:KillOnce", agent_args={"marker": str(tmp_path / "killed"), "index": 1},
                      **common)  # type: ignore[arg-type]  # fmt: skip
    forward = EvalSpec(agent="pool_fixtures:Forward", **common)  # type: ignore[arg-type]
    result = run_ab(killer, forward, max_pairs=6)
    assert result.test.decision is None and result.pairs_used == 6  # both succeed on every key: nothing to tell
    retried = next(row for row in result.run_a.episodes if row.index == 1)
    assert (retried.attempt, retried.status.value) == (2, "success")
    assert result.test.pairs == 6 and result.test.abstentions == 0  # the pair took A's final attempt


def test_a_capped_comparison_with_a_futility_delta_records_its_design_and_refuses_another_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["babyai", "--a", "expert", "--b", "random", "--task", *TASKS, "--max-steps", "30", "--design", "capped",
            "--min-effect", "0.3"]  # fmt: skip
    code, record = ab(tmp_path, capsys, *args, "--max-episodes", "40", "--json")
    assert code == 0 and isinstance(record, dict)
    assert (record["design"], record["min_effect"], record["extendable"]) == ("capped", 0.3, False)
    assert record["decision"] == "A better" and record["stopped_for"] == "efficacy"
    pairs = record["pairs_used"]
    assert isinstance(pairs, int) and pairs < 20
    leads, efficacy, futility = record["lead_path"], record["efficacy_boundary"], record["futility_boundary"]
    assert isinstance(leads, list) and isinstance(efficacy, list) and isinstance(futility, list)
    assert len(leads) == len(efficacy) == len(futility) == pairs
    assert abs(leads[-1]) >= efficacy[-1] and all(
        abs(x) < c for x, c in zip(leads[:-1], efficacy[:-1], strict=True) if c
    )
    assert record["confidence_sequence_kind"] == "anytime"
    anytime = run_ab(spec(tmp_path, "expert"), spec(tmp_path, "random"), max_pairs=40)
    assert anytime.ab_id != record["ab_id"]  # another design: another comparison

    code, text = ab(tmp_path, capsys, "show", str(record["ab_id"]))
    text = " ".join(str(text).split())
    assert code == 0 and "design: capped at 40 pairs, futility at δ = 0.3" in text
    assert "this capped record cannot be extended with a larger --max-episodes" in text

    code, err = ab(tmp_path, capsys, *args, "--max-episodes", "60")
    assert code == 2 and f"A/B {record['ab_id']} is capped at 40 pairs" in str(err)
    assert "a capped record cannot be extended" in " ".join(str(err).split())
    code, again = ab(tmp_path, capsys, *args, "--max-episodes", "40", "--json")
    assert code == 0 and again == record  # the same cap: the same record


def test_without_a_design_the_record_is_the_anytime_one_it_always_was(tmp_path: Path) -> None:
    result = run_ab(spec(tmp_path, "hold", max_steps=4), spec(tmp_path, "random", max_steps=4), max_pairs=6)
    record = result.to_json()
    assert (record["design"], record["min_effect"], record["extendable"], record["stopped_for"]) == (
        "anytime",
        None,
        True,
        "cap",
    )
    assert record["futility_boundary"] == [None] * 6 and record["lead_path"] == [0] * 6
    assert record["confidence_sequence_kind"] == "test"
