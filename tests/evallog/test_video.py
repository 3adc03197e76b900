"""Tests for hylo.evallog.video: mp4 writing with PyAV, padding, size checks, safe names."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import av
import av.logging
import numpy as np
import pytest

from hylo.evallog import video as video_mod
from hylo.evallog.video import VideoWriter, video_name

COLOUR = (200, 30, 60)


def coloured(height: int, width: int, colour: tuple[int, int, int] = COLOUR) -> np.ndarray:
    frame = np.empty((height, width, 3), dtype=np.uint8)
    frame[...] = colour
    return frame


def read_back(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


@pytest.mark.parametrize("codec", ["default", "mpeg4"])
def test_write_and_read_back(tmp_path: Path, codec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if codec == "mpeg4":
        monkeypatch.setattr(video_mod, "_codec_name", lambda: "mpeg4")
    path = tmp_path / "sub" / "ep.mp4"
    with VideoWriter(path, fps=10.0) as writer:
        for _ in range(12):
            writer.add(coloured(33, 20))  # odd height: padded to 34
        assert writer.frames == 12
    assert writer.close() == path  # idempotent
    assert sorted(p.name for p in path.parent.iterdir()) == ["ep.mp4"]  # no temporary file left behind
    frames = read_back(path)
    assert len(frames) == 12
    assert frames[0].shape == (34, 20, 3)
    mean = frames[5][:33].reshape(-1, 3).mean(axis=0)
    assert np.allclose(mean, COLOUR, atol=12), mean
    assert np.allclose(frames[5][-1].mean(axis=0), COLOUR, atol=12)  # the padded row repeats the edge


def test_odd_width_padded(tmp_path: Path) -> None:
    path = tmp_path / "w.mp4"
    writer = VideoWriter(path, fps=5)
    writer.add(coloured(20, 33))
    writer.add(coloured(20, 33, (10, 220, 10)))
    assert writer.close() == path
    frames = read_back(path)
    assert [f.shape for f in frames] == [(20, 34, 3), (20, 34, 3)]
    assert frames[1][..., 1].mean() > 180 and frames[1][..., 0].mean() < 60


def test_no_frames_no_file(tmp_path: Path) -> None:
    path = tmp_path / "none.mp4"
    with VideoWriter(path) as writer:
        assert writer.frames == 0
    assert writer.close() is None
    assert list(tmp_path.iterdir()) == []


def test_mismatched_size_raises(tmp_path: Path) -> None:
    path = tmp_path / "m.mp4"
    with VideoWriter(path) as writer:
        writer.add(coloured(33, 20))
        with pytest.raises(ValueError, match=r"32x20.*33x20"):
            writer.add(coloured(32, 20))
        writer.add(coloured(33, 20))
    assert len(read_back(path)) == 2


@pytest.mark.parametrize(
    "bad", [np.zeros((4, 4), np.uint8), np.zeros((4, 4, 4), np.uint8), np.zeros((4, 4, 3), np.float32)]
)
def test_bad_frames_rejected(tmp_path: Path, bad: np.ndarray) -> None:
    writer = VideoWriter(tmp_path / "b.mp4")
    with pytest.raises(ValueError):
        writer.add(bad)
    assert writer.close() is None


def test_closed_writer_refuses_frames(tmp_path: Path) -> None:
    writer = VideoWriter(tmp_path / "c.mp4")
    writer.add(coloured(8, 8))
    writer.close()
    with pytest.raises(RuntimeError):
        writer.add(coloured(8, 8))


def test_bad_fps() -> None:
    for fps in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            VideoWriter("x.mp4", fps=fps)


def test_quiet_even_with_pyav_logging_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    previous = av.logging.get_level()
    av.logging.set_level(av.logging.INFO)
    try:
        with caplog.at_level(logging.DEBUG, logger="libav"), VideoWriter(tmp_path / "q.mp4") as writer:
            for _ in range(3):
                writer.add(coloured(16, 16))
    finally:
        av.logging.set_level(previous)
    assert [r for r in caplog.records if r.name.startswith("libav")] == []


def test_video_name() -> None:
    name = video_name("babyai/default/GoToLocal/0003@s0", "success")
    assert name == "babyai_default_GoToLocal_0003@s0.success.mp4"
    for episode_id in ['a b/c\\d:e*f?g"h<i>j|k', "../../etc/passwd", "..", "", "ünïcode/ep 1", "x" * 1000]:
        name = video_name(episode_id, "infra_invalid")
        assert re.fullmatch(r"[A-Za-z0-9._@-]+", name), name
        assert not name.startswith(".")
        assert "/" not in name
        assert name.endswith(".infra_invalid.mp4")
        assert len(name) <= 255
    assert video_name("x" * 1000, "success") != video_name("x" * 999 + "y", "success")
    assert video_name("ep", "weird/status") == "ep.weird_status.mp4"
