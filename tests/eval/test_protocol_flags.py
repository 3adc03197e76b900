"""The timing flags as a user types them: what spec they make, what they refuse and why, `--latency-samples` files,
`hylo list protocols` and `--protocol` on `hylo eval` (refusals before anything runs; a run end to end)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hylo.cli import build_parser, main
from hylo.cli.evaluate import read_latency_samples, run_options
from hylo.eval.resolve import EvalError
from hylo.eval.spec import EvalSpec

CHUNKED = {"schedule": "chunked", "adaptive_refill": False, "clock": "virtual"}


def flags(*argv: str) -> dict[str, Any]:
    """The spec fields `hylo eval babyai --agent random ARGV` gives for timing."""
    args = build_parser().parse_args(["eval", "babyai", "--agent", "random", *argv])
    options = run_options(args)
    return {key: options[key] for key in ("protocol", "timing", "timing_options") if key in options}


def test_no_timing_flag_is_the_sync_run_it_always_was() -> None:
    assert flags() == {"protocol": None, "timing_options": {}}
    assert (
        EvalSpec(benchmark="babyai", agent="random", **flags()).digest()
        == EvalSpec(benchmark="babyai", agent="random").digest()
    )


@pytest.mark.parametrize(
    ("argv", "options"),
    [
        (["--latency-steps", "2"], {"latency_steps": 2}),
        (["--execution-steps", "4"], {"execution_steps": 4}),
        (
            ["--latency-steps", "2", "--execution-steps", "4", "--strategy", "ensemble", "--ensemble-m", "0.1"],
            {"latency_steps": 2, "execution_steps": 4, "strategy": "ensemble", "ensemble_m": 0.1},
        ),
        (
            ["--latency-lognormal", "0.05", "0.25"],
            {"latency_model": {"kind": "lognormal", "median_s": 0.05, "sigma": 0.25}},
        ),
        (
            ["--latency", "0.1", "--execution-steps", "2", "--max-hold-steps", "9"],
            {"latency_s": 0.1, "execution_steps": 2, "max_hold_steps": 9},
        ),
    ],
)
def test_a_latency_in_steps_or_a_distribution_or_a_horizon_selects_chunked_realtime(
    argv: list[str], options: dict[str, Any]
) -> None:
    assert flags(*argv) == {"protocol": None, "timing": "realtime", "timing_options": {**CHUNKED, **options}}


def test_the_refill_schedule_and_a_protocol_keep_only_what_was_typed() -> None:
    assert flags("--timing", "realtime", "--latency", "0.1", "--refill-steps", "2") == {
        "protocol": None, "timing": "realtime", "timing_options": {"latency_s": 0.1, "refill_steps": 2}}  # fmt: skip
    assert flags("--protocol", "realtime-d2", "--execution-steps", "4") == {
        "protocol": "realtime-d2", "timing_options": {"execution_steps": 4}}  # fmt: skip
    assert flags("--strategy", "ensemble") == {"protocol": None, "timing_options": {"strategy": "ensemble"}}


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (
            ["--latency-steps", "2", "--refill-steps", "1"],
            "--latency-steps runs the chunked schedule, which asks for a "
            "new chunk every s control steps; --refill-steps",
        ),
        (["--execution-steps", "2", "--timing", "sync"], "--execution-steps is realtime timing's; --timing sync"),
        (["--ensemble-m", "0.5"], "--ensemble-m 0.5 weighs the ensemble strategy: add --strategy ensemble"),
        (["--latency-lognormal", "0", "0.2"], "--latency-lognormal: MEDIAN_S must be a number of seconds > 0"),
    ],
)
def test_combinations_that_cannot_hold_are_refused_with_the_reason(argv: list[str], reason: str) -> None:
    with pytest.raises(EvalError, match=reason):
        flags(*argv)


def test_two_latencies_are_refused_by_the_parser(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        flags("--latency-steps", "2", "--latency", "0.1")
    assert info.value.code == 2
    assert "argument --latency: not allowed with argument --latency-steps" in capsys.readouterr().err


# -- --latency-samples ------------------------------------------------------------------------------------------------


def samples_file(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "latencies.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_latency_samples_are_read_one_a_line_or_as_a_json_list(tmp_path: Path) -> None:
    assert read_latency_samples(samples_file(tmp_path, "# measured\n0.041\n\n 0.052 \n1e-2\n")) == [0.041, 0.052, 0.01]
    assert read_latency_samples(samples_file(tmp_path, " [0.041, 0.052, 0]\n")) == [0.041, 0.052, 0.0]
    path = samples_file(tmp_path, "0.04\n0.06\n")
    options = flags("--latency-samples", str(path))["timing_options"]
    assert options == {**CHUNKED, "latency_model": {"kind": "empirical", "samples_s": [0.04, 0.06]}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0.04\nfast\n", "line 2: expected a latency in seconds \\(a finite number >= 0\\), got 'fast'"),
        ("0.04\n-0.01\n", "line 2: .* got '-0.01'"),
        ("nan\n", "line 1: .* got 'nan'"),
        ("[0.04, true]", "item 1: .* got True"),
        ("[0.04, ", "is not a JSON list"),
        ("# nothing\n\n", "holds no latencies"),
        ("[]", "holds no latencies"),
        (b"\xff\xfe", "is not UTF-8 text"),
        ("0.01\n" * 100_001, "holds 100,001 latencies, more than the 100,000 it may"),
    ],
)
def test_a_bad_latency_samples_file_is_refused_naming_it_and_the_value(tmp_path: Path, text: str, message: str) -> None:
    path = samples_file(tmp_path, text)
    with pytest.raises(EvalError, match=message) as info:
        read_latency_samples(path)
    assert str(path) in str(info.value)


def test_a_missing_or_oversized_latency_samples_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match=r"cannot read --latency-samples .*nope\.txt"):
        read_latency_samples(tmp_path / "nope.txt")
    with pytest.raises(EvalError, match="is larger than 8 MiB"):
        read_latency_samples(samples_file(tmp_path, "0.01\n" * (2 * 1024 * 1024)))


# -- hylo list protocols, hylo eval --protocol -----------------------------------------------------------------------


def test_hylo_list_protocols(capsys) -> None:
    assert main(["list", "protocols", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert list(rows)[:4] == ["sync", "realtime-d1", "realtime-d2", "realtime-d4"]
    d2 = rows["realtime-d2"]
    assert (d2["timing"], d2["clock"], d2["latency"], d2["execution_steps"], d2["families"]) == (
        "realtime", "virtual", "2 steps", None, [])  # fmt: skip
    assert rows["libero-realtime-100ms"]["families"] == ["libero"]
    assert main(["list", "protocols"]) == 0
    text = capsys.readouterr().out
    assert (
        "metaworld-realtime-50ms" in text and "lognormal median 0.05 s sigma 0.25" in text and "for metaworld" in text
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--protocol", "realtime-d2", "--latency-steps", "3"],
            "--latency-steps 3 conflicts with protocol 'realtime-d2', which fixes latency_steps at 2",
        ),
        (
            ["--protocol", "realtime-d2", "--refill-steps", "1"],
            "--refill-steps 1 conflicts with protocol 'realtime-d2'",
        ),
        (["--protocol", "realtime-d2", "--timing", "sync"], "--timing sync conflicts with protocol 'realtime-d2'"),
        (["--protocol", "libero-realtime-100ms"], "protocol 'libero-realtime-100ms' is for libero, not 'babyai'"),
        (["--protocol", "rt2"], "unknown protocol 'rt2'; choose from: sync, realtime-d1, realtime-d2, realtime-d4"),
        (
            ["--latency-steps", "2", "--execution-steps", "1"],
            "s=1 with latency d=2 steps breaks max(1, d) <= s <= H - d",
        ),
    ],
)
def test_hylo_eval_refuses_before_anything_runs(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    code = main(["eval", "babyai", "--agent", "random", "--episodes", "1", "--log-dir", str(tmp_path), *argv])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # no run was made


def test_a_protocol_run_on_meta_world_end_to_end(tmp_path: Path, capsys) -> None:
    pytest.importorskip("metaworld")
    base = ["eval", "metaworld", "--task", "reach-v3", "--agent", "expert", "-A", "chunk_size=8", "--protocol",
            "realtime-d2", "--episodes", "2", "--log-dir", str(tmp_path)]  # fmt: skip
    assert main(base) == 2  # s is the expert's own: all 8 actions of its chunk, which runs dry before the next arrives
    refusal = capsys.readouterr().err
    assert "s=8 with latency d=2 steps breaks max(1, d) <= s <= H - d (H=8)" in refusal
    assert "give --execution-steps S" in refusal and not list(tmp_path.iterdir())

    assert main([*base, "--execution-steps", "4", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["spec"]["protocol"] == "realtime-d2" and run["spec"]["timing"] == "realtime"
    assert run["spec"]["timing_options"] == {**CHUNKED, "latency_steps": 2, "max_hold_steps": 20, "execution_steps": 4}
    assert [episode["status"] for episode in run["episodes"]] == ["success", "success"]

    assert main([*base, "--execution-steps", "4"]) == 0  # the same run, resumed: the summary names the protocol
    out = capsys.readouterr().out
    assert f"run {run['run_id']}: 2 episodes (0 run now)" in out
    assert "timing: protocol realtime-d2: realtime (schedule chunked" in out
