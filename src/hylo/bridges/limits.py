"""The limits of served mode, in one place: the bridge's defaults, shared by the server and its command (which must
not import the server to show `--help`). The bounds of the remote agents' arguments live with those agents
(`hylo.agents.remote_limits`)."""

DEFAULT_MAX_FRAME_BYTES = 64 * 2**20
"""The largest frame the bridge reads (64 MiB: a PNG camera is some 100 kB, even eight raw 1024×1024 RGB ones
24 MiB); a larger one closes its connection (code 1009)."""

DEFAULT_MAX_CONNECTIONS = 32
"""The connections served at once (each has its own agent and thread); one more is refused with HTTP 503."""

DEFAULT_IDLE_TIMEOUT_S = 300.0
"""How long a connection may send nothing while the bridge waits for it before it is closed (a benchmark's slowest
reset or step must fit: vla-eval's client runs them on the thread that would answer)."""


DEFAULT_BATCH_WAIT_MS = 10.0
"""How long a batch of the batched bridge (`--batch`) waits for more requests after its first, as `hylo eval`'s."""

MAX_BATCH_WAIT_MS = 10_000.0
"""The longest a batch may be told to wait: ten seconds (as `hylo eval --batch-wait-ms`)."""
