"""The benchmark scripts keep running and keep their output shape (their numbers are not asserted: noisy machines)."""

import json
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def run_benchmark(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `benchmarks/<script>` with `args`; it must exit 0 (its stderr is the message otherwise)."""
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr
    return result


def test_kernel_overhead_prints_one_json_object_with_every_figure():
    result = run_benchmark("kernel_overhead.py", "--json", "--repeats", "5", "--steps", "1000", timeout=120)
    figures = json.loads(result.stdout)
    for key in (
        "bare_steps_per_s",
        "kernel_steps_per_s",
        "kernel_trace_steps_per_s",
        "overhead_us_per_step",
        "trace_overhead_us_per_step",
    ):
        assert isinstance(figures[key], float) and figures[key] == figures[key], key
    assert figures["kernel_steps_per_s"] > 0 and figures["bare_steps_per_s"] > 0
    expected_overhead = 1e6 / figures["kernel_steps_per_s"] - 1e6 / figures["bare_steps_per_s"]
    assert abs(figures["overhead_us_per_step"] - expected_overhead) < 1e-6 * max(1.0, abs(expected_overhead))


def test_eval_overhead_prints_one_json_object_with_both_benchmarks():
    result = run_benchmark(
        "eval_overhead.py",
        "--json",
        "--repeats",
        "5",
        "--babyai-episodes",
        "10",
        "--metaworld-episodes",
        "1",
        timeout=300,
    )
    figures = json.loads(result.stdout)
    assert set(figures) == {"babyai", "metaworld"}
    for name, row in figures.items():
        assert set(row) == {
            "bare_steps_per_s",
            "hylo_steps_per_s",
            "ratio",
            "bare_cpu_ms_per_1k",
            "loop_thread_cpu_ms_per_1k",
            "process_cpu_ms_per_1k",
        }, name
        assert row["bare_steps_per_s"] > 0 and row["hylo_steps_per_s"] > 0
        assert abs(row["ratio"] - row["hylo_steps_per_s"] / row["bare_steps_per_s"]) < 1e-9
        assert 0 < row["loop_thread_cpu_ms_per_1k"] <= row["process_cpu_ms_per_1k"], name


def test_eval_breakdown_prints_every_layer_with_its_ratio_to_the_raw_loop():
    result = run_benchmark("eval_breakdown.py", "--json", "--episodes", "10", "--repeats", "1", timeout=300)
    figures = json.loads(result.stdout)
    assert list(figures) == ["raw", "env", "kernel", "panel", "eval_no_trace", "eval"]
    assert figures["raw"]["ratio"] == 1.0
    for row in figures.values():
        assert row["steps_per_s"] > 0


def test_scaling_prints_one_json_object_with_every_figure():
    result = run_benchmark("scaling.py", "--json", "--episodes", "1", "--repeats", "1", timeout=300)
    figures = json.loads(result.stdout)
    for key in ("workers_1_eps_per_s", "workers_2_eps_per_s", "ratio", "ray_2_eps_per_s", "ray_ratio"):
        assert isinstance(figures[key], float) and figures[key] > 0, key
    assert abs(figures["ratio"] - figures["workers_2_eps_per_s"] / figures["workers_1_eps_per_s"]) < 1e-9
    assert abs(figures["ray_ratio"] - figures["ray_2_eps_per_s"] / figures["workers_1_eps_per_s"]) < 1e-9


def test_graph_overhead_prints_one_json_object_with_both_comparisons():
    result = run_benchmark(
        "graph_overhead.py",
        "--json",
        "--repeats",
        "1",
        "--episodes",
        "5",
        "--steps",
        "500",
        "--episode-steps",
        "100",
        timeout=300,
    )
    figures = json.loads(result.stdout)
    assert set(figures) == {"babyai", "null_env"}
    babyai, null = figures["babyai"], figures["null_env"]
    for key in ("kernel_steps_per_s", "graph_steps_per_s", "ratio"):
        assert isinstance(babyai[key], float) and babyai[key] > 0, key
    assert abs(babyai["ratio"] - babyai["graph_steps_per_s"] / babyai["kernel_steps_per_s"]) < 1e-9
    assert null["kernel_us_per_step"] > 0 and null["graph_us_per_step"] > 0
    assert abs(null["overhead_us_per_step"] - (null["graph_us_per_step"] - null["kernel_us_per_step"])) < 1e-9


def test_live_stream_prints_one_json_object_with_both_figures_and_what_the_client_got():
    result = run_benchmark("live_stream.py", "--json", "--repeats", "1", "--executions", "2", timeout=180)
    figures = json.loads(result.stdout)
    assert figures["headless_steps_per_s"] > 0 and figures["streamed_steps_per_s"] > 0
    assert abs(figures["ratio"] - figures["streamed_steps_per_s"] / figures["headless_steps_per_s"]) < 0.01
    assert figures["steps"] > 0 and figures["client_events_per_repeat"] > figures["steps"] / 2  # the client read


def test_web_tti_prints_one_json_object_with_each_page_and_the_ratio():
    result = run_benchmark("web_tti.py", "--json", "--repeats", "1", timeout=300)
    figures = json.loads(result.stdout)
    for key in ("root_tti_ms", "run_100_tti_ms", "run_10000_tti_ms", "next_page_ms", "status_filter_ms"):
        assert figures[key] > 0, key
    assert abs(figures["ratio"] - figures["run_10000_tti_ms"] / figures["run_100_tti_ms"]) < 0.01


def test_sequential_savings_prints_each_case_with_its_ratio():
    result = run_benchmark("sequential_savings.py", "--json", "--runs", "300", "--rates", "0.5:0.7", "0.2:0.5",
                           timeout=300)  # fmt: skip
    cases = json.loads(result.stdout)["cases"]
    assert {(c["p_a"], c["p_b"]) for c in cases} == {(0.5, 0.7), (0.2, 0.5)}
    assert {(c["design"], c["min_effect"] is not None) for c in cases} == {
        (design, futility) for design in ("anytime", "capped") for futility in (False, True)
    }
    for c in cases:
        assert c["fixed_pairs"] > 0 and 0 < c["sequential_mean_pairs"] <= c["max_pairs"]
        assert abs(c["pairs_ratio"] - c["sequential_mean_pairs"] / c["fixed_pairs"]) < 1e-9
        assert abs(c["p90_ratio"] - c["p90_pairs"] / c["fixed_pairs"]) < 1e-9
        assert c["min_effect"] in (None, round(c["p_b"] - c["p_a"], 10)) and 0 <= c["type_ii"] <= 1 - c["power"]
        assert c["step"]["figure"] is None and c["step"]["reason"]


def test_batched_policy_prints_both_rates_their_ratio_and_the_memory_of_each_role():
    result = run_benchmark("batched_policy.py", "--json", "--episodes", "1", "--repeats", "1", "--max-steps", "5",
                           timeout=300)  # fmt: skip
    figures = json.loads(result.stdout)
    assert figures["workers"] == figures["batch"] == 4 and 1 <= figures["mean_batch_size"] <= 4
    ratio = figures["batched_eps_per_s"] / figures["unbatched_eps_per_s"]
    assert abs(figures["throughput_ratio"] - ratio) < 1e-2 * ratio
    roles = figures["rss_by_role_mb"]
    assert set(roles["unbatched"]) == {"runner", "workers"} and set(roles["batched"]) == {"runner", "workers", "host"}
    for label, total in figures["rss_mb"].items():
        assert abs(total - sum(roles[label].values())) < 1.0
    # each unbatched worker holds a copy of the policy's 48 MB of weights, no batched one does: the host holds one
    assert roles["unbatched"]["workers"] - roles["batched"]["workers"] > 2 * 48


def test_batched_policy_wire_times_each_observation_both_ways():
    result = run_benchmark("batched_policy.py", "--json", "--wire", "--calls", "20", timeout=300)
    figures = json.loads(result.stdout)
    assert list(figures) == ["state", "metaworld_camera", "frame_256", "aloha_4_cameras"]
    assert figures["state"]["bytes"] == 39 * 8 and figures["aloha_4_cameras"]["bytes"] == 4 * 480 * 640 * 3 + 39 * 8
    for each in figures.values():
        assert each["round_trip_ms"] > 0 and each["pickled_round_trip_ms"] > 0
        assert abs(each["speedup"] - each["pickled_round_trip_ms"] / each["round_trip_ms"]) < 0.01 * each["speedup"]


def test_realtime_overhead_prints_both_rates_and_their_ratio_on_identical_episodes():
    result = run_benchmark("realtime_overhead.py", "--json", "--repeats", "1", "--episodes", "1", timeout=300)
    figures = json.loads(result.stdout)  # the script refuses to report when the two timings ran other episodes
    assert figures["sync_steps_per_s"] > 0 and figures["realtime_steps_per_s"] > 0
    assert abs(figures["ratio"] - figures["realtime_steps_per_s"] / figures["sync_steps_per_s"]) < 1e-9
    assert (figures["episodes"], figures["repeats"]) == (2, 1)


def test_lerobot_policy_compares_the_same_episodes_and_keeps_batched_results_equal():
    import pytest

    pytest.importorskip("lerobot", reason="the lerobot extra installs on Python >= 3.12")
    result = run_benchmark("lerobot_policy.py", "--json", "--episodes", "1", "--max-steps", "8", timeout=400)
    figures = json.loads(result.stdout)
    assert figures["steps_compared"]["raw"] == figures["steps_compared"]["hylo"] > 0  # the same episodes, both loops
    loop, raw = figures["hylo_loop_s"], figures["raw_loop_s"]  # rounded to 1 ms: the share to within that
    assert abs(figures["hylo_share"] - (loop - raw) / loop) <= 0.002 / abs(loop) + 1e-3
    assert figures["same_returns_batched"] is True
    for run in ("inline", "workers_2", "workers_2_batch_2"):
        assert figures[run]["steps"] > 0 and figures[run]["episodes_per_s"] > 0, run
    assert set(figures["workers_2_batch_2"]["rss_by_role_mb"]) == {"runner", "children"}


def test_rerun_overhead_prints_both_rates_their_ratio_and_the_export():
    import pytest

    pytest.importorskip("rerun", reason="the rerun extra")
    result = run_benchmark(
        "rerun_overhead.py", "--json", "--repeats", "1", "--episodes", "1", "--max-steps", "10", timeout=300
    )
    figures = json.loads(result.stdout)
    assert figures["bare_steps_per_s"] > 0 and figures["rerun_steps_per_s"] > 0
    assert abs(figures["ratio"] - figures["rerun_steps_per_s"] / figures["bare_steps_per_s"]) < 1e-9
    assert figures["export_episodes"] == 1 and figures["export_frames"] == 11 and figures["export_bytes"] > 0
