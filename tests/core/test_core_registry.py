"""One registry mechanism for every kind: built-ins first, entry points that never shadow them, import paths only where
allowed, entry points read once per process and targets loaded once, `import_target` naming what is missing."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

import pytest

from hylo.core import registry as core_registry
from hylo.core.errors import UnknownChoice
from hylo.core.registry import Registry, RegistryError, import_target

GROUP = "hylo.test-things"


class Thing:
    """A thing of the test kind."""


class Installed(list[EntryPoint]):
    """The entry points installed, and the groups read so far."""

    reads: list[str]


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> Installed:
    installed = Installed()
    installed.reads = []

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        installed.reads.append(group)
        return [ep for ep in installed if ep.group == group]

    monkeypatch.setattr(core_registry, "entry_points", fake_entry_points)
    return installed


def _registry(loads: list[str] | None = None, **options: Any) -> Registry[type]:
    def load(target: str, value: object) -> type:
        if loads is not None:
            loads.append(target)
        if not isinstance(value, type):
            raise RegistryError(f"thing {target!r} is not a class")
        return value

    return Registry("thing", GROUP, {"b": f"{__name__}:Thing", "a": f"{__name__}:Thing"}, load, **options)


def test_builtins_come_first_and_an_entry_point_never_shadows_one(plugins: Installed) -> None:
    plugins += [EntryPoint("z", "elsewhere:Z", GROUP), EntryPoint("a", "elsewhere:A", GROUP),
                EntryPoint("c", "elsewhere:C", GROUP), EntryPoint("x", "other:X", "hylo.other")]  # fmt: skip
    assert _registry().entries() == {"b": f"{__name__}:Thing", "a": f"{__name__}:Thing", "c": "elsewhere:C",
                                     "z": "elsewhere:Z"}  # fmt: skip
    assert _registry(sort=True).names() == ["a", "b", "c", "z"]


def test_entry_points_are_read_once_and_targets_loaded_once_until_refreshed(plugins: Installed) -> None:
    loads: list[str] = []
    things = _registry(loads)
    plugins.append(EntryPoint("late", f"{__name__}:Thing", GROUP))
    assert things.get("b") is Thing and things.get("a") is Thing and things.get("late") is Thing
    assert things.names() == ["b", "a", "late"]
    assert plugins.reads == [GROUP]
    assert loads == [f"{__name__}:Thing"]  # one target, loaded once
    plugins.append(EntryPoint("later", f"{__name__}:Thing", GROUP))
    assert "later" not in things.names()  # installed while the process runs: seen after a refresh
    things.refresh()
    assert "later" in things.names() and things.get("later") is Thing
    assert loads == [f"{__name__}:Thing"] * 2


def test_an_unknown_name_lists_the_names_and_the_other_forms(plugins: Installed) -> None:
    with pytest.raises(UnknownChoice) as info:
        _registry(forms=["thing:<id>"]).get("nope")
    assert info.value.choices == ["b", "a", "thing:<id>"]
    assert str(info.value).startswith("unknown thing 'nope'; choose from: b, a, thing:<id>")


def test_import_paths_only_for_a_kind_that_takes_them_and_only_where_imports_are_allowed(
    plugins: Installed,
) -> None:
    target = f"{__name__}:Thing"
    assert _registry(import_paths=True).resolve(target) is Thing
    with pytest.raises(UnknownChoice) as info:
        _registry(import_paths=True).resolve(target, allow_import=False)
    assert info.value.what == "thing (only registered things are accepted here)" and info.value.choices == ["b", "a"]
    with pytest.raises(UnknownChoice):
        _registry().resolve(target)  # a kind without import paths never imports one
    assert _registry(import_paths=True).resolve("a", allow_import=False) is Thing


def test_a_failure_is_raised_with_the_kinds_error_and_not_cached(plugins: Installed) -> None:
    class ThingError(Exception):
        """The kind's own error class."""

    plugins.append(EntryPoint("broken", "no_such_module_for_hylo:Thing", GROUP))
    plugins.append(EntryPoint("odd", f"{__name__}:GROUP", GROUP))
    things = _registry(error=ThingError)
    for _ in range(2):
        with pytest.raises(ThingError, match="cannot import thing module 'no_such_module_for_hylo'"):
            things.get("broken")
    with pytest.raises(RegistryError, match=r"thing '.*:GROUP' is not a class"):
        things.get("odd")


@pytest.mark.parametrize(
    "target, message",
    [
        ("no_such_module_for_hylo:X", "cannot import agent module 'no_such_module_for_hylo' (from "),
        (f"{__name__}:Missing", f"module '{__name__}' has no 'Missing' (from agent "),
        (f"{__name__}:Thing.missing", "has no 'Thing.missing'"),
        (f"{__name__}:", "bad agent import path"),
        (":Thing", "bad agent import path"),
    ],
)
def test_import_target_names_what_is_missing(target: str, message: str) -> None:
    with pytest.raises(RegistryError) as info:
        import_target(target, kind="agent")
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_import_target_walks_a_dotted_attribute_path() -> None:
    assert import_target(f"{__name__}:Thing.__doc__") == Thing.__doc__
