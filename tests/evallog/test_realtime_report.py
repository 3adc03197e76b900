"""The realtime figures of a real realtime run, as `hylo eval --json`, `hylo runs show` and the EvalLog give them:
Meta-World's chunked expert under a fixed latency on the virtual clock."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from hylo.cli import main
from hylo.evallog.realtime_metrics import realtime_figures
from hylo.evallog.store import EvalLog

LATENCY_S = 0.02
DT = 0.0125  # Meta-World's control period: 80 Hz


def hylo_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def realtime_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    data: dict[str, Any] = hylo_json(
        capsys, "eval", "metaworld", "--task", "reach-v3", "--agent", "expert", "-A", "chunk_size=8",
        "-A", "execution_steps=4", "--timing", "realtime", "--latency", str(LATENCY_S), "--refill-steps", "4",
        "--episodes", "3", "--max-steps", "100", "--log-dir", str(tmp_path),
    )  # fmt: skip
    return data


def test_eval_json_carries_the_runs_figures_and_each_episodes(realtime_run: dict[str, Any]) -> None:
    run, episodes = realtime_run["realtime"], realtime_run["episodes"]
    assert len(episodes) == 3 and all(e["realtime"]["episodes"] == 1 for e in episodes)
    for key in ("steps", "executed", "holds", "dropped", "chunks", "acts", "watchdog_ends"):
        assert run[key] == sum(e["realtime"][key] for e in episodes), key
    assert run["steps"] == sum(e["steps"] for e in episodes)
    assert run["sim_time_s"] == pytest.approx(run["steps"] * DT)
    assert run["control_rate_hz"] == pytest.approx(run["executed"] / (run["steps"] * DT))
    assert run["stale_ratio"] == pytest.approx(run["dropped"] / run["executed"])
    assert run["hold_ratio"] == pytest.approx(run["holds"] / run["steps"])
    # a fixed latency on the virtual clock: every act is charged it, and arrives ceil(latency / dt) steps later
    assert run["virtual_latency_s"] == {"p50": LATENCY_S, "p95": LATENCY_S, "p99": LATENCY_S}
    assert run["mean_delay_steps"] == math.ceil(LATENCY_S / DT)
    assert run["dropped"] > 0 and run["acts"] > 0
    assert set(run["latency_s"]) == {"p50", "p95", "p99"}


def test_runs_show_prints_the_realtime_block_with_the_timing(
    realtime_run: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = realtime_run["run_id"]
    shown = hylo_json(capsys, "runs", "show", run_id, "--log-dir", str(tmp_path))
    assert shown["realtime"] == realtime_run["realtime"]
    with EvalLog.open(tmp_path / run_id) as log:
        pooled = realtime_figures(log.realtime_records())  # what the API answers, read in SQL
    assert pooled is not None and pooled.to_json() == shown["realtime"]

    assert main(["runs", "show", run_id, "--log-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    figures = shown["realtime"]
    assert f"timing realtime: latency_s={LATENCY_S}, refill_steps=4" in text
    assert f"realtime ({figures['episodes']} episodes, {figures['acts']} acts" in text
    assert "p50 20.0 · p95 20.0 · p99 20.0 ms" in text
    assert f"{figures['control_rate_hz']:.2f} actions/s" in text
    assert f"{figures['stale_ratio']:.3f} ({figures['dropped']} / {figures['executed']})" in text
    assert f"{figures['hold_ratio']:.3f} ({figures['holds']} / {figures['steps']})" in text


def test_a_sync_run_has_no_realtime_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = hylo_json(
        capsys, "eval", "metaworld", "--task", "reach-v3", "--agent", "expert", "--episodes", "1", "--max-steps", "30",
        "--log-dir", str(tmp_path),
    )  # fmt: skip
    assert "realtime" not in data and "realtime" not in data["episodes"][0]
    assert "realtime" not in hylo_json(capsys, "runs", "show", data["run_id"], "--log-dir", str(tmp_path))


def test_compare_says_what_each_run_ran_under(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["metaworld", "--task", "reach-v3", "--agent", "expert", "-A", "chunk_size=8", "-A", "execution_steps=4",
              "--episodes", "2", "--max-steps", "100", "--log-dir", str(tmp_path)]  # fmt: skip
    sync = hylo_json(capsys, "eval", *common)["run_id"]
    late = hylo_json(capsys, "eval", *common, "--protocol", "realtime-d2")["run_id"]
    compared = hylo_json(capsys, "compare", sync, late, "--log-dir", str(tmp_path))
    assert compared["timing_a"] == {"protocol": None, "timing": "sync", "timing_options": {}}
    assert compared["timing_b"]["protocol"] == "realtime-d2"
    assert compared["timing_b"]["timing_options"]["latency_steps"] == 2
    assert main(["compare", sync, late, "--log-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert f"{sync}: timing sync" in text and f"{late}: protocol realtime-d2 · timing realtime" in text
