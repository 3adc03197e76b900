"""`hylo list benchmarks|agents`: what can be evaluated here."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hylo.cli.output import console


def run(args: argparse.Namespace) -> int:
    if args.what == "benchmarks":
        from hylo.envs.benchmark import get_benchmark, registered_benchmarks

        rows: list[dict[str, Any]] = []
        for name, target in registered_benchmarks().items():
            try:
                bench = get_benchmark(name)
                available, why = bench.available()
                splits = {split: len(bench.tasks(split)) for split in bench.splits()}
                rows.append({"name": name, "target": target, "available": available, "why": why, "splits": splits})
            except Exception as exc:
                rows.append({"name": name, "target": target, "available": False, "why": str(exc), "splits": {}})
        rows.append({"name": "gym:<id>", "target": "hylo.envs.gym_adapter:GymBenchmark", "available": True})
        if args.json:
            sys.stdout.write(json.dumps(rows) + "\n")
            return 0
        out = console()
        for row in rows:
            splits_text = ", ".join(f"{s} ({n} tasks)" for s, n in row.get("splits", {}).items())
            state = "" if row["available"] else f"  unavailable: {row['why']}"
            out.print(f"{row['name']:<12} {splits_text or 'any gymnasium id'}{state}", highlight=False)
        return 0
    from hylo.agents.registry import registered_agents

    agents = registered_agents()
    if args.json:
        sys.stdout.write(json.dumps(agents) + "\n")
        return 0
    out = console()
    width = max(len(name) for name in [*agents, "module:Class"])
    for name, target in agents.items():
        out.print(f"{name:<{width}} {target}", highlight=False)
    out.print(
        f"{'module:Class':<{width}} any class on the Python path or in the current directory, built as Class(**args) "
        "from -A key=value"
    )
    return 0


# -- demo --------------------------------------------------------------------------------------------------------------
