"""The docs promise what the code does: every benchmark's observation keys, the EvalLog's columns and the names a log
dir keeps for itself are documented."""

import sqlite3
from pathlib import Path

from hylo.envs.babyai import BabyAIBenchmark
from hylo.envs.gym_adapter import GymBenchmark
from hylo.envs.kinetix import KinetixBenchmark
from hylo.envs.libero import LiberoBenchmark
from hylo.envs.maniskill import ManiSkillBenchmark
from hylo.envs.maniskill_robots import ACTION_CONVENTIONS as MANISKILL_CONVENTIONS
from hylo.envs.metaworld import MetaWorldBenchmark
from hylo.envs.robomimic import RobomimicBenchmark
from hylo.evallog.logdir import FILENAME, RESERVED_NAMES
from hylo.evallog.store import EvalLog

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_every_benchmarks_observation_keys_are_documented():
    text = (DOCS / "benchmarks.md").read_text()
    for bench in (
        BabyAIBenchmark,
        MetaWorldBenchmark,
        LiberoBenchmark,
        ManiSkillBenchmark,
        KinetixBenchmark,
        GymBenchmark,
    ):
        for key in bench.observation_keys:
            assert f"`{key}`" in text, f"{bench.__name__}: observation key {key!r} is not in docs/benchmarks.md"


def test_every_benchmarks_time_allowances_are_documented():
    text = (DOCS / "benchmarks.md").read_text()
    benches = (("babyai", BabyAIBenchmark), ("metaworld", MetaWorldBenchmark), ("libero", LiberoBenchmark),
               ("maniskill", ManiSkillBenchmark), ("kinetix", KinetixBenchmark),
               ("robomimic", RobomimicBenchmark), ("gym:<id>", GymBenchmark))  # fmt: skip
    for name, bench in benches:
        figures = (bench.default_per_step_budget_sec, bench.typical_reset_sec, bench.typical_step_sec,
                   bench.typical_build_sec)  # fmt: skip
        row = " | ".join("—" if figure is None else f"{figure:g}" for figure in figures)
        assert f"| `{name}` | {row} |" in text, f"{name}: its time figures are not in docs/benchmarks.md"


def test_every_evallog_column_is_documented(tmp_path):
    log = EvalLog.create(
        tmp_path / "r",
        run_id="r",
        benchmark="b",
        split="s",
        agent="a",
        digest="d",
        spec={},
        n_planned=1,
        versions={},
    )
    log.close()
    text = (DOCS / "evallog.md").read_text()
    with sqlite3.connect(tmp_path / "r" / FILENAME) as conn:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert set(tables) == {"meta", "run", "episodes", "traces"}
        for table in tables:
            assert f"`{table}`" in text
            for column in conn.execute(f"PRAGMA table_info({table})"):
                assert f"`{column[1]}`" in text, f"column {table}.{column[1]} is not in docs/evallog.md"


def test_every_name_a_log_dir_reserves_is_documented():
    text = (DOCS / "evallog.md").read_text()
    for name in sorted(RESERVED_NAMES):
        assert f"`{name}`" in text or f"`{name}/`" in text, f"reserved name {name!r} is not in docs/evallog.md"


def test_every_benchmarks_action_convention_is_documented():
    from hylo.envs.gym_adapter import ACTION_CONVENTIONS

    text = (DOCS / "benchmarks.md").read_text()
    conventions = [
        MetaWorldBenchmark.action_convention,
        LiberoBenchmark.action_convention,
        *ACTION_CONVENTIONS.values(),
        *MANISKILL_CONVENTIONS.values(),
        KinetixBenchmark.action_convention,
    ]
    for convention in conventions:
        assert convention is not None and f"`{convention.summary()}" in text, convention


def test_the_architecture_page_names_every_command_and_every_layer() -> None:
    import tomllib

    from hylo.cli import COMMANDS

    page = (DOCS / "architecture.md").read_text()
    assert [name for name in COMMANDS if f"`{name}`" not in page] == []
    contracts = tomllib.loads((DOCS.parent / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    diagram = page.split("```")[1]
    assert [layer for layer in layers if not any(line.startswith(layer + " ") for line in diagram.splitlines())] == []
    assert "§" not in page
