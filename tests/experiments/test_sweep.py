"""`hylo sweep`: a run of its own per latency d × execution horizon s on the same episodes, points outside the rule
refused, the record and plot under the sweep's own id, resumed to the same points and the same bytes; a `hylo eval`
run of a point's configuration left alone unless asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hylo.cli import main
from hylo.envs.metaworld import MetaWorldExpert
from hylo.eval import EvalLog
from hylo.eval.spec import EvalSpec
from hylo.evallog.logdir import find_run
from hylo.evallog.rows import records
from hylo.experiments.sweep import (
    GridPoint,
    SweepError,
    SweepNotFound,
    list_sweeps,
    plan_grid,
    point_run_id,
    point_spec,
    point_timing,
    read_sweep,
    run_sweep,
    runs_id,
    sweep_id,
)
from hylo.stats.success import compare_runs, wilson_interval

TASK = "reach-v3"


def base(log_dir: Path, **more: Any) -> EvalSpec:
    fields: dict[str, Any] = {"benchmark": "metaworld", "tasks": [TASK], "agent": "expert",
                              "agent_args": {"chunk_size": 8}, "episodes": 2, **more}  # fmt: skip
    return EvalSpec(log_dir=str(log_dir), **fields)


def sweep(log_dir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = main(["sweep", *args, "--log-dir", str(log_dir)])
    out, err = capsys.readouterr()
    if code != 0:
        return code, err
    return code, json.loads(out) if "--json" in args else out


def test_points_outside_the_rule_are_refused_with_it_and_the_rest_ordered_by_latency_then_horizon(tmp_path: Path):
    grid = plan_grid(base(tmp_path), [4, 0, 2], [4, 2, 6])
    assert [(p.latency_steps, p.execution_steps) for p in grid.points] == [
        (0, 2), (0, 4), (0, 6), (2, 2), (2, 4), (2, 6), (4, 4),
    ]  # fmt: skip
    refused = {(p.latency_steps, p.execution_steps): why for p, why in grid.refused}
    assert set(refused) == {(4, 2), (4, 6)}  # s < d; s > H - d
    assert all("max(1, d) <= s <= H - d" in why for why in refused.values())
    assert grid.chunk_size == 8

    one = plan_grid(base(tmp_path, agent_args={}), [0, 1], None)  # the expert's own H: 1 action a chunk
    assert one.chunk_size == 1 and [p.execution_steps for p in one.points] == [None]
    assert [p.latency_steps for p, _ in one.refused] == [1]  # s = H = 1 > H - d = 0

    with pytest.raises(SweepError, match=r"no grid point can run: d=4, s=1"):
        plan_grid(base(tmp_path), [4], [1])


@pytest.mark.parametrize(
    ("latency", "execution", "message"),
    [
        ([], None, "--latency-steps needs at least one latency"),
        ([0, -1], None, "--latency-steps takes integers from 0 .* got -1"),
        ([0, 2, 2], None, r"--latency-steps lists each value once; repeated: \[2\]"),
        ([0], [0], "--execution-steps takes integers from 1 .* got 0"),
        (list(range(20)), list(range(1, 20)), "at most 256 grid points; 380 were asked for"),
    ],
)
def test_a_bad_grid_is_refused_naming_the_value(tmp_path: Path, latency: list[int], execution: Any, message: str):
    with pytest.raises(SweepError, match=message):
        plan_grid(base(tmp_path), latency, execution)


def test_a_point_runs_the_chunked_protocol_on_the_virtual_clock_keeping_the_strategy(tmp_path: Path):
    timing, options = point_timing(base(tmp_path, timing_options={"max_hold_steps": 30}), GridPoint(2, 4))
    assert timing == "realtime"
    assert options == {"schedule": "chunked", "clock": "virtual", "adaptive_refill": False,
                       "latency_steps": 2, "execution_steps": 4, "max_hold_steps": 30}  # fmt: skip
    assert "execution_steps" not in point_timing(base(tmp_path), GridPoint(0, None))[1]  # each chunk's own
    said = base(tmp_path, timing_options={"clock": "virtual", "schedule": "chunked"})  # what a sweep sets anyway
    assert point_timing(said, GridPoint(2, 4)) == point_timing(base(tmp_path), GridPoint(2, 4))
    with pytest.raises(SweepError, match=r"keeps only .*got \['latency_s'\]"):
        point_spec(base(tmp_path, timing="realtime", timing_options={"latency_s": 0.1}), GridPoint(0, 1))
    with pytest.raises(SweepError, match=r"got \['clock'\]"):
        point_timing(base(tmp_path, timing="realtime", timing_options={"clock": "wall"}), GridPoint(0, 1))


def test_the_sweep_id_is_the_base_spec_the_grid_and_the_episodes_alone(tmp_path: Path):
    grid = plan_grid(base(tmp_path), [0, 2], [2, 4])
    identity = sweep_id(base(tmp_path), grid)
    assert identity == sweep_id(base(tmp_path / "elsewhere", workers=2), grid)  # knobs, not results
    assert identity != sweep_id(base(tmp_path, episodes=9), grid)  # another sweep, over the same runs
    assert identity != sweep_id(base(tmp_path), plan_grid(base(tmp_path), [0, 2], [4]))
    assert identity != sweep_id(base(tmp_path, seed=1), grid)
    assert identity != sweep_id(base(tmp_path, agent_args={"chunk_size": 6}), grid)
    assert identity != sweep_id(base(tmp_path), grid, reuse_runs=True)  # on hylo eval's runs: another sweep
    assert runs_id(base(tmp_path), grid) == runs_id(base(tmp_path, episodes=9), grid)  # ... over the same runs
    assert runs_id(base(tmp_path), grid) != runs_id(base(tmp_path), grid, reuse_runs=True)


def test_a_sweep_records_every_point_pairs_it_against_zero_latency_and_gives_the_same_bytes_again(tmp_path: Path):
    first = run_sweep(base(tmp_path), [0, 2, 4], [2, 4])
    record = first.record
    assert first.directory == tmp_path.resolve() / "sweeps" / record["sweep_id"]
    assert json.loads((first.directory / "sweep.json").read_text()) == record
    points = record["points"]
    assert [(p["latency_steps"], p["execution_steps"]) for p in points] == [(0, 2), (0, 4), (2, 2), (2, 4), (4, 4)]
    assert [(r["latency_steps"], r["execution_steps"]) for r in record["refused"]] == [(4, 2)]
    runs = {(p["latency_steps"], p["execution_steps"]): p["run_id"] for p in points}
    named = runs_id(base(tmp_path), plan_grid(base(tmp_path), [0, 2, 4], [2, 4]))
    assert runs[(2, 4)] == f"{named}-d2-s4"  # the sweep's own runs
    assert [p["run_id"] for p in points] == [point_run_id(named, GridPoint(d, s)) for d, s in runs]
    assert len(set(runs.values())) == len(points) and record["reuse_runs"] is False
    for point in points:
        with EvalLog.open(find_run(tmp_path, point["run_id"])) as log:
            rows = log.final_episodes()
        assert [row.episode_id for row in rows] == [f"metaworld/mt10/{TASK}/{i:04d}@s0" for i in range(2)]
        realtime = [row.metrics["realtime"] for row in rows]  # the point's run ran the protocol at its d
        assert all(set(m["delay_steps"]) == {point["latency_steps"]} for m in realtime)
        assert all(m["dropped"] > 0 for m in realtime) == (point["latency_steps"] > 0)
        successes = sum(row.success for row in rows)
        assert point["success_rate"] == successes / 2 and point["success_ci"] == list(wilson_interval(successes, 2))
        if point["latency_steps"] == 0:
            assert point["mcnemar_p"] is None  # the baseline itself
            continue
        with EvalLog.open(find_run(tmp_path, runs[(0, point["execution_steps"])])) as log:
            zero = records(log.final_episodes())
        assert point["mcnemar_p"] == compare_runs(zero, records(rows)).p_value

    svg, png = (first.directory / name for name in ("plot.svg", "plot.png"))
    assert svg.read_text().startswith("<?xml") and png.read_bytes().startswith(b"\x89PNG")
    drawn = svg.read_bytes(), png.read_bytes()
    again = run_sweep(base(tmp_path), [0, 2, 4], [2, 4])
    assert again.record == record
    assert (svg.read_bytes(), png.read_bytes()) == drawn
    assert read_sweep(tmp_path, record["sweep_id"]) == record
    elsewhere = run_sweep(base(tmp_path / "elsewhere"), [0, 2, 4], [2, 4])  # every episode run again
    assert elsewhere.record == record and (elsewhere.directory / "plot.svg").read_bytes() == drawn[0]
    assert [listed["sweep_id"] for listed in list_sweeps(tmp_path)] == [record["sweep_id"]]


def test_a_sweep_of_more_episodes_extends_the_runs_of_a_sweep_of_fewer(tmp_path: Path):
    fewer = run_sweep(base(tmp_path, episodes=1), [0, 2], [4]).record
    more = run_sweep(base(tmp_path, episodes=2), [0, 2], [4]).record
    assert fewer["sweep_id"] != more["sweep_id"]  # records of their own ...
    assert [p["run_id"] for p in fewer["points"]] == [p["run_id"] for p in more["points"]]  # ... over the same runs
    assert [p["n"] for p in more["points"]] == [2, 2] and [p["n"] for p in fewer["points"]] == [1, 1]
    assert run_sweep(base(tmp_path, episodes=1), [0, 2], [4]).record == fewer  # scored on its own episodes still


class ExpertFailingOnTheSecond(MetaWorldExpert):
    """Meta-World's chunked expert, raising on every act of episode index 1: an `error` under every grid point."""

    def act(self, obs: Any) -> Any:
        if self.ctx.task.index == 1:
            raise RuntimeError("policy exploded")
        return super().act(obs)


