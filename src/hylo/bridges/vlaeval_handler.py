"""The vla-eval protocol for one connection of the bridge, apart from the socket: a frame in, the reply frame out.

`ConnectionHandler` decodes each frame, drives the connection's `ServedSession` and encodes the reply; the server
(`hylo.bridges.vlaeval_server`) only moves frames between the socket and the connection's thread, where this runs.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any, Protocol

from hylo.agents.vlaeval_protocol import Message, MessageType, ProtocolError, frame_header, pack, unpack
from hylo.bridges.session import EpisodeRefused, ServedSession

log = logging.getLogger(__name__)


class Greets(Protocol):
    """What a handler asks of its bridge: the HELLO reply, and how many pixels one frame may decode to."""

    max_frame_pixels: int

    def hello(self) -> dict[str, Any]: ...


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, after its type's name (what a log line or an ERROR says)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


class ConnectionHandler:
    """The protocol for one connection, independent of the socket: `handle(frame)` returns the reply frame, or
    None when the message takes none (EPISODE_START, EPISODE_END, a client's ERROR). It never raises: a failure
    while handling a message is logged, recorded against the open episode (`infra_invalid`) and, for a message that
    expects a reply (OBSERVATION, HELLO), answered with an ERROR; the connection goes on."""

    def __init__(self, bridge: Greets, session: ServedSession) -> None:
        self.bridge = bridge
        self.session = session
        # An agent that declares needs_images=False never sees any (as in driven mode): the images of
        # its frames are traced by the digest of their bytes and never decoded.
        self.decode_images = session.images

    def handle(self, frame: bytes | str) -> bytes | None:
        try:
            message = unpack(frame, decode_images=self.decode_images, max_pixels=self.bridge.max_frame_pixels)
        except ProtocolError as exc:
            return self._undecodable(frame, exc)
        except Exception as exc:
            return self._undecodable(frame, ProtocolError(f"cannot decode the frame: {first_line(exc)}"))
        try:
            return self._dispatch(message)
        except Exception as exc:
            return self._failed(message, exc)

    def _dispatch(self, message: Message) -> bytes | None:
        kind = message.type
        if kind is MessageType.OBSERVATION:
            try:
                action = self.session.act(message.payload)
            except EpisodeRefused as exc:
                return _error(str(exc), message.seq)
            return pack(MessageType.ACTION, {"actions": action}, message.seq)
        if kind is MessageType.HELLO:
            return pack(MessageType.HELLO, self.bridge.hello(), message.seq)
        if kind is MessageType.EPISODE_START:
            self.session.start(message.payload)
        elif kind is MessageType.EPISODE_END:
            self.session.end(message.payload)
        elif kind is MessageType.ERROR:
            log.warning("%s: the harness reported an error: %s", self.session.connection, message.payload)
        else:
            log.warning("%s: ignoring a %s message (a model server never receives one)", self.session.connection, kind)
        return None

    def _failed(self, message: Message, exc: Exception) -> bytes | None:
        reason = f"the bridge failed handling {message.type.value} (seq {message.seq}): {first_line(exc)}"
        detail = "".join(traceback.format_exception(exc)).strip()
        log.error("%s: %s\n%s", self.session.connection, reason, detail)
        try:
            self.session.fail(reason, detail)
        except Exception as again:
            log.error("%s: recording the failure failed too: %s", self.session.connection, first_line(again))
        if message.type in (MessageType.OBSERVATION, MessageType.HELLO):
            return _error(reason, message.seq)
        return None

    def _undecodable(self, frame: bytes | str, exc: ProtocolError) -> bytes | None:
        """Answer a frame that cannot be decoded only if it expects an answer (HELLO, OBSERVATION), with its `seq`
        when that can be read (else 0); an observation's episode cannot go on and is recorded as the harness's
        fault."""
        kind, seq = frame_header(frame)
        log.warning("%s: undecodable frame: %s", self.session.connection, exc)
        if kind == MessageType.OBSERVATION.value and self.session.in_episode:
            self.session.close(f"the harness sent an undecodable observation ({exc})")
        if kind in (MessageType.OBSERVATION.value, MessageType.HELLO.value):
            return _error(f"bad frame: {exc}", seq)
        return None


def _error(text: str, seq: int) -> bytes:
    """An ERROR frame; what UTF-8 cannot carry in `text` (a lone surrogate in an agent's message) is escaped."""
    return pack(MessageType.ERROR, {"error": text.encode("utf-8", "backslashreplace").decode("utf-8")}, seq)
