"""Named protocols: the registry and its entry points, what a protocol fixes in a spec (and its digest), the refusals
that name the flag and the protocol, and the chunked-execution grid rule checked before anything runs."""

from __future__ import annotations

import math
import re
from importlib.metadata import EntryPoint
from typing import Any

import pytest
from pydantic import ValidationError

import hylo.core.registry as core_registry
from hylo.envs import libero, metaworld
from hylo.envs.registry import get_benchmark
from hylo.eval.protocols import (
    PROTOCOL_REGISTRY,
    Protocol,
    describe_protocol,
    get_protocol,
    registered_protocols,
)
from hylo.eval.resolve import EvalError, apply_protocol, check_grid, declared_chunking
from hylo.eval.spec import EvalSpec

SHIPPED = ["sync", "realtime-d1", "realtime-d2", "realtime-d4", "metaworld-realtime-50ms", "libero-realtime-100ms"]
CHUNKED = {"schedule": "chunked", "adaptive_refill": False, "clock": "virtual", "max_hold_steps": 20}


def spec(**changes: Any) -> EvalSpec:
    return EvalSpec(**{"benchmark": "babyai", "agent": "random", **changes})


SEVEN_MS = Protocol(
    name="plugin-7ms",
    description="A plugin's protocol.",
    timing="realtime",
    clock="virtual",
    latency_s=0.007,
)


def seven_ms() -> Protocol:
    return SEVEN_MS


@pytest.fixture
def plugins(monkeypatch, request):
    """Fake `hylo.protocols` entry points; returns the list to fill."""
    found: list[EntryPoint] = []

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        return [ep for ep in found if ep.group == group]

    monkeypatch.setattr(core_registry, "entry_points", fake_entry_points)
    PROTOCOL_REGISTRY.refresh()
    request.addfinalizer(PROTOCOL_REGISTRY.refresh)
    return found


# -- the registry -----------------------------------------------------------------------------------------------------


def test_the_shipped_protocols_are_listed_in_order() -> None:
    assert list(registered_protocols()) == SHIPPED
    assert [get_protocol(name).name for name in SHIPPED] == SHIPPED


def test_a_realtime_protocol_fixes_the_chunked_schedule_on_the_virtual_clock() -> None:
    assert get_protocol("realtime-d2").fixed_timing() == ("realtime", {**CHUNKED, "latency_steps": 2})
    assert get_protocol("sync").fixed_timing() == ("sync", {})
    info = describe_protocol(get_protocol("metaworld-realtime-50ms")).model_dump(mode="json")
    assert info["latency"] == "lognormal median 0.05 s sigma 0.25" and info["families"] == ["metaworld"]
    assert info["timing_options"]["latency_model"] == {"kind": "lognormal", "median_s": 0.05, "sigma": 0.25}


def test_the_family_protocols_median_latency_is_the_documented_number_of_control_steps() -> None:
    for name, rate, steps in (("metaworld-realtime-50ms", metaworld.CONTROL_RATE_HZ, 4),
                              ("libero-realtime-100ms", libero.CONTROL_RATE_HZ, 2)):  # fmt: skip
        model = get_protocol(name).latency_model
        assert model is not None
        assert math.ceil(model["median_s"] * rate - 1e-9) == steps, name


def test_an_entry_point_adds_a_protocol_as_an_object_or_a_callable(plugins) -> None:
    group = "hylo.protocols"
    plugins += [
        EntryPoint("plugin-7ms", f"{__name__}:SEVEN_MS", group),
        EntryPoint("sync", f"{__name__}:SEVEN_MS", group),  # cannot shadow a built-in
    ]
    assert list(registered_protocols()) == [*SHIPPED, "plugin-7ms"]
    assert get_protocol("plugin-7ms") is SEVEN_MS
    assert get_protocol("sync").timing == "sync"

    plugins[:] = [EntryPoint("plugin-7ms", f"{__name__}:seven_ms", group)]
    PROTOCOL_REGISTRY.refresh()
    assert get_protocol("plugin-7ms") == SEVEN_MS
    filled = apply_protocol(spec(protocol="plugin-7ms"))
    assert filled.timing_options == {"schedule": "chunked", "adaptive_refill": False, "clock": "virtual",
                                     "latency_s": 0.007}  # fmt: skip


