"""An episode's trace read lazily (`EvalLog.iter_trace`): the same events as the whole stored trace, however the
decompression is cut into pieces; a range of sequence numbers read from a long trace holds exactly the events in it,
and the reading stops after the range when the trace is in sequence order."""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hylo.cli import main
from hylo.core.errors import HyloError
from hylo.core.status import EpisodeStatus
from hylo.evallog import store as store_module
from hylo.evallog.logdir import FILENAME
from hylo.evallog.store import EpisodeRow, EvalLog, in_seq_range

EPISODE = "builtin/default/point_reach/0000@s0"


def stored_events(run_dir: Path, episode_id: str, attempt: int) -> list[dict[str, Any]]:
    """The trace as it is stored, decompressed whole and parsed line by line."""
    with sqlite3.connect(run_dir / FILENAME) as conn:
        (blob,) = conn.execute(
            "SELECT events FROM traces WHERE episode_id = ? AND attempt = ?", (episode_id, attempt)
        ).fetchone()
    return [json.loads(line) for line in zlib.decompress(blob).split(b"\n") if line]


@pytest.fixture(scope="module")
def babyai_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recorded BabyAI run of two episodes."""
    log_dir = tmp_path_factory.mktemp("runs")
    code = main(["eval", "babyai", "--task", "GoToLocal", "--agent", "expert", "--episodes", "2", "--max-steps", "20",
                 "--log-dir", str(log_dir)])  # fmt: skip
    assert code == 0
    (run_dir,) = log_dir.iterdir()
    return run_dir


@pytest.mark.parametrize("piece", [7, 1 << 16], ids=["pieces_cutting_lines", "default_pieces"])
def test_the_lazy_read_of_a_recorded_episode_is_its_stored_trace(
    babyai_run: Path, piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "TRACE_PIECE", piece)
    with EvalLog.open(babyai_run) as log:
        rows = log.final_episodes()
        assert len(rows) == 2
        for row in rows:
            events = stored_events(babyai_run, row.episode_id, row.attempt)
            assert len(events) > 20 and {e["event"] for e in events} >= {"action", "step.result", "episode.end"}
            assert list(log.iter_trace(row.episode_id)) == events
            assert log.trace(row.episode_id, row.attempt) == events


def long_trace(run_dir: Path, n: int, seqs: Iterable[int] | None = None) -> EvalLog:
    """A run holding one episode whose trace is `n` events (with sequence numbers `seqs`, 0.. by default)."""
    log = EvalLog.create(run_dir, run_id=run_dir.name, benchmark="builtin", split="default", agent="random",
                         digest="0" * 16, spec={}, n_planned=1, versions={})  # fmt: skip
    numbers = range(n) if seqs is None else seqs
    lines = [json.dumps({"event": "step.result", "seq": seq, "reward": seq / 7}).encode() for seq in numbers]
    row = EpisodeRow(episode_id=EPISODE, task="point_reach", split="default", index=0, base_seed=0, seed=0,
                     status=EpisodeStatus.SUCCESS, reason="success", success=True, steps=n,
                     safety_interventions=0, metrics={}, started_at=0.0, ended_at=1.0)  # fmt: skip
    log.record(row, lines)
    return log


class Counted:
    """Events handed on one by one, counting how many were read."""

    def __init__(self, events: Iterator[dict[str, Any]]) -> None:
        self.events = events
        self.read = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for event in self.events:
            self.read += 1
            yield event


def test_a_range_of_a_long_trace_is_exactly_its_events_and_the_read_stops_after_it(tmp_path: Path) -> None:
    with long_trace(tmp_path / "long", 20_000) as log:
        for first, last in [(0, 0), (9_990, 10_009), (19_990, 19_999), (19_990, None), (25_000, 26_000)]:
            read = Counted(log.iter_trace(EPISODE))
            got = list(in_seq_range(read, first, last))
            end = 20_000 if last is None else min(last + 1, 20_000)
            assert [e["seq"] for e in got] == list(range(first, end))
            assert [e["reward"] for e in got] == [seq / 7 for seq in range(first, end)]
            assert read.read == min(end + 1, 20_000), "read up to the first event past the range"


def test_a_trace_out_of_sequence_order_is_read_to_its_end(tmp_path: Path) -> None:
    seqs = [40, 41, *range(30), 42, 5]  # a stray start, and a step back near the end
    with long_trace(tmp_path / "odd", len(seqs), seqs) as log:
        read = Counted(log.iter_trace(EPISODE))
        assert [e["seq"] for e in in_seq_range(read, 3, 6)] == [3, 4, 5, 6, 5]
        assert read.read == len(seqs)


def test_a_stored_trace_cut_short_is_refused_naming_the_episode(tmp_path: Path) -> None:
    with long_trace(tmp_path / "cut", 500) as log:
        with sqlite3.connect(tmp_path / "cut" / FILENAME) as conn:
            (blob,) = conn.execute("SELECT events FROM traces").fetchone()
            conn.execute("UPDATE traces SET events = ?", (blob[: len(blob) // 2],))
        with pytest.raises(HyloError, match="cut short") as refused:
            log.trace(EPISODE)
        assert EPISODE in str(refused.value)
