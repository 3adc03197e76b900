"""The policy host's batching rule: at most B requests, closed when full, when every running episode waits, or W
after the oldest request; oldest first."""

from __future__ import annotations

import pytest

from hylo.eval.batching.batcher import Batcher, Request


def _req(client: int, at: float, serial: int = 1) -> Request:
    return Request(client, serial, {"state": client}, at)


def test_nothing_waits_nothing_is_due() -> None:
    assert Batcher(4, 0.01).due_in(0.0, running=4) is None


def test_a_batch_waits_for_more_requests_at_most_w_after_its_first() -> None:
    batcher = Batcher(4, 0.010)
    batcher.add(_req(1, at=100.0))
    batcher.add(_req(2, at=100.004))
    assert batcher.due_in(100.005, running=4) == pytest.approx(0.005)
    assert batcher.due_in(100.010, running=4) == 0.0
    assert [r.client for r in batcher.take()] == [1, 2]
    assert len(batcher) == 0


def test_a_batch_closes_as_soon_as_every_running_episode_waits() -> None:
    batcher = Batcher(4, 10.0)
    batcher.add(_req(1, at=0.0))
    assert batcher.due_in(0.0, running=2) == pytest.approx(10.0)
    batcher.add(_req(2, at=0.0))
    assert batcher.due_in(0.0, running=2) == 0.0


def test_a_full_batch_closes_and_takes_the_oldest_b() -> None:
    batcher = Batcher(2, 10.0)
    for client in (3, 1, 2):
        batcher.add(_req(client, at=float(client)))
    assert batcher.due_in(0.0, running=8) == 0.0
    assert [r.client for r in batcher.take()] == [3, 1]
    assert [r.client for r in batcher.take()] == [2]


def test_a_dropped_episode_leaves_the_queue() -> None:
    batcher = Batcher(4, 10.0)
    batcher.add(_req(1, at=0.0))
    batcher.add(_req(2, at=1.0))
    batcher.drop(1)
    assert [r.client for r in batcher.take()] == [2]


@pytest.mark.parametrize(("size", "wait", "message"), [(0, 0.01, "max_batch must be >= 1, got 0"),
                                                       (2, -1.0, "wait_s must be >= 0, got -1.0")])  # fmt: skip
def test_bad_settings_are_refused_by_name(size: int, wait: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Batcher(size, wait)
