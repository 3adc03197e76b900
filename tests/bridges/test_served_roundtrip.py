"""The served round-trip benchmark runs end to end and prints the figures it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "served_roundtrip.py"


def _figures(*flags: str) -> dict[str, float]:
    """The one JSON object the script prints for a short run with `flags`."""
    command = [sys.executable, str(SCRIPT), "--json", *flags, "--steps", "5", "--episodes", "1", "--repeats", "1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    figures: dict[str, float] = json.loads(line)
    return figures


def test_served_roundtrip_prints_its_figures_as_one_json_object() -> None:
    figures = _figures("--size", "32")
    assert set(figures) == {
        "hylo_bridge_steps_per_s",
        "vlaeval_reference_steps_per_s",
        "ratio",
        "hylo_server_us_per_obs",
        "reference_server_us_per_obs",
    }
    assert all(value > 0 for value in figures.values())
    expected = figures["hylo_bridge_steps_per_s"] / figures["vlaeval_reference_steps_per_s"]
    assert abs(figures["ratio"] - expected) <= 1e-3 * expected


def test_batched_serving_prints_both_rates_and_their_ratio() -> None:
    figures = _figures("--clients", "2", "--call-sleep-ms", "5", "--size", "16")
    assert set(figures) == {
        "clients",
        "call_sleep_ms",
        "unbatched_steps_per_s",
        "batched_steps_per_s",
        "throughput_ratio",
        "mean_batch_size",
    }
    assert (figures["clients"], figures["call_sleep_ms"]) == (2, 5.0)
    assert 1 <= figures["mean_batch_size"] <= 2  # the batched bridge answered in batches of at most --clients
    expected = figures["batched_steps_per_s"] / figures["unbatched_steps_per_s"]
    assert abs(figures["throughput_ratio"] - expected) <= 1e-3 * expected
