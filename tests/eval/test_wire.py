"""The policy host's wire: messages pickled, large arrays sent out of band from their own memory."""

from __future__ import annotations

import multiprocessing
import pickle
import struct
import threading

import numpy as np
import pytest

from hylo.eval.batching import wire


@pytest.fixture
def pipe():
    sender, receiver = multiprocessing.Pipe()
    yield sender, receiver
    sender.close()
    receiver.close()


def _send_in_thread(conn, message) -> threading.Thread:
    """Send from a thread: a message larger than the socket's buffer blocks its sender until the receiver reads."""
    thread = threading.Thread(target=wire.send_message, args=(conn, message), daemon=True)
    thread.start()
    return thread


def test_an_observation_with_camera_frames_arrives_whole_and_writable(pipe):
    sender, receiver = pipe
    rng = np.random.default_rng(0)
    obs = {
        "state": rng.standard_normal(39),
        "images": {f"cam{i}": rng.integers(0, 256, (480, 640, 3), dtype=np.uint8) for i in range(4)},
        "depth": np.asfortranarray(rng.standard_normal((300, 200)).astype(np.float32)),  # Fortran order, 240 kB
        "instruction": "open the drawer",
    }
    thread = _send_in_thread(sender, ("act", 7, obs))
    op, serial, got = wire.recv_message(receiver)
    thread.join(5)
    assert (op, serial, got["instruction"]) == ("act", 7, "open the drawer")
    for name, frame in obs["images"].items():
        assert got["images"][name].dtype == np.uint8 and np.array_equal(got["images"][name], frame)
        assert got["images"][name].flags.writeable  # the agent may write to its observation, as to a pickled one
    assert np.array_equal(got["depth"], obs["depth"]) and got["depth"].flags.f_contiguous
    assert np.array_equal(got["state"], obs["state"])


def test_a_large_array_leaves_the_pickle_and_travels_as_a_frame_of_its_own(pipe):
    sender, receiver = pipe
    frame = np.arange(256 * 256 * 3, dtype=np.uint32).astype(np.uint8).reshape(256, 256, 3)
    thread = _send_in_thread(sender, {"images": {"corner": frame}})
    head = receiver.recv_bytes()  # read as raw frames: the framing itself is what is checked here
    body = receiver.recv_bytes()
    thread.join(5)
    (count,) = struct.unpack_from("!I", head)
    (size,) = struct.unpack_from("!Q", head, 4)
    assert (count, size) == (1, frame.nbytes)
    assert len(head) < 1024  # the pickle holds no pixel
    assert body == frame.tobytes()


def test_small_and_strided_arrays_stay_in_the_pickle(pipe):
    sender, receiver = pipe
    big = np.ones((512, 512), dtype=np.float32)
    message = {"state": np.zeros(39), "every_other_row": big[::2]}  # 512 kB, not contiguous
    thread = _send_in_thread(sender, message)
    head = receiver.recv_bytes()
    thread.join(5)
    assert struct.unpack_from("!I", head) == (0,)  # one frame: nothing out of band
    got = pickle.loads(head[4:])
    assert np.array_equal(got["every_other_row"], big[::2]) and np.array_equal(got["state"], np.zeros(39))


def test_a_broken_or_cut_message_is_a_lost_connection(pipe):
    sender, receiver = pipe
    sender.send_bytes(struct.pack("!IQ", 1, 100_000) + pickle.dumps("head"))
    sender.send_bytes(b"x" * 10)  # a frame of the wrong size: the stream is broken
    with pytest.raises(wire.WireError, match="frame of 10 bytes where its header said 100000"):
        wire.recv_message(receiver)
    other_sender, other_receiver = multiprocessing.Pipe()
    other_sender.send_bytes(struct.pack("!IQ", 1, 100_000) + pickle.dumps("head"))
    other_sender.close()
    with pytest.raises(EOFError):
        wire.recv_message(other_receiver)
    other_receiver.close()


def test_a_header_beyond_the_bounds_is_refused_before_anything_is_read(pipe):
    sender, receiver = pipe
    sender.send_bytes(struct.pack("!I", wire.MAX_BUFFERS + 1))
    with pytest.raises(wire.WireError, match=f"{wire.MAX_BUFFERS + 1} out-of-band buffers"):
        wire.recv_message(receiver)
    sender.send_bytes(struct.pack("!IQ", 1, wire.MAX_BUFFER_BYTES + 1) + pickle.dumps(None))
    with pytest.raises(wire.WireError, match="out-of-band buffer of"):
        wire.recv_message(receiver)
    sender.send_bytes(b"\x00")
    with pytest.raises(wire.WireError, match="too short"):
        wire.recv_message(receiver)
