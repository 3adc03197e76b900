"""`OPTIONS` on any path: which methods it takes (204 with `Allow`), and no cross-origin access granted (no
`Access-Control-Allow-*` header, so a browser's preflight from another page fails as it should).

Include `router` after the API's routers and before the web UI's mount: it answers for the routes of the app that
serves the request.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from starlette.routing import BaseRoute, Match, Mount

from hylo.server.problems import NoRoute

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")

router = APIRouter()


@router.options("/{path:path}", include_in_schema=False)
def options(path: str, request: Request) -> Response:
    methods = {method for method in METHODS if any(_takes(route, request, method) for route in request.app.routes)}
    if not methods and not request.url.path.startswith("/api/"):
        methods = {"GET", "HEAD"}  # the web UI's files
    if not methods:
        raise NoRoute(f"no route {request.url.path!r}")
    return Response(status_code=204, headers={"Allow": ", ".join(sorted(methods | {"OPTIONS"}))})


def _takes(route: BaseRoute, request: Request, method: str) -> bool:
    """Whether `route` (not this one, nor a mount) serves the request's path with `method`."""
    if isinstance(route, Mount) or getattr(route, "endpoint", None) is options:
        return False
    return route.matches({**request.scope, "method": method})[0] is Match.FULL
