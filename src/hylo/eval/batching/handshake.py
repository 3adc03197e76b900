"""The policy host's door: a connection gets in once it has proved the run's key, within `HANDSHAKE_S`.

`multiprocessing.connection.Listener.accept` proves the key itself, reading the peer's answers on the accepting
thread with no limit: one peer that connects and stays silent (or sends half an answer) held that thread, and with
it every worker's connection, until the run gave up on its host. Here the accepting thread only accepts; each
connection proves the key (the same challenges, both ways) on a thread of its own, and one still at it when its
`HANDSHAKE_S` are up is shut, however slowly it was trickling bytes. At most `MAX_PENDING` handshakes run at once;
a connection past them is closed at once (a worker retries its connection until its host answers).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection as mpc
import os
import socket
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

HANDSHAKE_S = 5.0
"""How long a connection has to prove the run's key (a worker's takes a few milliseconds)."""

MAX_PENDING = 64
"""The most connections proving the key at once."""


class Door:
    """Accepts connections on `listener` (one made without a key: the key is proved here) and hands each that proves
    `authkey` in time to `admit`."""

    def __init__(
        self,
        listener: mpc.Listener,
        authkey: bytes,
        admit: Callable[[mpc.Connection], None],
        *,
        timeout_s: float | None = None,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self.listener = listener
        self.authkey = authkey
        self.admit = admit
        self.timeout_s = HANDSHAKE_S if timeout_s is None else timeout_s
        self.max_pending = max_pending
        self.closing = False
        self._pending = threading.BoundedSemaphore(max_pending)

    def serve(self) -> None:
        """Accept until `closing` (the listener closed under it ends its last `accept`)."""
        while not self.closing:
            try:
                conn = self.listener.accept()
            except (OSError, EOFError):
                continue
            if not self._pending.acquire(blocking=False):
                logger.warning("%d connections are proving the key already: one more closed", self.max_pending)
                conn.close()
                continue
            threading.Thread(target=self._prove, args=(conn,), daemon=True, name="hylo-host-handshake").start()

    def _prove(self, conn: mpc.Connection) -> None:
        deadline = _Deadline(conn, self.timeout_s)
        try:
            mpc.deliver_challenge(conn, self.authkey)
            mpc.answer_challenge(conn, self.authkey)
        except (OSError, EOFError, multiprocessing.AuthenticationError) as exc:
            deadline.finish()
            conn.close()
            logger.debug("a connection did not prove the key: %r", exc)
            return
        finally:
            self._pending.release()
        if not deadline.finish() or self.closing:
            conn.close()
            return
        self.admit(conn)


class _Deadline:
    """Shuts a connection's socket (ending any read on it) when `seconds` pass before `finish`."""

    def __init__(self, conn: mpc.Connection, seconds: float) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._done = False
        self._expired = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self._expired = True
            shut(self._conn)

    def finish(self) -> bool:
        """Stop the clock; whether the connection was still in time."""
        with self._lock:
            self._done = True
        self._timer.cancel()
        return not self._expired


def shut(conn: mpc.Connection) -> None:
    """Shut a connection's socket both ways: a thread blocked reading it reads its end at once."""
    with contextlib.suppress(OSError):
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()
