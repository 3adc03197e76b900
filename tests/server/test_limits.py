"""Limits and the token over a real uvicorn: request bodies past their limit get 413 naming it (declared or chunked),
websocket messages past theirs close the connection with 1009, and the token may ride in the query string only
where a browser cannot send a header (websockets and GET)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from served_app import Served
from test_catalog import catalog_app, example
from websockets.exceptions import ConnectionClosedError, InvalidStatus
from websockets.sync.client import connect

from hylo.server.limits import MAX_WS_MESSAGE_BYTES, WS_CLOSE_TOO_BIG, BodyLimit

MiB = 1024 * 1024
TOKEN = "s3cret-token"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Served]:
    served = Served(catalog_app(tmp_path / "graphs"))
    yield served
    served.close()


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Served]:
    """The same app behind a token; its client sends no header."""
    served = Served(catalog_app(tmp_path / "graphs", token=TOKEN))
    yield served
    served.close()


def chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    """A body of `total` bytes sent without a Content-Length (chunked)."""
    while total > 0:
        yield b"x" * min(size, total)
        total -= size


# -- bodies --------------------------------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_refused_with_413_naming_it(server: Served) -> None:
    client = server.client
    too_big = client.post("/api/echo", content=b"x" * (3 * MiB))
    assert too_big.status_code == 413
    assert "1 MiB" in too_big.json()["detail"] and "/api/echo" in too_big.json()["detail"]

    assert client.post("/api/echo", content=b"x" * MiB).json() == {"received": MiB}  # the limit itself is fine
    assert client.post("/api/echo", content=b"x" * (MiB + 1)).status_code == 413
    assert client.get("/api/graphs").status_code == 200  # the server serves on


def test_a_chunked_body_is_cut_off_once_it_grows_past_the_limit(server: Served) -> None:
    refused = server.client.post("/api/echo", content=chunks(3 * MiB))
    assert refused.status_code == 413 and "1 MiB" in refused.json()["detail"]
    accepted = server.client.post("/api/echo", content=chunks(MiB - 10))
    assert accepted.status_code == 200 and accepted.json() == {"received": MiB - 10}


def test_a_graph_may_be_as_large_as_a_graph_file_and_no_larger(server: Served) -> None:
    doc = example(named=False)
    doc["description"] = "d" * int(1.5 * MiB)  # over the default limit, within the graph limit
    saved = server.client.put("/api/graphs/big", json=doc)
    assert saved.status_code == 200, saved.text[:300]
    assert len(server.client.get("/api/graphs/big").json()["description"]) == int(1.5 * MiB)

    doc["description"] = "d" * (3 * MiB)
    refused = server.client.put("/api/graphs/huge", json=doc)
    assert refused.status_code == 413 and "2 MiB" in refused.json()["detail"]
    chunked = server.client.put("/api/graphs/huge", content=chunks(3 * MiB))
    assert chunked.status_code == 413
    assert server.client.get("/api/graphs/huge").status_code == 404


def test_body_limits_are_checked_when_the_middleware_is_built() -> None:
    async def app(scope: object, receive: object, send: object) -> None: ...

    with pytest.raises(ValueError, match="'/x'"):
        BodyLimit(app, overrides={"/x": -1})
    limit = BodyLimit(app, max_bytes=10, overrides={"/api/": 20, "/api/graphs/": 30})
    assert (limit.limit_for("/api/graphs/g"), limit.limit_for("/api/nodes"), limit.limit_for("/other")) == (30, 20, 10)


# -- websocket messages --------------------------------------------------------------------------------------------


def test_a_websocket_message_over_the_limit_closes_the_connection_with_1009(server: Served) -> None:
    with connect(f"{server.ws_url}/api/ws") as ws:
        ws.send("x" * MAX_WS_MESSAGE_BYTES)
        assert ws.recv(timeout=10) == f"echo:{MAX_WS_MESSAGE_BYTES}"
        ws.send("x" * (MAX_WS_MESSAGE_BYTES + 1))
        with pytest.raises(ConnectionClosedError) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == WS_CLOSE_TOO_BIG
    assert "64 KiB" in closed.value.rcvd.reason


# -- the token -----------------------------------------------------------------------------------------------------


def test_the_token_in_the_header_opens_every_method(guarded: Served) -> None:
    header = {"Authorization": f"Bearer {TOKEN}"}
    assert guarded.client.get("/api/graphs").status_code == 401
    assert guarded.client.get("/api/graphs", headers=header).status_code == 200
    assert guarded.client.post("/api/echo", content=b"abc", headers=header).json() == {"received": 3}
    assert guarded.client.put("/api/graphs/g", json=example(named=False), headers=header).status_code == 200
    wrong = guarded.client.get("/api/graphs", headers={"Authorization": "Bearer guess"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert "access_token" in wrong.json()["detail"]


def test_the_token_in_the_query_opens_get_but_not_other_methods(guarded: Served) -> None:
    client = guarded.client
    assert client.get("/api/graphs", params={"access_token": TOKEN}).status_code == 200
    assert client.get("/api/graphs/babyai_expert", params={"access_token": TOKEN}).json()["name"] == "babyai_expert"
    assert client.get("/api/graphs", params={"access_token": "guess"}).status_code == 401

    post = client.post("/api/echo", params={"access_token": TOKEN}, content=b"abc")
    put = client.put("/api/graphs/g", params={"access_token": TOKEN}, json=example(named=False))
    delete = client.delete("/api/graphs/g", params={"access_token": TOKEN})
    assert (post.status_code, put.status_code, delete.status_code) == (401, 401, 401)
    assert client.get("/api/graphs/g", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404  # not saved


def test_the_query_token_is_taken_out_of_what_the_app_sees(guarded: Served) -> None:
    seen = guarded.client.get("/api/query?a=1&access_token=" + TOKEN + "&b=x%20y")
    assert seen.status_code == 200 and seen.json() == {"query": "a=1&b=x%20y"}


def test_the_token_in_the_query_opens_a_websocket(guarded: Served) -> None:
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{guarded.ws_url}/api/ws")
    assert refused.value.response.status_code == 403
    with pytest.raises(InvalidStatus):
        connect(f"{guarded.ws_url}/api/ws?access_token=guess")

    with connect(f"{guarded.ws_url}/api/ws?access_token={TOKEN}") as ws:
        ws.send("hello")
        assert ws.recv(timeout=10) == "echo:5"
    with connect(f"{guarded.ws_url}/api/ws", additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send(json.dumps({"hello": 1}))
        assert ws.recv(timeout=10) == "echo:12"
