"""The submission model: an `EvalSpec` extended with the scheduling fields, validated like the spec itself."""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field, field_validator

from hylo.eval.spec import EvalSpec

SCHEDULING_FIELDS = ("priority", "cpus", "ram_gb", "gpu_mem_gb", "exclusive_gpu")

MAX_PRIORITY = 10**6
"""The largest priority either way."""
MAX_CPUS = 4096
MAX_GB = 1024.0**2
"""Bounds past any machine (a job larger than this machine is refused by admission, naming what it has)."""


class JobRequest(EvalSpec):
    """What `POST /api/eval/v2/start` takes: every `EvalSpec` field, plus `priority` (higher first), and the declared
    resources `cpus` (default: `workers`, one more for a batched job's policy host), `ram_gb` (default: 1.0 per
    worker), `gpu_mem_gb` (default 0) and `exclusive_gpu` (default false). Unknown fields are refused."""

    priority: int = Field(default=0, ge=-MAX_PRIORITY, le=MAX_PRIORITY)
    cpus: int | None = Field(default=None, ge=1, le=MAX_CPUS)
    ram_gb: float | None = Field(default=None, gt=0, le=MAX_GB)
    gpu_mem_gb: float = Field(default=0.0, ge=0, le=MAX_GB)
    exclusive_gpu: bool = False

    @field_validator("ram_gb", "gpu_mem_gb")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError(f"expected a finite number of GB, got {value}")
        return value

    def eval_spec(self) -> EvalSpec:
        """The spec alone; the fields the request set stay set (the scheduler tells a given `log_dir` from the
        default)."""
        data = self.model_dump(exclude=set(SCHEDULING_FIELDS), exclude_unset=True)
        return EvalSpec.model_validate(data)

    def scheduling(self) -> dict[str, Any]:
        """The keyword arguments of `JobScheduler.submit` beyond the spec."""
        return {name: getattr(self, name) for name in SCHEDULING_FIELDS}
