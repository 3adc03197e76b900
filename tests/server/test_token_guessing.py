"""Guessing the token: after ten wrong tokens from one address, that address's attempts are checked one at a time,
each after a wait that doubles with every further wrong token (up to a cap), the right token included; many
connections guess no faster than one; other addresses and requests that carry no token are not slowed; memory stays
bounded. A fake clock and a sleep that only records: no test waits, and none depends on the machine's speed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from hylo.server.auth import (
    FIRST_DELAY_S,
    FORGET_S,
    FREE_FAILURES,
    MAX_CLIENTS,
    MAX_DELAY_S,
    MAX_WAITING,
    BearerToken,
    FailedAttempts,
)

TOKEN = "the-right-token-0123456789"
GUESSER = ("10.1.2.3", 40000)


class FakeTime:
    """A clock that moves only when a sleep is asked for, and the sleeps asked for."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def guarded(attempts: FailedAttempts) -> Starlette:
    async def hello(request: Any) -> PlainTextResponse:
        return PlainTextResponse("hello")

    app = Starlette(routes=[Route("/api/hello", hello)])
    app.add_middleware(BearerToken, token=TOKEN, attempts=attempts)
    return app


def ask(app: Starlette, tokens: list[str | None], client: tuple[str, int] = GUESSER) -> list[int]:
    """The statuses of one request per token (None: no token at all), sent one after the other from `client`."""

    async def send_all() -> list[int]:
        transport = httpx.ASGITransport(app=app, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
            statuses = []
            for token in tokens:
                headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
                statuses.append((await http.get("/api/hello", headers=headers)).status_code)
            return statuses

    return asyncio.run(send_all())


def doubling(waits: int) -> list[float]:
    return [min(FIRST_DELAY_S * 2**k, MAX_DELAY_S) for k in range(waits)]


def test_ten_wrong_tokens_are_free_then_each_attempt_waits_twice_as_long_up_to_the_cap() -> None:
    time = FakeTime()
    app = guarded(FailedAttempts(clock=time.clock, sleep=time.sleep))
    assert ask(app, ["guess"] * FREE_FAILURES) == [401] * FREE_FAILURES
    assert time.slept == []  # a user who mistyped is not slowed down
    assert ask(app, ["guess"] * 12) == [401] * 12
    assert time.slept == doubling(11)  # the first attempt past the free ones goes at once
    assert time.slept[-1] == MAX_DELAY_S


def test_the_right_token_from_a_guessing_address_waits_its_turn_too_and_then_passes() -> None:
    """Were the right token answered sooner, its answer would tell the guesser it was right."""
    time = FakeTime()
    app = guarded(FailedAttempts(clock=time.clock, sleep=time.sleep))
    ask(app, ["guess"] * (FREE_FAILURES + 1))
    assert ask(app, [TOKEN]) == [200]
    assert time.slept == [FIRST_DELAY_S]


def test_other_addresses_and_requests_without_a_token_are_not_slowed_or_counted() -> None:
    time = FakeTime()
    attempts = FailedAttempts(clock=time.clock, sleep=time.sleep)
    app = guarded(attempts)
    assert ask(app, [None] * 50) == [401] * 50  # no token: no guess
    assert time.slept == [] and len(attempts) == 0
    ask(app, ["guess"] * (FREE_FAILURES + 3))
    waited = list(time.slept)
    assert waited
    assert ask(app, [TOKEN, "guess"], client=("10.9.9.9", 40000)) == [200, 401]
    assert time.slept == waited


def test_many_connections_at_once_guess_no_faster_than_one() -> None:
    time = FakeTime()
    slept: list[float] = []

    async def recorded(seconds: float) -> None:  # the clock stands still: every attempt is made at the same moment
        slept.append(seconds)
        await asyncio.sleep(0)

    attempts = FailedAttempts(clock=time.clock, sleep=recorded)
    for _ in range(FREE_FAILURES):
        attempts.failed(GUESSER[0])

    async def at_once() -> list[bool]:
        return list(await asyncio.gather(*(attempts.turn(GUESSER[0]) for _ in range(5))))

    assert asyncio.run(at_once()) == [True] * 5
    assert slept == [FIRST_DELAY_S * k for k in range(1, 5)]  # served one after the other


def test_past_the_attempts_that_may_wait_the_next_is_refused_at_once() -> None:
    time = FakeTime()

    async def scenario() -> tuple[list[bool], int]:
        release = asyncio.Event()

        async def blocked(seconds: float) -> None:
            await release.wait()

        attempts = FailedAttempts(clock=time.clock, sleep=blocked)
        for _ in range(FREE_FAILURES):
            attempts.failed(GUESSER[0])
        assert await attempts.turn(GUESSER[0])  # its turn is now
        waiting = [asyncio.ensure_future(attempts.turn(GUESSER[0])) for _ in range(MAX_WAITING)]
        await asyncio.sleep(0)
        refused = await attempts.turn(GUESSER[0])
        app = guarded(attempts)
        transport = httpx.ASGITransport(app=app, client=GUESSER)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
            answer = await http.get("/api/hello", headers={"Authorization": f"Bearer {TOKEN}"})
        release.set()
        return [refused, *await asyncio.gather(*waiting)], answer.status_code

    turns, status = asyncio.run(scenario())
    assert turns == [False] + [True] * MAX_WAITING
    assert status == 429


def test_an_address_quiet_for_long_enough_starts_afresh() -> None:
    time = FakeTime()
    app = guarded(FailedAttempts(clock=time.clock, sleep=time.sleep))
    ask(app, ["guess"] * (FREE_FAILURES + 2))
    waited = len(time.slept)
    time.now += FORGET_S + 1
    assert ask(app, ["guess"] * FREE_FAILURES) == [401] * FREE_FAILURES
    assert len(time.slept) == waited


def test_the_addresses_remembered_are_bounded_and_the_oldest_go_first() -> None:
    time = FakeTime()
    attempts = FailedAttempts(clock=time.clock, sleep=time.sleep)
    for n in range(MAX_CLIENTS + 100):
        time.now += 0.001
        for _ in range(FREE_FAILURES):
            attempts.failed(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}")
    assert len(attempts) == MAX_CLIENTS

    async def turns(address: str) -> None:
        await attempts.turn(address)

    run: Callable[[Awaitable[None]], None] = asyncio.run
    before = len(time.slept)
    run(turns("10.0.0.0"))  # among the first: forgotten, so free again
    run(turns("10.0.0.0"))
    assert len(time.slept) == before
    newest = MAX_CLIENTS + 99
    run(turns(f"10.{newest // 65536}.{newest // 256 % 256}.{newest % 256}"))
    run(turns(f"10.{newest // 65536}.{newest // 256 % 256}.{newest % 256}"))
    assert len(time.slept) == before + 1  # still remembered: its second attempt waited
