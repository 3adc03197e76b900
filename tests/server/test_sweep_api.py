"""The sweep endpoints: a sweep `hylo sweep` recorded is listed, served as recorded and its plot as SVG; an id is
`sweep-` and 12 hex digits, never a path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hylo.eval.spec import EvalSpec
from hylo.experiments.sweep import run_sweep

API = "/api/eval/v2"


def test_a_sweep_is_listed_and_served_as_recorded_with_its_plot(make_server: Any, log_dir: Path) -> None:
    client = make_server().client
    assert client.get(f"{API}/sweeps").json() == {"sweeps": []}
    base = EvalSpec(benchmark="metaworld", tasks=["reach-v3"], agent="expert", agent_args={"chunk_size": 8},
                    episodes=1, log_dir=str(log_dir))  # fmt: skip
    result = run_sweep(base, [0, 2], [2, 7])
    recorded = json.loads((result.directory / "sweep.json").read_text())

    junk = log_dir / "sweeps" / "sweep-ffffffffffff"
    junk.mkdir()
    (junk / "sweep.json").write_text('{"sweep_id": "sweep-ffffffffffff"}')  # no record: left out of the list
    listed = client.get(f"{API}/sweeps").json()["sweeps"]
    summary = ("sweep_id", "benchmark", "agent", "latency_steps", "execution_steps", "chunk_size")
    assert listed == [{key: recorded[key] for key in summary}]
    served = client.get(f"{API}/sweeps/{result.sweep_id}")
    assert served.status_code == 200 and served.json() == recorded
    assert [(p["latency_steps"], p["execution_steps"]) for p in recorded["points"]] == [(0, 2), (0, 7), (2, 2)]

    plot = client.get(f"{API}/sweeps/{result.sweep_id}/plot.svg")
    assert plot.status_code == 200 and plot.headers["content-type"] == "image/svg+xml"
    assert plot.content == (result.directory / "plot.svg").read_bytes()
    assert "default-src 'none'" in plot.headers["content-security-policy"]
    assert plot.headers["x-content-type-options"] == "nosniff"
    embedded = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}  # another site's <img>
    assert client.get(f"{API}/sweeps/{result.sweep_id}/plot.svg", headers=embedded).status_code == 403

    missing = client.get(f"{API}/sweeps/sweep-000000000000")
    assert missing.status_code == 404
    assert "sweep-000000000000" in missing.json()["detail"] and result.sweep_id in missing.json()["detail"]
    assert client.get(f"{API}/sweeps/sweep-000000000000/plot.svg").status_code == 404
    assert client.get(f"{API}/sweeps/sweep-ffffffffffff/plot.svg").status_code == 404  # a record without its plot
    assert client.get(f"{API}/sweeps/..%2F..%2Fplot.svg").status_code == 404  # a sweep id, never a path
    for bad in ("sweep-..", "x", f"{result.sweep_id}0", f"{result.sweep_id}.json", result.sweep_id.upper()):
        for suffix in ("", "/plot.svg"):
            refused = client.get(f"{API}/sweeps/{bad}{suffix}")
            assert refused.status_code == 404 and bad in refused.json()["detail"], bad
