"""The eval REST API: `hylo serve`, a `JobScheduler` behind FastAPI (docs/api.md).

Its names are imported on first use, so `hylo` commands that do not serve never import the web stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hylo.hosts import is_loopback
    from hylo.secret_env import TOKEN_ENV
    from hylo.server.access import ServerAccess
    from hylo.server.app import PREFIX, create_app
    from hylo.server.auth import BearerToken
    from hylo.server.binding import DEFAULT_HOST, DEFAULT_PORT, ServeRefused, check_binding
    from hylo.server.serve import serve

_WHERE = {
    "PREFIX": "hylo.server.app",
    "create_app": "hylo.server.app",
    "BearerToken": "hylo.server.auth",
    "DEFAULT_HOST": "hylo.server.binding",
    "DEFAULT_PORT": "hylo.server.binding",
    "TOKEN_ENV": "hylo.secret_env",
    "ServeRefused": "hylo.server.binding",
    "check_binding": "hylo.server.binding",
    "is_loopback": "hylo.hosts",
    "ServerAccess": "hylo.server.access",
    "serve": "hylo.server.serve",
}

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "PREFIX",
    "TOKEN_ENV",
    "BearerToken",
    "ServeRefused",
    "ServerAccess",
    "check_binding",
    "create_app",
    "is_loopback",
    "serve",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'hylo.server' has no attribute {name!r}")
