"""A submission checked before it is queued: `plan_run` as a request (without import paths unless the operator allows
them; benchmark options only as the benchmark declares them, whatever the operator allows), its errors pinned to the
field to blame, the log dir forced to the scheduler's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from hylo.agents.registry import AgentSpecError
from hylo.core.errors import HyloError, UnknownChoice
from hylo.eval.resolve import EvalError, plan_run
from hylo.eval.spec import EvalSpec
from hylo.jobs.errors import JobRefused

_CHOICE_FIELDS = {"benchmark": "benchmark", "agent": "agent", "split": "split", "task": "tasks"}


def blamed_field(exc: Exception) -> str | None:
    """The spec field a `plan_run` error is about (None when no single field is)."""
    text = str(exc)
    if isinstance(exc, EvalError) and exc.field is not None:
        return exc.field
    if isinstance(exc, UnknownChoice):
        return _CHOICE_FIELDS.get(exc.what.split(" ", 1)[0])
    if isinstance(exc, AgentSpecError):
        return "agent_args" if text.startswith("cannot build agent") else "agent"
    if isinstance(exc, ValidationError):
        errors = exc.errors()
        return str(errors[0]["loc"][0]) if errors and errors[0]["loc"] else None
    for needle, field in (
        ("timing", "timing_options"),
        ("step budget", "max_steps"),
        ("--fresh", "run_id"),
        ("--run-id", "run_id"),
        ("--address", "address"),
        ("--backend", "backend"),
        ("benchmark", "benchmark"),
        ("agent", "agent"),
    ):
        if needle in text:
            return field
    return None


def check_spec(
    spec: EvalSpec, log_dir: Path, check_url: Callable[[str], None] | None = None, *, allow_import: bool = False
) -> EvalSpec:
    """The spec as the job will run it: log dir the scheduler's, validated by `plan_run` (which refuses a run id the
    log dir reserves for its own files, and asks `check_url` about every URL its agents would connect to), run id
    fixed and `fresh` consumed. Import paths only with `allow_import` (the operator's `hylo serve --allow-import`);
    benchmark options only those the benchmark declares, within their bounds, with or without it (`--allow-import`
    lets a request name code, not files for an env to read). Raises `JobRefused` naming the field."""
    log_dir = log_dir.resolve()
    if "log_dir" in spec.model_fields_set and Path(spec.log_dir).resolve() != log_dir:
        raise JobRefused(
            "log_dir", f"log_dir {spec.log_dir!r} is not this scheduler's; its runs go to {str(log_dir)!r}"
        )
    spec = spec.model_copy(update={"log_dir": str(log_dir)})
    try:
        planned = plan_run(spec, allow_import=allow_import, check_url=check_url, request=True)
    except (HyloError, ValueError, LookupError) as exc:
        raise JobRefused(blamed_field(exc), str(exc)) from None
    return planned
