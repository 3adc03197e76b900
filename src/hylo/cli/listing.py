"""`hylo list benchmarks|agents|protocols`: what can be evaluated here, and how, as the registries describe it (the
same descriptions `GET /api/benchmarks`, `GET /api/agents` and `GET /api/protocols` serve)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hylo.cli.output import console


def run(args: argparse.Namespace) -> int:
    if args.what == "benchmarks":
        return _benchmarks(args)
    if args.what == "protocols":
        return _protocols(args)
    return _agents(args)


def _benchmarks(args: argparse.Namespace) -> int:
    from hylo.envs.gym_adapter import GymBenchmark
    from hylo.envs.registry import GYM_TARGET, describe_benchmark, listed_benchmarks

    rows: list[dict[str, Any]] = []
    for name in listed_benchmarks():
        info = describe_benchmark(name).model_dump(mode="json")
        info["splits"] = {split["name"]: len(split["tasks"]) for split in info["splits"]}  # the split's task count
        info["why"] = info["reason"] or ""  # the older name of `reason`
        rows.append(info)
    rows.append(
        {
            "name": "gym:<id>",
            "target": GYM_TARGET,
            "available": True,
            "observation_keys": dict(GymBenchmark.observation_keys),
        }
    )
    if args.json:
        sys.stdout.write(json.dumps(rows) + "\n")
        return 0
    out = console()
    width = max(12, *(len(row["name"]) for row in rows))
    for row in rows:
        splits_text = ", ".join(f"{s} ({n} tasks)" for s, n in row.get("splits", {}).items())
        state = "" if row["available"] else f"  unavailable: {row['reason']}"
        if not splits_text and "splits" not in row:
            splits_text = "any gymnasium id (gym:<namespace>/<id> imports the namespace; -E key=value: make options)"
        out.print(f"{row['name']:<{width}} {splits_text}{state}", highlight=False, markup=False)
    out.print(f"{'':<{width}} observations of gym:<id>:", highlight=False)
    for key, what in GymBenchmark.observation_keys.items():
        out.print(f"{'':<{width}}   {key}: {what}", highlight=False, markup=False)
    return 0


def _agents(args: argparse.Namespace) -> int:
    from hylo.agents.registry import EXPERT_TARGET, describe_agent, registered_agents

    agents = [describe_agent(name) for name in registered_agents()]
    if args.json:  # name → its description
        sys.stdout.write(json.dumps({info.name: info.model_dump(mode="json") for info in agents}) + "\n")
        return 0
    out = console()
    width = max(len(name) for name in [*(info.name for info in agents), "module:Class"])
    for info in agents:
        state = "" if info.available else f"  unavailable: {info.reason}"
        out.print(f"{info.name:<{width}} {info.target or EXPERT_TARGET}{state}", highlight=False)
    out.print(
        f"{'module:Class':<{width}} any class on the Python path or in the current directory, built as Class(**args) "
        "from -A key=value"
    )
    return 0


# -- demo --------------------------------------------------------------------------------------------------------------


def _protocols(args: argparse.Namespace) -> int:
    from hylo.eval.protocols import describe_protocol, get_protocol, registered_protocols

    rows = [describe_protocol(get_protocol(name)).model_dump(mode="json") for name in registered_protocols()]
    if args.json:  # a list, in listing order: the built-ins, then the entry points
        sys.stdout.write(json.dumps(rows) + "\n")
        return 0
    out = console()
    width = max(len(row["name"]) for row in rows)
    for row in rows:
        timing = row["timing"] if row["clock"] is None else f"{row['timing']}/{row['clock']}"
        agents = "the agent's"
        parts = [
            f"latency {row['latency']}",
            f"s {row['execution_steps'] or agents}",
            f"H {row['chunk_size'] or 'any'}",
            *([f"hold {row['max_hold_steps']}"] if row["max_hold_steps"] else []),
            f"strategy {row['strategy'] or 'any'}",
            f"for {', '.join(row['families']) or 'any benchmark'}",
        ]
        out.print(f"{row['name']:<{width}} {timing:<16} {', '.join(parts)}", highlight=False, markup=False)
        out.print(f"{'':<{width}}   {row['description']}", highlight=False, markup=False)
    return 0
