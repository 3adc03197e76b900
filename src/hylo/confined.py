"""Files a server hands out from a directory it keeps (its log dir, its saved graphs): only those written there.

A symbolic link planted in such a directory would otherwise make the server read, and answer with, whatever the link
points at: another user's file, or one of the server's own outside what it serves. Following no link below the
directory, and no `..`, keeps every file it finds inside it without resolving anything.

This module is a leaf: paths in, a path or None out.
"""

from __future__ import annotations

import stat
from pathlib import Path, PurePath


def confined_file(root: Path, relative: str | PurePath) -> Path | None:
    """`root / relative` when it is a regular file reached from `root` through no symbolic link; else None: missing,
    not a regular file, a link at any step below `root` (`root` itself may be one: the owner chose it), or a name
    that is absolute, climbs with `..` or that the file system refuses (too long, a NUL byte)."""
    name = PurePath(relative)
    if name.is_absolute() or not name.parts or ".." in name.parts:
        return None
    path = root
    try:
        for part in name.parts[:-1]:
            path = path / part
            if not stat.S_ISDIR(path.lstat().st_mode):
                return None
        path = path / name.parts[-1]
        return path if stat.S_ISREG(path.lstat().st_mode) else None
    except (OSError, ValueError):  # ValueError: a NUL byte in the name
        return None
