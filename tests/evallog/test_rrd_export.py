"""`hylo runs export RUN --format rrd`: a run's episodes as a Rerun recording, read back with Rerun's own reader:
one subtree per episode, as many steps as its trace, camera frames for the episodes the run recorded on video."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rerun", reason="the rerun extra (rerun-sdk)")

from rerun.chunk import RrdReader

from hylo.cli import main
from hylo.evallog.rrd import episode_name
from hylo.evallog.store import EvalLog


def _hylo(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def read_rrd(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every entity's rows on the `step` timeline (its components by name), as Rerun reads the file back."""
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for chunk in RrdReader(path).stream().to_chunks():
        if "step" not in chunk.timeline_names:
            continue
        rows[chunk.entity_path].extend(chunk.to_record_batch().to_pylist())
    for entity in rows:
        rows[entity].sort(key=lambda row: row["step"])
    return dict(rows)


def logged_episodes(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each final episode's status, steps, video and the trace's step results and actions."""
    with EvalLog.open(run_dir) as log:
        episodes = {}
        for row in log.final_episodes():
            trace = log.trace(row.episode_id, row.attempt)
            episodes[row.episode_id] = {
                "status": row.status.value,
                "steps": row.steps,
                "video": row.video,
                "results": [e for e in trace if e["event"] == "step.result"],
                "actions": [e["action"] for e in trace if e["event"] == "action"],
            }
        return episodes


def check_recording(rows: dict[str, list[dict[str, Any]]], episodes: dict[str, dict[str, Any]]) -> None:
    """The recording holds each episode under its path, with the trace's steps, and frames when it has a video."""
    roots = {entity.split("/")[2] for entity in rows}
    assert roots == {episode_name(episode_id) for episode_id in episodes}
    for episode_id, logged in episodes.items():
        root = f"/episodes/{episode_name(episode_id)}"
        steps = len(logged["results"])
        assert steps == logged["steps"] > 0
        rewards = rows[f"{root}/reward"]
        assert [row["step"] for row in rewards] == list(range(steps))
        assert [row["Scalars:scalars"][0] for row in rewards] == [e["reward"] for e in logged["results"]]
        action = rows[f"{root}/action/0"]
        assert [row["Scalars:scalars"][0] for row in action] == [float(a) for a in logged["actions"]]
        outcome = rows[f"{root}/outcome"]
        assert [row["step"] for row in outcome] == [steps]
        assert logged["status"] in outcome[0]["TextDocument:text"][0]
        camera = rows.get(f"{root}/camera", [])
        if logged["video"] is not None:
            assert [row["step"] for row in camera] == list(range(steps + 1))  # the reset's frame, then each step's
            assert camera[0]["EncodedImage:media_type"] == ["image/jpeg"]
        else:
            assert camera == []


@pytest.fixture(scope="module")
def babyai_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BabyAI run of three episodes, the first recorded on video."""
    log_dir = tmp_path_factory.mktemp("runs")
    code = main(["eval", "babyai", "--task", "GoToLocal", "--agent", "expert", "--episodes", "3", "--video", "1",
                 "--max-steps", "12", "--log-dir", str(log_dir)])  # fmt: skip
    assert code == 0
    (run_dir,) = log_dir.iterdir()
    return run_dir


def test_export_writes_every_episode_with_its_steps_and_its_video_frames(
    babyai_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    out = tmp_path / "run.rrd"
    code, stdout, _ = _hylo(capsys, "runs", "export", babyai_run.name, "--log-dir", str(babyai_run.parent),
                            "--format", "rrd", "-o", str(out))  # fmt: skip
    assert code == 0, stdout
    episodes = logged_episodes(babyai_run)
    assert len(episodes) == 3 and sum(e["video"] is not None for e in episodes.values()) == 1
    steps = sum(e["steps"] for e in episodes.values())
    assert f"3 episodes, {steps} steps" in stdout and f"rerun {out}" in stdout
    check_recording(read_rrd(out), episodes)


def test_export_of_named_episodes_holds_those_alone(
    babyai_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    episodes = logged_episodes(babyai_run)
    chosen = sorted(episodes)[1:]
    out = tmp_path / "two.rrd"
    code, _, _ = _hylo(capsys, "runs", "export", babyai_run.name, "--log-dir", str(babyai_run.parent), "--format",
                       "rrd", "--episodes", *chosen, "-o", str(out))  # fmt: skip
    assert code == 0
    check_recording(read_rrd(out), {episode_id: episodes[episode_id] for episode_id in chosen})


def test_export_refuses_unknown_episodes_and_a_name_that_is_not_rrd(
    babyai_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    known = sorted(logged_episodes(babyai_run))[0]
    out = tmp_path / "x.rrd"
    base = ("runs", "export", babyai_run.name, "--log-dir", str(babyai_run.parent), "--format", "rrd")
    code, _, err = _hylo(capsys, *base, "--episodes", known, "babyai/nope@s0", "-o", str(out))
    assert code == 2 and "'babyai/nope@s0'" in err and known not in err
    assert not out.exists()
    code, _, err = _hylo(capsys, *base, "-o", str(tmp_path / "x.mp4"))
    assert code == 2 and "x.mp4" in err and ".rrd" in err
    code, _, err = _hylo(capsys, *base)
    assert code == 2 and "-o FILE.rrd" in err
    code, _, err = _hylo(capsys, "runs", "export", babyai_run.name, "--log-dir", str(babyai_run.parent),
                         "--episodes", known)  # fmt: skip
    assert code == 2 and "--episodes is --format rrd's" in err


def test_export_without_rerun_sdk_says_how_to_install_it(
    babyai_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(sys.modules, "rerun", None)  # import rerun fails, as without the extra
    out = tmp_path / "run.rrd"
    code, _, err = _hylo(capsys, "runs", "export", babyai_run.name, "--log-dir", str(babyai_run.parent), "--format",
                         "rrd", "-o", str(out))  # fmt: skip
    assert code == 2 and "pip install 'hylo[rerun]'" in err
    assert not out.exists()
