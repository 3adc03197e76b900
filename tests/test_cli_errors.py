"""The CLI's exit codes by kind of error: a refusal of the input is exit 2 with one line; a failure at run time (a
`HyloFailure`, e.g. a crashed nodeset) is not reported as bad input."""

from __future__ import annotations

import argparse

import pytest
from pydantic import BaseModel, ValidationError

import hylo.cli.runs
from hylo.cli import main
from hylo.cli.output import EXIT_ABORTED, EXIT_BAD_INPUT, EXIT_INTERRUPTED, error_message, exit_code
from hylo.core.errors import HyloError, HyloFailure, UnknownChoice
from hylo.graph.executor import NodesetCrashed
from hylo.graph.node import Owner


class _Episodes(BaseModel):
    episodes: int


def _validation_error() -> ValidationError:
    try:
        _Episodes.model_validate({"episodes": "many"})
    except ValidationError as exc:
        return exc
    raise AssertionError("validated")


def _raising(exc: BaseException):
    def run(args: argparse.Namespace) -> int:
        raise exc

    return run


def test_a_refusal_is_bad_input(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(hylo.cli.runs, "run_runs", _raising(HyloError("no run 'x'")))
    assert main(["runs", "list", "--log-dir", str(tmp_path)]) == 2
    assert "no run 'x'" in capsys.readouterr().err


def test_a_failure_at_run_time_is_not_bad_input(monkeypatch, tmp_path):
    crashed = NodesetCrashed("babyai#1", Owner.ENV, "killed by SIGKILL")
    monkeypatch.setattr(hylo.cli.runs, "run_runs", _raising(crashed))
    with pytest.raises(NodesetCrashed):
        main(["runs", "list", "--log-dir", str(tmp_path)])


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (HyloError("no run 'x'"), EXIT_BAD_INPUT),
        (UnknownChoice("benchmark", "nope", ["babyai"]), EXIT_BAD_INPUT),
        (ValueError("--alpha must be in (0, 1), got 2"), EXIT_BAD_INPUT),
        (LookupError("no such key"), EXIT_BAD_INPUT),
        (_validation_error(), EXIT_BAD_INPUT),
        (HyloFailure("the worker died"), EXIT_ABORTED),
        (NodesetCrashed("babyai#1", Owner.ENV, "killed by SIGKILL"), EXIT_ABORTED),
        (RuntimeError("a bug"), EXIT_ABORTED),
        (KeyboardInterrupt(), EXIT_INTERRUPTED),
    ],
)
def test_each_kind_of_error_has_its_exit_code(exc, code):
    assert exit_code(exc) == code


def test_a_validation_error_is_one_line_naming_the_field():
    assert error_message(_validation_error()).startswith("episodes: ")


def test_an_interruption_exits_130_saying_how_to_resume(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(hylo.cli.runs, "run_runs", _raising(KeyboardInterrupt()))
    assert main(["runs", "list", "--log-dir", str(tmp_path)]) == 130
    assert capsys.readouterr().err == "hylo: error: interrupted; re-run the same command to resume\n"


def test_a_bug_is_not_bad_input(monkeypatch, tmp_path):
    monkeypatch.setattr(hylo.cli.runs, "run_runs", _raising(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        main(["runs", "list", "--log-dir", str(tmp_path)])
