"""Benchmarks by name: a registered benchmark that cannot load here is refused in one line naming its module, and
listed as unavailable with the same words."""

from __future__ import annotations

import re
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from hylo.cli import main
from hylo.core import registry as core_registry
from hylo.core.registry import RegistryError
from hylo.envs.registry import BENCHMARK_REGISTRY, ENTRY_POINT_GROUP, describe_benchmark, get_benchmark

MESSAGE = "cannot import benchmark module 'no_such_module_for_hylo' (from 'no_such_module_for_hylo:Bench')"


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """A package registers benchmark `broken`, whose module is not installed."""
    plugin = EntryPoint("broken", "no_such_module_for_hylo:Bench", ENTRY_POINT_GROUP)
    monkeypatch.setattr(core_registry, "entry_points", lambda *, group: [plugin] if group == ENTRY_POINT_GROUP else [])
    BENCHMARK_REGISTRY.refresh()
    request.addfinalizer(BENCHMARK_REGISTRY.refresh)


@pytest.mark.usefixtures("broken")
def test_a_registered_benchmark_that_cannot_load_is_refused_naming_its_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(RegistryError, match=re.escape(MESSAGE)):
        get_benchmark("broken")
    assert main(["eval", "broken", "--agent", "random", "--episodes", "1", "--log-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"hylo: error: {MESSAGE}: No module named "
                                                             "'no_such_module_for_hylo'"]  # fmt: skip
    assert not list(tmp_path.iterdir())  # refused before anything ran


@pytest.mark.usefixtures("broken")
def test_it_is_listed_as_unavailable_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    info = describe_benchmark("broken")
    assert (info.available, info.target, info.splits) == (False, "no_such_module_for_hylo:Bench", [])
    assert info.reason is not None and MESSAGE in info.reason
    assert main(["list", "benchmarks"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("broken"))
    assert f"unavailable: {MESSAGE}" in line and "gymnasium" not in line
