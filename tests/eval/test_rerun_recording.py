"""`hylo eval --rerun FILE.rrd`: the episodes are recorded as they finish, inline and in worker processes, without
changing the run; a writer that falls behind drops frames first, then whole episodes, and says how many."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rerun", reason="the rerun extra (rerun-sdk)")

from rerun.chunk import RrdReader

from hylo.cli import main
from hylo.eval.rerun_recording import RerunRecorder
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec
from hylo.evallog.rrd import episode_name
from hylo.evallog.store import EvalLog

BABYAI = ("babyai", "--task", "GoToLocal", "--agent", "expert", "--episodes", "3", "--max-steps", "12")


def read_rrd(path: Path) -> dict[str, list[int]]:
    """Every entity's steps on the `step` timeline, as Rerun reads the file back."""
    steps: dict[str, list[int]] = defaultdict(list)
    for chunk in RrdReader(path).stream().to_chunks():
        if "step" in chunk.timeline_names:
            steps[chunk.entity_path].extend(chunk.to_record_batch().column("step").to_pylist())
    return {entity: sorted(at) for entity, at in steps.items()}


def logged_episodes(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each final episode's steps (its trace's step results) and whether it has a video."""
    with EvalLog.open(run_dir) as log:
        return {
            row.episode_id: {
                "steps": sum(e["event"] == "step.result" for e in log.trace(row.episode_id, row.attempt)),
                "video": row.video,
            }
            for row in log.final_episodes()
        }


def check_recording(recorded: dict[str, list[int]], episodes: dict[str, dict[str, Any]]) -> None:
    """Each episode under its path with its trace's steps, and its frames when it has a video."""
    assert {entity.split("/")[2] for entity in recorded} == {episode_name(episode_id) for episode_id in episodes}
    for episode_id, logged in episodes.items():
        root = f"/episodes/{episode_name(episode_id)}"
        assert recorded[f"{root}/reward"] == recorded[f"{root}/action/0"] == list(range(logged["steps"]))
        frames = list(range(logged["steps"] + 1)) if logged["video"] is not None else []
        assert recorded.get(f"{root}/camera", []) == frames


def _eval_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = main(["eval", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def _returns(run_dir: Path) -> dict[str, Any]:
    with EvalLog.open(run_dir) as log:
        return {
            row.episode_id: (row.status.value, row.steps, row.metrics.get("return")) for row in log.final_episodes()
        }


def test_rerun_records_every_episode_and_leaves_the_run_as_it_would_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    out = tmp_path / "live.rrd"
    plain = _eval_json(capsys, *BABYAI, "--video", "1", "--log-dir", str(tmp_path / "a"))
    recorded = _eval_json(capsys, *BABYAI, "--video", "1", "--log-dir", str(tmp_path / "b"), "--rerun", str(out))
    assert recorded["run_id"] == plain["run_id"]  # the recording is not part of the run's identity
    assert recorded["spec"] == {**plain["spec"], "log_dir": str(tmp_path / "b")}
    assert recorded["episodes"] == plain["episodes"]
    run_a, run_b = Path(plain["log_dir"]), Path(recorded["log_dir"])
    assert _returns(run_b) == _returns(run_a)
    episodes = logged_episodes(run_b)
    steps = sum(e["steps"] for e in episodes.values())
    assert recorded["rerun"] == {"path": str(out), "episodes": 3, "steps": steps, "frames": episodes_frames(episodes),
                                 "frames_dropped": 0, "episodes_dropped": 0, "error": None}  # fmt: skip
    check_recording(read_rrd(out), episodes)


def episodes_frames(episodes: dict[str, dict[str, Any]]) -> int:
    """The frames a recording of these episodes holds: each video's, one per step and the reset's."""
    return sum(e["steps"] + 1 for e in episodes.values() if e["video"] is not None)


def test_rerun_records_the_episodes_of_worker_processes(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "workers.rrd"
    result = _eval_json(capsys, *BABYAI, "--video", "3", "--workers", "2", "--backend", "process", "--log-dir",
                        str(tmp_path), "--rerun", str(out))  # fmt: skip
    episodes = logged_episodes(Path(result["log_dir"]))
    assert all(e["video"] is not None for e in episodes.values())
    assert result["rerun"]["episodes"] == 3 and result["rerun"]["frames"] == episodes_frames(episodes)
    check_recording(read_rrd(out), episodes)


def test_a_writer_behind_drops_frames_first_then_episodes_and_counts_them(tmp_path: Path):
    spec = EvalSpec(benchmark="babyai", tasks=["GoToLocal"], agent="expert", episodes=3, max_steps=12, video=3,
                    log_dir=str(tmp_path))  # fmt: skip
    evaluation = Evaluation(spec)
    out = tmp_path / "behind.rrd"
    recorder = RerunRecorder(out, evaluation.run_dir, evaluation.run_id, capacity=2)
    evaluation.on_result = lambda result: recorder.put(result.row, result.trace)
    result = evaluation.run()  # the writer is not started: every episode waits in the queue
    recorder.start()
    summary = recorder.close()
    first, second, third = (row for row in sorted(result.episodes, key=lambda row: row.index))
    # the first is queued whole; the second, with half the queue waiting, without frames; the third finds it full
    assert (summary.episodes, summary.episodes_dropped) == (2, 1)
    assert summary.frames_dropped == second.steps + 1
    assert summary.frames == first.steps + 1
    assert "dropped while the writer was behind" in summary.line()
    rows = read_rrd(out)
    assert {entity.split("/")[2] for entity in rows} == {
        episode_name(first.episode_id),
        episode_name(second.episode_id),
    }
    assert rows[f"/episodes/{episode_name(first.episode_id)}/camera"] == list(range(first.steps + 1))
    assert f"/episodes/{episode_name(second.episode_id)}/camera" not in rows
    assert rows[f"/episodes/{episode_name(second.episode_id)}/reward"] == list(range(second.steps))
    assert third.status.value == "success"  # the run itself is whole: only its recording dropped the episode


def test_rerun_without_the_extra_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(sys.modules, "rerun", None)  # import rerun fails, as without the extra
    code = main(["eval", *BABYAI, "--log-dir", str(tmp_path), "--rerun", str(tmp_path / "x.rrd")])
    _, err = capsys.readouterr()
    assert code == 2 and "pip install 'hylo[rerun]'" in err
    assert list(tmp_path.iterdir()) == []


def test_a_run_refused_at_its_resume_leaves_no_recording_and_keeps_a_file_already_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    logs = str(tmp_path / "runs")
    _eval_json(capsys, *BABYAI, "--run-id", "r1", "--log-dir", logs)
    other = [*BABYAI, "--seed", "9", "--run-id", "r1", "--log-dir", logs]  # another configuration under r1
    out = tmp_path / "refused.rrd"
    assert main(["eval", *other, "--rerun", str(out)]) == 2
    assert "different configuration" in capsys.readouterr().err
    assert not out.exists()

    kept = tmp_path / "kept.rrd"
    kept.write_bytes(b"an earlier recording")
    assert main(["eval", *other, "--rerun", str(kept)]) == 2
    capsys.readouterr()
    assert kept.read_bytes() == b"an earlier recording"


def test_a_resumed_run_with_nothing_left_to_run_writes_an_empty_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    _eval_json(capsys, *BABYAI, "--log-dir", str(tmp_path))
    out = tmp_path / "again.rrd"
    again = _eval_json(capsys, *BABYAI, "--log-dir", str(tmp_path), "--rerun", str(out))
    assert again["executed_now"] == 0 and again["rerun"]["episodes"] == 0
    assert out.is_file() and read_rrd(out) == {}
