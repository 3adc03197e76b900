"""The shapes the API answers with (they are also its OpenAPI schemas)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hylo.core.status import EpisodeStatus
from hylo.core.types import NodesetMode
from hylo.jobs.job import JobState, JobStatus
from hylo.panels.base import EnabledWhen, FieldKind, SideEffectName
from hylo.sessions.state import SessionState


class Started(BaseModel):
    """A queued job: its id, its run and its state."""

    job_id: str
    run_id: str
    state: JobState


class Queue(BaseModel):
    """Running jobs, then queued jobs in the order they will be served."""

    jobs: list[JobStatus]


class Runs(BaseModel):
    """Every run in the log dir, oldest first (as `hylo runs list` sees them)."""

    runs: list[dict[str, Any]]


class Episodes(BaseModel):
    """One page of a run's final episodes, ordered by (task, index); `total` counts every match of the filter."""

    run_id: str
    total: int
    offset: int
    limit: int
    episodes: list[dict[str, Any]]


class Episode(BaseModel):
    """One final episode of a run (its last attempt), as `Episodes` lists it."""

    run_id: str
    episode: dict[str, Any]


class SuiteBootstrap(BaseModel):
    """How a suite figure's interval was drawn: stratified resamples from a fixed-seed generator, percentile."""

    resamples: int
    seed: int
    confidence: float


class SuiteFigures(BaseModel):
    """A run's suite-level aggregates (`hylo runs show --json`'s `suite`, docs/statistics.md, Suite-level
    aggregates): the mean over tasks of the per-task success rates and the IQM of the per-(seed, task) rates, each
    with its stratified bootstrap interval; null figures, with `reason`, for a run of one task."""

    tasks: int = Field(description="the tasks counted: those with a scored episode")
    seeds: int
    unit: str = Field(description='what the bootstrap resamples within a task: "episode" or "(task, index) cluster"')
    mean: float | None
    mean_ci: list[float] | None
    iqm: float | None
    iqm_ci: list[float] | None
    left_out: list[str] = Field(description="tasks without a scored episode")
    bootstrap: SuiteBootstrap
    reason: str | None = Field(description="why there are no figures; null when there are")


class Improvement(BaseModel):
    """The probability of improvement P(B > A) of two runs (`hylo compare --json`'s `improvement`): the mean over
    tasks of P(X_B > X_A) + ½ P(X_B = X_A), with its stratified bootstrap interval; null, with `reason`, when fewer
    than two tasks are scored in both runs."""

    probability: float | None
    ci: list[float] | None
    tasks: int
    scores: str = Field(description='a task\'s scores: "seed" (per-seed success rates) or "episode" (0/1 outcomes)')
    unit_a: str
    unit_b: str
    per_task: dict[str, float]
    left_out: dict[str, str] = Field(description="task → why it is left out")
    bootstrap: SuiteBootstrap
    reason: str | None


class RunDetail(BaseModel):
    """A run (as listed in `Runs`), its summary (`hylo runs show --json`'s `summary`: counts of every status, success
    rate with its 95% Wilson interval, conservative rate, and `per_task`), its agent's code and what changed in it
    against the latest other run of the same configuration, its realtime figures (`hylo runs show
    --json`'s `realtime`; null for a run without realtime timing), its episodes clustered by (task, index) under
    its seeds (`hylo runs show --json`'s `seed_clusters`; null for a run of one seed) and its queued or running job."""

    run: dict[str, Any]
    summary: dict[str, Any]
    code: dict[str, Any] | None = Field(
        default=None,
        description="the agent's code identity (its `digest`, and per agent its source files, the versioned "
        "distributions they import and the files its arguments name: `parts`), as the run recorded it in its spec; "
        "null for a run made before runs recorded their code",
    )
    code_changes: dict[str, Any] | None = Field(
        default=None,
        description="how the code differs from that of `against`, the latest other run of the same configuration "
        "(`hylo runs show --json`'s `code_changes`: `changes`, each a source file, distribution or argument file "
        "`changed`, `added` or `removed`, and `same_code`); null when no other run of the configuration recorded its "
        "code",
    )
    realtime: dict[str, Any] | None = Field(
        default=None,
        description="act latency percentiles, control rate, stale and hold ratios, chunks, watchdog ends "
        "(docs/evallog.md, Realtime metrics); null without realtime timing",
    )
    seed_clusters: dict[str, Any] | None = Field(
        default=None,
        description="a run of several seeds (`--seeds`): seeds, clusters (episode keys), design_effect, success_ci "
        "clustered by (task, index), pass_at_k and per_seed success rates (docs/statistics.md); null for one seed",
    )
    suite: SuiteFigures | None = Field(
        default=None, description="the suite-level aggregates (`hylo runs show --json`'s `suite`)"
    )
    job: JobStatus | None


