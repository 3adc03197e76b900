"""EvalSpec: validation with messages that name the bad value, and a config digest that only the result-defining
fields enter (so a run can be resumed or extended with more episodes or workers and stay the same run)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

import pytest
from pydantic import ValidationError

from hylo.core.agent import MAX_CHUNK
from hylo.core.timing import RefillTiming, timing_from
from hylo.eval.spec import DIGEST_FIELDS, MAX_SECONDS, MAX_STEPS, TIMING_OPTIONS, EvalSpec

BASE: dict[str, Any] = {"benchmark": "babyai", "agent": "random"}


def spec(**changes: Any) -> EvalSpec:
    return EvalSpec(**{**BASE, **changes})


# -- digest -----------------------------------------------------------------------------------------------------------


def test_digest_is_stable_and_short_hex() -> None:
    digest = spec().digest()
    assert re.fullmatch(r"[0-9a-f]{16}", digest)
    assert spec().digest() == digest
    assert EvalSpec.model_validate(spec().model_dump()).digest() == digest  # survives a round trip


@pytest.mark.parametrize(
    "knob, value",
    [
        ("episodes", 500),
        ("log_dir", "/elsewhere/runs"),
        ("run_id", "my-run"),
        ("fresh", True),
        ("video", 3),
        ("video_size", "320x240"),
        ("strict", True),
        ("workers", 8),
        ("episode_timeout", 30.0),
        ("env_timeout", 30.0),
    ],
)
def test_display_and_parallelism_knobs_leave_the_digest_alone(knob: str, value: Any) -> None:
    assert spec(**{knob: value}).digest() == spec().digest()


def test_all_knobs_together_leave_the_digest_alone() -> None:
    knobs = spec(episodes=2, log_dir="x", run_id="r", fresh=True, video=1, strict=True, workers=3)
    assert knobs.digest() == spec().digest()
    assert knobs.default_run_id() == spec().default_run_id()


@pytest.mark.parametrize(
    "field, value",
    [
        ("benchmark", "metaworld"),
        ("split", "default"),
        ("tasks", ["GoToLocal"]),
        ("agent", "hold"),
        ("agent_args", {"chunk": 2}),
        ("env_args", {"obs_type": "pixels"}),
        ("seed", 1),
        ("max_steps", 64),
        ("act_timeout", 0.5),
        ("shield", False),
        ("timing", "realtime"),
        ("timing_options", {"refill_steps": 2}),
        ("no_images", True),
    ],
)
def test_result_defining_fields_change_the_digest(field: str, value: Any) -> None:
    assert field in DIGEST_FIELDS
    changed = spec(**{field: value})
    assert changed.digest() != spec().digest()
    assert changed.default_run_id() != spec().default_run_id()


def test_a_spec_without_env_args_keeps_the_digest_it_had_before_they_existed() -> None:
    # the digest of this spec as hylo computed it before EvalSpec had `env_args`, `seeds`, `protocol`, `no_images`
    before = spec().model_dump(mode="json", include=set(DIGEST_FIELDS) - {"env_args", "seeds", "protocol", "no_images"})
    text = json.dumps(before, sort_keys=True, separators=(",", ":"))
    assert spec().digest() == hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
    assert spec(env_args={}).default_run_id() == spec().default_run_id()
    assert spec(seeds=[0]).default_run_id() == spec().default_run_id()
    assert spec(no_images=False).default_run_id() == spec().default_run_id()


def test_digest_distinguishes_values_of_one_field() -> None:
    digests = {spec(seed=s).digest() for s in range(5)}
    digests |= {spec(tasks=t).digest() for t in (["A"], ["B"], ["A", "B"], ["B", "A"])}
    assert len(digests) == 9  # the task order counts: it is the order the run reports in


def test_digest_ignores_key_order_of_dicts() -> None:
    a = spec(agent_args={"alpha": 1, "beta": [1, 2]}, timing_options={"latency_s": 0.1, "refill_steps": 2})
    b = spec(agent_args={"beta": [1, 2], "alpha": 1}, timing_options={"refill_steps": 2, "latency_s": 0.1})
    assert a.digest() == b.digest()


def test_digest_tells_apart_agent_args_of_different_types() -> None:
    assert spec(agent_args={"chunk": 2}).digest() != spec(agent_args={"chunk": "2"}).digest()


# -- default_run_id ---------------------------------------------------------------------------------------------------


def test_default_run_id_names_benchmark_agent_and_digest() -> None:
    s = spec()
    assert s.default_run_id() == f"babyai-random-{s.digest()}"


@pytest.mark.parametrize(
    "benchmark, agent, prefix",
    [
        ("babyai", "my.pkg.mod:MyAgent", "babyai-myagent-"),
        ("gym:CartPole-v1", "hold", "gym-CartPole-v1-hold-"),
        ("gym:ALE/Pong-v5", "pkg.agents:Outer.Policy", "gym-ALE-Pong-v5-policy-"),
        ("babyai", "my_pkg:Agent_V2", "babyai-agent-v2-"),
    ],
)
def test_default_run_id_is_filesystem_safe(benchmark: str, agent: str, prefix: str) -> None:
    s = spec(benchmark=benchmark, agent=agent)
    run_id = s.default_run_id()
    assert run_id == f"{prefix}{s.digest()}"
    assert re.fullmatch(r"[A-Za-z0-9-]+", run_id)
    assert not run_id.startswith((".", "-"))
    assert spec(benchmark=benchmark, agent=agent, run_id=run_id).run_id == run_id  # a valid explicit run id too
    assert spec(benchmark=benchmark, agent=agent).default_run_id() == run_id  # stable


# -- validation -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field, value, named",
    [
        ("episodes", 0, "episodes must be >= 1, got 0"),
        ("episodes", -3, "got -3"),
        ("seed", -1, "seed must be >= 0, got -1"),
        ("max_steps", 0, "step budget must be >= 1, got 0"),
        ("max_steps", -5, "got -5"),
        ("act_timeout", 0, "got 0"),
        ("act_timeout", -1.5, "got -1.5"),
        ("act_timeout", math.inf, "got inf"),
        ("act_timeout", math.nan, "got nan"),
        ("env_timeout", 0, "env timeout must be a finite number of seconds > 0, got 0"),
        ("video", -1, "video must be >= 0, got -1"),
        ("video_size", "10", "each side 32-4096 (e.g. 256 or 320x240), got '10'"),
        ("video_size", "256x5000", "got '256x5000'"),
        ("video_size", "256x", "got '256x'"),
        ("video_size", "big", "got 'big'"),
        ("video_size", 1.5, "got 1.5"),
        ("workers", 0, "workers must be >= 1, got 0"),
        ("timing_options", {"refill_steps": 1, "warp": 9}, "unknown timing options ['warp']"),
        ("run_id", "a/b", "'a/b'"),
        ("run_id", ".hidden", "'.hidden'"),
        ("run_id", "..", "'..'"),
        ("run_id", "", "''"),
        ("run_id", "has space", "'has space'"),
        ("timing", "fast", "'fast'"),
        ("benchmark", "", "benchmark"),
        ("agent", "", "agent"),
    ],
)
def test_invalid_values_are_refused_naming_the_value(field: str, value: Any, named: str) -> None:
    with pytest.raises(ValidationError) as info:
        spec(**{field: value})
    message = str(info.value)
    assert named in message
    assert field in message


def test_timing_option_error_lists_the_valid_ones() -> None:
    with pytest.raises(ValidationError) as info:
        spec(timing_options={"warp": 9})
    for option in TIMING_OPTIONS:
        assert option in str(info.value)


def test_unknown_field_is_refused() -> None:
    with pytest.raises(ValidationError, match="episodez"):
        spec(episodez=3)


@pytest.mark.parametrize("missing", ["benchmark", "agent"])
def test_benchmark_and_agent_are_required(missing: str) -> None:
    data = dict(BASE)
    del data[missing]
    with pytest.raises(ValidationError, match=missing):
        EvalSpec(**data)


def test_valid_edge_values_are_accepted() -> None:
    s = spec(
        episodes=1,
        seed=0,
        max_steps=1,
        act_timeout=1e-3,
        video=0,
        workers=1,
        run_id="run_1.v-2",
        timing="realtime",
        timing_options={
            **{"refill_steps": 0, "max_hold_steps": 1, "latency_s": 1, "clock": "virtual", "adaptive_refill": False},
            **{"schedule": "chunked", "execution_steps": 1, "strategy": "ensemble", "ensemble_m": 0},
        },
    )
    assert (s.episodes, s.max_steps, s.run_id) == (1, 1, "run_1.v-2")
    bounds = {"refill_steps": MAX_STEPS, "max_hold_steps": MAX_STEPS, "latency_s": MAX_SECONDS, "ensemble_m": 100}
    refill = spec(timing="realtime", timing_options={**bounds, "adaptive_refill": True, "strategy": "naive"})
    assert refill.timing_options["refill_steps"] == MAX_STEPS


# -- timing_options: the timing they make -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, reason",
    [
        ({"schedule": "chunked", "refill_steps": 2}, "it takes no refill_steps and no adaptive_refill"),
        ({"execution_steps": 2}, "add schedule='chunked'"),
        ({"schedule": "chunked", "latency_steps": 2, "execution_steps": 1}, r"s=1 with latency d=2 steps breaks"),
        ({"clock": "wall", "latency_steps": 1}, "the wall clock measures it"),
        ({"latency_model": {"kind": "lognormal", "median_s": 0.05}}, r"missing \['sigma'\]"),
        ({"latency_model": {"kind": "fixed", "steps": 1}}, "kind must be 'lognormal' or 'empirical'"),
        ({"schedule": "warp"}, r"unknown schedule 'warp'; choose one of \['refill', 'chunked'\]"),
        ({"execution_steps": MAX_CHUNK + 1, "schedule": "chunked"}, "execution_steps must be an int >= 1"),
    ],
)
def test_realtime_options_are_refused_as_the_timing_they_make_would_be(options: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValidationError) as info:
        spec(timing="realtime", timing_options=options)
    assert info.value.errors()[0]["loc"] == ("timing_options",)
    assert re.search(reason, info.value.errors()[0]["msg"])
    with pytest.raises(ValueError, match=reason):
        timing_from("realtime", options)


def test_options_completed_later_are_checked_each_on_its_own() -> None:
    # a protocol, --timing realtime or a sweep completes them: only what no completion can mend is refused now
    assert spec(timing_options={"schedule": "chunked", "refill_steps": 2}).timing == "sync"
    assert spec(protocol="realtime-d2", timing_options={"execution_steps": 1}).timing_options == {"execution_steps": 1}
    for options, reason in [
        ({"latency_s": 0.1, "latency_steps": 1}, r"give one latency, got \['latency_s', 'latency_steps'\]"),
        ({"strategy": "average"}, "unknown strategy 'average'"),
        ({"max_hold_steps": 0}, "max_hold_steps must be an int >= 1"),
    ]:
        for changes in ({}, {"protocol": "realtime-d2"}):
            with pytest.raises(ValidationError, match=reason):
                spec(timing_options=options, **changes)


def test_the_spec_digest_keeps_the_options_as_given() -> None:
    options = {"latency_s": 0, "refill_steps": 2}
    s = spec(timing="realtime", timing_options=options)
    assert s.timing_options == options and s.model_dump(mode="json")["timing_options"] == options
    assert isinstance(timing_from(s.timing, s.timing_options), RefillTiming)


def test_defaults() -> None:
    s = spec()
    assert (s.split, s.tasks, s.episodes, s.seed, s.max_steps, s.timing, s.shield) == (
        None,
        [],
        10,
        0,
        None,
        "sync",
        True,
    )
    assert str(s.log_path) == "hylo-runs"
