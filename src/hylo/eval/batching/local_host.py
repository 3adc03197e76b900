"""A policy host in the calling process: a live agent object (a training loop's policy) served to the env workers.

`hylo.evaluate(..., agent=policy, workers=N)` runs the episodes in N worker processes, as any run does, while the
policy stays where it is, in the caller's memory (it is never pickled or loaded again): a thread of the calling
process serves it exactly as a policy-host process serves a built agent (`host.Host`: one `EpisodeContext` per
episode, `act_batch` calls of at most B requests). When the run ends the thread stops and the caller goes on with its
object. Unlike a host process it is not restarted: an `act_batch` that raises ends that batch's episodes `error`.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection as mpc
import os
import shutil
import tempfile
import threading
from typing import Any

from hylo.eval.batching.batcher import Batcher
from hylo.eval.batching.host import FIGURES_SIZE, Host, NotBatched
from hylo.eval.batching.proxy import HostEndpoint
from hylo.eval.batching.supervisor import BatchFigures, HostFailed, figures_of


class LocalPolicyHost:
    """Serves `agent` (built, live) from a thread of this process; `start`, `close` and `figures` as `PolicyHost`."""

    def __init__(self, agent: Any, max_batch: int, wait_s: float) -> None:
        self.agent = agent
        self.max_batch = max_batch
        self.wait_s = wait_s
        self._dir = tempfile.mkdtemp(prefix="hylo-host-")
        self.endpoint = HostEndpoint(os.path.join(self._dir, "host.sock"), os.urandom(32))
        self._figures = [0.0] * FIGURES_SIZE
        self._stop: mpc.Connection | None = None
        self._thread: threading.Thread | None = None
        self._host: Host | None = None
        self.restarts = 0

    def start(self) -> None:
        """Start serving; raise `HostFailed` for an object a host cannot serve (no `act_batch`)."""
        listener = mpc.Listener(self.endpoint.address, family="AF_UNIX")
        control, self._stop = mpc.Pipe()
        try:
            self._host = Host(control, listener, self.endpoint.authkey, lambda: self.agent,
                              Batcher(self.max_batch, self.wait_s), self._figures)  # fmt: skip
        except NotBatched as exc:
            listener.close()
            self.close()
            raise HostFailed(f"{exc} (a live agent object serves several workers through act_batch)") from None
        self._thread = threading.Thread(target=self._serve, daemon=True, name="hylo-live-host")
        self._thread.start()

    def _serve(self) -> None:
        assert self._host is not None
        try:
            self._host.serve()
        finally:
            self._host.close()

    def close(self) -> None:
        if self._stop is not None:
            with contextlib.suppress(OSError):
                self._stop.send(("stop",))
        if self._thread is not None:
            self._thread.join(30)
        if self._stop is not None:
            self._stop.close()
            self._stop = None
        shutil.rmtree(self._dir, ignore_errors=True)

    def figures(self) -> BatchFigures:
        return figures_of(self._figures, self.restarts)
