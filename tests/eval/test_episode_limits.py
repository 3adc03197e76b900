"""Episode limits: the env's time never counts against the agent, a limit that fires blames the party whose call
crossed it and names the flag that changes it, and every backend (inline, worker processes, Ray) gives the same
status and reason. The backends of one scenario run at once (the envs and agents sleep), on one local Ray."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import hylo.eval.limits as rule
from hylo.core import registry as core_registry
from hylo.core.errors import OverLimit
from hylo.envs.registry import BENCHMARK_REGISTRY, ENTRY_POINT_GROUP
from hylo.eval import EvalResult, evaluate
from hylo.eval.limits import RESET, STEP, EpisodeLimits, call_limit, judge

ray = pytest.importorskip("ray")

HERE = Path(__file__).parent
BACKENDS = {
    "workers 1 (inline)": {},
    "workers 2": {"workers": 2},
    "backend process": {"backend": "process"},
    "backend ray": {"backend": "ray", "workers": 2},
}
INLINE, KILLING = "workers 1 (inline)", ("backend process", "backend ray")
LIMITED = {INLINE: {}, "backend process": {"backend": "process"}, "backend ray": {"backend": "ray"}}
"""The limit scenarios (one episode): inline, which cannot kill, against one worker process and one Ray actor."""


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module (2 CPUs); its workers find the fixtures through PYTHONPATH."""
    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()
        os.environ.clear()
        os.environ.update(saved)


def on_backends(tmp_path: Path, backends: dict[str, dict], benchmark: str, **spec) -> dict[str, EvalResult]:
    """The same run on each backend, all at once."""
    with ThreadPoolExecutor(len(backends)) as threads:
        futures = {
            name: threads.submit(evaluate, benchmark, **spec, **extra, log_dir=str(tmp_path / name.replace(" ", "-")))
            for name, extra in backends.items()
        }
        return {name: future.result() for name, future in futures.items()}


def verdicts(result: EvalResult) -> list[tuple[str, str]]:
    return [(row.status.value, row.reason) for row in result.episodes]


def test_a_slow_env_is_nobodys_fault_on_any_backend(local_ray, tmp_path):
    # Resets of 1 s and steps of 0.6 s: 8.2 s in env calls per episode, past the 12 × 0.5 s = 6 s the agent may
    # take; the random agent takes microseconds, so the episodes run out their step budget.
    results = on_backends(tmp_path, BACKENDS, "gym:pool_fixtures:Slow-v0", agent="random", episodes=2,
                          max_steps=12)  # fmt: skip
    for name, result in results.items():
        assert verdicts(result) == [("failure", "max_steps")] * 2, name
        assert [row.steps for row in result.episodes] == [12, 12], name


def test_an_env_call_past_env_timeout_is_the_envs_on_any_backend(local_ray, tmp_path):
    # The second step takes 6 s; --env-timeout 0.5: a pool kills the worker there, inline ends it when it returns.
    results = on_backends(tmp_path, LIMITED, "gym:pool_fixtures:LateStep-v0", agent="pool_fixtures:Forward", episodes=1,
                               max_steps=5, env_timeout=0.5)  # fmt: skip
    for name, result in results.items():
        assert verdicts(result) == [("infra_invalid", "env timeout")], name
        detail = result.episodes[0].detail
        assert "a step ran" in detail and "past --env-timeout 0.5 s" in detail and "--env-timeout sets it" in detail
    assert results[INLINE].episodes[0].steps == 1  # the step that ran late does not count
    for name in KILLING:
        assert results[name].episodes[0].metrics["wall_s"] < 5.0, name  # killed, not waited for


def test_an_act_past_act_timeout_is_the_agents_on_any_backend(local_ray, tmp_path):
    # Each act takes 6 s; --act-timeout 0.5: a pool kills the worker at about 1.55 s, the inline Kernel ends the
    # episode when the act returns.
    results = on_backends(tmp_path, LIMITED, "gym:pool_fixtures:Counted-v0", agent="eval_agents:SlowAgent",
                               agent_args={"seconds": 6.0}, episodes=1, max_steps=3, act_timeout=0.5)  # fmt: skip
    for name, result in results.items():
        assert verdicts(result) == [("error", "timeout")], name
        assert "--act-timeout sets it" in result.episodes[0].detail, name
    for name in KILLING:
        assert results[name].episodes[0].metrics["wall_s"] < 5.0, name


def test_an_agent_past_its_allowance_is_the_agents_on_any_backend(local_ray, tmp_path):
    # 0.7 s per act against an allowance of 4 steps × 0.5 s = 2 s, in a fast env.
    results = on_backends(tmp_path, LIMITED, "gym:pool_fixtures:Counted-v0", agent="eval_agents:SlowAgent",
                               agent_args={"seconds": 0.7}, episodes=1, max_steps=4)  # fmt: skip
    for name, result in results.items():
        assert verdicts(result) == [("error", "agent timeout")], name
        detail = result.episodes[0].detail
        assert "past its allowance of 2 s (4 steps × 0.5 s" in detail and "--act-timeout" in detail, name


