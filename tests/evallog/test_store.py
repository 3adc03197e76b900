"""The EvalLog: one SQLite database per run, each episode committed atomically with its trace; readable while a run
is in progress; a run whose process died reports itself stopped."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hylo.core.errors import HyloError
from hylo.core.status import EpisodeStatus
from hylo.evallog.logdir import (
    FILENAME,
    GRAPHS_DIR,
    JOBS_DB,
    JOBS_DIR,
    JOBS_LOCK,
    RESERVED_NAMES,
    BadLogDir,
    ReservedRunId,
    RunNotFound,
    check_log_dir,
    delete_run,
    find_run,
)
from hylo.evallog.store import EpisodeRow, EvalLog, list_runs, records
from hylo.stats.success import summary_json

SPEC: dict[str, Any] = {"benchmark": "babyai", "agent": "random", "episodes": 2, "tasks": ["GoToLocal", "Open"]}
VERSIONS = {"hylo": "0.1.0", "python": "3.11"}


def create(run_dir: Path, run_id: str | None = None, **overrides: Any) -> EvalLog:
    kwargs: dict[str, Any] = {
        "run_id": run_id or run_dir.name,
        "benchmark": "babyai",
        "split": "default",
        "agent": "random",
        "digest": "0123456789abcdef",
        "spec": SPEC,
        "n_planned": 4,
        "versions": VERSIONS,
        "git_commit": "deadbeef",
    }
    kwargs.update(overrides)
    return EvalLog.create(run_dir, **kwargs)


def row(task: str, index: int, *, attempt: int = 1, success: bool = True, **overrides: Any) -> EpisodeRow:
    status = EpisodeStatus.SUCCESS if success else EpisodeStatus.FAILURE
    values: dict[str, Any] = {
        "episode_id": f"babyai/default/{task}/{index:04d}@s0",
        "task": task,
        "split": "default",
        "index": index,
        "base_seed": 0,
        "seed": 1000 + index,
        "status": status,
        "reason": "success" if success else "max_steps",
        "success": success,
        "steps": 10 + index,
        "safety_interventions": index,
        "metrics": {"return": 1.0 if success else 0.0, "wall_s": 0.25},
        "started_at": 100.0 + index,
        "ended_at": 101.0 + index,
        "attempt": attempt,
        "worker": "main",
    }
    values.update(overrides)
    return EpisodeRow(**values)


def trace_lines(*events: dict[str, Any]) -> list[bytes]:
    return [json.dumps(e).encode() for e in events]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs" / "run-a"


@pytest.fixture
def log(run_dir: Path) -> Iterator[EvalLog]:
    with create(run_dir) as opened:
        yield opened


# -- episodes ---------------------------------------------------------------------------------------------------------


def test_recorded_episodes_survive_reopening(run_dir: Path) -> None:
    rows = [row("Open", 0, success=False), row("GoToLocal", 1), row("GoToLocal", 0, detail="tb", video="v.mp4")]
    with create(run_dir) as log:
        for r in rows:
            log.record(r, trace_lines({"event": "episode.start", "id": r.episode_id}))
        assert log.n_done() == 3
    assert (run_dir / FILENAME).is_file()

    with EvalLog.open(run_dir) as reopened:
        final = reopened.final_episodes()
        assert final == sorted(rows, key=lambda r: (r.task, r.index))  # ordered by task, index
        assert reopened.n_done() == 3
        assert reopened.done() == {r.episode_id: r for r in rows}
        assert final[0].status is EpisodeStatus.SUCCESS
        assert final[0].metrics == {"return": 1.0, "wall_s": 0.25}
        assert (final[0].detail, final[0].video) == ("tb", "v.mp4")
        assert [rec.success for rec in records(final)] == [True, True, False]


def test_the_final_episode_is_the_last_attempt(log: EvalLog) -> None:
    first = row("GoToLocal", 0, attempt=1, success=False, status=EpisodeStatus.ERROR, reason="timeout")
    second = row("GoToLocal", 0, attempt=2, success=True)
    other = row("Open", 3)
    log.record(first, trace_lines({"n": 1}))
    log.record(other)
    log.record(second, trace_lines({"n": 2}))

    assert log.attempts(first.episode_id) == [first, second]
    assert log.attempts() == [first, other, second]  # recording order
    assert log.final_episodes() == [second, other]
    assert log.n_done() == 2  # distinct episodes, not attempts
    done = log.done()
    assert set(done) == {first.episode_id, other.episode_id}
    assert done[first.episode_id].attempt == 2
    assert done[first.episode_id].success is True
    assert log.info().n_done == 2


def test_pages_and_tallies_read_in_sql_agree_with_the_final_episodes(log: EvalLog) -> None:
    statuses = [EpisodeStatus.SUCCESS, EpisodeStatus.FAILURE, EpisodeStatus.ERROR, EpisodeStatus.INFRA_INVALID]
    for task in ("Open", "GoToLocal", "PickupLoc"):
        for index in range(7):
            status = statuses[(index + len(task)) % len(statuses)]
            final = row(task, index, status=status, success=status is EpisodeStatus.SUCCESS, reason=status.value)
            if index % 3 == 0:  # an earlier attempt that must not count
                log.record(replace(final, attempt=1, status=EpisodeStatus.INFRA_INVALID, success=False, steps=999))
                final = replace(final, attempt=2)
            log.record(final)
    final = log.final_episodes()
    assert summary_json(tallies=log.tallies()) == summary_json(records(final))
    assert list(log.tallies()) == ["GoToLocal", "Open", "PickupLoc"]

    assert log.final_page(offset=5, limit=4) == (21, final[5:9])
    for status in statuses:
        for task in (None, "Open"):
            matching = [r for r in final if r.status is status and task in (None, r.task)]
            assert log.final_page(offset=1, limit=3, status=status, task=task) == (len(matching), matching[1:4])
    assert log.final_page(offset=100, limit=10) == (21, [])
    assert log.final_page(task="Nope") == (0, [])


def test_trace_round_trips_json_lines(log: EvalLog) -> None:
    events = [
        {"event": "episode.start", "task": {"episode_id": "x"}, "seed": 3},
        {"event": "action", "step": 0, "action": [0.5, -1.0]},
        {"event": "episode.end", "status": "success", "note": "héllo ✓"},
    ]
    r = row("GoToLocal", 0)
    log.record(r, trace_lines(*events))
    assert log.trace(r.episode_id) == events
    assert log.trace(r.episode_id, 1) == events


def test_trace_defaults_to_the_last_attempt(log: EvalLog) -> None:
    log.record(row("GoToLocal", 0, attempt=1), trace_lines({"attempt": 1}, {"step": 0}))
    log.record(row("GoToLocal", 0, attempt=2), trace_lines({"attempt": 2}))
    episode = row("GoToLocal", 0).episode_id
    assert log.trace(episode) == [{"attempt": 2}]
    assert log.trace(episode, attempt=1) == [{"attempt": 1}, {"step": 0}]


def test_trace_of_a_last_attempt_without_trace_is_not_an_earlier_attempts(log: EvalLog) -> None:
    episode = row("GoToLocal", 0).episode_id
    log.record(row("GoToLocal", 0, attempt=1, success=False), trace_lines({"attempt": 1}))
    log.record(row("GoToLocal", 0, attempt=2))  # recorded without trace lines
    assert log.done()[episode].attempt == 2
    assert log.trace(episode) == []  # the final attempt's (empty) trace, not the failed first attempt's
    assert log.trace(episode, attempt=1) == [{"attempt": 1}]


def test_trace_of_nothing_is_empty(log: EvalLog) -> None:
    r = row("GoToLocal", 0)
    log.record(r)  # no trace lines
    assert log.trace(r.episode_id) == []
    assert log.trace("babyai/default/Nope/0000@s0") == []
    assert log.trace(r.episode_id, attempt=7) == []


# -- the run ----------------------------------------------------------------------------------------------------------


def test_info_of_a_new_run(log: EvalLog, run_dir: Path) -> None:
    info = log.info()
    assert info.run_id == "run-a"
    assert info.status == "running"
    assert info.mode == "driven"
    assert (info.benchmark, info.split, info.agent) == ("babyai", "default", "random")
    assert info.digest == "0123456789abcdef"
    assert info.spec == SPEC
    assert info.versions == VERSIONS
    assert info.git_commit == "deadbeef"
    assert info.message is None
    assert (info.n_planned, info.n_done) == (4, 0)
    assert info.path == run_dir
    assert info.created_at <= info.updated_at
    data = info.to_json()
    assert data["path"] == str(run_dir)
    json.dumps(data)  # serialisable as is


def test_update_run_changes_status_plan_spec_and_message(log: EvalLog, run_dir: Path) -> None:
    before = log.info()
    log.update_run(status="complete", n_planned=10, message="all done", spec={**SPEC, "episodes": 5})
    with EvalLog.open(run_dir) as reader:
        info = reader.info()
    assert info.status == "complete"
    assert info.n_planned == 10
    assert info.message == "all done"
    assert info.spec["episodes"] == 5
    assert info.updated_at >= before.updated_at
    assert info.created_at == before.created_at

    log.update_run(message="again")  # what is not given stays
    assert (log.info().status, log.info().n_planned, log.info().message) == ("complete", 10, "again")


def test_creating_twice_in_one_directory_is_refused(log: EvalLog, run_dir: Path) -> None:
    log.record(row("GoToLocal", 0))
    with pytest.raises(HyloError, match="already exists"):
        create(run_dir)
    assert log.n_done() == 1  # the existing run is untouched


@pytest.mark.parametrize("make_dir", [False, True])
def test_open_without_a_run_raises_run_not_found(tmp_path: Path, make_dir: bool) -> None:
    where = tmp_path / "nothing-here"
    if make_dir:
        where.mkdir()
    with pytest.raises(RunNotFound, match="nothing-here"):
        EvalLog.open(where)


def test_a_reader_sees_what_a_live_writer_committed(log: EvalLog, run_dir: Path) -> None:
    log.record(row("GoToLocal", 0), trace_lines({"n": 0}))
    with EvalLog.open(run_dir) as reader:
        assert reader.n_done() == 1
        log.record(row("GoToLocal", 1), trace_lines({"n": 1}))  # the writer carries on while the reader is open
        assert reader.n_done() == 2
        assert reader.trace(row("GoToLocal", 1).episode_id) == [{"n": 1}]
        assert reader.info().status == "running"
        log.update_run(status="partial")
        assert reader.info().status == "partial"
    raw = sqlite3.connect(run_dir / FILENAME)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()


def test_a_failed_record_leaves_no_partial_row_or_trace(log: EvalLog, run_dir: Path) -> None:
    kept = row("GoToLocal", 0)
    log.record(kept, trace_lines({"kept": True}))

    # the same (episode_id, attempt) again: refused, and the first one is intact
    with pytest.raises(sqlite3.IntegrityError):
        log.record(row("GoToLocal", 0, success=False), trace_lines({"kept": False}))
    assert log.attempts() == [kept]
    assert log.trace(kept.episode_id) == [{"kept": True}]

    # a failure after the episode row was written (its trace collides): the row is rolled back with it
    victim = row("Open", 5)
    raw = sqlite3.connect(run_dir / FILENAME, isolation_level=None)
    raw.execute("INSERT INTO traces VALUES (?, 1, 1, 'jsonl+zlib', x'')", (victim.episode_id,))
    raw.close()
    with pytest.raises(sqlite3.IntegrityError):
        log.record(victim, trace_lines({"lost": True}))
    assert victim.episode_id not in log.done()
    assert log.n_done() == 1

    # and the log still takes episodes afterwards
    log.record(row("Open", 6), trace_lines({"after": True}))
    assert log.n_done() == 2
    with EvalLog.open(run_dir) as reader:
        assert [r.episode_id for r in reader.attempts()] == [kept.episode_id, row("Open", 6).episode_id]


def test_a_record_failing_before_insert_leaves_the_log_usable(log: EvalLog) -> None:
    bad = row("GoToLocal", 0, status="success")  # not an EpisodeStatus: fails while building the row
    with pytest.raises(AttributeError):
        log.record(bad, trace_lines({"x": 1}))
    assert log.n_done() == 0
    log.record(row("GoToLocal", 0), trace_lines({"x": 1}))
    assert log.n_done() == 1


# -- a run whose process died -----------------------------------------------------------------------------------------

_DIE_WITH_LOG_OPEN = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from hylo.evallog.store import EpisodeRow, EvalLog
    from hylo.core.status import EpisodeStatus
    log = EvalLog.create(Path(sys.argv[1]), run_id="dead", benchmark="babyai", split="default", agent="random",
                         digest="d", spec={}, n_planned=3, versions={})
    log.record(EpisodeRow("e0", "GoToLocal", "default", 0, 0, 1, EpisodeStatus.SUCCESS, "success", True, 4))
    os._exit(0)  # killed: no close, no status update
    """
)


