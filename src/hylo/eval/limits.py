"""Episode limits: how long the agent and the env may take, and whose fault an overrun is.

An episode's wall time is split between its two parties. The env's time is its calls (reset, step, observe), and each
call has a limit of its own, set by how long the env's calls usually take: the agent must never be charged for a
simulator that is slow. A worker's first reset builds the simulator and loads its assets: its limit allows for the
benchmark's typical build time as well, and it is not counted in the mean that later resets are limited by. The
agent's time is everything else from the episode's placement to its verdict (its acts and hooks, and the harness's
own work between env calls); it is limited per act with `--act-timeout`, else as a whole, by the step budget × the
benchmark's per-step allowance. `--episode-timeout` optionally caps the whole. Under `--batch`, the time a worker
waits for its policy host to be started again (after it died) is neither party's: it has a limit of its own
(`Meter.hold`).

The worker that runs an episode keeps a `record` of where it is — which party is in a call, since when, that call's
limit, the time each party has used — in a few floats it shares with whoever watches it, and `judge` reads it. The same
function decides everywhere: in the worker itself when an env call begins or returns (the inline backend's only check:
it cannot kill), in the process pool (which reads the record from shared memory and kills the worker) and on Ray (the
actor reads its own record when the pool asks). So an episode gets the same status and reason on every backend.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, MutableSequence, Sequence
from dataclasses import dataclass
from typing import cast

from hylo.core.errors import OverLimit
from hylo.core.status import EpisodeStatus
from hylo.envs.benchmark import Benchmark
from hylo.eval.spec import EvalSpec

RESET_FLOOR_S = 60.0
"""A reset may always take this long (a scene rebuilt for another task, assets loaded again)."""

STEP_FLOOR_S = 10.0
"""A step may always take this long, however fast the env's steps have been so far."""

UNMEASURED_STEP_S = 30.0
"""A step's limit before the worker has measured one, when the benchmark declares no typical step time."""

SLOWDOWN = 10.0
"""A call may take this many times the env's usual time for it (its measured mean, else the benchmark's figure)."""

REMEASURE = 0.05
"""A call's limit follows its mean once the mean has moved by this fraction since the limit was set."""

WRAP_UP_S = 300.0
"""How long a worker may take after an episode's verdict to hand the episode back (its video is written then)."""

ACT_GRACE = (1.1, 1.0)
"""With `--act-timeout S`, a worker is killed once the agent has run `1.1 S + 1 s` between env calls: the Kernel ends
an act slower than S itself when the act returns; the grace covers the agent's hooks and the harness's work."""

# The record: RECORD_SIZE floats. The worker changes PARTY last, a reader reads it first and the rest in index order
# (AGENT_S before SINCE, which the worker writes the other way round): no lock, and no copy a reader can misjudge.
PARTY, KIND, LIMIT, BASIS, BASIS_S, STEP_LIMIT, STARTED, AGENT_S, SINCE = range(9)
RECORD_SIZE = 9

# PARTY: who is in a call (WRAP_UP: the episode has its verdict; the worker writes its video and trace; HOLD: the
# worker waits for its policy host to be started, which is neither party's time).
NOBODY, AGENT, ENV, WRAP_UP, HOLD = 0.0, 1.0, 2.0, 3.0, 4.0
# KIND: which env call. SILENT: a worker that stopped answering (taken for a call holding its interpreter).
SILENT, RESET, STEP, OBSERVE = 0.0, 1.0, 2.0, 3.0
# BASIS: how the call's limit was set (BASIS_S: the time it was set from). BUILD: a worker's first reset, from the
# benchmark's typical reset and build together.
EXPLICIT, UNMEASURED, MEASURED, TYPICAL, BUILD = 1.0, 2.0, 3.0, 4.0, 5.0

_CALLS = {SILENT: "a call", RESET: "a reset", STEP: "a step", OBSERVE: "an observe"}


