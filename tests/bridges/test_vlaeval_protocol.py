"""hylo's own codec for vla-eval frames reads what vla-eval writes and writes what vla-eval reads."""

from __future__ import annotations

import io

import msgpack
import numpy as np
import pytest
from PIL import Image
from vla_eval.protocol.messages import Message as VlaMessage
from vla_eval.protocol.messages import MessageType as VlaType
from vla_eval.protocol.messages import pack_message, unpack_message

from hylo.agents import vlaeval_protocol
from hylo.agents.vlaeval_protocol import MessageType, ProtocolError, UndecodedImage, pack, unpack


def image(channels: int) -> np.ndarray:
    return np.random.default_rng(channels).integers(0, 256, size=(6, 5, channels), dtype=np.uint8)


@pytest.mark.parametrize("channels", [3, 4])
def test_png_images_from_vla_eval_decode_exactly(channels: int) -> None:
    frame = pack_message(
        VlaMessage(VlaType.OBSERVATION, {"images": {"cam": image(channels)}, "state": np.arange(3.0)}, 9)
    )
    message = unpack(frame)
    assert message.type is MessageType.OBSERVATION and message.seq == 9
    np.testing.assert_array_equal(message.payload["images"]["cam"], image(channels))
    np.testing.assert_array_equal(message.payload["state"], np.arange(3.0))


def test_single_channel_png_and_raw_images_decode_to_hwc() -> None:
    buffer = io.BytesIO()
    Image.fromarray(image(1)[:, :, 0]).save(buffer, format="PNG")
    png = {"__image__": True, "format": "png", "data": buffer.getvalue(), "shape": [6, 5, 1]}
    raw = {"__image__": True, "format": "raw", "data": image(1).tobytes(), "dtype": "|u1", "shape": [6, 5, 1]}
    frame = msgpack.packb({"type": "observation", "payload": {"a": png, "b": raw}, "seq": 1, "timestamp": 0.0})
    payload = unpack(frame).payload
    np.testing.assert_array_equal(payload["a"], image(1))
    np.testing.assert_array_equal(payload["b"], image(1))


def test_hylo_frames_decode_in_vla_eval() -> None:
    sent = {"images": {"rgb": image(3), "rgba": image(4), "grey": image(1)}, "state": np.arange(4, dtype=np.float32)}
    message = unpack_message(pack(MessageType.OBSERVATION, sent, 5, images=True))
    assert message.type is VlaType.OBSERVATION and message.seq == 5
    np.testing.assert_array_equal(message.payload["images"]["rgb"], image(3))
    np.testing.assert_array_equal(message.payload["images"]["rgba"], image(4))
    np.testing.assert_array_equal(message.payload["images"]["grey"].reshape(6, 5, 1), image(1))
    action = unpack_message(pack(MessageType.ACTION, {"actions": np.ones((2, 7), dtype=np.float32)}, 5))
    assert action.payload["actions"].shape == (2, 7) and action.payload["actions"].dtype == np.float32


def test_object_arrays_and_malformed_frames_are_refused_with_the_reason() -> None:
    evil = {"__ndarray__": True, "data": b"", "dtype": "|O", "shape": [0]}
    frame = msgpack.packb({"type": "observation", "payload": {"x": evil}, "seq": 1, "timestamp": 0.0})
    with pytest.raises(ProtocolError, match="dtype object refused"):
        unpack(frame)
    with pytest.raises(ProtocolError, match="unknown message type 'bogus'"):
        unpack(msgpack.packb({"type": "bogus", "payload": {}, "seq": 1, "timestamp": 0.0}))
    with pytest.raises(ProtocolError, match="lacks"):
        unpack(msgpack.packb({"type": "hello"}))
    short = {"__ndarray__": True, "data": b"abc", "dtype": "<f8", "shape": [1]}
    with pytest.raises(ProtocolError, match="does not fit"):
        unpack(msgpack.packb({"type": "action", "payload": {"x": short}, "seq": 1, "timestamp": 0.0}))


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def _observation(payload: dict) -> bytes:
    return msgpack.packb({"type": "observation", "payload": payload, "seq": 1, "timestamp": 0.0})


def test_a_compressed_image_larger_than_declared_or_than_the_cap_is_refused_before_decoding(monkeypatch) -> None:
    bomb = {"__image__": True, "format": "png", "data": _png(np.zeros((300, 200, 4), np.uint8)), "shape": [8, 8, 3]}
    with pytest.raises(ProtocolError, match=r"png image is \[300, 200, 4\].*declares \[8, 8, 3\]"):
        unpack(_observation({"images": {"cam": bomb}}))
    monkeypatch.setattr(vlaeval_protocol, "MAX_IMAGE_PIXELS", 1000)
    honest = {**bomb, "shape": [300, 200, 4]}
    with pytest.raises(ProtocolError, match="300x200 pixels refused: over the 1000 pixel limit"):
        unpack(_observation({"images": {"cam": honest}}))
    with pytest.raises(ProtocolError, match="bad shape None"):
        unpack(_observation({"images": {"cam": {**honest, "shape": None}}}))