def test_a_run_whose_process_is_gone_reports_stopped(tmp_path: Path) -> None:
    run_dir = tmp_path / "dead"
    subprocess.run([sys.executable, "-c", _DIE_WITH_LOG_OPEN, str(run_dir)], check=True, timeout=60)
    with EvalLog.open(run_dir) as log:
        info = log.info()
        assert info.status == "stopped"
        assert info.n_done == 1  # what it committed before dying is kept
        assert [r.episode_id for r in log.final_episodes()] == ["e0"]
        log.claim()  # a resuming process takes the run over
        assert log.info().status == "running"
    assert [r.status for r in list_runs(tmp_path)] == ["running"]


def _set_run(run_dir: Path, **values: Any) -> None:
    conn = sqlite3.connect(run_dir / FILENAME, isolation_level=None)
    try:
        for column, value in values.items():
            conn.execute(f"UPDATE run SET {column} = ?", (value,))
    finally:
        conn.close()


def test_stopped_only_replaces_running(log: EvalLog, run_dir: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _set_run(run_dir, pid=dead.pid)
    assert log.info().status == "stopped"
    log.update_run(status="complete")
    assert log.info().status == "complete"  # a finished run is not "stopped"


def test_a_run_on_another_host_cannot_be_judged_and_stays_running(log: EvalLog, run_dir: Path) -> None:
    _set_run(run_dir, pid=2**22 + 12345, host=socket.gethostname() + "-elsewhere")
    assert log.info().status == "running"
    _set_run(run_dir, pid=os.getpid(), host=socket.gethostname())
    assert log.info().status == "running"


# -- the log directory ------------------------------------------------------------------------------------------------


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for name in ("babyai-random-aaa", "babyai-random-aab", "babyai-hold-ccc"):
        with create(root / name) as made:
            made.record(row("GoToLocal", 0))
    (root / "not-a-run").mkdir()
    (root / "stray.txt").write_text("hello")
    return root


def test_list_runs_lists_every_run_oldest_first(log_dir: Path) -> None:
    runs = list_runs(log_dir)
    assert [r.run_id for r in runs] == ["babyai-random-aaa", "babyai-random-aab", "babyai-hold-ccc"]
    assert all(r.n_done == 1 for r in runs)
    assert [r.created_at for r in runs] == sorted(r.created_at for r in runs)


def test_list_runs_of_a_missing_or_empty_dir_is_empty(tmp_path: Path) -> None:
    assert list_runs(tmp_path / "missing") == []
    assert list_runs(tmp_path) == []


def test_list_runs_skips_a_broken_run(log_dir: Path) -> None:
    broken = log_dir / "broken"
    broken.mkdir()
    (broken / FILENAME).write_bytes(b"this is not a database" * 100)
    assert len(list_runs(log_dir)) == 3


def test_list_runs_while_a_run_is_in_progress(log_dir: Path) -> None:
    with create(log_dir / "live") as live:
        live.record(row("Open", 0))
        live.record(row("Open", 1))
        found = {r.run_id: r for r in list_runs(log_dir)}
        assert found["live"].status == "running"
        assert found["live"].n_done == 2


def test_find_run_by_id_or_unique_prefix(log_dir: Path) -> None:
    assert find_run(log_dir, "babyai-hold-ccc") == log_dir / "babyai-hold-ccc"
    assert find_run(log_dir, "babyai-h") == log_dir / "babyai-hold-ccc"
    assert find_run(log_dir, "babyai-random-aab") == log_dir / "babyai-random-aab"


def test_an_exact_id_wins_over_a_longer_run_it_prefixes(log_dir: Path) -> None:
    with create(log_dir / "babyai-hold-ccc-2") as log:
        assert log.n_done() == 0
    assert find_run(log_dir, "babyai-hold-ccc") == log_dir / "babyai-hold-ccc"


def test_find_run_with_an_ambiguous_prefix_names_the_candidates(log_dir: Path) -> None:
    with pytest.raises(RunNotFound, match="ambiguous") as info:
        find_run(log_dir, "babyai-random")
    assert "babyai-random-aaa" in str(info.value)
    assert "babyai-random-aab" in str(info.value)
    assert "babyai-hold-ccc" not in str(info.value)


def test_find_run_of_a_missing_run_lists_the_known_ones(log_dir: Path) -> None:
    with pytest.raises(RunNotFound, match="'zzz'") as info:
        find_run(log_dir, "zzz")
    for name in ("babyai-random-aaa", "babyai-random-aab", "babyai-hold-ccc"):
        assert name in str(info.value)
    assert "not-a-run" not in str(info.value)  # a directory without a log is no run
    with pytest.raises(RunNotFound, match="none"):
        find_run(log_dir.parent / "empty", "zzz")


def test_delete_run_removes_only_that_run(log_dir: Path) -> None:
    deleted = delete_run(log_dir, "babyai-h")
    assert deleted == log_dir / "babyai-hold-ccc"
    assert not deleted.exists()
    assert [r.run_id for r in list_runs(log_dir)] == ["babyai-random-aaa", "babyai-random-aab"]
    with pytest.raises(RunNotFound):
        find_run(log_dir, "babyai-hold-ccc")
    with pytest.raises(RunNotFound, match="ambiguous"):
        delete_run(log_dir, "babyai-random")  # nothing is deleted on an ambiguous name
    assert len(list_runs(log_dir)) == 2


def test_the_log_dirs_own_names_are_reserved_with_the_sqlite_side_files() -> None:
    for name in (JOBS_DIR, JOBS_LOCK, GRAPHS_DIR, JOBS_DB, f"{JOBS_DB}-wal", f"{JOBS_DB}-shm", FILENAME):
        assert name in RESERVED_NAMES
    assert GRAPHS_DIR == "graphs"


@pytest.mark.parametrize("name", ["graphs", "jobs.sqlite-wal", "jobs.sqlite-shm", "Jobs", "evallog.sqlite"])
def test_a_run_is_never_created_under_a_reserved_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(ReservedRunId, match=f"run id {name!r} is reserved"):
        create(tmp_path / "runs" / name)
    assert not (tmp_path / "runs").exists()


def test_a_reserved_directory_holding_an_evallog_is_no_run(log_dir: Path) -> None:
    """A run named `graphs` made before the name was reserved shares its directory with the saved graphs: it is not
    listed, nor found by name or prefix (renaming the directory brings it back)."""
    (log_dir / "babyai-hold-ccc").rename(log_dir / GRAPHS_DIR)
    assert [r.run_id for r in list_runs(log_dir)] == ["babyai-random-aaa", "babyai-random-aab"]
    with pytest.raises(RunNotFound, match="'graphs'"):
        find_run(log_dir, GRAPHS_DIR)
    with pytest.raises(RunNotFound, match="'gra'"):
        find_run(log_dir, "gra")


def test_a_log_dir_that_is_or_lies_under_a_file_is_refused_by_name(tmp_path: Path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not runs")
    with pytest.raises(BadLogDir, match=f"log dir {str(a_file)!r} is not a directory"):
        check_log_dir(a_file)
    under = a_file / "runs"
    with pytest.raises(BadLogDir, match=f"log dir {str(under)!r} cannot be created: {str(a_file)!r} is not a"):
        check_log_dir(under, writable=True)
    assert check_log_dir(tmp_path) == tmp_path
    assert check_log_dir(tmp_path / "new" / "runs", writable=True) == tmp_path / "new" / "runs"
    assert not (tmp_path / "new").exists()  # checked, not made


def test_returns_and_the_success_signal_counted_in_sql_agree_with_the_rows(log: EvalLog) -> None:
    returns = [1.5, -2.0, float("nan"), 4.0, 7.25, float("inf")]
    for index, value in enumerate(returns):
        status = EpisodeStatus.ERROR if index == 4 else EpisodeStatus.FAILURE
        metrics = {"return": value, "success_signal": False}
        log.record(row("CartPole", index, status=status, success=False, reason=status.value, metrics=metrics))
    tallied = summary_json(tallies=log.tallies())
    assert tallied == summary_json(records(log.final_episodes()))
    assert tallied["mean_return"] == pytest.approx((1.5 - 2.0 + 4.0) / 3)  # NaN, inf and the error's left out
    assert tallied["success_signal"] is False
