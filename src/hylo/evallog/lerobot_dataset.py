"""A run's recorded rollouts written as a LeRobotDataset (v3), the format LeRobot's policies train on.

`export_dataset(run_dir, out)` writes each final episode of the run that kept a rollout (`hylo.evallog.rollouts`,
recorded with `--record-dataset`), optionally only those of some statuses: cameras as video, the observation's
vectors, `action`, `next.reward`, `next.done`, `next.success` and the task text, at the env's control rate. Each
episode's row of the dataset's episode metadata carries hylo's record of it: `hylo.run_id`, `hylo.episode_id`,
`hylo.attempt`, `hylo.status`, `hylo.reason`, `hylo.seed`. `LeRobotDataset(repo_id, root=out)` reads it back.

LeRobot (`pip install 'hylo[lerobot]'`, Python >= 3.12) is imported only here, when a dataset is written.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hylo.core.errors import HyloError
from hylo.evallog.rollouts import Feature, Rollout, rollout_path
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.store import EvalLog

INSTALL_HINT = "pip install 'hylo[lerobot]' (Python >= 3.12)"
EPISODE_COLUMNS = ("run_id", "episode_id", "attempt", "status", "reason", "seed")
"""hylo's columns in the dataset's episode metadata, each named `hylo.<column>`."""


class DatasetError(HyloError):
    """A dataset cannot be written: no recorded episode, an output that exists, LeRobot missing."""


@dataclass(frozen=True, slots=True)
class DatasetExport:
    """What an export wrote: where, how many episodes and frames, and the episodes that kept no rollout."""

    root: Path
    episodes: int
    frames: int
    unrecorded: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"root": str(self.root), "episodes": self.episodes, "frames": self.frames,
                "unrecorded": list(self.unrecorded)}  # fmt: skip


def require_lerobot() -> None:
    """Raise `DatasetError` saying how to install LeRobot when it is not importable."""
    if sys.version_info < (3, 12) or importlib.util.find_spec("lerobot") is None:
        raise DatasetError(f"writing a LeRobot dataset needs LeRobot: {INSTALL_HINT}")


def check_out(out: Path) -> None:
    """Refuse an output directory that exists: a dataset is written into a new one, never over anything."""
    if out.exists():
        raise DatasetError(f"{out} exists; a LeRobot dataset is written into a new directory")


def export_dataset(
    run_dir: Path, out: Path, *, statuses: Collection[str] | None = None, repo_id: str | None = None
) -> DatasetExport:
    """Write the run's recorded final episodes (those of `statuses`, when given) as a LeRobotDataset at `out`."""
    require_lerobot()
    check_out(out)
    with EvalLog.open(run_dir) as log:
        run_id = log.info().run_id
        final = log.final_episodes()
    chosen = [row for row in final if statuses is None or row.status.value in statuses]
    kept = [(row, rollout_path(run_dir, row.episode_id, row.attempt)) for row in chosen]
    recorded = [(row, Rollout.open(path)) for row, path in kept if path.is_dir()]
    unrecorded = tuple(row.episode_id for row, path in kept if not path.is_dir())
    if not recorded:
        which = f" of status {', '.join(sorted(statuses))}" if statuses is not None else ""
        raise DatasetError(
            f"run {run_id} has no recorded episode{which} ({len(chosen)} of {len(final)} episodes chosen, none kept "
            "its steps): record them with hylo eval ... --record-dataset DIR"
        )
    features = _features(recorded)
    try:
        frames = _write(out, repo_id or f"hylo/{run_id}", recorded, features)
        _annotate(out, run_id, [row for row, _ in recorded])
    except BaseException as exc:
        shutil.rmtree(out, ignore_errors=True)  # it did not exist: nothing of anyone's is lost
        if isinstance(exc, Exception) and not isinstance(exc, HyloError):
            raise DatasetError(f"LeRobot could not write the dataset: {type(exc).__name__}: {exc}") from exc
        raise
    return DatasetExport(out, len(recorded), frames, unrecorded)


