"""Rollouts as LeRobot datasets: `hylo eval ... --record-dataset DIR` and `hylo runs export RUN --format lerobot`,
read back with LeRobot's own loader: episodes, frame counts, actions and statuses are the EvalLog's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("lerobot", reason="the lerobot extra installs on Python >= 3.12")

from lerobot.datasets.lerobot_dataset import LeRobotDataset

from hylo.cli import main
from hylo.eval import EvalLog

PUSHT = "gym:gym_pusht/PushT-v0"


def _hylo(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _read(root: Path) -> Any:
    return LeRobotDataset("hylo/test", root=root, video_backend="pyav")


def _episodes(run_dir: Path) -> dict[str, tuple[str, int, list[Any]]]:
    """Each final episode's status, steps and the actions hylo sent its env (the trace's)."""
    with EvalLog.open(run_dir) as log:
        return {
            row.episode_id: (
                row.status.value,
                row.steps,
                [e["action"] for e in log.trace(row.episode_id, row.attempt) if e["event"] == "action"],
            )
            for row in log.final_episodes()
        }


def _matches_the_log(dataset: Any, run_dir: Path, statuses: set[str] | None = None) -> None:
    logged = _episodes(run_dir)
    chosen = {eid: v for eid, v in logged.items() if statuses is None or v[0] in statuses}
    episodes = dataset.meta.episodes
    assert sorted(episodes["hylo.episode_id"]) == sorted(chosen)
    assert set(episodes["hylo.run_id"]) == {run_dir.name}
    frames = dataset.hf_dataset.with_format("numpy")
    for index, (episode_id, status, length) in enumerate(
        zip(episodes["hylo.episode_id"], episodes["hylo.status"], episodes["length"], strict=True)
    ):
        logged_status, steps, actions = chosen[episode_id]
        assert (status, length) == (logged_status, steps)
        rows = frames.filter(lambda row, i=index: row["episode_index"] == i)
        assert np.array_equal(np.stack(rows["action"]), np.asarray(actions, dtype=np.float32))
        assert list(rows["frame_index"]) == list(range(steps))
        done = np.asarray(rows["next.done"]).reshape(-1)
        assert done[-1] and not done[:-1].any()


def test_record_dataset_writes_a_meta_world_run_that_lerobot_reads_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    out = tmp_path / "dataset"
    code, stdout, _ = _hylo(capsys, "eval", "metaworld", "--task", "reach-v3", "--agent", "random", "--episodes", "3",
                            "--max-steps", "15", "--workers", "2", "--log-dir", str(tmp_path / "runs"),
                            "--record-dataset", str(out), "--json")  # fmt: skip
    assert code == 0
    result = json.loads(stdout)  # one JSON object: LeRobot's encoders print to stderr
    assert result["dataset"] == {"root": str(out), "episodes": 3, "frames": 45, "unrecorded": []}
    dataset = _read(out)
    assert (dataset.num_episodes, dataset.num_frames, dataset.fps) == (3, 45, 80)
    assert dataset.meta.camera_keys == ["observation.image"]  # the random agent took no images; the dataset has them
    _matches_the_log(dataset, tmp_path / "runs" / result["run_id"])
    first = dataset[0]
    assert tuple(first["observation.image"].shape) == (3, 128, 128)  # decoded from the dataset's video
    assert tuple(first["observation.state"].shape) == (4,)
    assert first["task"] == "reach the red goal position"


def test_runs_export_writes_a_pusht_run_by_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    runs = tmp_path / "runs"
    import hylo

    result = hylo.evaluate(PUSHT, env_args={"obs_type": "pixels_agent_pos"}, agent="random", episodes=3,
                           max_steps=10, log_dir=str(runs), record_rollouts=True)  # fmt: skip
    run_dir = Path(result.log_dir)
    statuses = {row.status.value for row in result.episodes}
    out = tmp_path / "all"
    code, stdout, _ = _hylo(capsys, "runs", "export", result.run_id, "--log-dir", str(runs), "--format", "lerobot",
                            "--out", str(out), "--status", *sorted(statuses))  # fmt: skip
    assert (code, stdout.strip()) == (0, f"dataset: {out} (3 episodes, 30 frames)")
    dataset = _read(out)
    assert dataset.meta.camera_keys == ["observation.image"]  # pixels; the agent's render frame is not in its obs
    _matches_the_log(dataset, run_dir, statuses)
    missing = next(s for s in ("success", "timeout", "failure") if s not in statuses)
    code, _, err = _hylo(capsys, "runs", "export", result.run_id, "--log-dir", str(runs), "--format", "lerobot",
                         "--out", str(tmp_path / "none"), "--status", missing)  # fmt: skip
    assert code == 2
    assert f"has no recorded episode of status {missing}" in err
    assert not (tmp_path / "none").exists()


def test_an_extended_run_exports_the_episodes_it_recorded_and_names_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    import hylo

    common: dict[str, Any] = dict(agent="random", tasks=["reach-v3"], max_steps=6, log_dir=str(tmp_path))
    first = hylo.evaluate("metaworld", episodes=2, record_rollouts=True, **common)
    extended = hylo.evaluate("metaworld", episodes=3, **common)
    assert extended.run_id == first.run_id and extended.executed_now == 1
    code, stdout, _ = _hylo(capsys, "runs", "export", first.run_id, "--log-dir", str(tmp_path), "--format",
                            "lerobot", "--out", str(tmp_path / "ds"))  # fmt: skip
    assert code == 0
    assert stdout.strip() == (f"dataset: {tmp_path / 'ds'} (2 episodes, 12 frames); 1 chosen episodes kept no steps "
                              "(recorded without --record-dataset)")  # fmt: skip
    assert _read(tmp_path / "ds").num_episodes == 2


def test_a_run_that_recorded_nothing_is_refused_and_the_output_is_never_overwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    import hylo

    result = hylo.evaluate("metaworld", agent="random", tasks=["reach-v3"], episodes=1, max_steps=4,
                           log_dir=str(tmp_path / "runs"))  # fmt: skip
    export = ["runs", "export", result.run_id, "--log-dir", str(tmp_path / "runs"), "--format", "lerobot"]
    code, _, err = _hylo(capsys, *export, "--out", str(tmp_path / "ds"))
    assert code == 2
    assert f"run {result.run_id} has no recorded episode" in err and "--record-dataset" in err
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    code, _, err = _hylo(capsys, "eval", "metaworld", "--task", "reach-v3", "--agent", "random", "--episodes", "1",
                         "--log-dir", str(tmp_path / "fresh"), "--record-dataset", str(taken))  # fmt: skip
    assert code == 2
    assert f"{taken} exists" in err
    assert not (tmp_path / "fresh").exists()  # refused before any episode ran
    assert [p.name for p in taken.iterdir()] == ["keep.txt"]
    assert _hylo(capsys, *export)[0] == 2  # no --out
    code, _, err = _hylo(capsys, "runs", "export", result.run_id, "--log-dir", str(tmp_path / "runs"), "--status",
                         "success")  # fmt: skip
    assert code == 2 and "--status is --format lerobot's" in err


def test_a_discrete_agent_and_a_symbolic_grid_export_as_numbers_beside_the_camera(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """BabyAI: its 7x7x3 `grid` is data (not a camera, though shaped like one), its actions integers."""
    out = tmp_path / "dataset"
    code, stdout, _ = _hylo(capsys, "eval", "babyai", "--task", "GoToLocal", "--agent", "expert", "--episodes", "2",
                            "--log-dir", str(tmp_path / "runs"), "--record-dataset", str(out), "--json")  # fmt: skip
    assert code == 0
    run_id = json.loads(stdout)["run_id"]
    dataset = _read(out)
    assert dataset.meta.camera_keys == ["observation.images.view"]
    assert dataset.meta.features["observation.grid"]["shape"] == (7, 7, 3)
    assert dataset.meta.features["action"]["dtype"] == "int64"
    logged = _episodes(tmp_path / "runs" / run_id)
    frames = dataset.hf_dataset.with_format("numpy")
    for index, episode_id in enumerate(dataset.meta.episodes["hylo.episode_id"]):
        actions = frames.filter(lambda row, i=index: row["episode_index"] == i)["action"]
        assert np.asarray(actions).reshape(-1).tolist() == logged[episode_id][2]


def test_a_failure_inside_lerobot_removes_the_half_written_dataset_and_keeps_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    import hylo

    result = hylo.evaluate("metaworld", agent="random", tasks=["reach-v3"], episodes=1, max_steps=4,
                           log_dir=str(tmp_path), record_rollouts=True)  # fmt: skip

    def broken(self: Any, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("encoder crashed")

    monkeypatch.setattr(LeRobotDataset, "save_episode", broken)
    out = tmp_path / "ds"
    code, _, err = _hylo(capsys, "runs", "export", result.run_id, "--log-dir", str(tmp_path), "--format", "lerobot",
                         "--out", str(out))  # fmt: skip
    assert code == 2
    assert "LeRobot could not write the dataset: RuntimeError: encoder crashed" in err
    assert not out.exists()
    monkeypatch.undo()
    assert _hylo(capsys, "runs", "export", result.run_id, "--log-dir", str(tmp_path), "--format", "lerobot",
                 "--out", str(out))[0] == 0  # fmt: skip