def test_an_entry_point_that_is_not_a_protocol_or_names_another_is_refused(plugins) -> None:
    group = "hylo.protocols"
    plugins += [
        EntryPoint("not-one", f"{__name__}:CHUNKED", group),
        EntryPoint("misnamed", f"{__name__}:SEVEN_MS", group),
    ]
    with pytest.raises(EvalError, match=r"protocol .test_protocols:CHUNKED. is not a Protocol or a callable"):
        apply_protocol(spec(protocol="not-one"))
    with pytest.raises(EvalError, match="registered as 'misnamed' names itself 'plugin-7ms'"):
        apply_protocol(spec(protocol="misnamed"))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"timing": "realtime", "clock": "virtual"}, "exactly one of latency_steps, latency_s, latency_model"),
        ({"timing": "realtime", "clock": "virtual", "latency_steps": 1, "latency_s": 0.1}, "exactly one of"),
        ({"timing": "realtime", "latency_steps": 1}, "runs on the virtual clock"),
        ({"timing": "sync", "latency_steps": 1}, "sync protocol 'p' cannot set \\['latency_steps'\\]"),
        ({"timing": "realtime", "clock": "virtual", "latency_model": {"kind": "gamma"}}, "kind must be 'lognormal'"),
        ({"timing": "realtime", "clock": "virtual", "latency_s": 1e9}, "protocol 'p': latency_s must be a finite"),
        (
            {"timing": "realtime", "clock": "virtual", "latency_steps": 1, "max_hold_steps": 0},
            "protocol 'p': max_hold_steps must be an int >= 1",
        ),
        (
            {"timing": "realtime", "clock": "virtual", "latency_steps": 2, "execution_steps": 7, "chunk_size": 8},
            "max\\(1, d\\) <= s <= H - d",
        ),
    ],
)
def test_an_inconsistent_protocol_is_refused_when_made(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Protocol(name="p", description="d", **fields)


# -- what a protocol does to a spec -----------------------------------------------------------------------------------


def test_a_protocol_fills_the_timing_and_keeps_what_it_leaves_open() -> None:
    filled = apply_protocol(spec(protocol="realtime-d2", timing_options={"execution_steps": 3, "strategy": "ensemble"}))
    assert filled.timing == "realtime"
    assert filled.timing_options == {**CHUNKED, "latency_steps": 2, "execution_steps": 3, "strategy": "ensemble"}
    assert apply_protocol(filled) == filled  # a worker resolving the planned spec again gets the same
    same = apply_protocol(spec(protocol="realtime-d2", timing="realtime", timing_options={"latency_steps": 2}))
    assert same.timing_options == {**CHUNKED, "latency_steps": 2}


def test_the_digest_is_unchanged_without_a_protocol_and_differs_with_one() -> None:
    plain = spec()
    assert "protocol" not in plain.model_dump(mode="json", exclude={"protocol"})
    assert spec(protocol=None).digest() == plain.digest()
    assert spec(protocol="sync").digest() != plain.digest()  # the protocol is part of the run's definition
    d2 = apply_protocol(spec(protocol="realtime-d2"))
    d4 = apply_protocol(spec(protocol="realtime-d4"))
    assert len({plain.digest(), d2.digest(), d4.digest()}) == 3
    by_hand = spec(timing="realtime", timing_options={**CHUNKED, "latency_steps": 2})
    assert d2.digest() != by_hand.digest()  # the same timing, named: another run
    redefined = d2.model_copy(update={"timing_options": {**d2.timing_options, "max_hold_steps": 30}})
    assert redefined.digest() != d2.digest()  # a protocol whose definition changes makes a new run


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        (
            {"timing_options": {"latency_steps": 3}},
            "--latency-steps 3 conflicts with protocol 'realtime-d2', which fixes latency_steps at 2",
        ),
        ({"timing_options": {"clock": "wall"}}, "--clock wall conflicts with protocol 'realtime-d2'"),
        (
            {"timing_options": {"refill_steps": 2}},
            "--refill-steps 2 conflicts with protocol 'realtime-d2', which fixes refill_steps \\(it leaves it unset\\)",
        ),
        ({"timing_options": {"latency_s": 0.1}}, "--latency 0.1 conflicts with protocol 'realtime-d2'"),
    ],
)
def test_a_flag_the_protocol_fixes_given_otherwise_is_refused_naming_both(changes: dict[str, Any], named: str) -> None:
    with pytest.raises(EvalError, match=named):
        apply_protocol(spec(protocol="realtime-d2", **changes))


def test_the_default_sync_timing_yields_to_a_protocol_and_realtime_does_not_to_sync() -> None:
    dumped = EvalSpec.model_validate(spec(protocol="realtime-d2").model_dump())  # every field set, timing "sync"
    assert apply_protocol(dumped).timing == "realtime"
    with pytest.raises(EvalError, match="--timing realtime conflicts with protocol 'sync', which fixes timing sync"):
        apply_protocol(spec(protocol="sync", timing="realtime"))


def test_the_sync_protocol_refuses_realtime_options() -> None:
    with pytest.raises(EvalError, match="--latency-steps 2 conflicts with protocol 'sync'"):
        apply_protocol(spec(protocol="sync", timing_options={"latency_steps": 2}))
    with pytest.raises(EvalError, match="--strategy ensemble conflicts with protocol 'sync'"):
        apply_protocol(spec(protocol="sync", timing_options={"strategy": "ensemble"}))
    assert apply_protocol(spec(protocol="sync")).timing_options == {}


def test_an_unknown_protocol_is_refused_listing_the_known_ones() -> None:
    with pytest.raises(EvalError, match="unknown protocol 'realtime-d3'; choose from: sync, realtime-d1") as info:
        apply_protocol(spec(protocol="realtime-d3"))
    assert info.value.field == "protocol"


