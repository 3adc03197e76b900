"""`hylo`'s exit statuses (a leaf: the CLI ends with them, the job scheduler reads a job's process by them)."""

EXIT_ABORTED = 1
"""A run that started and could not go on (re-running resumes it)."""
EXIT_INVALID = 1
"""`hylo graph validate`: the graph is invalid."""
EXIT_BAD_INPUT = 2
"""Bad input, refused before anything ran, with one line naming the bad value."""
EXIT_STRICT = 3
"""`--strict`: the run completed, and an episode is `error` or `infra_invalid`."""
EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C or SIGTERM)."""
