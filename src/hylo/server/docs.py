"""`hylo serve --docs`: the interactive API docs (Swagger UI at `/docs`, ReDoc at `/redoc`), off unless the operator
asks. Their scripts come from a CDN and run in the origin where the web UI keeps its token, so they are a development
convenience, never a default. The versions are pinned and each file's hash is given (subresource integrity), so
neither a new release nor a file changed on the CDN runs: the browser refuses a script whose hash differs.

The pages themselves hold no data and are served without the token (a browser cannot send a header on a
navigation); they read the token the web UI keeps in this origin's storage and send it for the OpenAPI document and
every call they try."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import HTMLResponse
from starlette.types import Scope

DOCS_PATHS = frozenset({"/docs", "/redoc"})

SWAGGER_UI = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5.17.14"
REDOC = "https://cdn.jsdelivr.net/npm/redoc@2.1.5/bundles/redoc.standalone.js"

INTEGRITY = {  # sha384 of the files of the npm packages swagger-ui-dist 5.17.14 and redoc 2.1.5, which jsDelivr serves
    f"{SWAGGER_UI}/swagger-ui.css": "sha384-wxLW6kwyHktdDGr6Pv1zgm/VGJh99lfUbzSn6HNHBENZlCN7W602k9VkGdxuFvPn",
    f"{SWAGGER_UI}/swagger-ui-bundle.js": "sha384-wmyclcVGX/WhUkdkATwhaK1X1JtiNrr2EoYJ+diV3vj4v6OC5yCeSu+yW13SYJep",
    REDOC: "sha384-0GrsyTQc9Oqd8h+b2dbc4XdR2T/DYpy0tLNNstyx+LBMUyiBbcWPbEs9aRmUcaxD",
}


def _pinned(attribute: str, url: str) -> str:
    """The attributes (`src` or `href`) that load `url` only as the file whose hash is known."""
    return f'{attribute}="{url}" integrity="{INTEGRITY[url]}" crossorigin="anonymous"'


_TOKEN = 'const token = localStorage.getItem("hylo:token");'  # where web/src/api.ts keeps it

_SWAGGER_PAGE = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>hylo eval API</title>
<link rel="stylesheet" {_pinned("href", f"{SWAGGER_UI}/swagger-ui.css")}></head>
<body><div id="swagger-ui"></div>
<script {_pinned("src", f"{SWAGGER_UI}/swagger-ui-bundle.js")}></script>
<script>
{_TOKEN}
SwaggerUIBundle({{
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  validatorUrl: null,
  requestInterceptor: (request) => {{
    if (token) request.headers.Authorization = "Bearer " + token;
    return request;
  }},
}});
</script></body></html>
"""

_REDOC_PAGE = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>hylo eval API</title></head>
<body><div id="redoc"></div>
<script {_pinned("src", REDOC)}></script>
<script>
{_TOKEN}
fetch("/openapi.json", {{headers: token ? {{Authorization: "Bearer " + token}} : {{}}}})
  .then((answer) => answer.json())
  .then((spec) => Redoc.init(spec, {{}}, document.getElementById("redoc")));
</script></body></html>
"""


def is_docs_page(scope: Scope) -> bool:
    """Whether a request is for one of the docs pages (which hold no data)."""
    return scope["type"] == "http" and scope.get("method") in ("GET", "HEAD") and scope.get("path") in DOCS_PATHS


router = APIRouter(include_in_schema=False)
"""The two docs pages (included only on the operator's `--docs`)."""


@router.get("/docs")
def swagger() -> HTMLResponse:
    return HTMLResponse(_SWAGGER_PAGE)


@router.get("/redoc")
def redoc() -> HTMLResponse:
    return HTMLResponse(_REDOC_PAGE)
