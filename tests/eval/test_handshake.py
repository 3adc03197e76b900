"""The policy host's door: a peer that does not prove the run's key promptly is shut out, and never holds up the
workers that do."""

from __future__ import annotations

import multiprocessing.connection as mpc
import os
import queue
import socket
import threading
from pathlib import Path

import pytest

from hylo.eval.batching.handshake import Door

KEY = os.urandom(32)


@pytest.fixture
def door(tmp_path: Path):
    """A door on a Unix socket with a one-second handshake; what it admits lands in `admitted`."""
    listener = mpc.Listener(str(tmp_path / "host.sock"), family="AF_UNIX")
    admitted: queue.Queue[mpc.Connection] = queue.Queue()
    opened = Door(listener, KEY, admitted.put, timeout_s=1.0)
    threading.Thread(target=opened.serve, daemon=True).start()
    yield listener.address, admitted
    opened.closing = True
    listener.close()


def _raw(address: str) -> socket.socket:
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    peer.connect(address)
    peer.settimeout(60)  # generous: the door shuts it after one second
    return peer


def _shut_by_the_host(peer: socket.socket) -> bool:
    """Whether the host closed `peer`'s connection (it reads to the end; a timeout means it is still open)."""
    try:
        while peer.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


def test_silent_and_trickling_peers_are_shut_out_and_workers_get_in_meanwhile(door) -> None:
    address, admitted = door
    silent = [_raw(address) for _ in range(3)]  # connect, and never answer the challenge
    trickling = _raw(address)
    trickling.sendall(b"\x00\x00")  # half of a message's length: the host waits for the rest
    workers = [mpc.Client(address, family="AF_UNIX", authkey=KEY) for _ in range(2)]  # while those are held open
    greeted = [admitted.get(timeout=60) for _ in workers]
    for worker, conn in zip(workers, greeted, strict=True):
        conn.send("hello")
        assert worker.recv() == "hello"
    assert all(_shut_by_the_host(peer) for peer in [*silent, trickling])
    assert admitted.empty()


def test_a_peer_without_the_key_is_refused_and_one_with_it_stays_in_past_the_handshakes_limit(door) -> None:
    address, admitted = door
    with pytest.raises(mpc.AuthenticationError):
        mpc.Client(address, family="AF_UNIX", authkey=b"x" * 32)
    worker = mpc.Client(address, family="AF_UNIX", authkey=KEY)
    conn = admitted.get(timeout=60)
    assert not worker.poll(2.0)  # quiet for longer than the handshake may take: the connection is not shut
    worker.send("after a quiet spell")
    assert conn.recv() == "after a quiet spell"
    assert admitted.empty()
