"""Evaluation runs: the spec, its resolution, the runner and its workers. The public names of a run's record
(`hylo.evallog`) and its statistics (`hylo.stats`) are re-exported here, as `hylo.eval`'s API."""

from hylo.eval.resolve import EvalError
from hylo.eval.runner import EvalResult, Evaluation, Progress, evaluate
from hylo.eval.spec import EvalSpec
from hylo.evallog.store import EpisodeRow, EvalLog, RunInfo, list_runs
from hylo.evallog.writer import RunAborted
from hylo.stats.success import (
    Comparison,
    EpisodeRecord,
    Flip,
    NoPairs,
    Summary,
    compare_runs,
    mcnemar_exact,
    summarize,
    summarize_by_task,
    wilson_interval,
)

__all__ = [
    "Comparison",
    "EpisodeRecord",
    "EpisodeRow",
    "EvalError",
    "EvalLog",
    "EvalResult",
    "EvalSpec",
    "Evaluation",
    "Flip",
    "NoPairs",
    "Progress",
    "RunAborted",
    "RunInfo",
    "Summary",
    "compare_runs",
    "evaluate",
    "list_runs",
    "mcnemar_exact",
    "summarize",
    "summarize_by_task",
    "wilson_interval",
]
