"""The content hash of a file or a directory tree that an agent's arguments name (a checkpoint, a config, a model
directory), so that a run records what it loaded.

A file is hashed whole (sha256, about 1 GB/s on one core with the CPU's SHA instructions), once per process: a
memo keyed by (path, size, mtime_ns, inode, ctime_ns) answers again for a file that did not change. A directory is
hashed as its sorted relative names with each entry's content: a symbolic link by the text it points to (never
followed, so a tree cannot reach out of itself), anything else that is not a file by its kind. A tree too large to
read at each run start (more than `MAX_TREE_FILES` files or `MAX_TREE_BYTES` bytes) is fingerprinted by each
file's name, size and modification time instead, and says so (`method` `stat`); one with more than
`MAX_TREE_ENTRIES` entries is refused.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from hylo.core.errors import HyloError

CHUNK = 1 << 20
"""Bytes read at a time."""
MAX_TREE_FILES = 10_000
"""A directory of more files than this is fingerprinted by its files' names, sizes and times, not read."""
MAX_TREE_BYTES = 64 << 30
"""A directory of more bytes than this (64 GiB) is fingerprinted by its files' names, sizes and times, not read."""
MAX_TREE_ENTRIES = 1_000_000
"""The most entries a directory an agent's arguments name may hold."""

_MEMO: dict[tuple[str, int, int, int, int], str] = {}
"""A file's sha256 by (path, size, mtime_ns, inode, ctime_ns): hashed once per process while it stays the same."""


class TreeTooLarge(HyloError, ValueError):
    """A directory with more than `MAX_TREE_ENTRIES` entries."""


@dataclass(frozen=True)
class ContentHash:
    """A file's or a tree's hash; `files` counts a tree's files (None for a file); `method` is `content` (every
    byte read) or `stat` (a tree over the size bounds: names, sizes, modification times)."""

    hash: str
    size: int
    files: int | None = None
    method: str = "content"


def file_hash(path: Path) -> ContentHash:
    """The sha256 of the file at `path` (memoised while its size, times and inode stay the same)."""
    info = path.stat()
    key = (str(path.resolve()), info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
    digest = _MEMO.get(key)
    if digest is None:
        digest = _read_hash(path)
        _MEMO[key] = digest
    return ContentHash(digest, info.st_size)


def _read_hash(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def tree_hash(root: Path, *, exclude: Path | None = None) -> ContentHash:
    """The hash of the directory tree at `root`: sorted relative names with each entry's content (see the module's
    docstring); `exclude` (a directory inside it, such as the log dir its runs are written to) is left out."""
    entries = _entries(root, exclude.resolve() if exclude is not None else None)
    files = [(name, info) for name, _, info in entries if stat.S_ISREG(info.st_mode)]
    size = sum(info.st_size for _, info in files)
    method = "stat" if len(files) > MAX_TREE_FILES or size > MAX_TREE_BYTES else "content"
    sha = hashlib.sha256()
    for name, path, info in entries:
        sha.update(name.encode("utf-8", "surrogateescape") + b"\0")
        sha.update(_entry(path, info, method).encode() + b"\n")
    return ContentHash(sha.hexdigest(), size, len(files), method)


def _entries(root: Path, exclude: Path | None) -> list[tuple[str, Path, os.stat_result]]:
    """Every entry below `root` as (relative name, path, lstat), sorted by name; links are not followed."""
    found: list[tuple[str, Path, os.stat_result]] = []
    for directory, dirs, names in os.walk(root, followlinks=False):
        here = Path(directory)
        if exclude is not None and here.resolve() == exclude.parent:  # left out whether or not it exists yet
            dirs[:] = [name for name in dirs if name != exclude.name]
            names = [name for name in names if name != exclude.name]
        dirs.sort()
        for name in [*dirs, *names]:
            path = here / name
            found.append((path.relative_to(root).as_posix(), path, path.lstat()))
        if len(found) > MAX_TREE_ENTRIES:
            raise TreeTooLarge(f"directory {str(root)!r} holds more than {MAX_TREE_ENTRIES:,} entries")
    return sorted(found, key=lambda entry: entry[0])


def _entry(path: Path, info: os.stat_result, method: str) -> str:
    """What the tree's hash records of one entry."""
    if stat.S_ISLNK(info.st_mode):
        return f"link {os.readlink(path)}"
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    if not stat.S_ISREG(info.st_mode):
        return "other"
    if method == "stat":
        return f"file {info.st_size} {info.st_mtime_ns}"
    return f"file {file_hash(path).hash}"
