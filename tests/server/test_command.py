"""`hylo serve`: its arguments, its refusals, the URL it prints (with the token it makes), and a real server process
that stops its jobs when it stops."""

from __future__ import annotations

import argparse
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from live_server import slow_spec

from hylo.cli import main
from hylo.cli.serve import add_parser, run
from hylo.jobs import JobScheduler, JobState
from hylo.server import check_binding, is_loopback
from hylo.server.binding import page_url

API = "/api/eval/v2"
SERVE = (
    "import argparse, sys\n"
    "from hylo.cli.serve import add_parser, run\n"
    "parser = argparse.ArgumentParser(prog='hylo')\n"
    "add_parser(parser.add_subparsers(dest='command'))\n"
    "sys.exit(run(parser.parse_args(sys.argv[1:])))\n"
)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hylo")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_binds_loopback_by_default():
    args = parse("serve")
    assert (args.command, args.host, args.port, args.log_dir, args.token) == (
        "serve",
        "127.0.0.1",
        8765,
        Path("hylo-runs"),
        None,
    )
    assert (args.no_token, args.docs, args.trusted_proxy) == (False, False, [])
    assert parse("serve", "--host", "0.0.0.0", "--port", "9000", "--token", "t").port == 9000


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                                ("127.3.2.1", True), ("0.0.0.0", False), ("::", False),
                                                ("192.168.1.10", False), ("example.org", False)])  # fmt: skip
def test_loopback_addresses(host: str, loopback: bool):
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("flags", "named"),
    [(["--host", "0.0.0.0"], "0.0.0.0"), (["--allow-host", "lab.example"], "--allow-host")],  # a proxy's name
)
def test_no_token_beyond_loopback_is_refused_in_one_line(tmp_path, monkeypatch, capsys, flags, named):
    monkeypatch.delenv("HYLO_TOKEN", raising=False)
    code = run(parse("serve", "--no-token", *flags, "--log-dir", str(tmp_path / "runs")))
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("hylo: error: ") and "token" in err and named in err
    assert not (tmp_path / "runs").exists()  # refused before anything was made
    check_binding("0.0.0.0", "a-token-of-sixteen-or-more")  # with a token it is allowed


