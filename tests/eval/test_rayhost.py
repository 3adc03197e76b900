"""The Ray policy host's TCP listener: a peer on the network must prove the run's key, promptly, to get in."""

from __future__ import annotations

import multiprocessing.connection as mpc
import socket
import threading
import time

import pytest

pytest.importorskip("ray")

from hylo.eval import rayhost

KEY = b"k" * 32


def test_a_silent_or_keyless_peer_is_dropped_and_a_worker_with_the_key_still_gets_in(monkeypatch):
    monkeypatch.setattr(rayhost, "HANDSHAKE_S", 1)
    listener = rayhost._Listener(("127.0.0.1", 0), KEY)
    try:
        silent = socket.create_connection(listener.address)  # connects, then never answers the challenge
        with pytest.raises(OSError):
            listener.accept()
        silent.close()
        threading.Thread(target=_client, args=(listener.address, b"x" * 32, None), daemon=True).start()
        with pytest.raises(mpc.AuthenticationError):
            listener.accept()
        threading.Thread(target=_client, args=(listener.address, KEY, 1.5), daemon=True).start()
        conn = listener.accept()
        assert conn.recv() == "after a quiet spell"  # the handshake's limit does not outlive the handshake
        conn.close()
    finally:
        listener.close()


def _client(address: tuple[str, int], key: bytes, quiet_s: float | None) -> None:
    try:
        conn = mpc.Client(address, family="AF_INET", authkey=key)
    except (mpc.AuthenticationError, OSError):
        return
    if quiet_s is not None:
        time.sleep(quiet_s)
        conn.send("after a quiet spell")
    conn.close()