class EpisodeTrace(BaseModel):
    """The recorded trace events of one attempt of an episode, and the attempts there are."""

    run_id: str
    episode_id: str
    attempt: int
    attempts: list[int]
    events: list[dict[str, Any]]


class TimelineReview(BaseModel):
    """The shield's review of one step's action: `approved` false when it aborted the episode, `modified` when it
    changed the action (an intervention), its reasons and the guard that refused it."""

    approved: bool
    modified: bool
    reasons: list[str]
    guard: str | None


class TimelineStep(BaseModel):
    """One env step of an episode's timeline. `action`: its numbers, flattened (one per action dimension; null when
    the action is not numbers, e.g. a digest of a large array); `executed` false for the step whose review aborted
    the episode; `seq_first`..`seq_last`: the sequence numbers of its trace events (inclusive)."""

    step: int
    executed: bool
    action: list[float | None] | None
    hold: bool
    reward: float | None
    terminated: bool
    truncated: bool
    success: bool
    review: TimelineReview | None
    seq_first: int
    seq_last: int


class TimelineChunk(BaseModel):
    """One chunk the agent returned (`agent.chunk`): asked for at step `requested_at`, merged at `start_step`, its
    first `dropped` actions stale by then."""

    seq: int
    requested_at: int
    start_step: int
    size: int
    execution_steps: int
    latency_s: float | None
    virtual_latency_s: float | None
    dropped: int
    delay_steps: int


class TimelineEnd(BaseModel):
    """How the episode ended (its `episode.end`)."""

    status: str
    reason: str
    success: bool
    steps: int
    safety_interventions: int


class TimelineVideo(BaseModel):
    """One camera's video of the episode (`GET /runs/{run}/video`): it plays at `fps` and has `frames` frames; frame
    `k + frame_offset` shows the observation step k acted on (0: frame 0 is the reset's), frame `k + frame_offset + 1`
    what step k's action led to. Frame i is on screen from i / fps to (i + 1) / fps seconds."""

    camera: str | None = Field(description="the camera's name; null: the run's one recorded camera")
    fps: float
    frames: int
    frame_offset: int


class EpisodeTimeline(BaseModel):
    """An episode's trace as one row per env step (docs/web.md, the episode viewer), bounded: at most 2000 steps
    from `first_step` of `total_steps`, the first 32 of `total_dims` action dimensions; `cut` says what was left
    out (null: nothing)."""

    run_id: str
    episode_id: str
    attempt: int
    attempts: list[int]
    first_step: int
    total_steps: int
    total_dims: int
    dim_names: list[str]
    dt: float | None = Field(description="the env's control period in seconds; null when the trace does not tell")
    steps: list[TimelineStep]
    chunks: list[TimelineChunk]
    end: TimelineEnd | None = Field(description="null for an episode that has no `episode.end`")
    cut: str | None
    videos: list[TimelineVideo] = Field(description="the episode's videos (none: the timeline alone)")


class RunTiming(BaseModel):
    """What a run ran under: its protocol (null: none named), its timing and timing options."""

    protocol: str | None
    timing: str
    timing_options: dict[str, Any]


class Comparison(BaseModel):
    """Two runs paired by episode id (`hylo compare --json`): what each ran under, pair counts, rates, the McNemar
    exact p-value and the flipped episodes. `difference` is `rate_b - rate_a`."""

    run_a: str
    run_b: str
    timing_a: RunTiming
    timing_b: RunTiming
    n_pairs: int
    only_in_a: int
    only_in_b: int
    abstained: int
    both_success: int
    a_only: int
    b_only: int
    neither: int
    rate_a: float | None
    rate_b: float | None
    difference: float | None
    p_value: float
    correlation: float | None = Field(
        default=None,
        description="the pairing correlation: phi of A's and B's success over the pairs both scored (what `hylo plan "
        "--correlation` takes); null when undefined",
    )
    correlation_note: str | None = Field(default=None, description="why the correlation is undefined, when it is")
    flips: list[dict[str, str]]
    paired: int
    n_a: int
    n_b: int
    per_task: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="each task's pairs, rates, difference, McNemar p-value and its Holm adjustment over the tasks",
    )
    improvement: Improvement | None = Field(
        default=None, description="the probability of improvement P(B > A) (`hylo compare --json`'s `improvement`)"
    )


class ABSummary(BaseModel):
    """An A/B comparison as listed: its id, the two agents and runs, the decision and how many pairs it took."""

    ab_id: str
    agent_a: str
    agent_b: str
    run_a: str
    run_b: str
    decision: str | None = Field(
        description='"A better", "B better", "no difference ≥ δ" (stopped for futility), or null when the test did '
        "not decide"
    )
    pairs_used: int
    max_pairs: int
    design: str = Field(default="anytime", description='"anytime" (extendable) or "capped" (calibrated to max_pairs)')
    min_effect: float | None = Field(default=None, description="δ of the futility stop; null: none")