def test_an_abstention_is_left_out_of_the_rate_and_of_the_pairs_as_compare_leaves_it(tmp_path: Path):
    spec = base(tmp_path, agent="test_sweep:ExpertFailingOnTheSecond", episodes=3)
    points = run_sweep(spec, [0, 2], [4]).record["points"]
    for point in points:
        assert point["status_counts"]["error"] == 1 and (point["n"], point["scored"]) == (3, 2)
        assert point["success_rate"] == point["successes"] / 2
        assert point["conservative_success_rate"] == point["successes"] / 3
    assert [p["abstained_pairs"] for p in points] == [None, 1]  # the pair where either side abstained


def test_without_a_zero_latency_point_no_point_has_a_p_value(tmp_path: Path):
    record = run_sweep(base(tmp_path, episodes=1), [1, 2], [2]).record
    assert [p["mcnemar_p"] for p in record["points"]] == [None, None]


def test_an_unknown_or_malformed_sweep_id_is_not_found(tmp_path: Path):
    with pytest.raises(SweepNotFound, match=r"no sweep 'sweep-000000000000'.*there are: none"):
        read_sweep(tmp_path, "sweep-000000000000")
    for bad in ("../x", "sweep-..", "sweep-00000000000g", "SWEEP-000000000000"):
        with pytest.raises(SweepNotFound, match="is not a sweep id"):
            read_sweep(tmp_path, bad)