@dataclass(frozen=True, slots=True)
class EpisodeLimits:
    """What one task's episodes may take. `agent_s` is the agent's allowance per episode (None with an act timeout,
    which limits each act instead); `act_kill_s` how long the agent may run between env calls before its worker is
    killed; `env_s` the limit of every env call when `--env-timeout` sets it (else the rule does)."""

    budget: int
    per_step_s: float
    agent_s: float | None
    act_timeout_s: float | None = None
    act_kill_s: float | None = None
    episode_s: float | None = None
    env_s: float | None = None
    typical_reset_s: float | None = None
    typical_step_s: float | None = None
    typical_build_s: float | None = None

    @classmethod
    def of(cls, spec: EvalSpec, benchmark: Benchmark, budget: int) -> EpisodeLimits:
        per_step = benchmark.default_per_step_budget_sec
        act = spec.act_timeout
        return cls(
            budget=budget,
            per_step_s=per_step,
            agent_s=None if act is not None else budget * per_step,
            act_timeout_s=act,
            act_kill_s=None if act is None else act * ACT_GRACE[0] + ACT_GRACE[1],
            episode_s=spec.episode_timeout,
            env_s=spec.env_timeout,
            typical_reset_s=benchmark.typical_reset_sec,
            typical_step_s=benchmark.typical_step_sec,
            typical_build_s=benchmark.typical_build_sec,
        )


def task_limits(spec: EvalSpec, benchmark: Benchmark, budgets: Mapping[str, int]) -> dict[str, EpisodeLimits]:
    """Each task's limits (tasks differ by step budget)."""
    return {task: EpisodeLimits.of(spec, benchmark, budget) for task, budget in budgets.items()}


@dataclass(frozen=True, slots=True)
class Verdict:
    """An episode found overdue: its status, its short and stable reason, and a detail that names the flag."""

    status: EpisodeStatus
    reason: str
    detail: str


def call_limit(
    kind: float, count: int, mean: float, limits: EpisodeLimits, *, first: bool = False
) -> tuple[float, float, float]:
    """(limit, basis, basis seconds) of an env call: `--env-timeout` when given, else `SLOWDOWN` × the env's mean
    for the call (`count` calls measured), else × the benchmark's typical time, with a floor. A worker's `first`
    reset builds the simulator: its typical time is the benchmark's typical build and reset together."""
    if limits.env_s is not None:
        return limits.env_s, EXPLICIT, 0.0
    floor = RESET_FLOOR_S if kind == RESET else STEP_FLOOR_S
    if kind == RESET and first and limits.typical_build_s is not None:
        typical_first = limits.typical_build_s + (limits.typical_reset_s or 0.0)
        return max(floor, SLOWDOWN * typical_first), BUILD, typical_first
    if count:
        return max(floor, SLOWDOWN * mean), MEASURED, mean
    typical = limits.typical_reset_s if kind == RESET else limits.typical_step_s
    if typical is None:
        return (floor if kind == RESET else UNMEASURED_STEP_S), UNMEASURED, 0.0
    return max(floor, SLOWDOWN * typical), TYPICAL, typical


