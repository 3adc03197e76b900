"""The bounds of a spec hold wherever a spec comes from: `hylo eval` flags (exit 2, one line naming the value),
`hylo.evaluate()` and a spec file, as they do over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from hylo.cli import main
from hylo.eval.spec import MAX_EPISODES, MAX_SECONDS, MAX_SEED, EvalSpec


def hylo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hylo", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--episodes", str(MAX_EPISODES + 1)], "episodes must be <= 100,000"),
        (["--episodes", "100000000000000000000000"], "episodes must be <= 100,000"),
        (["--seed", str(MAX_SEED + 1)], "seed must be <="),
        (["--act-timeout", "1e9"], "act timeout must be at most 86400 seconds"),
        (["--episode-timeout", str(MAX_SECONDS + 1)], "episode timeout must be at most"),
        (["--max-steps", str(10**12)], "step budget must be <="),
        (["--workers", str(len(os.sched_getaffinity(0)) + 1)], "usable CPUs"),
        (["--workers", "5000", "--backend", "ray"], "workers must be <= 1,024"),
        (["-A", "chunk=3000000"], "chunk: Input should be less than or equal to 10000"),
        (["-A", "chunk=true"], "chunk: Input should be a valid integer"),
        (["--task", "x" * 300], "a task name has 1 to 200 characters"),
    ],
)
def test_a_flag_past_its_bound_is_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], named: str
) -> None:
    code = main(["eval", "babyai", "--agent", "random", "--log-dir", str(tmp_path / "runs"), *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("hylo: error: ") and named in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # nothing ran


def test_a_spec_file_is_held_to_the_same_bounds(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    deep = '{"benchmark": "babyai", "agent": "random", "agent_args": {"deep": ' + "[" * 20 + "]" * 20 + "}}"
    spec.write_text(deep)
    done = hylo("eval", "--spec", str(spec), cwd=tmp_path)
    assert done.returncode == 2 and "agent_args nests deeper than 16 levels" in done.stderr


@pytest.mark.parametrize(
    "field, value",
    [
        ("episodes", MAX_EPISODES + 1),
        ("seed", MAX_SEED + 1),
        pytest.param("seed", 10**5000, id="seed-5000-digits"),
        ("tasks", ["GoToLocal"] * 10_001),
        ("agent_args", {"x": float("inf")}),
        ("agent_args", {"blob": "x" * 70_000}),
        ("env_args", {"blob": "x" * 70_000}),
        ("env_args", {"deep": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}),
        ("env_args", {"not a name": 1}),
        ("timing_options", {"latency_s": 1e12}),
        ("benchmark", "b" * 201),
    ],
)
def test_the_python_api_is_held_to_the_same_bounds(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as refused:
        EvalSpec(**{"benchmark": "babyai", "agent": "random", field: value})  # type: ignore[arg-type]
    assert refused.value.errors()[0]["loc"] == (field,)
    assert len(str(refused.value)) < 2000  # a huge value is named, not printed


def test_values_at_their_bounds_are_accepted() -> None:
    spec = EvalSpec(benchmark="babyai", agent="random", episodes=MAX_EPISODES, seed=MAX_SEED, act_timeout=MAX_SECONDS)
    assert (spec.episodes, spec.seed, spec.act_timeout) == (MAX_EPISODES, MAX_SEED, MAX_SECONDS)
