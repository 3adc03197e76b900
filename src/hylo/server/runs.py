"""The run routes of the eval API (under `/api/eval/v2`): every run of the log dir, one run's detail, its final
episodes (paged, or one by id), an episode's trace, timeline and video, and two runs compared."""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Annotated, Any

import av
from fastapi import APIRouter, Query
from fastapi.responses import FileResponse

from hylo.confined import confined_file
from hylo.core.errors import shown
from hylo.core.status import EpisodeStatus
from hylo.core.types import MAX_SEED
from hylo.eval.code_identity import CodeIdentity
from hylo.evallog.logdir import RunNotFound, find_run, is_run_name
from hylo.evallog.realtime_metrics import episode_realtime, realtime_figures
from hylo.evallog.report import run_timing
from hylo.evallog.rows import EpisodeRow
from hylo.evallog.store import EvalLog, in_seq_range, list_runs, records
from hylo.evallog.timeline import MAX_STEPS, timeline
from hylo.jobs.errors import JobRefused
from hylo.server.dependencies import CodeChanges, Scheduler
from hylo.server.models import (
    Comparison,
    Episode,
    Episodes,
    EpisodeTimeline,
    EpisodeTrace,
    RunDetail,
    Runs,
    SuiteFigures,
    TimelineVideo,
    streamed,
)
from hylo.stats.success import compare_runs, seed_clusters, summary_json
from hylo.stats.suite import improvement, suite_figures, suite_units, units_from_tallies

router = APIRouter(tags=["runs"])

EpisodeId = Annotated[str, Query(min_length=1, description="the episode id, e.g. babyai/test/GoToLocal/0003@s0")]


def run_name(run: str) -> str:
    """A run named in a path: a run id (letters, digits, '-', '_', '.', not leading '.', at most 255 bytes) or a
    prefix of one, never a path out of the log dir nor a name the file system refuses."""
    if not is_run_name(run):
        raise RunNotFound(f"no run {shown(run)}")
    return run


def _listed(run: dict[str, Any]) -> dict[str, Any]:
    """A run as `/runs` lists it: its spec's code identity cut to its digest (a few kB per run otherwise)."""
    spec = run.get("spec")
    code = spec.get("code") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(code, dict):
        return run
    return {**run, "spec": {**spec, "code": {"digest": code.get("digest")}}}


def _episode_json(row: EpisodeRow) -> dict[str, Any]:
    """An episode as the API lists it: its EvalLog row, with its realtime figures under realtime timing."""
    realtime = episode_realtime(row)
    return row.to_json() if realtime is None else {**row.to_json(), "realtime": realtime}


def _several_seeds(spec: dict[str, Any]) -> bool:
    """Whether a run's spec runs each (task, index) under several seeds (`--seeds S1 S2 ...`)."""
    seeds = spec.get("seeds")
    return isinstance(seeds, list) and len(seeds) > 1


@router.get("/runs", response_model=Runs, summary="Every run in the log dir")
def runs(scheduler: Scheduler) -> Runs:
    """Every run as `hylo runs list --json` lists it, except that its spec's `code` is its `digest` alone (the whole
    identity, every source file's hash, is in `/runs/{run}`): the list is read every second while a job runs."""
    return Runs(runs=[_listed(info.to_json()) for info in list_runs(scheduler.log_dir)])


@router.get("/runs/{run}", response_model=RunDetail, summary="A run, its summary per task and its active job")
def run_detail(run: str, scheduler: Scheduler, memo: CodeChanges) -> RunDetail:
    """The run (as in `/runs`), its summary as `hylo runs show --json` gives it (every status counted, success rate
    over scored episodes with its 95% Wilson interval, conservative rate over all, and the same per task), its agent's
    code identity and how that differs from the latest other run of the same configuration (as `hylo runs show
    --json`'s `code_changes`), its realtime figures, a run of several seeds' episodes clustered by (task, index) (as
    `hylo runs show --json`'s `seed_clusters`), its suite-level aggregates (`suite`), and its queued or running job,
    if any. Only a run whose spec holds several seeds reads its episodes for the clusters: the summary and the suite
    figures of any other run are read from the log's tallies."""
    with EvalLog.open(find_run(scheduler.log_dir, run_name(run))) as log:
        info = log.info()
        tallies = log.tallies()
        realtime = realtime_figures(log.realtime_records())
        recs = records(log.final_episodes()) if _several_seeds(info.spec) else None
    clusters = seed_clusters(recs) if recs is not None else None
    suite = suite_figures(suite_units(recs) if recs is not None else units_from_tallies(tallies))
    job = scheduler.active_job(info.run_id)
    code = CodeIdentity.from_json(info.spec.get("code"))
    changes = memo.changes(info) if code is not None else None
    return RunDetail(
        run=info.to_json(),
        summary=summary_json(tallies=tallies),
        code=None if code is None else code.to_json(),
        code_changes=None if changes is None else changes.to_json(),
        realtime=None if realtime is None else realtime.to_json(),
        seed_clusters=None if clusters is None else clusters.to_json(),
        suite=SuiteFigures.model_validate(suite.to_json()),
        job=scheduler.status(job.job_id) if job is not None else None,
    )


