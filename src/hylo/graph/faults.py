"""What ends a graph execution from outside its nodes' own code, or keeps a graph from being set up: a server-mode
nodeset's subprocess that died, a runner's gate that stopped the execution, a node that could not be set up."""

from __future__ import annotations

from hylo.core.errors import HyloError, HyloFailure
from hylo.graph.node import Owner


class NodesetCrashed(HyloFailure):
    """The subprocess of a server-mode nodeset died during a call; `owner` says whose fault it is."""

    def __init__(self, nodeset: str, owner: Owner, why: str) -> None:
        super().__init__(f"nodeset {nodeset!r} crashed: {why}")
        self.nodeset = nodeset
        self.owner = owner
        self.why = why


class ExecutionStopped(HyloFailure):
    """Raised by a runner's `gate` to end the execution between two iterations (Stop pressed, the episode moved);
    the execution ends `infra_invalid` (an abstention: neither the agent's success nor its failure) with `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GraphSetupError(HyloError):
    """A node could not be set up (bad agent arguments, an env it cannot build); the message names the node."""
