"""The Ray policy host's TCP listener: a peer on the network must prove the run's key, promptly, to get in, and one
that does not never holds up a worker that does."""

from __future__ import annotations

import multiprocessing.connection as mpc
import queue
import socket
import threading

import pytest

pytest.importorskip("ray")

from hylo.eval import rayhost
from hylo.eval.batching.handshake import Door

KEY = b"k" * 32


def test_a_silent_or_keyless_peer_is_dropped_and_a_worker_with_the_key_still_gets_in() -> None:
    listener = rayhost._Listener(("127.0.0.1", 0))
    admitted: queue.Queue[mpc.Connection] = queue.Queue()
    door = Door(listener, KEY, admitted.put, timeout_s=1.0)
    threading.Thread(target=door.serve, daemon=True).start()
    try:
        silent = socket.create_connection(listener.address, timeout=60)  # connects, then never answers
        with pytest.raises(mpc.AuthenticationError):
            mpc.Client(listener.address, family="AF_INET", authkey=b"x" * 32)
        worker = mpc.Client(listener.address, family="AF_INET", authkey=KEY)  # while the silent one is held open
        conn = admitted.get(timeout=60)
        assert not worker.poll(2.0)  # quiet past the handshake's limit: still in
        worker.send("after a quiet spell")
        assert conn.recv() == "after a quiet spell"
        assert conn.fileno() >= 0 and _no_delay(conn)  # a message leaves at once, not after a delayed ack
        while silent.recv(4096):  # the challenge, then the end: the listener shut it
            pass
        assert admitted.empty()
    finally:
        door.closing = True
        listener.close()


def _no_delay(conn: mpc.Connection) -> bool:
    sock = socket.socket(fileno=conn.fileno())
    try:
        return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    finally:
        sock.detach()
