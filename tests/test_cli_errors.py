"""The CLI's exit codes by kind of error: a refusal of the input is exit 2 with one line; a failure at run time (a
`HyloFailure`, e.g. a crashed nodeset) is not reported as bad input."""

from __future__ import annotations

import argparse

import pytest

import hylo.cli.runs
from hylo.cli import main
from hylo.core.errors import HyloError
from hylo.graph.executor import NodesetCrashed
from hylo.graph.node import Owner


def _raising(exc: Exception):
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
