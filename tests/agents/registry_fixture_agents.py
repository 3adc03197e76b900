"""Agents (and non-agents) that tests/agents/test_registry.py builds through `make_agent("module:Class")`."""

from __future__ import annotations

from typing import Any

from hylo.core import ActionChunk, AgentBase, Observation


class Greeter(AgentBase):
    """An agent whose constructor arguments can be checked after `make_agent` built it."""

    name = "greeter"

    def __init__(self, greeting: str = "hello", times: int = 1, **extra: Any) -> None:
        self.greeting = greeting
        self.times = times
        self.extra = extra

    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk.single(0)


class Strict(AgentBase):
    """Takes exactly one keyword, `level`."""

    def __init__(self, level: int) -> None:
        self.level = level

    def act(self, obs: Observation) -> ActionChunk:
        return ActionChunk.single(self.level)


class Outer:
    class Inner(AgentBase):
        def act(self, obs: Observation) -> ActionChunk:
            return ActionChunk.single(0)


class NoAct:
    """Builds fine but is not an agent."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


def make_greeter(**kwargs: Any) -> Greeter:
    """A factory function works as well as a class."""
    return Greeter(greeting="from factory", **kwargs)


NOT_CALLABLE = 42