def judge(record: Sequence[float], now: float, limits: EpisodeLimits) -> Verdict | None:
    """Whether the episode the record describes is overdue at `now` (monotonic seconds), and whose fault that is:
    the party whose call crossed a limit."""
    party = record[PARTY]
    if party == WRAP_UP:
        ran = now - record[SINCE]
        if ran <= WRAP_UP_S:
            return None
        detail = f"the worker did not hand the episode back within {WRAP_UP_S:g} s of its end (writing its video?)"
        return Verdict(EpisodeStatus.INFRA_INVALID, "worker stalled", detail)
    if party == ENV:
        ran = now - record[SINCE]
        if ran > record[LIMIT]:
            return Verdict(EpisodeStatus.INFRA_INVALID, "env timeout", _call_detail(record, ran, limits))
        if limits.episode_s is not None and now - record[STARTED] > limits.episode_s:
            what = f"during {_CALLS.get(record[KIND], 'a call')} of the env"
            return Verdict(EpisodeStatus.INFRA_INVALID, "env timeout", _episode_detail(record, now, limits, what))
    elif party == HOLD:
        ran = now - record[SINCE]
        if ran > record[LIMIT]:
            detail = f"the worker waited {_s(ran)} s for its policy host to be started, past {record[LIMIT]:g} s"
            return Verdict(EpisodeStatus.ERROR, "policy host unavailable", detail)
        if limits.episode_s is not None and now - record[STARTED] > limits.episode_s:
            what = "while the worker waited for its policy host to be started"
            return Verdict(EpisodeStatus.ERROR, "policy host unavailable", _episode_detail(record, now, limits, what))
    elif party == AGENT:
        ran = now - record[SINCE]
        if limits.act_kill_s is not None:
            if ran > limits.act_kill_s:
                detail = (
                    f"the agent ran {_s(ran)} s without handing back to the env, past --act-timeout "
                    f"{limits.act_timeout_s:g} s; --act-timeout sets it"
                )
                return Verdict(EpisodeStatus.ERROR, "timeout", detail)
        elif limits.agent_s is not None and record[AGENT_S] + ran > limits.agent_s:
            return Verdict(EpisodeStatus.ERROR, "agent timeout", _agent_detail(record, record[AGENT_S] + ran, limits))
        if limits.episode_s is not None and now - record[STARTED] > limits.episode_s:
            what = "while the agent ran (outside env calls)"
            return Verdict(EpisodeStatus.ERROR, "agent timeout", _episode_detail(record, now, limits, what))
    return None


def headroom(record: Sequence[float], now: float, limits: EpisodeLimits) -> float:
    """How long `judge` will find nothing, whatever the worker does meanwhile: when a watcher needs to look again."""
    party = record[PARTY]
    if party == WRAP_UP:
        return max(0.0, WRAP_UP_S - (now - record[SINCE]))
    if party == NOBODY:  # between episodes: the next one may begin at once
        ran = used = elapsed = 0.0
    else:
        ran, used, elapsed = now - record[SINCE], record[AGENT_S], now - record[STARTED]
    soonest = limits.env_s if limits.env_s is not None else STEP_FLOOR_S  # a call that begins now
    if limits.episode_s is not None:
        soonest = min(soonest, limits.episode_s - elapsed)
    if party in (ENV, HOLD):
        soonest = min(soonest, record[LIMIT] - ran)
        ran = 0.0  # the agent's next stretch has not begun
    if limits.act_kill_s is not None:
        soonest = min(soonest, limits.act_kill_s - ran)
    elif limits.agent_s is not None:
        soonest = min(soonest, limits.agent_s - used - ran)
    return max(0.0, soonest)


def _call_detail(record: Sequence[float], ran: float, limits: EpisodeLimits) -> str:
    kind, limit, basis, basis_s = record[KIND], record[LIMIT], record[BASIS], record[BASIS_S]
    call = "the worker's first reset" if basis == BUILD else _CALLS.get(kind, "a call")
    if kind == SILENT:
        return (
            f"the worker stopped answering for {_s(ran)} s (a call holding its Python interpreter, taken for the "
            f"env's), past the {limit:g} s an env call may take; --env-timeout sets it"
        )
    if basis == EXPLICIT:
        return f"{call} ran {_s(ran)} s, past --env-timeout {limit:g} s; --env-timeout sets it"
    name = call.split()[-1]
    floor = RESET_FLOOR_S if kind == RESET else STEP_FLOOR_S
    if basis == BUILD:
        build = limits.typical_build_s or 0.0
        typically = f"{basis_s:.3g} s, its build {build:.3g} s and its reset {basis_s - build:.3g} s"
        if limit > floor:
            why = f"{SLOWDOWN:g}× the benchmark's typical first reset of {typically}"
        else:
            why = f"the floor for a reset; the benchmark's first reset typically takes {typically}"
    elif basis == UNMEASURED:
        why = f"before any {name} was measured"
    elif limit > floor:
        whose = "mean" if basis == MEASURED else "benchmark's typical"
        why = f"{SLOWDOWN:g}× the {whose} {name} of {basis_s:.3g} s"
    else:
        whose = f"its mean is {basis_s:.3g} s" if basis == MEASURED else f"typically {basis_s:.3g} s"
        why = f"the floor for {call}; {whose}"
    return f"{call} ran {_s(ran)} s, past its limit of {limit:g} s ({why}); --env-timeout sets it"