def test_episode_timeout_charges_the_party_whose_call_crossed_it(tmp_path):
    slow = evaluate("gym:pool_fixtures:Slow-v0", agent="random", episodes=1, max_steps=12, episode_timeout=2.0,
                    backend="process", log_dir=str(tmp_path))  # fmt: skip
    assert verdicts(slow) == [("infra_invalid", "env timeout")]  # it crossed 2 s inside a step
    assert "past --episode-timeout 2 s" in slow.episodes[0].detail
    agent = evaluate("gym:pool_fixtures:Counted-v0", agent="eval_agents:SlowAgent", agent_args={"seconds": 0.4},
                     episodes=1, max_steps=10, act_timeout=5.0, episode_timeout=1.0,
                     log_dir=str(tmp_path))  # fmt: skip
    assert verdicts(agent) == [("error", "agent timeout")]  # it crossed 1 s while the agent acted
    assert "--episode-timeout sets it" in agent.episodes[0].detail


def test_the_default_rule_of_an_env_calls_limit_and_its_message():
    limits = EpisodeLimits(budget=20, per_step_s=0.5, agent_s=10.0)
    assert call_limit(RESET, 0, 0.0, limits)[0] == 60.0
    assert call_limit(STEP, 0, 0.0, limits)[:2] == (30.0, rule.UNMEASURED)  # nothing measured, nothing declared
    assert call_limit(STEP, 5, 0.4, limits)[:2] == (10.0, rule.MEASURED)  # the floor
    assert call_limit(STEP, 5, 2.5, limits)[:2] == (25.0, rule.MEASURED)  # 10× the mean step
    declared = EpisodeLimits(budget=20, per_step_s=0.5, agent_s=10.0, typical_reset_s=9.0, typical_step_s=0.01)
    assert call_limit(RESET, 0, 0.0, declared)[0] == 90.0
    assert call_limit(STEP, 0, 0.0, declared)[0] == 10.0
    explicit = EpisodeLimits(budget=20, per_step_s=0.5, agent_s=10.0, env_s=3.0)
    assert call_limit(STEP, 5, 2.5, explicit)[0] == 3.0

    def in_a_step(limit: tuple[float, float, float]) -> list[float]:
        record = [0.0] * rule.RECORD_SIZE
        record[rule.PARTY], record[rule.SINCE], record[rule.KIND] = rule.ENV, 100.0, STEP
        record[rule.LIMIT], record[rule.BASIS], record[rule.BASIS_S] = limit
        return record

    record = in_a_step(call_limit(STEP, 5, 0.9, limits))
    assert judge(record, 109.9, limits) is None
    verdict = judge(record, 112.3, limits)
    assert verdict is not None and (verdict.status.value, verdict.reason) == ("infra_invalid", "env timeout")
    assert verdict.detail == (
        "a step ran 12.3 s, past its limit of 10 s (the floor for a step; its mean is 0.9 s); --env-timeout sets it"
    )
    verdict = judge(in_a_step(call_limit(STEP, 5, 2.5, limits)), 130.0, limits)
    assert verdict is not None
    assert verdict.detail.startswith("a step ran 30.0 s, past its limit of 25 s (10× the mean step of 2.5 s)")


def test_a_worker_that_does_not_hand_an_episode_back_after_its_end_is_charged_to_the_infrastructure():
    limits = EpisodeLimits(budget=20, per_step_s=0.5, agent_s=10.0)
    meter = rule.Meter()
    meter.begin(limits)
    meter.end()  # the verdict is in: the worker writes the video and the trace now
    ended = meter.record[rule.SINCE]
    assert judge(meter.record, ended + rule.WRAP_UP_S - 1, limits) is None
    stalled = judge(meter.record, ended + rule.WRAP_UP_S + 1, limits)
    assert stalled is not None and (stalled.status.value, stalled.reason) == ("infra_invalid", "worker stalled")
    assert rule.headroom(meter.record, ended + 10, limits) == pytest.approx(rule.WRAP_UP_S - 10)
    meter.done()  # handed back: nothing of the episode runs any more
    assert judge(meter.record, ended + 10 * rule.WRAP_UP_S, limits) is None


