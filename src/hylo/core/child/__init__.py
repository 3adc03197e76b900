"""Child processes: started so that they die with their parent, killed with whatever they started, and their
exceptions sent back by type. The agent of a hard timeout, an eval worker, a server-mode nodeset's subprocess and a
job's process are all started and ended here."""

from hylo.core.child.exceptions import RemoteError, RemoteTraceback, carry, error_payload, rebuild_error
from hylo.core.child.spawn import (
    Child,
    die_with_parent,
    kill,
    kill_group,
    pdeathsig_available,
    popen,
    reap,
    signal_group,
    signal_name,
    spawn_process,
)

__all__ = [
    "Child",
    "RemoteError",
    "RemoteTraceback",
    "carry",
    "die_with_parent",
    "error_payload",
    "kill",
    "kill_group",
    "pdeathsig_available",
    "popen",
    "reap",
    "rebuild_error",
    "signal_group",
    "signal_name",
    "spawn_process",
]
