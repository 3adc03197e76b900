"""`hylo report` refuses bad input in one line naming the bad value, with exit status 2, before writing anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from hylo.cli import main
from hylo.core.status import EpisodeStatus
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.run_status import RunStatus
from hylo.evallog.store import EvalLog
from hylo.exits import EXIT_BAD_INPUT


def _run(log_dir: Path, run_id: str) -> Path:
    """A finished run of one successful episode."""
    row = EpisodeRow(
        episode_id="babyai/default/GoToLocal/0000@s0",
        task="GoToLocal",
        split="default",
        index=0,
        base_seed=0,
        seed=0,
        status=EpisodeStatus.SUCCESS,
        reason="success",
        success=True,
        steps=5,
    )
    with EvalLog.create(
        log_dir / run_id,
        run_id=run_id,
        benchmark="babyai",
        split="default",
        agent="expert",
        digest="d",
        spec={},
        n_planned=1,
        versions={},
    ) as log:
        log.record(row)
        log.update_run(status=RunStatus.COMPLETE)
    return log_dir / run_id


def _error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    try:
        status = main(["report", *args])
    except SystemExit as exc:  # refused by the argument parser
        status = exc.code
    assert status == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(("hylo: error:", "hylo report: error:")) and len(err.strip().splitlines()) == 1, err
    return err


def test_a_missing_run_is_named_with_the_runs_there(tmp_path, capsys):
    _run(tmp_path / "runs", "babyai-expert-1")
    out = tmp_path / "r.html"
    err = _error(capsys, "babyai-expert-1", "nope", "--log-dir", str(tmp_path / "runs"), "-o", str(out))
    assert "'nope'" in err and "babyai-expert-1" in err
    assert not out.exists()


def test_a_directory_without_a_run_is_named(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    err = _error(capsys, str(tmp_path / "empty"), "-o", str(tmp_path / "r.html"))
    assert str(tmp_path / "empty") in err and "evallog.sqlite" in err


def test_a_run_given_by_its_directory_is_reported(tmp_path, capsys):
    run_dir = _run(tmp_path / "elsewhere", "r1")
    assert main(["report", str(run_dir), "-o", str(tmp_path / "r.html")]) == 0
    assert "r1" in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["r1", "--max-mb", "0"], "'0'"),
        (["r1", "--clips", "-1"], "'-1'"),
        (["r1", "r1"], "'r1' is given twice"),
        (["r1", "-o", "{tmp}"], "is a directory"),
        (["r1", "-o", "{tmp}/no/such/r.html"], "does not exist"),
    ],
)
def test_bad_options_are_refused_naming_the_value(tmp_path, capsys, args, named):
    _run(tmp_path / "runs", "r1")
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    if "-o" not in args:
        args += ["-o", str(tmp_path / "r.html")]
    err = _error(capsys, *args, "--log-dir", str(tmp_path / "runs"))
    assert named in err