@router.get("/runs/{run}/episodes", response_model=Episodes, summary="A run's final episodes, paged")
def episodes(
    run: str,
    scheduler: Scheduler,
    offset: Annotated[int, Query(ge=0, le=MAX_SEED)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    status: Annotated[EpisodeStatus | None, Query(description="only episodes that ended with this status")] = None,
    task: Annotated[str | None, Query(description="only episodes of this task")] = None,
) -> Episodes:
    with EvalLog.open(find_run(scheduler.log_dir, run_name(run))) as log:
        run_id = log.info().run_id
        total, rows = log.final_page(offset=offset, limit=limit, status=status, task=task)
    page = [_episode_json(row) for row in rows]
    return Episodes(run_id=run_id, total=total, offset=offset, limit=limit, episodes=page)


@router.get("/runs/{run}/episode", response_model=Episode, summary="One final episode, by its id")
def episode(run: str, episode: EpisodeId, scheduler: Scheduler) -> Episode:
    """The episode's last attempt, as `/episodes` lists it: what a link to one episode (a flip of a comparison)
    opens. 404 for an episode the run does not have."""
    with EvalLog.open(find_run(scheduler.log_dir, run_name(run))) as log:
        run_id = log.info().run_id
        final = max(log.attempts(episode), key=lambda row: row.attempt, default=None)
    if final is None:
        raise RunNotFound(f"run {run_id} has no episode {episode!r}")
    return Episode(run_id=run_id, episode=_episode_json(final))


Attempt = Annotated[int | None, Query(ge=1, le=MAX_SEED, description="which attempt (default: the last)")]


def _attempt_rows(log: EvalLog, run_id: str, episode: str, attempt: int | None) -> tuple[list[EpisodeRow], int]:
    """The episode's attempts and the one asked for (the last by default); RunNotFound when either is missing."""
    rows = sorted(log.attempts(episode), key=lambda row: row.attempt)
    if not rows or (attempt is not None and attempt not in {row.attempt for row in rows}):
        which = f"episode {episode!r}" + (f" attempt {attempt}" if attempt is not None else "")
        raise RunNotFound(f"run {run_id} has no {which}")
    return rows, attempt if attempt is not None else rows[-1].attempt


@router.get("/runs/{run}/trace", response_model=EpisodeTrace, summary="One episode's recorded trace")
def trace(
    run: str,
    episode: EpisodeId,
    scheduler: Scheduler,
    attempt: Attempt = None,
    from_seq: Annotated[int, Query(ge=0, le=MAX_SEED, description="only events from this sequence number")] = 0,
    to_seq: Annotated[
        int | None, Query(ge=0, le=MAX_SEED, description="only events up to this sequence number (inclusive)")
    ] = None,
) -> EpisodeTrace:
    """The trace events of one attempt of an episode, in order (those of one step of its timeline, with `from_seq`
    and `to_seq`). 404 for an episode the run does not have."""
    with EvalLog.open(find_run(scheduler.log_dir, run_name(run))) as log:
        run_id = log.info().run_id
        rows, chosen = _attempt_rows(log, run_id, episode, attempt)
        read = log.iter_trace(episode, chosen)
        events = list(in_seq_range(read, from_seq, to_seq) if from_seq > 0 or to_seq is not None else read)
    attempts = [row.attempt for row in rows]
    return EpisodeTrace(run_id=run_id, episode_id=episode, attempt=chosen, attempts=attempts, events=events)


@router.get("/runs/{run}/timeline", response_model=EpisodeTimeline, summary="One episode's timeline, step by step")
def episode_timeline(
    run: str,
    episode: EpisodeId,
    scheduler: Scheduler,
    attempt: Attempt = None,
    first_step: Annotated[
        int, Query(ge=0, le=MAX_SEED, description=f"the first step of the answer (at most {MAX_STEPS} steps)")
    ] = 0,
) -> EpisodeTimeline:
    """One attempt's trace as one row per env step (its action, reward, end flags, the shield's review, its events'
    sequence numbers), its chunks and how it ended, and its video's frame of each step (the last attempt's video
    only: an earlier attempt has none). Bounded: at most 2000 steps from `first_step` and 32 action dimensions, `cut`
    saying what was left out. 404 for an episode the run does not have, 422 for a `first_step` past its last step."""
    run_dir = find_run(scheduler.log_dir, run_name(run))
    with EvalLog.open(run_dir) as log:
        run_id = log.info().run_id
        rows, chosen = _attempt_rows(log, run_id, episode, attempt)
        steps = timeline(log.iter_trace(episode, chosen), first_step)
    if first_step > 0 and first_step >= steps.total_steps:
        raise JobRefused("first_step", f"first_step {first_step} is past the episode's {steps.total_steps} steps")
    final = rows[-1]
    videos: list[TimelineVideo] = []
    if chosen == final.attempt and final.video:
        path = confined_file(scheduler.log_dir, PurePath(run_dir.name, final.video))
        found = None if path is None else _video_track(path)
        videos = [] if found is None else [found]
    return EpisodeTimeline.model_validate(
        {
            "run_id": run_id,
            "episode_id": episode,
            "attempt": chosen,
            "attempts": [row.attempt for row in rows],
            **steps.to_json(),
            "videos": videos,
        }
    )


def _video_track(path: Path) -> TimelineVideo | None:
    """The rate and frame count of an episode's video (its one camera's), or None when it cannot be read. The
    recording's frame 0 is the reset's, then one per step (evallog/recording.py, FrameTap): frame offset 0."""
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate
            fps = float(rate) if rate else 0.0
            frames = int(stream.frames) or _counted(container)
    except (OSError, ValueError, IndexError, av.FFmpegError):
        return None
    if fps <= 0 or frames <= 0:
        return None
    return TimelineVideo(camera=None, fps=fps, frames=frames, frame_offset=0)


def _counted(container: Any) -> int:
    """A video's frames, counted by demuxing (a container that does not store the count)."""
    return sum(1 for packet in container.demux(video=0) if packet.size)


@router.get(
    "/runs/{run}/video",
    response_class=FileResponse,
    responses=streamed("video/mp4", "the episode's video"),
    summary="One episode's video (MP4)",
)
def video(run: str, episode: Annotated[str, Query(min_length=1)], scheduler: Scheduler) -> FileResponse:
    """The video recorded for an episode (`video` episodes per task were asked for). 404 when it has none."""
    run_dir = find_run(scheduler.log_dir, run_name(run))
    with EvalLog.open(run_dir) as log:
        attempts = log.attempts(episode)
    final = max(attempts, key=lambda row: row.attempt, default=None)
    if final is None or not final.video:
        raise RunNotFound(f"episode {shown(episode)} of run {run_dir.name} has no video")
    path = confined_file(scheduler.log_dir, PurePath(run_dir.name, final.video))
    if path is None:
        raise RunNotFound(f"the video of episode {shown(episode)} is missing from run {run_dir.name}")
    return FileResponse(path, media_type="video/mp4")


@router.get("/compare", response_model=Comparison, summary="Pair two runs' episodes and test the difference")
def compare(
    a: Annotated[str, Query(min_length=1, description="run a (id or unique prefix)")],
    b: Annotated[str, Query(min_length=1, description="run b (id or unique prefix)")],
    scheduler: Scheduler,
) -> Comparison:
    """Episodes paired by id; McNemar's exact test on the pairs both runs scored; every flipped episode; the
    probability of improvement over the tasks (`improvement`). As `hylo compare --json`. 422 when the runs cannot be
    paired (an episode id with different tasks)."""
    loaded = []
    for run in (a, b):
        with EvalLog.open(find_run(scheduler.log_dir, run_name(run))) as log:
            info = log.info()
            loaded.append((info.run_id, run_timing(info.spec), records(log.final_episodes())))
    (run_a, timing_a, recs_a), (run_b, timing_b, recs_b) = loaded
    try:
        comparison = compare_runs(recs_a, recs_b)
    except ValueError as exc:
        raise JobRefused(None, str(exc)) from exc
    runs = {"run_a": run_a, "run_b": run_b, "timing_a": timing_a, "timing_b": timing_b}
    answer = {**runs, **comparison.to_json(), "improvement": improvement(recs_a, recs_b).to_json()}
    return Comparison.model_validate(answer)
