"""A run as `hylo runs list` and `GET /runs` list it: the tally of its final episodes, its success rate with its
interval, and a health that tells an all-error run from a complete one; and why its episodes did not succeed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hylo.core.status import EpisodeStatus as S
from hylo.evallog.reasons import reason_groups
from hylo.evallog.rows import EpisodeRow, RunHealth
from hylo.evallog.run_list import agent_text, listed, status_style, status_text
from hylo.evallog.run_status import RunStatus
from hylo.evallog.store import EvalLog, list_runs
from hylo.stats.success import wilson_interval


def _row(index: int, status: S, *, attempt: int = 1, reason: str = "", detail: str | None = None,
         steps: int = 10) -> EpisodeRow:  # fmt: skip
    return EpisodeRow(
        episode_id=f"metaworld/mt10/reach-v3/{index:04d}@s0", task="reach-v3", split="mt10", index=index,
        base_seed=0, seed=index, status=status, reason=reason or status.value, success=status is S.SUCCESS,
        steps=steps, attempt=attempt, detail=detail,
    )  # fmt: skip


def _log(run_dir: Path, rows: list[EpisodeRow], agent_args: dict[str, Any] | None = None) -> None:
    spec = {"agent_args": agent_args or {}}
    with EvalLog.create(run_dir, run_id=run_dir.name, benchmark="metaworld", split="mt10", agent="myagents:ReachP",
                        digest=run_dir.name, spec=spec, n_planned=len(rows), versions={}) as log:  # fmt: skip
        for row in rows:
            log.record(row)
        log.update_run(status=RunStatus.COMPLETE)


def test_the_listing_counts_each_episodes_final_attempt(tmp_path):
    rows = [_row(0, S.INFRA_INVALID), _row(0, S.SUCCESS, attempt=2), _row(1, S.SUCCESS), _row(2, S.FAILURE),
            _row(3, S.ERROR)]  # fmt: skip
    _log(tmp_path / "a", rows, {"gain": 10})
    (info,) = list_runs(tmp_path)
    assert info.n_done == 4
    assert info.status_counts == {"success": 2, "failure": 1, "error": 1, "infra_invalid": 0, "safety_abort": 0}
    data = info.to_json()
    assert (data["scored"], data["successes"], data["abstained"]) == (3, 2, 1)
    assert data["success_rate"] == pytest.approx(2 / 3)
    assert data["success_ci"] == pytest.approx(list(wilson_interval(2, 3)))
    assert data["health"] == "some_errors"
    assert listed(info)["agent_args"] == {"gain": 10} and listed(info)["health"] == "some_errors"


def test_a_run_with_nothing_scored_has_no_rate_and_all_errors(tmp_path):
    _log(tmp_path / "a", [_row(i, S.ERROR) for i in range(10)])
    (info,) = list_runs(tmp_path)
    assert info.to_json()["success_rate"] is None and info.to_json()["success_ci"] is None
    assert info.health is RunHealth.ALL_ERRORS
    assert str(status_text(info)) == "complete, 10/10 error"
    assert status_style(info) == "red"


@pytest.mark.parametrize(
    ("abstained", "n", "health"),
    [(0, 0, "ok"), (0, 10, "ok"), (1, 10, "some_errors"), (4, 10, "some_errors"), (5, 10, "mostly_errors"),
     (9, 10, "mostly_errors"), (10, 10, "all_errors"), (1, 1, "all_errors")],
)  # fmt: skip
def test_health_thresholds(abstained, n, health):
    assert RunHealth.of(abstained, n).value == health


def test_a_complete_run_is_green_only_when_nothing_abstained(tmp_path):
    _log(tmp_path / "ok", [_row(i, S.SUCCESS) for i in range(4)])
    _log(tmp_path / "some", [_row(0, S.ERROR), *(_row(i, S.SUCCESS) for i in range(1, 4))])
    _log(tmp_path / "most", [_row(0, S.ERROR), _row(1, S.INFRA_INVALID), _row(2, S.SUCCESS)])
    infos = {info.run_id: info for info in list_runs(tmp_path)}
    assert [status_style(infos[name]) for name in ("ok", "some", "most")] == ["green", "yellow", "red"]
    assert str(status_text(infos["most"])) == "complete, 1/3 error, 1/3 infra_invalid"
    assert str(status_text(infos["ok"])) == "complete"


def test_two_runs_that_differ_only_in_an_argument_are_told_apart_by_it(tmp_path):
    _log(tmp_path / "a", [_row(0, S.SUCCESS)], {"gain": 10})
    _log(tmp_path / "b", [_row(0, S.SUCCESS)], {"gain": 20, "path": "ckpt/model v2.pt"})
    texts = sorted(agent_text(info) for info in list_runs(tmp_path))
    assert texts == ["myagents:ReachP gain=10", 'myagents:ReachP gain=20 path="ckpt/model v2.pt"']


def test_reasons_are_grouped_with_their_count_and_first_episode():
    rows = [
        _row(0, S.SUCCESS),
        _row(1, S.ERROR, reason="agent raised RuntimeError: boom", detail="Traceback (most recent call last):\n..."),
        _row(2, S.FAILURE, reason="max_steps", steps=500),
        _row(3, S.ERROR, reason="agent raised RuntimeError: boom"),
        _row(4, S.INFRA_INVALID, reason="env timeout",
             detail="a reset ran 81.2 s, past its limit of 80 s (the floor for a reset); --env-timeout sets it"),
        _row(5, S.ERROR, reason="agent raised IndexError: index 7 is out of bounds for axis 0 with size 4"),
        _row(6, S.ERROR, reason="agent raised IndexError: index 9 is out of bounds for axis 0 with size 4"),
        _row(7, S.ERROR, reason="agent raised IndexError: index 9 is out of bounds for axis 0 with size 4"),
    ]  # fmt: skip
    groups = [(g.status.value, g.count, g.reason, g.first[-7:], g.hint) for g in reason_groups(rows)]
    assert groups == [
        ("error", 3, "agent raised IndexError: index <n> is out of bounds for axis 0 with size 4", "0005@s0", None),
        ("error", 2, "agent raised RuntimeError: boom", "0001@s0", None),  # a traceback is no hint
        ("infra_invalid", 1, "env timeout", "0004@s0", rows[4].detail),
        ("failure", 1, "max_steps", "0002@s0", "the step budget ran out after 500 steps; --max-steps sets it"),
    ]