def test_the_command_prints_one_object_and_shows_it_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    grid = ["--latency-steps", "0", "2", "--execution-steps", "2", "7"]
    code, record = sweep(tmp_path, capsys, "metaworld", "--tasks", TASK, "--agent", "expert", "-A", "chunk_size=8",
                         *grid, "--episodes", "1", "--json")  # fmt: skip
    assert code == 0, record
    assert [(p["latency_steps"], p["execution_steps"]) for p in record["points"]] == [(0, 2), (0, 7), (2, 2)]
    assert record["refused"][0]["latency_steps"] == 2 and "H - d" in record["refused"][0]["reason"]
    assert set(record["points"][0]) >= {"latency_steps", "execution_steps", "success_rate", "success_ci",
                                        "mcnemar_p", "run_id"}  # fmt: skip
    shown = sweep(tmp_path, capsys, "show", record["sweep_id"], "--json")[1]
    assert shown == record

    code, table = sweep(tmp_path, capsys, "show", record["sweep_id"])
    assert code == 0 and "McNemar p vs d = 0" in table and record["points"][2]["run_id"] in table
    assert "refused d = 2, s = 7" in table and str(Path(record["directory"]) / "plot.svg") in table
    code, listed = sweep(tmp_path, capsys, "list", "--json")
    assert listed["sweeps"][0]["sweep_id"] == record["sweep_id"] and listed["sweeps"][0]["points"] == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["metaworld", "--agent", "expert"], "hylo sweep needs --latency-steps D"),
        (["metaworld", "--latency-steps", "0"], "hylo sweep needs --agent"),
        (["metaworld", "--agent", "expert", "--latency-steps", "0", "--run-id", "x"], "drop --run-id"),
        (["metaworld", "--agent", "expert", "--latency-steps", "1", "1"], "repeated: [1]"),
        (["show"], "needs the sweep id"),
        (["show", "sweep-000000000000"], "no sweep 'sweep-000000000000'"),
    ],
)
def test_bad_input_is_one_line_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
):
    code, err = sweep(tmp_path, capsys, *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("metaworld-*"))


