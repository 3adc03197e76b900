"""The environment variables that hold secrets, and an environment without them for the processes hylo starts.

`hylo serve` may read its API token from `HYLO_TOKEN`. The processes it starts (each job's `hylo eval`, and the
workers those start) never call the API back, so they are given no token: an agent or a simulator could otherwise
read it, log it or send it anywhere, and any process of the same user can read another's environment.

This module is a leaf: names in, names out, no other hylo code, so every layer may use it.
"""

from __future__ import annotations

from collections.abc import Mapping

TOKEN_ENV = "HYLO_TOKEN"
"""The API token `hylo serve` requires when `--token` is not given."""

SECRET_ENV = frozenset({TOKEN_ENV})
"""Variables no process started by hylo inherits."""


def without_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` less the `SECRET_ENV` variables."""
    return {name: value for name, value in env.items() if name not in SECRET_ENV}
