"""`hylo serve --allow-import`: code from requests. Off by default (a request naming `module:Class` is refused, saying
how the operator turns it on); on, a job may name an importable agent and the catalog says so; refused without a
token (`--no-token`), on loopback too: any user of the machine could then run code as the server's user."""

from __future__ import annotations

import argparse
import os
import sys

import pytest
from live_server import quick_spec, wait_final

from hylo.cli import IMPORT_DIR_ENV
from hylo.cli.serve import add_parser, run
from hylo.server import ServerAccess, ServeRefused
from hylo.server.binding import check_import, check_serving

API = "/api/eval/v2"
IMPORTABLE = "hylo.agents.basic:HoldAgent"
"""An import path every test process and job can import: what a user's `myagents:MyAgent` is to the server."""


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hylo")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_without_the_flag_an_import_path_is_refused_naming_the_flag_and_the_catalog_offers_none(make_server):
    server = make_server(start=False)
    assert server.client.get("/api/agents").json()["import_paths"] is False
    response = server.client.post(f"{API}/start", json=quick_spec(agent=IMPORTABLE))
    assert response.status_code == 422, response.text
    (problem,) = response.json()["detail"]
    assert problem["loc"][-1] == "agent"
    assert "registered" in problem["msg"] and "hylo serve --allow-import" in problem["msg"]
    assert server.scheduler.jobs() == []

    unknown = server.client.post(f"{API}/start", json=quick_spec(agent="nobody"))  # a registered name mistyped
    assert "--allow-import" not in unknown.json()["detail"][0]["msg"]


def test_with_the_flag_a_job_runs_an_importable_agent_and_the_catalog_says_so(make_server):
    server = make_server(access=ServerAccess.of(allow_import=True))
    assert server.client.get("/api/agents").json()["import_paths"] is True
    started = server.client.post(f"{API}/start", json=quick_spec(agent=IMPORTABLE, max_steps=4))
    assert started.status_code == 200, started.text
    status = wait_final(server.client, started.json()["job_id"])
    assert status["state"] == "done", status["message"]
    detail = server.client.get(f"{API}/runs/{started.json()['run_id']}").json()
    assert detail["run"]["agent"] == IMPORTABLE
    assert detail["summary"]["status_counts"]["failure"] == 3  # it held still: it ran, and raised nothing

    missing = server.client.post(f"{API}/start", json=quick_spec(agent="no_such_module_here:Agent"))
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"][-1] == "agent"
    assert "no_such_module_here" in missing.json()["detail"][0]["msg"]


@pytest.mark.parametrize(
    "flags",
    [
        [],  # loopback alone: every user of the machine reaches it
        ["--allow-host", "lab.example"],  # loopback bound, but a reverse proxy or a LAN peer reaches it by name
        ["--host", "0.0.0.0"],
    ],
)
def test_the_flag_without_a_token_is_refused_in_one_line(tmp_path, monkeypatch, capsys, flags):
    monkeypatch.delenv("HYLO_TOKEN", raising=False)
    monkeypatch.delenv(IMPORT_DIR_ENV, raising=False)
    path = list(sys.path)
    code = run(parse("serve", "--allow-import", "--no-token", *flags, "--log-dir", str(tmp_path / "runs")))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("hylo: error: ") and "token" in err
    assert not (tmp_path / "runs").exists()  # refused before anything was made
    assert sys.path == path and IMPORT_DIR_ENV not in os.environ  # nor was anything opened to imports


def test_with_a_token_the_flag_is_allowed_wherever_the_server_is_reached():
    check_import("a-token-of-sixteen-or-more")  # the one `hylo serve` makes, or the operator's
    check_serving("0.0.0.0", "a-token-of-sixteen-or-more", reachable_beyond_loopback=True, allow_import=True)
    with pytest.raises(ServeRefused, match="--allow-import"):
        check_import(None)
    with pytest.raises(ServeRefused, match="--allow-import"):
        check_serving("127.0.0.1", None, reachable_beyond_loopback=False, allow_import=True)
    assert parse("serve").allow_import is False
