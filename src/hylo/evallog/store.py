"""The EvalLog: one SQLite database per evaluation run, written incrementally and crash-safe (WAL mode).

Each finished episode is committed in one transaction with its trace, so a run killed at any moment keeps every
episode it finished and none it did not; re-running resumes exactly the missing ones. The schema is in
docs/evallog.md. The rows it stores are `hylo.evallog.rows` (importable from here too); the log dir that holds one
directory per run, `hylo.evallog.logdir`.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from hylo.core.errors import HyloError
from hylo.core.status import EpisodeStatus
from hylo.evallog.logdir import FILENAME, RunNotFound, check_run_id, run_dirs
from hylo.evallog.realtime_metrics import RealtimeRecord, realtime_record
from hylo.evallog.rows import EpisodeRow, RunInfo, records
from hylo.evallog.run_status import RunStatus
from hylo.stats.success import Returns, Tally

__all__ = ["SCHEMA_VERSION", "TRACE_ENCODING", "EpisodeRow", "EvalLog", "RunBusy", "RunInfo", "list_runs", "records"]

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS run (
    run_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    status TEXT NOT NULL,
    mode TEXT NOT NULL,
    benchmark TEXT NOT NULL,
    split TEXT,
    agent TEXT NOT NULL,
    digest TEXT NOT NULL,
    spec TEXT NOT NULL,
    n_planned INTEGER NOT NULL,
    versions TEXT NOT NULL,
    git_commit TEXT,
    message TEXT,
    pid INTEGER,
    host TEXT
);
CREATE TABLE IF NOT EXISTS episodes (
    episode_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    task TEXT NOT NULL,
    split TEXT NOT NULL,
    idx INTEGER NOT NULL,
    base_seed INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT,
    success INTEGER NOT NULL,
    steps INTEGER NOT NULL,
    safety_interventions INTEGER NOT NULL,
    metrics TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL,
    worker TEXT,
    video TEXT,
    PRIMARY KEY (episode_id, attempt)
);
CREATE TABLE IF NOT EXISTS traces (
    episode_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    n_events INTEGER NOT NULL,
    encoding TEXT NOT NULL,
    events BLOB NOT NULL,
    PRIMARY KEY (episode_id, attempt)
);
"""

TRACE_ENCODING = "jsonl+zlib"
TRACE_PIECE = 1 << 16
"""How many bytes of a stored trace are decompressed at a time (`EvalLog.iter_trace`)."""


class RunBusy(HyloError):
    """Another live process is running this run."""


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # in WAL mode, every commit survives a crash of the process
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