class ABRecords(BaseModel):
    """Every A/B comparison of the log dir, oldest first."""

    comparisons: list[ABSummary]


class ABRecord(ABSummary):
    """An A/B comparison's record (`hylo ab show --json`): the difference `rate_b - rate_a` with its confidence
    sequence, the flips, the abstentions, and the path of the statistic (log E after each scored pair) with the
    threshold `log(1/alpha)` it decides at."""

    difference: float | None
    confidence_sequence: list[float]
    confidence_sequence_kind: str = Field(
        default="betting",
        description='"test": every p_B − p_A the deciding test has not rejected, which excludes 0 exactly when it '
        'decided; "anytime": the anytime test\'s interval beside a capped design, valid on its own; "betting": a '
        "record made before, whose separate betting interval may contain 0 although the test decided",
    )
    reuse_runs: bool = Field(
        default=False, description="whether the comparison ran on the runs `hylo eval` made (`--reuse-runs`)"
    )
    flips: dict[str, int]
    abstentions: int
    alpha: float
    log_evalue: float
    threshold: float
    path: list[float]
    stopped_for: str | None = Field(
        default=None, description='"efficacy", "futility", "curtailment", "cap", or null (a record made before)'
    )
    extendable: bool = Field(default=True, description="whether a larger --max-episodes may extend it (anytime)")
    lead_path: list[int] = Field(default_factory=list, description="B's lead (b_wins − a_wins) after each pair")
    efficacy_boundary: list[int | None] = Field(
        default_factory=list, description="the |lead| that decided at each pair (null where none could)"
    )
    futility_boundary: list[float | None] = Field(
        default_factory=list, description="the |lead| below which it stopped for futility at each pair (null: none)"
    )


class SweepSummary(BaseModel):
    """A latency sweep as listed: its id, agent, benchmark, the grid asked for and how many points ran."""

    sweep_id: str
    benchmark: str
    agent: str
    latency_steps: list[int]
    execution_steps: list[int] | None = Field(description="the horizons swept; null: the agent's own")
    chunk_size: int | None = Field(description="H, the agent's chunk size, when it declares one")


class SweepRecords(BaseModel):
    """Every sweep of the log dir, oldest first."""

    sweeps: list[SweepSummary]


class SweepPoint(BaseModel):
    """One grid point's run: its success rate with the 95% Wilson interval and McNemar's exact p against the
    zero-latency run at the same horizon (null for that run itself, or when the sweep has none)."""

    latency_steps: int
    execution_steps: int | None
    success_rate: float | None
    success_ci: list[float] | None
    mcnemar_p: float | None
    run_id: str
    n: int
    scored: int
    successes: int
    conservative_success_rate: float | None
    status_counts: dict[str, int]
    pairs: int | None = None
    abstained_pairs: int | None


class SweepRecord(SweepSummary):
    """A sweep's record (`hylo sweep show --json`): its points ordered by latency then horizon, the points refused
    with the rule each breaks, and its plot's files."""

    split: str | None
    tasks: list[str] | None
    agent_args: dict[str, Any]
    episodes: int
    seeds: list[int]
    timing_options: dict[str, Any]
    reuse_runs: bool = Field(
        default=False, description="whether each point ran on the run `hylo eval` made for it (`--reuse-runs`)"
    )
    points: list[SweepPoint]
    refused: list[dict[str, Any]]
    plot: dict[str, str]


# -- live: env panels and sessions (docs/live.md) -----------------------------------------------------------------


class Outcome(BaseModel):
    """How an execution ended (`EpisodeOutcome.to_json`)."""

    status: EpisodeStatus
    success: bool
    steps: int
    reason: str
    safety_interventions: int
    detail: str | None
    metrics: dict[str, Any]


class FrameRef(BaseModel):
    """A session's latest camera frame: its number, the env step it shows, its camera and where to fetch it (PNG)."""

    number: int
    step: int
    camera: str
    url: str


class SessionBrief(BaseModel):
    """The state each message of a session's stream carries."""

    id: str
    state: SessionState
    step: int = Field(description="env steps of the current execution (of the last one when idle)")
    episode_id: str | None
    executions: int
    last_outcome: Outcome | None
    frame: FrameRef | None


class LastExecution(BaseModel):
    """The last execution's episode, steps and wall time."""

    episode_id: str
    steps: int
    wall_s: float
    steps_per_s: float | None


class SessionInfo(SessionBrief):
    """A session (`GET /api/sessions/{id}`): its brief state, what it runs and its details."""

    benchmark: str
    graph: str
    agent: str | None
    panel: str | None
    last_execution: LastExecution | None
    containers: dict[str, Any] = Field(description="the state containers' values (at the last iteration while running)")
    events: int = Field(description="the position of the session's event feed")
    error: str | None
    created_at: float = Field(description="when the session was made (seconds since the epoch)")


