"""Server mode for nodesets: a nodeset the graph sets to `{"mode": "server"}` runs in a subprocess of its own
(`python -m hylo.graph.host`), one per worker, tagged `<nodeset>#<k>` where k is the worker's index (`w1` and its
replacements `w1.2`, `w1.3` → 1; `main` → 0).

The worker reaches it over a unix-domain socket in a private temporary directory (removed as soon as the
subprocess has connected): length-prefixed msgpack frames, each request answered by one reply, in order (`wire`).
Arrays of bool, integer and float dtypes travel raw (`hylo.core.codec`); tuples, numpy scalars, observations, action
chunks, tasks, step results, outcomes and signals keep their types; anything else travels pickled (both ends are this
worker and its own child). The subprocess as the worker sees it is `processes`; the nodes and the nodesets are
`proxies`.

Each node of the nodeset gets a proxy in the worker, a `Node` that forwards the node's hooks:

- `setup`: the node is built and set up in the subprocess, with a runtime of the subprocess' own: an env nodeset
  builds its benchmark's env there (shared by its env nodes); any other nodeset gets the placement's benchmark and
  the worker's env spec and capabilities. Privileged simulator state never reaches a subprocess.
- `start`: the task only. The graph's state containers and its trace bus stay in the worker, so a node that uses a
  container cannot run in server mode; the subprocess keeps its nodes' own containers (an agent's), cleared by the
  signals its nodes receive.
- `forward` (as `begin` + `end`, which the executor overlaps across the nodes of one level), `after_step`,
  `on_signal`, `finish` and `close`, each only if the node's class implements it.

A node's exception comes back by type (`hylo.core.child`), the subprocess' traceback as its cause: the errors that
decide an episode's status (`InvalidAction`, `SimulationDiverged`, `AgentTimeout`, `OverLimit`, ...) and
`NodeFailure` come back as themselves, so the executor gives the statuses it gives a local node; any other with its
type name and message. A subprocess that dies during a call
(a segfault, `os._exit`, SIGKILL) raises `NodesetCrashed` naming how it died, and the executor ends the episode
(`infra_invalid` for an env nodeset, `error` for any other); the next execution starts a new subprocess and sets its
nodes up in it again.

An env nodeset that is a benchmark's also hosts its benchmark's env panel in the subprocess, beside the env:
`ServerNodesets.env_panel(nodeset)` gives the worker a `RemoteEnvPanelProxy` of it, named `<panel>#<k>`
(`env_babyai#1`), whose hooks travel over the same connection (one request in flight, as ever). A panel request to
a subprocess that died restarts it first, as the next execution would; the new subprocess' panel starts from its
defaults.

A subprocess dies with its worker (`hylo.core.child`: PR_SET_PDEATHSIG on Linux, whichever thread started it, and a
watch of the worker's pid) and when its socket closes; `close()` asks each to stop, kills the ones that do not within
`stop_grace_s`.
"""

from hylo.graph.remote.processes import (
    CRASH_WAIT_S,
    POLL_S,
    START_TIMEOUT_S,
    STOP_GRACE_S,
    exit_cause,
    replica_index,
)
from hylo.graph.remote.proxies import NodeProxy, ServerNodesets
from hylo.graph.remote.wire import (
    RemoteNodeError,
    RemoteTraceback,
    encode_frame,
    error_payload,
    read_frame,
    rebuild_error,
)

__all__ = [
    "CRASH_WAIT_S",
    "POLL_S",
    "START_TIMEOUT_S",
    "STOP_GRACE_S",
    "NodeProxy",
    "RemoteNodeError",
    "RemoteTraceback",
    "ServerNodesets",
    "encode_frame",
    "error_payload",
    "exit_cause",
    "read_frame",
    "rebuild_error",
    "replica_index",
]
