"""`hylo compare` and `GET /api/eval/v2/compare` on runs that pair fully, partly or not at all: runs without an
episode in common are refused (exit 2, HTTP 422) instead of reported as "no difference"; a partial pairing says how
much of each run it covers; the pairing correlation is reported, or why it is undefined."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Collection
from pathlib import Path
from typing import Any

import httpx
import pytest

from hylo.cli import main
from hylo.core.status import EpisodeStatus
from hylo.evallog.store import EpisodeRow, EvalLog
from hylo.jobs import JobScheduler
from hylo.server import create_app


def make_run(
    log_dir: Path, run_id: str, *, benchmark: str = "babyai", split: str = "test", seed: int = 0,
    tasks: tuple[str, ...] = ("GoToLocal",), episodes: int = 4, successes: int = 0,
    succeeded: Collection[int] | None = None,
) -> None:  # fmt: skip
    """A finished run of `episodes` per task, the first `successes` of each task successful (or the indices in
    `succeeded`)."""
    spec = {"benchmark": benchmark, "split": split, "seed": seed, "tasks": list(tasks), "agent": "random"}
    with EvalLog.create(
        log_dir / run_id, run_id=run_id, benchmark=benchmark, split=split, agent="random", digest=run_id,
        spec=spec, n_planned=episodes * len(tasks), versions={},
    ) as log:  # fmt: skip
        for task in tasks:
            for index in range(episodes):
                success = index < successes if succeeded is None else index in succeeded
                status = EpisodeStatus.SUCCESS if success else EpisodeStatus.FAILURE
                episode_id = f"{benchmark}/{split}/{task}/{index:04d}@s{seed}"
                log.record(EpisodeRow(episode_id, task, split, index, seed, index, status, status.value, success, 5))
        log.update_run(status="complete")


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    make_run(runs, "babyai-0", episodes=4, successes=1)
    make_run(runs, "babyai-6", episodes=6, successes=5)  # the same episodes and two more
    make_run(runs, "babyai-seed1", seed=1)
    make_run(runs, "babyai-pickup", tasks=("PickupLoc",))
    make_run(runs, "metaworld-0", benchmark="metaworld", split="mt10", tasks=("reach-v3",))
    return runs


def compare(log_dir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["compare", *args, "--log-dir", str(log_dir)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("b", "scopes"),
    [
        ("metaworld-0", ("babyai-0 is babyai/test seed 0", "metaworld-0 is metaworld/mt10 seed 0")),
        ("babyai-seed1", ("babyai-0 is babyai/test seed 0", "babyai-seed1 is babyai/test seed 1")),
        ("babyai-pickup", ("babyai-0 is babyai/test seed 0 tasks GoToLocal",
                           "babyai-pickup is babyai/test seed 0 tasks PickupLoc")),
    ],
)  # fmt: skip
@pytest.mark.parametrize("as_json", [False, True])
def test_runs_without_a_common_episode_are_refused_naming_what_each_holds(
    log_dir: Path, capsys: pytest.CaptureFixture[str], b: str, scopes: tuple[str, str], as_json: bool
) -> None:
    code, out, err = compare(log_dir, capsys, "babyai-0", b, *(["--json"] if as_json else []))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"hylo: error: runs babyai-0 and {b} share no episode: ")
    for scope in scopes:
        assert scope in err
    assert "compare runs of the same benchmark, split, seed and tasks" in err


def test_a_run_with_no_finished_episode_is_refused(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(log_dir, "empty", episodes=0)
    code, out, err = compare(log_dir, capsys, "empty", "babyai-0")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "share no episode: empty has no finished episode yet" in err


def test_a_partial_pairing_warns_with_each_runs_paired_count_and_goes_on(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = compare(log_dir, capsys, "babyai-0", "babyai-6", "--json")
    assert code == 0
    assert err == (
        "hylo: warning: not every episode is paired: 4 of babyai-0's 4 episodes and 4 of babyai-6's 6 are in both "
        "runs; the comparison covers those 4\n"
    )
    result = json.loads(out)
    assert (result["paired"], result["n_a"], result["n_b"]) == (4, 4, 6)
    assert (result["n_pairs"], result["only_in_a"], result["only_in_b"]) == (4, 0, 2)
    assert (result["rate_a"], result["rate_b"], result["a_only"], result["b_only"]) == (0.25, 1.0, 0, 3)

    code, out, err = compare(log_dir, capsys, "babyai-0", "babyai-6")
    assert code == 0 and "not every episode is paired" in err and "unpaired: 0 only in A, 2 only in B" in out


def test_a_full_pairing_compares_without_a_warning(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(log_dir, "babyai-0-again", episodes=4, successes=4)
    code, out, err = compare(log_dir, capsys, "babyai-0", "babyai-0-again", "--json")
    assert code == 0 and err == ""
    result = json.loads(out)
    assert (result["paired"], result["n_a"], result["n_b"], result["b_only"]) == (4, 4, 4, 3)


def api_get(log_dir: Path, path: str, **params: str) -> httpx.Response:
    """One request to the API over the scheduler of `log_dir`."""
    with JobScheduler(log_dir) as scheduler:
        app = create_app(scheduler)

        async def get() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
                return await client.get(path, params=params)

        try:
            return asyncio.run(get())
        finally:
            app.state.sessions.close()


def test_the_api_refuses_runs_without_a_common_episode_with_422(log_dir: Path) -> None:
    refused = api_get(log_dir, "/api/eval/v2/compare", a="babyai-0", b="metaworld-0")
    assert refused.status_code == 422, refused.text
    detail: list[dict[str, Any]] = refused.json()["detail"]
    assert "share no episode" in detail[0]["msg"]
    partial = api_get(log_dir, "/api/eval/v2/compare", a="babyai-0", b="babyai-6")
    assert partial.status_code == 200 and partial.json()["n_pairs"] == 4


def test_runs_of_several_tasks_are_compared_per_task_with_holms_correction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = ("GoToLocal", "PickupLoc", "GoToObj")
    make_run(tmp_path, "a", tasks=tasks, episodes=12, successes=1)
    make_run(tmp_path, "b", tasks=tasks, episodes=12, successes=11)
    code, out, _ = compare(tmp_path, capsys, "a", "b", "--json")
    assert code == 0
    per_task = json.loads(out)["per_task"]
    assert sorted(per_task) == sorted(tasks)
    for part in per_task.values():
        assert (part["n_pairs"], part["a_only"], part["b_only"], part["difference"]) == (
            12,
            0,
            10,
            pytest.approx(10 / 12),
        )
        assert part["p_value"] == pytest.approx(2 / 2**10)
        assert part["p_holm"] == pytest.approx(3 * 2 / 2**10)  # three equal p-values: each times three
    code, out, _ = compare(tmp_path, capsys, "a", "b")
    assert "per task (p adjusted over the tasks by Holm's method)" in out
    assert all(task in out for task in tasks) and "0.005859" in out  # 3 × 2/1024, as the table writes it


@pytest.mark.parametrize(
    ("episodes", "succeeded_a", "succeeded_b", "expected"),
    [
        (4, {0}, {0, 1}, 1 / math.sqrt(3)),  # both 1, only B 1, neither 2: (1·2 − 0·1) / √(1·3·2·2)
        (4, {0, 1}, {2, 3}, -1.0),  # every pair discordant, each side winning two
        (6, {0, 1, 2}, {1, 2, 3, 4}, 0.0),  # both 2, only A 1, only B 2, neither 1: 2·1 − 1·2 = 0
    ],
)
def test_the_pairing_correlation_is_the_phi_of_the_paired_outcomes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], episodes: int, succeeded_a: set[int], succeeded_b: set[int],
    expected: float,
) -> None:  # fmt: skip
    make_run(tmp_path, "a", episodes=episodes, succeeded=succeeded_a)
    make_run(tmp_path, "b", episodes=episodes, succeeded=succeeded_b)
    code, out, _ = compare(tmp_path, capsys, "a", "b", "--json")
    result = json.loads(out)
    assert code == 0 and result["correlation"] == pytest.approx(expected) and result["correlation_note"] is None
    assert result["per_task"]["GoToLocal"]["correlation"] == pytest.approx(expected)
    served = api_get(tmp_path, "/api/eval/v2/compare", a="a", b="b").json()
    assert served["correlation"] == pytest.approx(expected) and served["correlation_note"] is None
    code, out, _ = compare(tmp_path, capsys, "a", "b")
    text = " ".join(out.split())
    assert f"pairing correlation (phi of A's and B's outcomes over the {episodes} pairs): {expected:+.3f}" in text
    assert f"hylo plan --correlation {expected:.2f}" in text


def test_a_side_whose_outcome_never_varies_leaves_the_correlation_undefined_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_run(tmp_path, "all", episodes=4, successes=4)
    make_run(tmp_path, "one", episodes=4, successes=1)
    make_run(tmp_path, "none", episodes=4, successes=0)
    code, out, _ = compare(tmp_path, capsys, "all", "one", "--json")
    result = json.loads(out)
    assert code == 0 and result["correlation"] is None
    assert result["correlation_note"] == "undefined: A succeeded on every pair (it needs both outcomes on each side)"
    code, out, _ = compare(tmp_path, capsys, "all", "none", "--json")
    assert json.loads(out)["correlation_note"] == (
        "undefined: A succeeded on every pair and B failed on every pair (it needs both outcomes on each side)"
    )
    served = api_get(tmp_path, "/api/eval/v2/compare", a="one", b="all").json()
    assert served["correlation"] is None and "B succeeded on every pair" in served["correlation_note"]
    code, out, _ = compare(tmp_path, capsys, "one", "all")
    assert "pairing correlation: undefined: B succeeded on every pair" in " ".join(out.split())
