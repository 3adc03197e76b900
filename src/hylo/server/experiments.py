"""The experiment routes of the eval API (under `/api/eval/v2`): the A/B comparisons `hylo ab` recorded and the
latency sweeps `hylo sweep` recorded, listed and read, and a sweep's plot."""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import APIRouter
from fastapi.responses import FileResponse
from pydantic import BaseModel, ValidationError

from hylo.experiments.ab import list_ab, read_ab
from hylo.experiments.sweep import PLOT_SVG, list_sweeps, read_sweep, sweep_plot
from hylo.server.dependencies import Scheduler
from hylo.server.models import ABRecord, ABRecords, ABSummary, SweepRecord, SweepRecords, SweepSummary, streamed

SVG_POLICY = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
"""A plot opened on its own runs nothing and loads nothing (it holds neither script nor link; this makes sure)."""

router = APIRouter(tags=["experiments"])

Listed = TypeVar("Listed", bound=BaseModel)


def _readable(model: type[Listed], records: list[dict[str, Any]]) -> list[Listed]:
    """The records that read as `model` (A/B or sweep summaries), as listed; one edited by hand into something else
    is left out."""
    summaries = []
    for record in records:
        try:
            summaries.append(model.model_validate(record))
        except ValidationError:
            continue
    return summaries


@router.get("/ab", response_model=ABRecords, summary="Every A/B comparison in the log dir")
def ab_list(scheduler: Scheduler) -> ABRecords:
    """The comparisons `hylo ab` recorded, oldest first: agents, runs, decision, pairs used of the most allowed. A
    file that does not hold a record (edited by hand) is left out."""
    return ABRecords(comparisons=_readable(ABSummary, list_ab(scheduler.log_dir)))


@router.get("/ab/{ab_id}", response_model=ABRecord, summary="An A/B comparison's record")
def ab_record(ab_id: str, scheduler: Scheduler) -> ABRecord:
    """As `hylo ab show --json`: the decision, the pairs used, the difference with its confidence sequence, the flips,
    the abstentions, the path of log E against its threshold, the design, δ and why it stopped, and B's lead after
    each pair with the efficacy and futility boundaries there. 404 for an unknown id (an id is `ab-` and 12 hex
    digits, never a path)."""
    return ABRecord.model_validate(read_ab(scheduler.log_dir, ab_id))


@router.get("/sweeps", response_model=SweepRecords, summary="Every latency sweep in the log dir")
def sweeps(scheduler: Scheduler) -> SweepRecords:
    """The sweeps `hylo sweep` recorded, oldest first: agent, benchmark, the grid asked for. A file that does not hold
    a record (edited by hand) is left out."""
    return SweepRecords(sweeps=_readable(SweepSummary, list_sweeps(scheduler.log_dir)))


@router.get("/sweeps/{sweep_id}", response_model=SweepRecord, summary="A latency sweep's record")
def sweep_record(sweep_id: str, scheduler: Scheduler) -> SweepRecord:
    """As `hylo sweep show --json` (without the directory): every point's success rate with its Wilson interval,
    McNemar's p against the zero-latency point at its horizon and its run; the points refused with the rule. 404 for
    an unknown id (an id is `sweep-` and 12 hex digits, never a path)."""
    return SweepRecord.model_validate(read_sweep(scheduler.log_dir, sweep_id))


@router.get(
    "/sweeps/{sweep_id}/plot.svg",
    response_class=FileResponse,
    responses=streamed("image/svg+xml", "the plot, which runs and loads nothing"),
    summary="A latency sweep's plot (SVG)",
)
def sweep_svg(sweep_id: str, scheduler: Scheduler) -> FileResponse:
    """Success against latency, one line per execution horizon with its Wilson band, as `hylo sweep` drew it. 404
    for an unknown id or a sweep without its plot."""
    path = sweep_plot(scheduler.log_dir, sweep_id, PLOT_SVG)
    return FileResponse(path, media_type="image/svg+xml", headers={"Content-Security-Policy": SVG_POLICY})