class EvalLog:
    """One run's log. `EvalLog.create(dir, ...)` starts a run; `EvalLog.open(dir)` reopens one (to resume or read)."""

    def __init__(self, run_dir: Path, conn: sqlite3.Connection) -> None:
        self.run_dir = run_dir
        self._conn = conn

    # -- lifecycle --------------------------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        run_dir: Path,
        *,
        run_id: str,
        benchmark: str,
        split: str | None,
        agent: str,
        digest: str,
        spec: dict[str, Any],
        n_planned: int,
        versions: dict[str, Any],
        git_commit: str | None = None,
        mode: str = "driven",
    ) -> EvalLog:
        check_run_id(run_id)
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / FILENAME
        if path.exists():
            raise HyloError(f"an EvalLog already exists at {path}")
        conn = _connect(path)
        conn.executescript(_SCHEMA)
        now = time.time()
        with _transaction(conn):
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.execute(
                "INSERT INTO run VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)",
                (
                    run_id,
                    now,
                    now,
                    mode,
                    benchmark,
                    split,
                    agent,
                    digest,
                    json.dumps(spec, sort_keys=True),
                    n_planned,
                    json.dumps(versions, sort_keys=True),
                    git_commit,
                    os.getpid(),
                    socket.gethostname(),
                ),
            )
        return cls(run_dir, conn)

    @classmethod
    def open(cls, run_dir: Path) -> EvalLog:
        path = run_dir / FILENAME
        if not path.is_file():
            raise RunNotFound(f"no run at {run_dir} (no {FILENAME})")
        conn = _connect(path)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.Error:
            conn.close()
            raise
        if row is None or int(row[0]) != SCHEMA_VERSION:
            conn.close()
            raise HyloError(f"{path} has EvalLog schema {row and row[0]}, this hylo reads {SCHEMA_VERSION}")
        return cls(run_dir, conn)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> EvalLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the run ----------------------------------------------------------------------------------------------------

    def info(self) -> RunInfo:
        row = self._conn.execute(
            "SELECT run_id, status, mode, benchmark, split, agent, digest, spec, n_planned, created_at, updated_at, "
            "versions, git_commit, message, pid, host FROM run"
        ).fetchone()
        (run_id, status, mode, benchmark, split, agent, digest, spec, n_planned, created, updated) = row[:11]
        versions, git_commit, message, pid, host = row[11:]
        if status == RunStatus.RUNNING and not _alive(pid, host):
            status = RunStatus.STOPPED  # its process is gone (killed): re-running the command resumes it
        counts = self.status_counts()
        return RunInfo(
            run_id=run_id,
            status=RunStatus(status),
            mode=mode,
            benchmark=benchmark,
            split=split,
            agent=agent,
            digest=digest,
            spec=json.loads(spec),
            n_planned=n_planned,
            n_done=sum(counts.values()),
            created_at=created,
            updated_at=updated,
            versions=json.loads(versions),
            git_commit=git_commit,
            message=message,
            path=self.run_dir,
            status_counts=counts,
        )

    def status_counts(self) -> dict[str, int]:
        """Status → how many final episodes ended with it (every status, zeros included, in `EpisodeStatus` order):
        one query, what a run's listing shows."""
        counts = {status.value: 0 for status in EpisodeStatus}
        query = f"SELECT status, COUNT(*) FROM episodes e WHERE {_FINAL} GROUP BY status"
        for status, count in self._conn.execute(query):
            counts[status] = count
        return counts

    def claim(self) -> None:
        """Mark the run as running in this process (on resume). Atomic: raises `RunBusy` when another live process
        runs it, so two invocations never write one run."""
        with _transaction(self._conn):
            status, pid, host = self._conn.execute("SELECT status, pid, host FROM run").fetchone()
            mine = pid == os.getpid() and host == socket.gethostname()
            if status == RunStatus.RUNNING and not mine and _alive(pid, host):
                raise RunBusy(f"run {self.run_dir.name!r} is being run by process {pid} on {host}")
            self._conn.execute(
                "UPDATE run SET status = 'running', pid = ?, host = ?, updated_at = ?",
                (os.getpid(), socket.gethostname(), time.time()),
            )

    def update_run(
        self,
        *,
        status: RunStatus | None = None,
        n_planned: int | None = None,
        spec: dict[str, Any] | None = None,
        message: str | None = None,
    ) -> None:
        sets: list[str] = ["updated_at = ?"]
        values: list[Any] = [time.time()]
        for column, value in (("status", status), ("n_planned", n_planned), ("message", message)):
            if value is not None:
                sets.append(f"{column} = ?")
                values.append(value)
        if spec is not None:
            sets.append("spec = ?")
            values.append(json.dumps(spec, sort_keys=True))
        with _transaction(self._conn):
            self._conn.execute(f"UPDATE run SET {', '.join(sets)}", values)

    # -- episodes ---------------------------------------------------------------------------------------------------

    def record(self, row: EpisodeRow, trace: Sequence[bytes] = ()) -> None:
        """Commit one finished episode attempt with its trace lines, atomically."""
        self.record_many([(row, trace)])

    def record_many(self, items: Sequence[tuple[EpisodeRow, Sequence[bytes]]]) -> None:
        """Commit finished episode attempts with their trace lines in one transaction: all or none."""
        episodes = [_episode_values(row) for row, _ in items]
        traces = [
            (row.episode_id, row.attempt, len(trace), TRACE_ENCODING, zlib.compress(b"\n".join(trace), 1))
            for row, trace in items
            if trace
        ]
        with _transaction(self._conn):
            self._conn.executemany(
                "INSERT INTO episodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", episodes
            )
            if traces:
                self._conn.executemany("INSERT INTO traces VALUES (?, ?, ?, ?, ?)", traces)
            self._conn.execute("UPDATE run SET updated_at = ?", (time.time(),))

    def attempts(self, episode_id: str | None = None) -> list[EpisodeRow]:
        """Every recorded attempt (of one episode, or of all), in recording order."""
        where, args = ("WHERE episode_id = ?", (episode_id,)) if episode_id is not None else ("", ())
        return [_row(r) for r in self._conn.execute(f"{_SELECT} {where} ORDER BY rowid", args)]

    def final_episodes(self) -> list[EpisodeRow]:
        """The last attempt of each episode, ordered by (task, index)."""
        return [_row(r) for r in self._conn.execute(f"{_SELECT} e WHERE {_FINAL} {_ORDER}")]

    def final_page(
        self, *, offset: int = 0, limit: int = 100, status: EpisodeStatus | None = None, task: str | None = None
    ) -> tuple[int, list[EpisodeRow]]:
        """`limit` of the final episodes from `offset` (in `final_episodes` order), only those with `status` and of
        `task` when given; and how many match in all. Read in SQL: a page of a 100,000-episode run costs a page."""
        where, args = _FINAL, list[str]()
        if status is not None:
            where, args = f"{where} AND status = ?", [*args, status.value]
        if task is not None:
            where, args = f"{where} AND task = ?", [*args, task]
        total: int = self._conn.execute(f"SELECT COUNT(*) FROM episodes e WHERE {where}", args).fetchone()[0]
        query = f"{_SELECT} e WHERE {where} {_ORDER} LIMIT ? OFFSET ?"
        return total, [_row(r) for r in self._conn.execute(query, (*args, limit, offset))]

    def tallies(self) -> dict[str, Tally]:
        """Task → the tally of its final episodes (count per status, total steps, the returns of the scored ones,
        how many ran without a success signal), tasks in `final_episodes` order: what a summary needs
        (`hylo.stats.success.summary_json(tallies=...)`), counted in SQL."""
        scored = ", ".join(f"'{status.value}'" for status in EpisodeStatus if status.scored)
        ret = f"(CASE WHEN status IN ({scored}) AND json_valid(metrics) THEN json_extract(metrics, '$.return') END)"
        query = (
            f"SELECT task, status, COUNT(*), SUM(steps), COUNT({ret}), TOTAL({ret}), TOTAL({ret} * {ret}), "
            "SUM(CASE WHEN json_valid(metrics) THEN json_extract(metrics, '$.success_signal') = 0 END) "
            f"FROM episodes e WHERE {_FINAL} GROUP BY task, status ORDER BY task"
        )
        out: dict[str, Tally] = {}
        for task, status, count, steps, n_ret, total, squares, unsignalled in self._conn.execute(query):
            tally = Tally({EpisodeStatus(status): count}, steps, Returns(n_ret, total, squares), unsignalled or 0)
            out[task] = out[task] + tally if task in out else tally
        return out

    def realtime_records(self) -> list[RealtimeRecord]:
        """The realtime record (`metrics.realtime`) of each final episode that has one, in `final_episodes` order:
        what `hylo.evallog.realtime_metrics.realtime_figures` pools, read without the rest of the rows."""
        realtime = "json_extract(metrics, '$.realtime')"
        query = (  # json_quote keeps an object's JSON text and quotes a bare string, so every value parses back
            f"SELECT episode_id, reason, json_quote({realtime}) FROM episodes e "
            f"WHERE {_FINAL} AND json_valid(metrics) AND {realtime} IS NOT NULL {_ORDER}"
        )
        return [
            realtime_record(episode_id, reason, json.loads(raw))
            for episode_id, reason, raw in self._conn.execute(query)
        ]

    def done(self) -> dict[str, EpisodeRow]:
        """Episode id → its final attempt."""
        return {row.episode_id: row for row in self.final_episodes()}

    def finals_of(self, episode_ids: Sequence[str]) -> dict[str, EpisodeRow]:
        """Episode id → its final attempt, for those of `episode_ids` the log holds: what a run asks of its log a
        slice of its plan at a time (`done` reads every episode)."""
        found: dict[str, EpisodeRow] = {}
        for start in range(0, len(episode_ids), _IDS_PER_QUERY):
            ids = episode_ids[start : start + _IDS_PER_QUERY]
            marks = ", ".join("?" * len(ids))
            query = f"{_SELECT} e WHERE episode_id IN ({marks}) AND {_FINAL}"
            found.update((row.episode_id, row) for row in map(_row, self._conn.execute(query, tuple(ids))))
        return found

    def count_final(
        self, *, below_index: int | None = None, status: EpisodeStatus | None = None, max_attempt: int | None = None
    ) -> int:
        """How many episodes' final attempt has an index below `below_index`, ended with `status`, and is at most
        attempt `max_attempt` (each when given), counted in SQL."""
        where, args = _FINAL, list[Any]()
        named = None if status is None else status.value
        for clause, value in (("idx < ?", below_index), ("status = ?", named), ("attempt <= ?", max_attempt)):
            if value is not None:
                where, args = f"{where} AND {clause}", [*args, value]
        count: int = self._conn.execute(f"SELECT COUNT(*) FROM episodes e WHERE {where}", args).fetchone()[0]
        return count

    def n_done(self) -> int:
        count: int = self._conn.execute("SELECT COUNT(DISTINCT episode_id) FROM episodes").fetchone()[0]
        return count

    def trace(self, episode_id: str, attempt: int | None = None) -> list[dict[str, Any]]:
        """The trace events of one attempt (the last when none is given)."""
        return list(self.iter_trace(episode_id, attempt))

    def iter_trace(self, episode_id: str, attempt: int | None = None) -> Iterator[dict[str, Any]]:
        """The trace events of one attempt (the last when none is given), in order, each read when asked for: the
        trace is decompressed `TRACE_PIECE` bytes at a time and never held whole. The trace is fetched now; the
        events can be read after the log is closed."""
        blob = self._trace_blob(episode_id, attempt)
        return iter(()) if blob is None else _trace_events(blob, episode_id)

    def _trace_blob(self, episode_id: str, attempt: int | None) -> bytes | None:
        """The compressed trace of one attempt (the last when none is given); None when it has none."""
        if attempt is None:
            found = self._conn.execute(
                "SELECT MAX(attempt) FROM episodes WHERE episode_id = ?", (episode_id,)
            ).fetchone()
            attempt = found[0] if found else None
        row = self._conn.execute(
            "SELECT encoding, events FROM traces WHERE episode_id = ? AND attempt = ?", (episode_id, attempt)
        ).fetchone()
        if row is None:
            return None
        encoding: str = row[0]
        blob: bytes = row[1]
        if encoding != TRACE_ENCODING:
            raise HyloError(f"unknown trace encoding {encoding!r}")
        return blob


