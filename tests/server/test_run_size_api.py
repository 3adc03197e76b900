"""A job whose run is too large as a whole (episodes × seeds × tasks, each within its own bound) is refused over HTTP
before anything is queued: 422 on `episodes`, its message naming the three fields."""

from __future__ import annotations

import pytest
from test_api import refused_fields

API = "/api/eval/v2"


@pytest.mark.parametrize(
    ("body", "product"),
    [  # the tasks named, or none: BabyAI's 16, counted once the split is known
        ({"episodes": 100_000, "seeds": list(range(1000)), "tasks": ["GoToLocal", "PickupLoc"]}, "100,000 × 1,000 × 2"),
        ({"episodes": 100_000, "seeds": list(range(7))}, "100,000 × 7 × 16"),
    ],
)
def test_a_run_past_the_bound_as_a_whole_is_refused_naming_its_fields(make_server, body: dict, product: str) -> None:
    client = make_server(start=False).client
    answer = client.post(f"{API}/start", json={"benchmark": "babyai", "agent": "random", **body})
    assert refused_fields(answer) == ["episodes"], answer.text
    message = answer.json()["detail"][0]["msg"]
    assert f"episodes × seeds × tasks = {product}" in message and "lower episodes, seeds or tasks" in message
    assert client.get(f"{API}/queue").json()["jobs"] == []
