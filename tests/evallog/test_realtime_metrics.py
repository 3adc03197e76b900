"""Realtime figures from synthetic `metrics["realtime"]` records: percentiles over every act of every episode,
ratios of sums, watchdog ends, sync episodes left out, bad records refused naming the value; and the same figures
read back from an EvalLog and printed by `hylo runs show`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hylo.cli import main
from hylo.core.status import EpisodeStatus
from hylo.evallog.realtime_metrics import (
    percentile,
    realtime_figures,
    realtime_record,
    row_record,
    run_realtime,
)
from hylo.evallog.store import EpisodeRow, EvalLog


def realtime(
    *,
    steps: int,
    executed: int,
    holds: int = 0,
    dropped: int = 0,
    latency: list[float],
    virtual: list[float] | None = None,
    delays: list[int] | None = None,
    dt: float = 0.1,
) -> dict[str, Any]:
    return {
        "dt": dt,
        "steps": steps,
        "executed": executed,
        "holds": holds,
        "dropped": dropped,
        "chunks": len(latency),
        "latency_s": latency,
        "virtual_latency_s": virtual,
        "delay_steps": delays if delays is not None else [0] * len(latency),
    }


def row(index: int, metrics: dict[str, Any], *, reason: str = "success") -> EpisodeRow:
    status = EpisodeStatus.SUCCESS if reason == "success" else EpisodeStatus.FAILURE
    return EpisodeRow(
        episode_id=f"toy/default/t/{index:04d}@s0",
        task="t",
        split="default",
        index=index,
        base_seed=0,
        seed=index,
        status=status,
        reason=reason,
        success=status is EpisodeStatus.SUCCESS,
        steps=metrics.get("realtime", {}).get("steps", 5),
        metrics=metrics,
    )


def test_percentiles_interpolate_between_ranks() -> None:
    values = [0.4, 0.1, 0.3, 0.2]
    assert percentile(values, 50) == pytest.approx(0.25)
    assert percentile(values, 0) == 0.1
    assert percentile(values, 100) == 0.4
    assert percentile(values, 95) == pytest.approx(0.3 + 0.85 * 0.1)
    assert percentile([0.7], 99) == 0.7


def test_run_percentiles_pool_every_act_of_every_episode() -> None:
    # One episode of 9 fast acts, one of a single slow act: per-episode medians average to 0.505, the pooled median
    # of the ten acts is 0.01 and its p95 sits between the fast acts and the slow one.
    fast = realtime(steps=90, executed=90, latency=[0.01] * 9, virtual=[0.02] * 9)
    slow = realtime(steps=10, executed=10, latency=[1.0], virtual=[1.5])
    figures = realtime_figures([realtime_record("a", "success", fast), realtime_record("b", "success", slow)])
    assert figures is not None
    assert figures.acts == 10
    assert figures.latency_s == {
        "p50": 0.01,
        "p95": pytest.approx(0.01 + 0.55 * 0.99),
        "p99": pytest.approx(0.01 + 0.91 * 0.99),
    }
    assert figures.virtual_latency_s is not None
    assert figures.virtual_latency_s["p50"] == 0.02
    assert figures.virtual_latency_s["p99"] == pytest.approx(0.02 + 0.91 * 1.48)


def test_run_ratios_are_ratios_of_sums() -> None:
    # Per-episode stale ratios 0.5 and 0.0 average to 0.25; pooled, 10 dropped of 110 executed.
    a = realtime(steps=20, executed=20, dropped=10, holds=0, latency=[0.1, 0.1], delays=[2, 4], dt=0.1)
    b = realtime(steps=100, executed=90, dropped=0, holds=10, latency=[0.1], delays=[3], dt=0.05)
    figures = realtime_figures([realtime_record("a", "success", a), realtime_record("b", "watchdog", b)])
    assert figures is not None
    assert figures.stale_ratio == pytest.approx(10 / 110)
    assert figures.hold_ratio == pytest.approx(10 / 120)
    assert figures.sim_time_s == pytest.approx(20 * 0.1 + 100 * 0.05)
    assert figures.control_rate_hz == pytest.approx(110 / 7.0)
    assert figures.mean_delay_steps == pytest.approx(3.0)
    assert figures.chunks == 3
    assert figures.watchdog_ends == 1
    assert (figures.episodes, figures.steps, figures.executed, figures.holds, figures.dropped) == (2, 120, 110, 10, 10)


def test_an_episode_is_its_own_pool() -> None:
    record = realtime_record("a", "watchdog", realtime(steps=8, executed=4, holds=4, dropped=2, latency=[0.2, 0.3]))
    figures = realtime_figures([record])
    assert figures is not None
    assert figures.to_json() == {
        "episodes": 1,
        "steps": 8,
        "executed": 4,
        "holds": 4,
        "dropped": 2,
        "chunks": 2,
        "acts": 2,
        "watchdog_ends": 1,
        "sim_time_s": pytest.approx(0.8),
        "latency_s": {"p50": pytest.approx(0.25), "p95": pytest.approx(0.295), "p99": pytest.approx(0.299)},
        "virtual_latency_s": None,
        "control_rate_hz": pytest.approx(5.0),
        "stale_ratio": 0.5,
        "hold_ratio": 0.5,
        "mean_delay_steps": 0.0,
    }


def test_sync_episodes_contribute_nothing_and_a_sync_run_has_no_figures() -> None:
    sync = [row(i, {"return": 1.0}) for i in range(3)]
    assert run_realtime(sync) is None
    assert row_record(sync[0]) is None
    timed = row(3, {"return": 0.0, "realtime": realtime(steps=10, executed=10, latency=[0.05])})
    figures = run_realtime([*sync, timed])
    assert figures is not None
    assert (figures.episodes, figures.steps, figures.acts) == (1, 10, 1)


def test_nothing_to_divide_by_gives_none() -> None:
    figures = realtime_figures([realtime_record("a", "success", realtime(steps=0, executed=0, latency=[]))])
    assert figures is not None
    assert figures.latency_s is None
    assert (figures.control_rate_hz, figures.stale_ratio, figures.hold_ratio, figures.mean_delay_steps) == (None,) * 4


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"executed": -1}, "metrics.realtime.executed must be a count (an integer >= 0), got -1"),
        ({"holds": 1.5}, "metrics.realtime.holds must be a count (an integer >= 0), got 1.5"),
        ({"dt": 0}, "metrics.realtime.dt must be a control period in seconds > 0, got 0"),
        ({"latency_s": [0.1, "slow"]}, "metrics.realtime.latency_s holds 'slow', not a latency in seconds"),
        ({"virtual_latency_s": 3}, "metrics.realtime.virtual_latency_s must be a list of seconds, got 3"),
        ({"delay_steps": [1, -2]}, "metrics.realtime.delay_steps[] must be a count (an integer >= 0), got -2"),
    ],
)
def test_a_bad_record_is_refused_naming_the_value(change: dict[str, Any], message: str) -> None:
    raw = realtime(steps=4, executed=4, latency=[0.1]) | change
    with pytest.raises(ValueError, match=re.escape(f"episode ep7: {message}")):
        realtime_record("ep7", "success", raw)


def test_a_record_lacking_keys_names_them() -> None:
    with pytest.raises(ValueError, match=r"episode ep1: metrics\.realtime lacks executed, delay_steps"):
        realtime_record(
            "ep1", "success", {"dt": 0.1, "steps": 1, "holds": 0, "dropped": 0, "chunks": 0, "latency_s": []}
        )


def write_log(run_dir: Path, rows: list[EpisodeRow], spec: dict[str, Any]) -> None:
    with EvalLog.create(
        run_dir,
        run_id=run_dir.name,
        benchmark="toy",
        split="default",
        agent="a",
        digest="d" * 16,
        spec=spec,
        n_planned=len(rows),
        versions={},
    ) as log:
        log.record_many([(r, ()) for r in rows])


def test_the_evallog_reads_back_the_records_of_the_final_episodes(tmp_path: Path) -> None:
    first = row(0, {"realtime": realtime(steps=4, executed=4, latency=[9.0])}, reason="max_steps")
    again = {"status": EpisodeStatus.SUCCESS, "reason": "success", "success": True, "attempt": 2}
    retried = EpisodeRow(
        **{**first.to_json(), **again, "metrics": {"realtime": realtime(steps=4, executed=4, latency=[0.1])}}
    )
    rows = [first, retried, row(1, {"return": 1.0}), row(2, {"realtime": realtime(steps=6, executed=3, latency=[0.3])})]
    write_log(tmp_path / "rt", rows, {})
    with EvalLog.open(tmp_path / "rt") as log:
        from_sql = realtime_figures(log.realtime_records())
        from_rows = run_realtime(log.final_episodes())
    assert from_sql is not None
    assert from_sql == from_rows
    assert from_sql.latency_s == {"p50": pytest.approx(0.2), "p95": pytest.approx(0.29), "p99": pytest.approx(0.298)}


def test_runs_show_prints_and_carries_the_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"timing": "realtime", "timing_options": {"latency_steps": 2, "schedule": "chunked"}, "protocol": "rt-d2"}
    rows = [
        row(0, {"realtime": realtime(steps=10, executed=8, holds=2, dropped=4, latency=[0.01, 0.03], delays=[2, 2])}),
        row(1, {"realtime": realtime(steps=10, executed=10, latency=[0.02], delays=[2])}, reason="watchdog"),
    ]
    write_log(tmp_path / "rt", rows, spec)
    assert main(["runs", "show", "rt", "--log-dir", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["realtime"]["stale_ratio"] == pytest.approx(4 / 18)
    assert data["realtime"]["watchdog_ends"] == 1
    assert data["spec"]["protocol"] == "rt-d2"
    assert main(["runs", "show", "rt", "--log-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "protocol rt-d2 · timing realtime: latency_steps=2, schedule=chunked" in text
    assert "p50 20.0 · p95 29.0 · p99 29.8 ms" in text
    assert "0.222 (4 / 18)" in text
    assert "9.00 actions/s" in text
    assert main(["runs", "export", "rt", "--log-dir", str(tmp_path), "--format", "json"]) == 0
    episodes = json.loads(capsys.readouterr().out)["episodes"]
    assert [e["realtime"]["watchdog_ends"] for e in episodes] == [0, 1]


def test_runs_show_of_a_sync_run_has_no_realtime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_log(tmp_path / "sync", [row(0, {"return": 1.0})], {"timing": "sync", "timing_options": {}})
    assert main(["runs", "show", "sync", "--log-dir", str(tmp_path), "--json"]) == 0
    assert "realtime" not in json.loads(capsys.readouterr().out)
    assert main(["runs", "show", "sync", "--log-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "timing sync" in text
    assert "act latency" not in text
