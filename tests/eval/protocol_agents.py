"""Chunked agents the protocol tests name as `protocol_agents:Class` (this directory is on sys.path)."""

from __future__ import annotations

from pydantic import Field

from hylo.core import ActionChunk
from hylo.core.agent import AgentArgs


class ArgsChunkedAgent:
    """Declares its chunk size in its `Args` (default 8)."""

    class Args(AgentArgs):
        chunk_size: int = Field(default=8, ge=1)
        execution_steps: int | None = None

    def __init__(self, chunk_size: int = 8, execution_steps: int | None = None) -> None:
        self.chunk_size = chunk_size
        self.execution_steps = execution_steps

    def act(self, obs):
        return ActionChunk.single(0)


class AttributeChunkedAgent:
    """Declares its chunk size (6) and horizon (4) as class attributes."""

    chunk_size = 6
    execution_steps = 4

    def act(self, obs):
        return ActionChunk.single(0)