def _write(out: Path, repo_id: str, recorded: Sequence[tuple[EpisodeRow, Rollout]], features: Sequence[Feature]) -> int:
    """Write every rollout as an episode of a new dataset at `out`; how many frames."""
    dataset = _create(out, repo_id, recorded[0][1].fps, features)
    frames = 0
    try:
        for _, rollout in recorded:
            for frame in rollout.frames():
                dataset.add_frame({**_frame(frame, features), "task": rollout.task})
            dataset.save_episode()
            frames += rollout.length
    finally:
        dataset.finalize()
    return frames


def _features(recorded: Sequence[tuple[EpisodeRow, Rollout]]) -> tuple[Feature, ...]:
    """The features every rollout shares (the first's); a rollout with others is refused, named."""
    first_row, first = recorded[0]
    for row, rollout in recorded[1:]:
        if rollout.features != first.features or rollout.fps != first.fps:
            raise DatasetError(
                f"episodes {first_row.episode_id} and {row.episode_id} recorded different features or rates "
                f"({_shown(first)} vs {_shown(rollout)}): export them into separate datasets (--status, or one "
                "run per task)"
            )
    return first.features


def _shown(rollout: Rollout) -> str:
    parts = [f"{f.name} {'x'.join(map(str, f.shape))}" for f in rollout.features]
    return f"{', '.join(parts)} at {rollout.fps:g} Hz"


def _dataset_features(features: Sequence[Feature]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for feature in features:
        if feature.kind == "image":
            out[feature.name] = {"dtype": "video", "shape": feature.shape, "names": ["height", "width", "channel"]}
        else:
            out[feature.name] = {"dtype": feature.dtype, "shape": feature.shape, "names": None}
    out["next.reward"] = {"dtype": "float32", "shape": (1,), "names": None}
    out["next.done"] = {"dtype": "bool", "shape": (1,), "names": None}
    out["next.success"] = {"dtype": "bool", "shape": (1,), "names": None}
    return out


def _frame(frame: dict[str, Any], features: Sequence[Feature]) -> dict[str, Any]:
    """A recorded frame as `add_frame` takes it (the step's scalars as 1-vectors)."""
    out = {feature.name: frame[feature.name] for feature in features}
    for key in ("next.reward", "next.done", "next.success"):
        out[key] = np.atleast_1d(frame[key])
    return out


def _create(out: Path, repo_id: str, fps: float, features: Sequence[Feature]) -> Any:
    """An empty LeRobotDataset at `out`, offline (its videos encoded as LeRobot does, through PyAV)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("SVT_LOG", "1")  # the AV1 encoder's errors only, not its settings table per video
    import datasets  # optional: the lerobot extra (datasets)
    from lerobot.datasets.lerobot_dataset import LeRobotDataset  # optional: the lerobot extra

    datasets.disable_progress_bars()

    rate = round(fps)
    if rate < 1 or abs(rate - fps) > 1e-6:
        raise DatasetError(f"a LeRobot dataset's frame rate is a whole number of frames per second; the env runs "
                           f"at {fps:g} Hz")  # fmt: skip
    return LeRobotDataset.create(
        repo_id=repo_id,
        fps=rate,
        features=_dataset_features(features),
        root=out,
        use_videos=True,
        video_backend="pyav",
    )


def _annotate(out: Path, run_id: str, rows: Sequence[EpisodeRow]) -> None:
    """Add hylo's record of each episode (`hylo.<column>`) to the dataset's episode metadata, by episode index."""
    import pyarrow as pa  # optional: the lerobot extra (pyarrow)
    import pyarrow.parquet as pq  # optional: the lerobot extra (pyarrow)

    values: dict[str, list[Any]] = {
        "run_id": [run_id] * len(rows),
        "episode_id": [row.episode_id for row in rows],
        "attempt": [row.attempt for row in rows],
        "status": [row.status.value for row in rows],
        "reason": [row.reason for row in rows],
        "seed": [row.seed for row in rows],
    }
    for path in sorted((out / "meta" / "episodes").rglob("*.parquet")):
        table = pq.read_table(path)
        index = table.column("episode_index").to_pylist()
        for column in EPISODE_COLUMNS:
            table = table.append_column(f"hylo.{column}", pa.array([values[column][i] for i in index]))
        pq.write_table(table, path)