def _agent_detail(record: Sequence[float], used: float, limits: EpisodeLimits) -> str:
    env_s = record[SINCE] - record[STARTED] - record[AGENT_S]
    return (
        f"the agent used {_s(used)} s outside env calls, past its allowance of {limits.agent_s:g} s ({limits.budget} "
        f"steps × {limits.per_step_s:g} s; env calls took {env_s:.1f} s and are not counted); "
        "--act-timeout limits each act instead"
    )


def _episode_detail(record: Sequence[float], now: float, limits: EpisodeLimits, what: str) -> str:
    return (
        f"the episode ran {_s(now - record[STARTED])} s, past --episode-timeout {limits.episode_s:g} s, {what}; "
        "--episode-timeout sets it"
    )


def _s(seconds: float) -> str:
    """Seconds as a detail shows them: enough digits to tell 0.52 from a limit of 0.5."""
    return f"{seconds:.2f}" if seconds < 10 else f"{seconds:.1f}"


# -- the record across processes and hosts ---------------------------------------------------------------------------


def read(record: Sequence[float]) -> list[float]:
    """A copy of a record another process or thread is writing, without a lock. The worker writes PARTY last, so a
    reader that reads it first gets the fields of that party's stretch, or newer ones: a newer SINCE only makes the
    stretch look just begun. The worker writes SINCE before AGENT_S and a reader reads them the other way round, so
    it never adds the agent's last stretch twice (a new AGENT_S with the old SINCE)."""
    party = record[PARTY]
    copy = list(record)
    copy[PARTY] = party
    return copy


def aged(record: Sequence[float], now: float) -> list[float]:
    """The record with its times as ages at `now`: what a worker on another host (another clock) sends."""
    out = list(record)
    out[SINCE], out[STARTED] = now - out[SINCE], now - out[STARTED]
    return out


def dated(ages: Sequence[float], now: float) -> list[float]:
    """A record sent by `aged`, on this host's clock."""
    out = list(ages)
    out[SINCE], out[STARTED] = now - out[SINCE], now - out[STARTED]
    return out


def silent(last: Sequence[float] | None, since: float) -> list[float]:
    """What a watcher assumes of a worker that has not answered since `since`: a call holds its interpreter, taken
    for the env's — the call it was in, else one that began then, with the step limit (a reset's before the
    episode's first call, or when nothing is known)."""
    out = list(last) if last is not None else [0.0] * RECORD_SIZE
    if out[PARTY] not in (ENV, HOLD):
        placing = out[PARTY] == AGENT and out[KIND] == RESET and out[SINCE] == out[STARTED]  # no env call yet
        if not placing:
            out[LIMIT] = out[STEP_LIMIT] if out[PARTY] == AGENT else RESET_FLOOR_S
        out[PARTY], out[SINCE] = ENV, since
        if last is None:
            out[STARTED] = since
    out[KIND] = SILENT
    return out


_clock = time.monotonic