def _trace_events(blob: bytes, episode_id: str) -> Iterator[dict[str, Any]]:
    """The events of a stored trace (`TRACE_ENCODING`), parsed one line at a time."""
    for line in _trace_lines(blob, episode_id):
        yield json.loads(line)


def _trace_lines(blob: bytes, episode_id: str) -> Iterator[bytes]:
    """The JSON lines of a stored trace, decompressed `TRACE_PIECE` bytes at a time."""
    inflate = zlib.decompressobj()
    pending: list[bytes] = []  # the start of a line that the pieces so far have not finished
    compressed, offset = memoryview(blob), 0
    while not inflate.eof:
        data: bytes | memoryview = inflate.unconsumed_tail  # what the last piece left of its input (a piece at most)
        if not data:
            if offset >= len(compressed):
                raise HyloError(f"the stored trace of episode {episode_id!r} is cut short")
            data, offset = compressed[offset : offset + TRACE_PIECE], offset + TRACE_PIECE
        piece = inflate.decompress(data, TRACE_PIECE)
        lines = piece.split(b"\n")
        if len(lines) > 1:
            lines[0] = b"".join([*pending, lines[0]])
            pending.clear()
            yield from (line for line in lines[:-1] if line)
        if lines[-1]:
            pending.append(lines[-1])
    if pending:
        yield b"".join(pending)