class SessionList(BaseModel):
    """Every session of the server."""

    sessions: list[SessionInfo]


class SessionClosed(BaseModel):
    """A session closed (200), or closing while an env step or agent call is still running (202)."""

    id: str
    state: SessionState


class SessionEvents(BaseModel):
    """A session's recent trace events after a position: the position now, how many the ring no longer held."""

    position: int
    dropped: int
    events: list[dict[str, Any]]


class PanelContextInfo(BaseModel):
    """Where a panel runs: in the server (`local`) or in a server-mode nodeset's subprocess (`server`)."""

    mode: NodesetMode
    server_url: str | None
    nodeset_name: str | None


class PanelFieldInfo(BaseModel):
    """One input of a panel (`EnvPanelField`)."""

    name: str
    kind: FieldKind
    label: str
    options: list[Any] | None
    min: float | None
    max: float | None
    step: float | None
    dynamic: bool
    help: str
    moves_episode: bool


class PanelActionInfo(BaseModel):
    """One button of a panel (`EnvPanelAction`)."""

    name: str
    label: str
    side_effect: SideEffectName
    enabled_when: EnabledWhen
    signal_name: str | None


class PanelSummary(BaseModel):
    """A panel as listed, with the session it belongs to and that session's state (`idle` without one)."""

    name: str
    display_name: str
    context: PanelContextInfo
    session: str | None
    state: SessionState


class PanelList(BaseModel):
    """Every env panel."""

    panels: list[PanelSummary]


class PanelInfo(BaseModel):
    """A panel's declaration (`info()`), its `on_load()` as `state` and its session; a panel may declare more."""

    model_config = ConfigDict(extra="allow")

    name: str
    display_name: str
    fields: list[PanelFieldInfo]
    actions: list[PanelActionInfo]
    context: PanelContextInfo
    state: dict[str, Any] = Field(description="`on_load()`: availability, `step_budget`, the field values")
    session: SessionInfo | None


class FieldOptions(BaseModel):
    """A field's options (`on_options`)."""

    name: str
    options: list[Any]


class PanelAnswer(BaseModel):
    """A hook's answer (an intent, with whatever values the panel adds), what was done with it and the panel's
    session. A key the answer does not hold is left out."""

    model_config = ConfigDict(extra="allow")

    ok: bool = True
    side_effect: str | None = Field(default=None, description="the intent: one of `SideEffect`'s values")
    carried_out: str | None = Field(default=None, description="the run intent the session carried out")
    forwarded: bool | None = Field(default=None, description="whether a `signal` intent reached the session's runner")
    signal_name: str | None = None
    signal_payload: dict[str, Any] | None = None
    signal_error: str | None = Field(default=None, description="why the runner did not take the signal")
    session: SessionInfo | None


class Problem(BaseModel):
    """A refusal: `detail` says why, as a sentence or (422) as one entry per problem, each naming where it is
    (`loc`, as FastAPI's validation errors do) or which graph node it is about; `message` sums a list up."""

    detail: str | list[dict[str, Any]] = Field(description="why the request was refused")
    message: str | None = None


_WHY = {
    400: "the body could not be parsed",
    401: "the token is missing or wrong (a server started with --token)",
    403: "a foreign Host or Origin, or a cross-site read (docs/api.md, Security)",
    404: "no such run, job, A/B comparison, sweep, graph, panel or session",
    408: "the request body did not arrive in time (docs/api.md, Limits)",
    409: "the request contradicts the state: a run with an active job, a busy panel, a full server",
    413: "the body is larger than the route accepts",
    415: "the body is not declared JSON",
    422: "a value is refused; `detail` names the field",
    429: "the job queue is full (--max-queued), or the server serves as many event streams as it may",
    502: "a panel living in a subprocess failed",
}

PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "description": why} for code, why in _WHY.items() if code != 502
}
"""The refusals any route may answer, as the OpenAPI document lists them."""

PANEL_PROBLEMS: dict[int | str, dict[str, Any]] = {**PROBLEMS, 502: {"model": Problem, "description": _WHY[502]}}
"""Those of the env-panel and session routes, which may also reach a panel in a subprocess."""


def streamed(media_type: str, description: str) -> dict[int | str, dict[str, Any]]:
    """The success answer of a route that sends `media_type` (a file, an image, server-sent events) instead of JSON,
    for its `responses`. (A route's own `response_class` would name its refusals' media type too: they are JSON.)"""
    schema = {"type": "string"} if media_type.startswith("text/") else {"type": "string", "format": "binary"}
    return {200: {"description": description, "content": {media_type: {"schema": schema}}}}