def test_an_array_must_be_exactly_as_large_as_its_declared_shape() -> None:
    for shape in ([-1], [2, -4], ["3"]):
        frame = {"__ndarray__": True, "data": b"\0" * 8, "dtype": "<f8", "shape": shape}
        with pytest.raises(ProtocolError, match="bad shape"):
            unpack(_observation({"x": frame}))
    frame = {"__ndarray__": True, "data": b"\0" * 8, "dtype": "<f8", "shape": [1000000, 1000000]}
    with pytest.raises(ProtocolError, match=r"of 8 bytes does not fit dtype float64 shape \[1000000, 1000000\]"):
        unpack(_observation({"x": frame}))


def test_non_numeric_arrays_are_never_sent() -> None:
    with pytest.raises(ProtocolError, match="dtype object"):
        pack(MessageType.ACTION, {"actions": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(ProtocolError, match="dtype <U5"):
        pack(MessageType.ACTION, {"actions": np.array(["hello"])})


def test_skipping_images_skips_only_those_under_images_and_deep_frames_are_protocol_errors() -> None:
    camera, mask = image(3), image(1)
    frame = pack(MessageType.OBSERVATION, {"images": {"cam": camera}, "mask": mask}, 3, images=True)
    payload = unpack(frame, decode_images=False).payload
    assert isinstance(payload["images"]["cam"], UndecodedImage) and payload["images"]["cam"].shape == (6, 5, 3)
    np.testing.assert_array_equal(payload["mask"], mask)
    nested: list = [0]
    for _ in range(1000):
        nested = [nested]
    with pytest.raises(ProtocolError, match="nested too deeply"):
        unpack(_observation({"x": nested}))


def test_the_images_of_a_frame_share_one_pixel_budget_checked_before_any_is_decoded(monkeypatch) -> None:
    camera = {"__image__": True, "format": "png", "data": _png(np.zeros((30, 20, 3), np.uint8)), "shape": [30, 20, 3]}
    frame = _observation({"images": {"a": camera, "b": camera}, "mask": camera})
    decoded: list[object] = []
    real = vlaeval_protocol.decode_image
    monkeypatch.setattr(vlaeval_protocol, "decode_image", lambda image: decoded.append(image) or real(image))
    with pytest.raises(ProtocolError, match="3 compressed images declare 1800 pixels together, over the 1799 pixel"):
        unpack(frame, max_pixels=1799)
    assert decoded == []
    assert unpack(frame, max_pixels=1800).payload["mask"].shape == (30, 20, 3) and len(decoded) == 3
    payload = unpack(frame, decode_images=False, max_pixels=600).payload  # the cameras kept compressed cost nothing
    assert isinstance(payload["images"]["a"], UndecodedImage) and payload["mask"].shape == (30, 20, 3)


def test_a_frame_is_bounded_in_values_string_length_and_nesting() -> None:
    def nested(depth: int) -> object:
        value: object = 0
        for _ in range(depth):
            value = [value]
        return value

    assert unpack(_observation({"x": nested(31)})).payload["x"] == nested(31)  # the payload itself is one level
    with pytest.raises(ProtocolError, match=r"nested too deeply \(more than 32 levels"):
        unpack(_observation({"x": nested(32)}))
    head = msgpack.packb({"type": "observation", "seq": 1, "timestamp": 0.0})
    deep = bytes([head[0] + 1]) + head[1:] + msgpack.packb("payload") + b"\x81\xa1x" + b"\x91" * 5000 + b"\x00"
    with pytest.raises(ProtocolError, match="nested too deeply"):
        unpack(deep)  # past msgpack's own limit
    empties = _observation({"x": [{}] * 60_000})
    assert len(empties) < 70_000  # a byte each on the wire
    with pytest.raises(ProtocolError, match=f"a frame of {len(empties)} bytes holds more than 100000 values"):
        unpack(empties)
    with pytest.raises(ProtocolError, match=r"1048577 exceeds max_str_len\(1048576\)"):
        unpack(_observation({"x": "y" * (2**20 + 1)}))
    assert len(unpack(_observation({"x": "y" * 2**20})).payload["x"]) == 2**20


def test_the_header_of_a_refused_frame_is_read_without_building_its_payload() -> None:
    frame = msgpack.packb({"type": "observation", "payload": {"x": [{}] * 200_000}, "seq": 2**64 - 1})
    with pytest.raises(ProtocolError):
        unpack(frame)
    assert vlaeval_protocol.frame_header(frame) == ("observation", 2**64 - 1)
    assert vlaeval_protocol.frame_header(msgpack.packb([1, 2])) == (None, 0)
    assert vlaeval_protocol.frame_header(b"") == (None, 0)
    assert vlaeval_protocol.frame_header(msgpack.packb({"type": 3, "seq": True})) == (None, 0)