def in_seq_range(events: Iterable[dict[str, Any]], first: int, last: int | None) -> Iterator[dict[str, Any]]:
    """The events whose `seq` is from `first` to `last` (inclusive; no end when None), in order. The reading stops at
    the first event past `last` when the trace is in sequence order, as the EvalLog writes it: the bus stamps each
    event's `seq` and hands it to the trace buffer under one lock, counting up from 0 from the episode's start, and
    the writer keeps that order. A trace that does not start at 0 or whose `seq` ever steps back is read to its end.
    The numbering restarts only before an episode's first step (a placement's signals, `bus.place`): a restart after
    the range's end would not be seen, so code that numbers a trace anew mid-episode must change this."""
    ordered, previous = True, -1
    for index, event in enumerate(events):
        seq = event.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool):
            ordered = False
            continue
        ordered = ordered and seq > previous and (index > 0 or seq == 0)
        previous = seq
        if first <= seq and (last is None or seq <= last):
            yield event
        elif ordered and last is not None and seq > last:
            return


_SELECT = (
    "SELECT episode_id, task, split, idx, base_seed, seed, status, reason, success, steps, safety_interventions, "
    "metrics, started_at, ended_at, attempt, detail, worker, video FROM episodes"
)


_FINAL = "NOT EXISTS (SELECT 1 FROM episodes later WHERE later.episode_id = e.episode_id AND later.attempt > e.attempt)"
"""The last attempt of each episode (the primary key's index answers it)."""
_ORDER = "ORDER BY task, idx, episode_id"
_IDS_PER_QUERY = 500
"""The most episode ids one query names (SQLite allows 999 parameters in its older versions)."""


