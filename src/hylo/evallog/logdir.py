"""A log dir's layout: one directory per run (holding its EvalLog, `FILENAME`) beside the files the log dir keeps
for itself (the job queue, the saved graphs), whose names are never a run id; and finding its runs by name.

Apart from the EvalLog (`hylo.evallog.store`) because the job queue, the server and the CLI check these names and paths
without reading a run.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePath
from typing import Any

from hylo.confined import confined_file
from hylo.core.errors import HyloError, shown

FILENAME = "evallog.sqlite"
"""A run's EvalLog, in the run's own directory `<log dir>/<run_id>/`."""

# The names a log dir holds besides its runs: one run directory per run id, and these.
JOBS_DIR = "jobs"
"""Each job's spec, stdout and stderr (`hylo.jobs`), in `jobs/<job_id>/`."""
JOBS_DB = "jobs.sqlite"
"""The job queue (`hylo.jobs`)."""
JOBS_LOCK = "jobs.lock"
"""Held by the job scheduler that owns the log dir."""
GRAPHS_DIR = "graphs"
"""The graphs `hylo serve` saves."""
AB_DIR = "ab"
"""The A/B comparisons' records (`hylo.experiments.ab`), `ab/<ab id>.json`."""
SWEEPS_DIR = "sweeps"
"""The latency sweeps' records and plots (`hylo.experiments.sweep`), `sweeps/<sweep id>/`."""
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
NAME_MAX_BYTES = 255
"""The longest file name most file systems hold, in bytes of UTF-8: a run id names a directory."""

RESERVED_NAMES = frozenset(
    {JOBS_DIR, JOBS_LOCK, GRAPHS_DIR, AB_DIR, SWEEPS_DIR}
    | {f"{database}{suffix}" for database in (JOBS_DB, FILENAME) for suffix in ("", *_SQLITE_SIDE_FILES)}
)
"""Names that are never a run id: a run by one of these names would share its directory with the log dir's own files
(or, for the EvalLog's, be mistaken for a run's)."""


class RunNotFound(HyloError, LookupError):
    pass


class ReservedRunId(HyloError, ValueError):
    """A run id that names one of the log dir's own files."""


class BadLogDir(HyloError, ValueError):
    """A log dir that is not a directory, or cannot become one."""


def is_reserved(name: str) -> bool:
    """Whether `name` is one of `RESERVED_NAMES`, in any case (a case-insensitive file system holds one of each)."""
    return name.casefold() in RESERVED_NAMES


def is_run_name(name: str) -> bool:
    """Whether `name` may name a run (its id, or a prefix of one): letters, digits, '-', '_' and '.', not first, at
    most `NAME_MAX_BYTES` as UTF-8. Anything else would be a path out of the log dir, or a name the file system
    refuses (`ENAMETOOLONG`) wherever the run is looked up."""
    return (
        bool(name)
        and not name.startswith(".")
        and all(c.isalnum() or c in "-_." for c in name)
        and len(name.encode()) <= NAME_MAX_BYTES
    )


def check_run_id(run_id: str) -> str:
    """`run_id`, unless it is reserved (raises `ReservedRunId` naming it)."""
    if is_reserved(run_id):
        raise ReservedRunId(
            f"run id {run_id!r} is reserved: the log dir keeps its own files by that name; choose another"
        )
    return run_id


def check_log_dir(log_dir: Path, *, writable: bool = False) -> Path:
    """`log_dir`, if it can hold runs: a directory, or a path that can become one (its nearest existing parent is a
    directory). With `writable`, this process must also be allowed to write there. Raises `BadLogDir` naming it, so a
    bad path is refused before anything runs instead of failing the run that would be written there."""
    try:
        if log_dir.exists():
            if not log_dir.is_dir():
                raise BadLogDir(f"log dir {str(log_dir)!r} is not a directory")
            if writable and not os.access(log_dir, os.W_OK | os.X_OK):
                raise BadLogDir(f"log dir {str(log_dir)!r} is not writable")
            return log_dir
        parent = next(p for p in log_dir.absolute().parents if p.exists())
    except OSError as exc:
        raise BadLogDir(f"log dir {str(log_dir)!r} cannot be read: {exc.strerror or exc}") from None
    if not parent.is_dir():
        raise BadLogDir(f"log dir {str(log_dir)!r} cannot be created: {str(parent)!r} is not a directory")
    if writable and not os.access(parent, os.W_OK | os.X_OK):
        raise BadLogDir(f"log dir {str(log_dir)!r} cannot be created: {str(parent)!r} is not writable")
    return log_dir


def _holds_run(log_dir: Path, name: str) -> bool:
    """Whether `log_dir/name` is a run's directory: its EvalLog there, neither of them a link (a link planted in the
    log dir is not one of its runs, wherever it points)."""
    return not is_reserved(name) and confined_file(log_dir, PurePath(name, FILENAME)) is not None


def run_dirs(log_dir: Path) -> Iterator[Path]:
    """The run directories in `log_dir`: those holding an EvalLog, under a name that is not reserved."""
    if not log_dir.is_dir():
        return
    for child in sorted(log_dir.iterdir()):
        if _holds_run(log_dir, child.name):
            yield child


def find_run(log_dir: Path, run: str) -> Path:
    """The directory of run `run` (its id, or a unique prefix of it)."""
    if not is_run_name(run):
        raise RunNotFound(f"no run {shown(run)}: a run id holds letters, digits, '-', '_' and '.' (not first), at "
                          f"most {NAME_MAX_BYTES} bytes")  # fmt: skip
    if _holds_run(log_dir, run):
        return log_dir / run
    matches = [d for d in run_dirs(log_dir) if d.name.startswith(run)]
    if len(matches) == 1:
        return matches[0]
    known = [d.name for d in run_dirs(log_dir)]
    if matches:
        raise RunNotFound(f"run {run!r} is ambiguous in {log_dir}: {', '.join(d.name for d in matches)}")
    raise RunNotFound(f"no run {run!r} in {log_dir}; runs there: {', '.join(known) or 'none'}")


def delete_run(log_dir: Path, run: str) -> Path:
    run_dir = find_run(log_dir, run)
    shutil.rmtree(run_dir)
    return run_dir


def records_oldest_first(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The JSON records (A/B comparisons, sweeps) at `paths`, oldest written first; a file that no longer reads as
    a record is left out."""
    found = []
    for path in paths:
        try:
            written, record = path.stat().st_mtime, json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            found.append((written, record))
    return [record for _, record in sorted(found, key=lambda entry: entry[0])]
