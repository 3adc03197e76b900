"""`confined_file`: a file under a directory, reached through no link, or nothing."""

from __future__ import annotations

import os
from pathlib import Path, PurePath

import pytest

from hylo.confined import confined_file


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "kept" / "run").mkdir(parents=True)
    (tmp_path / "kept" / "run" / "log").write_text("mine")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret").write_text("theirs")
    return tmp_path / "kept"


def test_a_file_written_under_the_directory_is_found(root: Path) -> None:
    assert confined_file(root, "run/log") == root / "run" / "log"
    assert confined_file(root, PurePath("run", "log")) == root / "run" / "log"
    assert confined_file(root, "./run/./log") == root / "run" / "log"


@pytest.mark.parametrize(
    "name",
    ["run/missing", "run", "", ".", "../elsewhere/secret", "run/../../elsewhere/secret", "run/../run/log",
     "/etc/passwd", "run/log\x00", "x" * 300, "run/" + "x" * 5000],
)  # fmt: skip
def test_a_name_outside_missing_or_unusable_finds_nothing(root: Path, name: str) -> None:
    assert confined_file(root, name) is None


def test_a_link_at_any_step_finds_nothing_wherever_it_points(root: Path) -> None:
    (root / "run" / "to-secret").symlink_to(root.parent / "elsewhere" / "secret")
    (root / "run" / "to-log").symlink_to(root / "run" / "log")  # even to a file inside
    (root / "linked-run").symlink_to(root.parent / "elsewhere", target_is_directory=True)
    (root / "run" / "loop").symlink_to(root / "run" / "loop")
    os.mkfifo(root / "run" / "fifo")
    for name in ("run/to-secret", "run/to-log", "linked-run/secret", "run/loop", "run/fifo"):
        assert confined_file(root, name) is None, name


def test_the_directory_itself_may_be_a_link(root: Path) -> None:
    """The owner chose it (a log dir on another disk)."""
    (root.parent / "alias").symlink_to(root, target_is_directory=True)
    assert confined_file(root.parent / "alias", "run/log") == root.parent / "alias" / "run" / "log"