@pytest.fixture
def slow_builds(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Benchmarks whose resets sleep (`build_fixtures`), registered as a package would register them; a reset's floor
    of 0.5 s, so that a later reset's limit is short (10× a mean of microseconds, at least 0.5 s). Inline runs only:
    the floor is this process's."""
    plugins = [EntryPoint(name, f"build_fixtures:{target}", ENTRY_POINT_GROUP)
               for name, target in (("slow_first_reset", "SlowFirstReset"),
                                    ("slower_than_its_build", "SlowerThanItsBuild"))]  # fmt: skip
    monkeypatch.setattr(core_registry, "entry_points", lambda *, group: plugins if group == ENTRY_POINT_GROUP else [])
    BENCHMARK_REGISTRY.refresh()
    request.addfinalizer(BENCHMARK_REGISTRY.refresh)
    monkeypatch.setattr(rule, "RESET_FLOOR_S", 0.5)


@pytest.mark.usefixtures("slow_builds")
def test_a_workers_first_reset_may_take_the_benchmarks_build_time_and_a_later_reset_may_not(tmp_path):
    # Resets of 1 s in episodes 0 and 2: the first is the worker's build, limited at 10 × (1 s build + 0.05 s reset);
    # the later one is limited by the mean of the resets measured since (episode 1's, the build left out).
    result = evaluate("slow_first_reset", agent="random", episodes=3, log_dir=str(tmp_path))
    first, fast, late = result.episodes
    assert first.status.value != "infra_invalid" and first.steps > 0, first.detail
    assert fast.status.value != "infra_invalid", fast.detail
    assert (late.status.value, late.reason) == ("infra_invalid", "env timeout")
    assert late.detail.startswith("a reset ran ") and "past its limit of 0.5 s (the floor for a reset" in late.detail
    assert late.detail.endswith("--env-timeout sets it")


@pytest.mark.usefixtures("slow_builds")
def test_a_first_reset_past_the_benchmarks_build_time_names_the_build_and_the_flag(tmp_path):
    result = evaluate("slower_than_its_build", agent="random", episodes=2, log_dir=str(tmp_path))
    first, second = result.episodes
    assert (first.status.value, first.reason) == ("infra_invalid", "env timeout")
    assert first.detail.startswith("the worker's first reset ran ")
    assert first.detail.endswith(
        "past its limit of 1 s (10× the benchmark's typical first reset of 0.1 s, its build 0.05 s and its reset "
        "0.05 s); --env-timeout sets it"
    )
    assert second.status.value != "infra_invalid", second.detail  # built: the next reset is an ordinary one


def test_a_first_resets_limit_adds_the_benchmarks_build_to_its_reset():
    declared = EpisodeLimits(budget=20, per_step_s=0.5, agent_s=10.0, typical_reset_s=8.0, typical_build_s=25.0)
    assert call_limit(RESET, 0, 0.0, declared, first=True)[:2] == (330.0, rule.BUILD)
    assert call_limit(RESET, 0, 0.0, declared)[:2] == (80.0, rule.TYPICAL)  # a later reset before one was measured
    assert call_limit(RESET, 3, 9.0, declared)[:2] == (90.0, rule.MEASURED)
    quick = EpisodeLimits(budget=20, per_step_s=0.5, agent_s=10.0, typical_reset_s=0.08, typical_build_s=1.5)
    assert call_limit(RESET, 0, 0.0, quick, first=True)[0] == rule.RESET_FLOOR_S
    explicit = EpisodeLimits(budget=20, per_step_s=0.5, agent_s=10.0, typical_build_s=25.0, env_s=30.0)
    assert call_limit(RESET, 0, 0.0, explicit, first=True)[:2] == (30.0, rule.EXPLICIT)  # --env-timeout is exact


class _Clock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_time_a_worker_waits_for_its_policy_host_is_neither_the_agents_nor_unlimited(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(rule, "_clock", clock)
    limits = EpisodeLimits(budget=4, per_step_s=0.5, agent_s=2.0)
    meter = rule.Meter()
    meter.begin(limits)
    clock.now += 1.0  # the agent's reset, before the host it knew turned out dead
    assert meter.hold(330.0)
    clock.now += 120.0  # the host is started again
    assert judge(meter.record, clock.now, limits) is None
    assert rule.headroom(meter.record, clock.now, limits) <= 210.0
    meter.release()
    clock.now += 0.5
    assert meter.enter(STEP)  # the agent has used 1.5 s of its 2: no verdict
    meter.leave(STEP)
    clock.now += 0.6
    with pytest.raises(OverLimit, match=r"agent used 2\.10 s outside env calls"):
        meter.enter(STEP)

    meter.begin(limits)
    meter.hold(330.0)
    waited = judge(meter.record, clock.now + 331.0, limits)  # a worker that never came back from its wait
    assert waited is not None and (waited.status.value, waited.reason) == ("error", "policy host unavailable")
    assert waited.detail == "the worker waited 331.0 s for its policy host to be started, past 330 s"
    meter.release()
    meter.end()
    assert not meter.hold(330.0)  # outside the agent's stretch: nothing to hold