def test_a_hylo_eval_run_of_a_points_configuration_is_left_alone(tmp_path: Path):
    from hylo.eval import evaluate

    evaluated = evaluate(point_spec(base(tmp_path, episodes=3), GridPoint(2, 4)))  # `hylo eval` ran the point first
    with EvalLog.open(find_run(tmp_path, evaluated.run_id)) as log:
        before = log.info().updated_at, log.final_episodes()
    record = run_sweep(base(tmp_path), [0, 2], [4]).record
    assert evaluated.run_id not in [p["run_id"] for p in record["points"]]
    with EvalLog.open(find_run(tmp_path, evaluated.run_id)) as log:
        assert (log.info().updated_at, log.final_episodes()) == before


def test_a_reused_point_run_extended_elsewhere_is_scored_on_the_sweeps_episodes_only(tmp_path: Path):
    from hylo.eval import evaluate

    longer = point_spec(base(tmp_path, episodes=3), GridPoint(2, 4))
    evaluated = evaluate(longer)  # `hylo eval` ran the (d = 2, s = 4) point's run further than this sweep goes
    result = run_sweep(base(tmp_path), [0, 2], [4], reuse_runs=True)
    record = result.record
    assert [(p["latency_steps"], p["n"], p["pairs"]) for p in record["points"]] == [(0, 2, None), (2, 2, 2)]
    assert record["episodes"] == 2 and record["reuse_runs"] is True
    assert record["points"][1]["run_id"] == evaluated.run_id  # asked for: hylo eval's run
    assert result.logged_before == {GridPoint(0, 4): 0, GridPoint(2, 4): 3}


def test_the_command_says_which_runs_it_reuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from hylo.eval import evaluate

    evaluated = evaluate(point_spec(base(tmp_path, episodes=1), GridPoint(0, 4)))
    args = ["metaworld", "--tasks", TASK, "--agent", "expert", "-A", "chunk_size=8", "--latency-steps", "0", "2",
            "--execution-steps", "4", "--episodes", "1"]  # fmt: skip
    code, text = sweep(tmp_path, capsys, *args, "--reuse-runs")
    text = " ".join(text.split())
    assert code == 0 and f"d = 0, s = 4: --reuse-runs: reusing run {evaluated.run_id} (1 episode already in it)" in text
    assert "d = 2, s = 4: --reuse-runs: no run of this configuration yet; made metaworld-expert-" in text
    assert "on the runs hylo eval made (--reuse-runs)" in text
    code, err = sweep(tmp_path, capsys, *args, "--reuse-runs", "--fresh")
    assert code == 2 and "--reuse-runs takes the runs hylo eval made, --fresh starts new ones" in err
