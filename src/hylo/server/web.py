"""The web UI: the built bundle of `web/` (committed in `hylo/server/web`, so an installed hylo needs no Node),
served at `/` by `hylo serve`.

`HYLO_WEB_DIR` points at another build of it (a front-end developer's `vite build --outDir`)."""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI
from starlette.responses import PlainTextResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

WEB_DIR_ENV = "HYLO_WEB_DIR"
BUNDLE = Path(__file__).with_name("web")

PUBLIC_PREFIXES = ("/assets/",)
PUBLIC_PATHS = frozenset({"/", "/index.html", "/favicon.ico"})


def web_dir() -> Path:
    """Where the served bundle is: `$HYLO_WEB_DIR` when set, else the one shipped in the package."""
    configured = os.environ.get(WEB_DIR_ENV)
    return Path(configured) if configured else BUNDLE


def is_public(scope: Scope) -> bool:
    """Whether a request is for the UI's own files (the page and its hashed assets), which hold no data and are
    served without the token: the page asks for the token and sends it with every API call."""
    if scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD"):
        return False
    path: str = scope.get("path", "")
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


class _Bundle(StaticFiles):
    """The bundle's files: `index.html` is revalidated on every load (it names the current assets); the assets'
    names carry a hash of their content, so a browser keeps them."""

    def file_response(self, full_path: os.PathLike[str] | str, *args: object, **kwargs: object) -> Response:
        response = super().file_response(full_path, *args, **kwargs)  # type: ignore[arg-type]
        immutable = Path(full_path).parent.name == "assets"
        response.headers["Cache-Control"] = "public, max-age=31536000, immutable" if immutable else "no-cache"
        return response


def mount_web(app: FastAPI) -> None:
    """Serve the bundle at `/` (beneath every route added before). Without a built bundle, `/` says how to build
    one instead of answering a bare 404."""
    directory = web_dir()
    if (directory / "index.html").is_file():
        app.mount("/", _Bundle(directory=directory, html=True), name="web")
        return

    @app.get("/", include_in_schema=False)
    def missing() -> PlainTextResponse:
        return PlainTextResponse(
            f"the web UI is not built in {directory}: run `make web` (needs Node.js and npm)", status_code=404
        )