def _episode_values(row: EpisodeRow) -> tuple[Any, ...]:
    return (
        row.episode_id,
        row.attempt,
        row.task,
        row.split,
        row.index,
        row.base_seed,
        row.seed,
        row.status.value,
        row.reason,
        row.detail,
        int(row.success),
        row.steps,
        row.safety_interventions,
        json.dumps(row.metrics, sort_keys=True, default=str),
        row.started_at,
        row.ended_at,
        row.worker,
        row.video,
    )


def _row(r: Sequence[Any]) -> EpisodeRow:
    return EpisodeRow(
        episode_id=r[0],
        task=r[1],
        split=r[2],
        index=r[3],
        base_seed=r[4],
        seed=r[5],
        status=EpisodeStatus(r[6]),
        reason=r[7],
        success=bool(r[8]),
        steps=r[9],
        safety_interventions=r[10],
        metrics=json.loads(r[11]),
        started_at=r[12],
        ended_at=r[13],
        attempt=r[14],
        detail=r[15],
        worker=r[16],
        video=r[17],
    )


def _alive(pid: int | None, host: str | None) -> bool:
    if pid is None or host != socket.gethostname():
        return True  # cannot tell from here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")


# -- the log directory ------------------------------------------------------------------------------------------------


def list_runs(log_dir: Path) -> list[RunInfo]:
    """Every run in `log_dir`, oldest first (readable while a run is in progress)."""
    runs = []
    for run_dir in run_dirs(log_dir):
        try:
            with EvalLog.open(run_dir) as log:
                runs.append(log.info())
        except (HyloError, sqlite3.Error):
            continue
    return sorted(runs, key=lambda r: r.created_at)