class Meter:
    """The worker's side of the record: it measures the env's calls and the agent's time between them, publishes
    both, and has `judge` look at the episode when an env call begins or returns if a limit may have been passed
    (raising `OverLimit`, which the Kernel turns into the verdict). The env's mean times are kept over the worker's
    life, not per episode, its first reset (the build) left out. A step costs two clock reads and five float stores:
    no lock, no system call."""

    def __init__(self, record: MutableSequence[float] | None = None) -> None:
        shared = record if record is not None else [0.0] * RECORD_SIZE
        # a ctypes array (shared memory) is written through a memoryview: ten times cheaper per store
        self.record: MutableSequence[float] = shared if isinstance(shared, list) else _floats(shared)
        self.limits: EpisodeLimits | None = None
        self.verdict: Verdict | None = None  # this episode's, once one was found
        self._resets = self._steps = 0  # measured so far, and their seconds
        self._reset_s = self._step_s = 0.0
        self._built = False  # the worker's first reset, which builds the simulator, has run
        self._band = (math.inf, -math.inf)  # the step means the step limit stands for
        self._limit = {RESET: (0.0, 0.0, 0.0), STEP: (0.0, 0.0, 0.0), OBSERVE: (0.0, 0.0, 0.0)}
        self._published: tuple[float, float, float] | None = None  # the call's limit in the record
        self._kind = SILENT  # ... and its kind
        self._party = NOBODY
        self._since = self._agent_s = self._due = 0.0
        self._stretch = self._allowance = self._episode_due = math.inf

    def begin(self, limits: EpisodeLimits) -> None:
        """An episode starts (its placement first): the agent's time runs from now."""
        self.limits, self.verdict = limits, None
        reset_mean, step_mean = self._means()
        reset = self._limit[RESET] = call_limit(RESET, self._resets, reset_mean, limits, first=not self._built)
        self._remeasure(STEP, self._steps, step_mean)
        # the agent's stretch between env calls may run `_stretch` (with an act timeout), else what is left of
        # `_allowance`
        self._stretch = math.inf if limits.act_kill_s is None else limits.act_kill_s
        self._allowance = math.inf if limits.agent_s is None else limits.agent_s
        now = _clock()
        self._episode_due = math.inf if limits.episode_s is None else now + limits.episode_s
        self._agent_s = 0.0
        self._since, self._due = now, min(now + self._stretch, now + self._allowance, self._episode_due)
        record = self.record
        # the episode's first env call is its reset: a watcher that hears nothing more judges the silence by its limit
        record[KIND] = self._kind = RESET
        record[LIMIT], record[BASIS], record[BASIS_S] = self._published = reset
        record[STARTED] = now
        record[AGENT_S] = 0.0
        record[SINCE] = now
        record[PARTY] = self._party = AGENT

    def end(self) -> Verdict | None:
        """The episode's verdict is in: judge the agent's last stretch (unless a limit fired already) and stop."""
        verdict = None
        if self.verdict is None and self.limits is not None and self._party == AGENT:
            verdict = self.verdict = judge(self.record, _clock(), self.limits)
        self._party = NOBODY
        self.record[SINCE] = _clock()
        self.record[PARTY] = WRAP_UP
        return verdict

    def done(self) -> None:
        """The episode is handed back (its row and trace are made): nothing of it runs any more."""
        self.record[PARTY] = NOBODY

    def enter(self, kind: float) -> bool:
        """An env call begins (False: outside an episode, nothing is measured); raises `OverLimit` when the agent's
        time ran out before it."""
        if self._party != AGENT:
            return False
        now = _clock()
        if now > self._due:
            self._judge(now)
        limit = self._limit[kind]
        record = self.record
        if limit is not self._published or kind != self._kind:
            record[KIND] = self._kind = kind
            record[LIMIT], record[BASIS], record[BASIS_S] = self._published = limit
        agent_s = self._agent_s = self._agent_s + now - self._since
        self._since = now
        due = now + limit[0]
        self._due = due if due < self._episode_due else self._episode_due
        record[SINCE] = now  # before AGENT_S (see `read`)
        record[AGENT_S] = agent_s
        record[PARTY] = self._party = ENV
        return True

    def leave(self, kind: float) -> None:
        """The env call that `enter` began returned (or raised); raises `OverLimit` when it ran past its limit."""
        if self._party != ENV:  # a new episode began meanwhile (a server-mode node's reply read late)
            return
        now = _clock()
        verdict = None
        if now > self._due:
            assert self.limits is not None
            verdict = judge(self.record, now, self.limits)
        if kind == RESET and not self._built:  # the build: no measure of the resets to come
            assert self.limits is not None
            self._built = True
            self._limit[RESET] = call_limit(RESET, self._resets, self._means()[0], self.limits)
        elif verdict is None and kind == STEP:  # a call past its limit would raise the mean the next one gets
            count = self._steps = self._steps + 1
            total = self._step_s = self._step_s + now - self._since
            mean = total / count
            if not self._band[0] <= mean <= self._band[1]:
                self._remeasure(STEP, count, mean)
        elif verdict is None and kind == RESET:
            self._resets += 1
            self._reset_s += now - self._since
            self._remeasure(RESET, self._resets, self._reset_s / self._resets)
        self._since = now
        left = self._allowance - self._agent_s
        due = now + (left if left < self._stretch else self._stretch)
        self._due = due if due < self._episode_due else self._episode_due
        record = self.record
        record[SINCE] = now
        record[PARTY] = self._party = AGENT
        if verdict is not None:
            self._over(verdict)

    def hold(self, limit_s: float) -> bool:
        """The worker waits, inside one of the agent's calls, for what is neither party's doing (its policy host being
        started again): from now until `release` the episode's time is nobody's, for at most `limit_s` (past it, a
        watcher ends the episode `error`, reason `policy host unavailable`). False outside an agent's stretch."""
        if self._party != AGENT:
            return False
        now = _clock()
        agent_s = self._agent_s = self._agent_s + now - self._since
        self._since = now
        self._due = min(now + limit_s, self._episode_due)
        record = self.record
        record[LIMIT] = limit_s
        self._published = None  # the next env call publishes its own limit again
        record[SINCE] = now  # before AGENT_S (see `read`)
        record[AGENT_S] = agent_s
        record[PARTY] = self._party = HOLD
        return True

    def release(self) -> None:
        """The wait that `hold` began is over: the agent's time runs again."""
        if self._party != HOLD:
            return
        now = _clock()
        self._since = now
        left = self._allowance - self._agent_s
        due = now + (left if left < self._stretch else self._stretch)
        self._due = due if due < self._episode_due else self._episode_due
        self.record[SINCE] = now
        self.record[PARTY] = self._party = AGENT

    def _remeasure(self, kind: float, count: int, mean: float) -> None:
        """Set a call's limit from its mean; a step's stands while its mean stays within `REMEASURE` of the mean
        it was set from (no new limit to publish)."""
        assert self.limits is not None
        limit = self._limit[kind] = call_limit(kind, count, mean, self.limits)
        if kind == STEP:
            self._limit[OBSERVE] = limit
            self._band = _band(limit)
            self.record[STEP_LIMIT] = limit[0]

    def _means(self) -> tuple[float, float]:
        """The mean reset and step so far (0.0 before one was measured)."""
        return self._reset_s / max(1, self._resets), self._step_s / max(1, self._steps)

    def _judge(self, now: float) -> None:
        assert self.limits is not None
        verdict = judge(self.record, now, self.limits)
        if verdict is not None:
            self._over(verdict)

    def _over(self, verdict: Verdict) -> None:
        self.verdict = verdict
        raise OverLimit(verdict.status.value, verdict.reason, verdict.detail)


def _band(limit: tuple[float, float, float]) -> tuple[float, float]:
    """The means of a call for which its limit stands: any (explicit), those near the measured mean, else none."""
    _, basis, mean = limit
    if basis == EXPLICIT:
        return -math.inf, math.inf
    if basis == MEASURED:
        return mean * (1.0 - REMEASURE), mean * (1.0 + REMEASURE)
    return math.inf, -math.inf


def _floats(shared: MutableSequence[float]) -> MutableSequence[float]:
    view = memoryview(shared).cast("B").cast("d")  # type: ignore[arg-type]
    return cast(MutableSequence[float], view)
