"""The bounds of the remote agents' arguments (openpi, vla-eval): a request can never ask for more."""

MAX_ACTION_DIM = 4096
"""The longest action vector the bridge's shield or a remote agent is told to expect."""

MAX_CALL_S = 86_400.0
"""The longest `timeout` a remote agent's call may be given: one day."""

MAX_RETRIES = 100
"""The most reconnections a remote agent may be told to try."""

MAX_BACKOFF_S = 600.0
"""The longest first wait between a remote agent's reconnections."""

MAX_KEYS = 256
"""The most entries an openpi agent's `obs_map` and `extra` may have."""