@pytest.mark.parametrize(
    ("flags", "env", "named"),
    [
        (["--token", "short-token"], {}, "is too short (length 11): give one of at least 16 characters"),
        ([], {"HYLO_TOKEN": "qQ9"}, "is too short (length 3): give one of at least 16 characters"),
        (["--token", "sixteen or more but spaced"], {}, "printable ASCII characters only, no space"),
        (["--token", "a-token-of-sixteen-or-more", "--no-token"], {}, "--no-token, and a token is given"),
        (["--no-token"], {"HYLO_TOKEN": "a-token-of-sixteen-or-more"}, "--no-token, and a token is given"),
    ],
)
def test_a_token_too_short_or_malformed_is_refused_in_one_line_that_does_not_show_it(
    tmp_path, monkeypatch, capsys, flags, env, named
):
    monkeypatch.delenv("HYLO_TOKEN", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code = run(parse("serve", *flags, "--log-dir", str(tmp_path / "runs")))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and named in err, err
    shown = [*flags, *env.values()]
    assert not any(value in err for value in shown if not value.startswith("--")), err
    assert not (tmp_path / "runs").exists()


def test_a_log_dir_owned_by_another_scheduler_is_refused_in_one_line(tmp_path, capsys):
    with JobScheduler(tmp_path / "runs"):
        code = run(parse("serve", "--log-dir", str(tmp_path / "runs"), "--port", str(free_port())))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "another job scheduler" in err


def test_a_served_api_needs_the_token_and_stopping_it_stops_its_jobs_resumably(tmp_path):
    port = free_port()
    log_dir = tmp_path / "runs"
    env = {**os.environ, "HYLO_TOKEN": "env-token-0123456789"}
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE, "serve", "--port", str(port), "--log-dir", str(log_dir)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                bare = httpx.get(f"{url}{API}/queue", timeout=5)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "hylo serve did not come up"
                time.sleep(0.1)
        assert bare.status_code == 401
        client = httpx.Client(base_url=url, headers={"Authorization": "Bearer env-token-0123456789"}, timeout=60)
        job = client.post(f"{API}/start", json=slow_spec()).json()
        while client.get(f"{API}/status/{job['job_id']}").json()["state"] == "queued":
            assert time.monotonic() < deadline + 30
            time.sleep(0.1)
        client.close()
        server.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0, server.stderr.read().decode() if server.stderr else ""
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    with JobScheduler(log_dir) as scheduler:
        status = scheduler.status(job["job_id"])
    assert status.state is JobState.ABORTED and "resume" in status.message


def test_a_busy_port_is_one_line_and_exit_2_and_leaves_nothing(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "hylo", "serve", "--port", str(port), "--log-dir", str(tmp_path / "runs")],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr
        == f"hylo: error: cannot listen on 127.0.0.1:{port}: the port is in use (another server listens there?)\n"
    )
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [
        ("--allow-host", "evil example", "malformed host 'evil example'"),
        ("--allow-origin", "evil.example", "expected an origin such as http://host:port, got 'evil.example'"),
        ("--allow-origin", "http://x:99999", "got 'http://x:99999'"),
        ("--allow-remote", "http://gpu-box:8000", "--allow-remote expects a ws:// or wss:// URL prefix"),
        ("--allow-ray", " ", "--allow-ray expects a Ray address"),
        ("--max-queued", "0", "expected a positive integer, got '0'"),
    ],
)
def test_a_malformed_operator_flag_is_one_line_and_exit_2(tmp_path, capsys, flag, value, named):
    try:
        code = main(["serve", flag, value, "--log-dir", str(tmp_path / "runs")])
    except SystemExit as exc:  # argparse's refusal of a malformed number
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and named in err, err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("flags", [[], ["--no-token"]], ids=["default", "no-token"])
def test_serve_prints_the_url_to_open_once_it_answers(tmp_path, flags):
    """By default the URL carries the token the server made; with `--no-token` the line says what that gives up."""
    port = free_port()
    env = {name: value for name, value in os.environ.items() if name != "HYLO_TOKEN"}
    server = subprocess.Popen(
        [sys.executable, "-m", "hylo", "serve", "--port", str(port), "--log-dir", str(tmp_path / "runs"), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        ready, _, _ = select.select([server.stdout], [], [], 120)  # printed once the server answers
        assert ready, "hylo serve printed nothing"
        line = server.stdout.readline()
        url = f"http://127.0.0.1:{port}/"
        if flags:
            assert line.startswith(f"hylo serve: open {url} in a browser (no token: any user of this machine"), line
            assert httpx.get(f"{url}api/eval/v2/queue", timeout=30).status_code == 200
        else:
            opened = re.match(rf"hylo serve: open {re.escape(url)}#token=([\w-]{{32,}}) in a browser;", line)
            assert opened, line
            token = opened.group(1)
            assert httpx.get(f"{url}api/eval/v2/queue", timeout=30).status_code == 401
            authorized = httpx.get(f"{url}api/eval/v2/queue", headers={"Authorization": f"Bearer {token}"})
            assert authorized.status_code == 200
        assert str((tmp_path / "runs").resolve()) in line
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200 and "<html" in page.text.lower()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8765/"),
        ("localhost", "http://localhost:8765/"),
        ("0.0.0.0", "http://127.0.0.1:8765/"),  # a wildcard is not an address to open: this machine's loopback is
        ("::", "http://[::1]:8765/"),
        ("::1", "http://[::1]:8765/"),
        ("192.168.1.10", "http://192.168.1.10:8765/"),
    ],
)
def test_the_url_names_an_address_the_server_answers(host: str, url: str):
    assert page_url(host, 8765) == url
