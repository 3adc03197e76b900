"""The run page's code comparison is remembered while the log dir holds the same runs, and found again when a run
is made or deleted."""

from __future__ import annotations

import shutil
from pathlib import Path

from hylo.evallog.rows import RunInfo
from hylo.evallog.store import EvalLog
from hylo.server.code_memo import CodeChangesMemo


def make_run(log_dir: Path, run_id: str, source_hash: str) -> RunInfo:
    """A run of one configuration whose agent's code is one file, `myagents.py`, of hash `source_hash`."""
    part = {"kind": "source", "path": "myagents.py", "sha256": source_hash}
    code = {"digest": source_hash[:16], "agents": [{"agent": "myagents:A", "modules": ["myagents"], "parts": [part]}]}
    spec = {"benchmark": "babyai", "agent": "myagents:A", "code": code, "config_digest": "same-config"}
    with EvalLog.create(
        log_dir / run_id, run_id=run_id, benchmark="babyai", split="default", agent="myagents:A", digest=run_id,
        spec=spec, n_planned=1, versions={},
    ) as log:  # fmt: skip
        return log.info()


def test_a_new_or_deleted_run_of_the_configuration_is_seen_and_otherwise_the_answer_is_kept(tmp_path: Path):
    first = make_run(tmp_path, "first", "a" * 64)
    make_run(tmp_path, "second", "b" * 64)
    memo = CodeChangesMemo(tmp_path)
    answer = memo.changes(first)
    assert answer is not None and answer.against == "second"
    assert [(c.name, c.change) for c in answer.changes] == [("myagents.py", "changed")]
    assert memo.changes(first) is answer  # nothing was made or deleted: not read again

    make_run(tmp_path, "third", "a" * 64)  # the latest of the configuration now, with first's code
    again = memo.changes(first)
    assert again is not None and again.against == "third" and again.same_code

    shutil.rmtree(tmp_path / "third")
    shutil.rmtree(tmp_path / "second")
    assert memo.changes(first) is None  # no other run of the configuration is left