def test_a_family_protocol_on_another_benchmark_is_refused_naming_those_that_fit() -> None:
    with pytest.raises(EvalError) as info:
        apply_protocol(spec(protocol="metaworld-realtime-50ms"))
    message = str(info.value)
    assert "protocol 'metaworld-realtime-50ms' is for metaworld, not 'babyai'" in message
    assert "sync, realtime-d1, realtime-d2, realtime-d4" in message and "libero-realtime-100ms" not in message
    assert apply_protocol(spec(benchmark="metaworld", protocol="metaworld-realtime-50ms")).timing == "realtime"


# -- the grid rule ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def babyai():
    return get_benchmark("babyai")


def test_the_chunking_an_agent_declares_is_read_without_building_it(babyai) -> None:
    def declared(agent: str, **args: Any) -> tuple[int | None, int | None]:
        return declared_chunking(spec(agent=f"protocol_agents:{agent}", agent_args=args), babyai)

    assert declared("ArgsChunkedAgent") == (8, 8)  # s None: the whole chunk
    assert declared("ArgsChunkedAgent", chunk_size=5, execution_steps=3) == (5, 3)
    assert declared("AttributeChunkedAgent") == (6, 4)
    assert declared_chunking(spec(agent="random"), babyai) == (None, None)


def grid(d: int, s: int, agent: str = "protocol_agents:ArgsChunkedAgent") -> EvalSpec:
    return apply_protocol(spec(agent=agent, protocol=f"realtime-d{d}", timing_options={"execution_steps": s}))


@pytest.mark.parametrize(("d", "s"), [(2, 2), (2, 6), (1, 1), (1, 7), (4, 4)])
def test_a_point_inside_the_rule_plans(babyai, d: int, s: int) -> None:
    check_grid(grid(d, s), babyai)


@pytest.mark.parametrize(("d", "s"), [(2, 1), (2, 7), (4, 5), (4, 3)])
def test_a_point_outside_the_rule_is_refused_stating_it(babyai, d: int, s: int) -> None:
    with pytest.raises(
        EvalError, match=re.escape(f"s={s} with latency d={d} steps breaks max(1, d) <= s <= H - d (H=8)")
    ):
        check_grid(grid(d, s), babyai)


def test_without_a_declared_chunk_size_only_the_lower_bound_is_checked(babyai) -> None:
    check_grid(grid(2, 50, agent="random"), babyai)
    with pytest.raises(EvalError, match=re.escape("s=1 with latency d=2 steps breaks max(1, d) <= s <= H - d")):
        check_grid(grid(2, 1, agent="random"), babyai)
    zero = spec(timing="realtime", timing_options={"schedule": "chunked", "latency_steps": 0, "execution_steps": 1})
    check_grid(zero, babyai)
    check_grid(apply_protocol(spec(protocol="realtime-d4")), babyai)  # s the agent's, which declares none


def test_the_agents_own_horizon_is_held_to_the_rule_when_no_s_is_given(babyai) -> None:
    check_grid(apply_protocol(spec(agent="protocol_agents:AttributeChunkedAgent", protocol="realtime-d2")), babyai)
    whole = apply_protocol(spec(agent="protocol_agents:ArgsChunkedAgent", protocol="realtime-d2"))
    with pytest.raises(EvalError) as info:
        check_grid(whole, babyai)  # s = all 8 of the chunk: it runs dry two steps before the next arrives
    assert "s=8 with latency d=2 steps breaks max(1, d) <= s <= H - d (H=8)" in str(info.value)
    assert "with no --execution-steps s is the agent's own execution_steps" in str(info.value)
    assert "--execution-steps S" in str(info.value) and info.value.field == "agent_args"
    check_grid(whole.model_copy(update={"agent_args": {"execution_steps": 6}}), babyai)


def test_a_protocol_that_requires_a_chunk_size_refuses_an_agent_without_it(plugins, babyai) -> None:
    group = "hylo.protocols"
    plugins.append(EntryPoint("rtc-h8", f"{__name__}:RTC_H8", group))
    check_grid(apply_protocol(spec(agent="protocol_agents:ArgsChunkedAgent", protocol="rtc-h8")), babyai)
    with pytest.raises(
        EvalError, match="protocol 'rtc-h8' runs agents with chunk_size H=8; agent 'random' declares none"
    ):
        check_grid(apply_protocol(spec(protocol="rtc-h8")), babyai)
    with pytest.raises(EvalError, match="declares chunk_size 6"):
        check_grid(apply_protocol(spec(agent="protocol_agents:AttributeChunkedAgent", protocol="rtc-h8")), babyai)


RTC_H8 = Protocol(
    name="rtc-h8",
    description="RTC's simulated benchmark: H = 8, d = 2, s = 3.",
    timing="realtime",
    clock="virtual",
    latency_steps=2,
    execution_steps=3,
    chunk_size=8,
)
