"""The eval REST API: `hylo serve`, a `JobScheduler` behind FastAPI (docs/api.md)."""

from hylo.server.app import PREFIX, create_app
from hylo.server.auth import TOKEN_ENV, BearerToken, is_loopback
from hylo.server.serve import DEFAULT_HOST, DEFAULT_PORT, ServeRefused, check_binding, serve

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "PREFIX",
    "TOKEN_ENV",
    "BearerToken",
    "ServeRefused",
    "check_binding",
    "create_app",
    "is_loopback",
    "serve",
]
