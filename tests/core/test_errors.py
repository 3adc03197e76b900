"""Every exception class hylo defines is a `HyloError`, so a caller can catch hylo's own errors in one clause; the
ones a caller already catches by a builtin base (`ValueError`, `LookupError`, `AssertionError`) keep it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import hylo
from hylo.conformance.errors import ConformanceError
from hylo.core.errors import HyloError, HyloFailure
from hylo.graph.executor import ExecutionStopped, NodesetCrashed
from hylo.graph.node import NodeFailure
from hylo.stats.success import NoPairs


def _hylo_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module in pkgutil.walk_packages(hylo.__path__, "hylo."):
        if module.name.endswith("__main__"):
            continue
        for obj in vars(importlib.import_module(module.name)).values():
            if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__.startswith("hylo."):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def test_every_hylo_exception_is_a_hylo_error() -> None:
    classes = _hylo_exceptions()
    assert len(classes) > 40
    outside = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, (HyloError, Warning)))
    assert outside == []


def test_runtime_failures_are_not_bad_input() -> None:
    for failure in (NodesetCrashed, ExecutionStopped, NodeFailure):
        assert issubclass(failure, HyloFailure)
    assert issubclass(NoPairs, ValueError) and issubclass(ConformanceError, AssertionError)
