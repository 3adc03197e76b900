"""`hylo list benchmarks|agents|protocols|tasks`: what can be evaluated here, and how, as the registries describe it
(the same descriptions `GET /api/benchmarks`, `GET /api/agents` and `GET /api/protocols` serve)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from hylo.cli.arguments import add_json, add_split
from hylo.cli.output import console
from hylo.core.conventions import ActionConvention
from hylo.core.errors import HyloError, UnknownChoice
from hylo.core.features import declared_text

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers
    from hylo.envs.registry import BenchmarkInfo


def add_parser(commands: Subparsers) -> None:
    """Add `list` to `hylo`'s commands."""
    listing = commands.add_parser("list", help="what is registered; list tasks BENCH: a benchmark's tasks")
    listing.add_argument("what", choices=("benchmarks", "agents", "protocols", "tasks"))
    listing.add_argument("benchmark", nargs="?", help="list tasks: the benchmark (hylo list benchmarks)")
    add_split(listing, "list tasks: only this split's (default: every split)")
    add_json(listing)


def run(args: argparse.Namespace) -> int:
    """`hylo list benchmarks|agents|protocols|tasks`."""
    if args.what != "tasks" and (args.benchmark is not None or args.split is not None):
        given = repr(args.benchmark) if args.benchmark is not None else "--split"
        raise HyloError(
            f"hylo list {args.what} takes no {given}; hylo list tasks BENCH [--split S] lists a benchmark's tasks"
        )
    if args.what == "benchmarks":
        return _benchmarks(args)
    if args.what == "protocols":
        return _protocols(args)
    if args.what == "tasks":
        return _tasks(args)
    return _agents(args)


def _benchmarks(args: argparse.Namespace) -> int:
    from hylo.envs.benchmark import BenchmarkOption  # start-up time: the benchmark registry
    from hylo.envs.gym_adapter import FEATURE_NAMES, GymBenchmark  # start-up time: the benchmark registry
    from hylo.envs.gym_options import ENUMERATED, GYM_OPTIONS  # start-up time: the benchmark registry
    from hylo.envs.registry import (  # start-up time: the benchmark registry
        GYM_TARGET,
        describe_benchmark,
        listed_benchmarks,
    )

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
            "feature_names": dict(FEATURE_NAMES),
            "options": [option.model_dump(mode="json") for option in GYM_OPTIONS],  # those the env takes
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
        if row.get("options"):
            shown = "; ".join(BenchmarkOption.model_validate(option).summary() for option in row["options"])
            if row["name"] == "gym:<id>":
                enumerated = ", ".join(sorted({name for options in ENUMERATED.values() for name in options}))
                shown = f"(those the env takes) {shown}; {enumerated}: the values the env's code lists"
            out.print(f"{'':<{width}}   options over HTTP: {shown}", highlight=False, markup=False)
        _declarations(out, width, row)
    out.print(f"{'':<{width}} observations of gym:<id>:", highlight=False)
    for key, what in GymBenchmark.observation_keys.items():
        out.print(f"{'':<{width}}   {key}: {what}", highlight=False, markup=False)
    return 0


def _declarations(out: Any, width: int, row: dict[str, Any]) -> None:
    """A benchmark's feature names and action convention, under its line."""
    if row.get("feature_names"):
        names = declared_text(tuple(row["feature_names"].items()))
        out.print(f"{'':<{width}}   LeRobot features: {names}", highlight=False, markup=False)
    if row.get("action_convention"):
        convention = ActionConvention.parse(row["action_convention"])
        labels = f" [{', '.join(convention.labels)}]" if convention.labels else ""
        where = ", ".join(x for x in (convention.frame, convention.units) if x)
        out.print(f"{'':<{width}}   actions: {convention.summary()} ({where}){labels}", highlight=False, markup=False)


def _tasks(args: argparse.Namespace) -> int:
    """`hylo list tasks BENCH [--split S]`: each split's tasks with their step budget and fixed instruction."""
    from hylo.envs.registry import listed_benchmarks  # start-up time: the benchmark registry

    if args.benchmark is None:
        raise HyloError(
            f"hylo list tasks needs a benchmark; choose from: {', '.join([*listed_benchmarks(), 'gym:<id>'])}"
        )
    info = _described(args.benchmark)
    if not info.splits:
        raise HyloError(f"benchmark {info.name!r} cannot list its tasks here: {info.reason}")
    splits = info.splits
    if args.split is not None:
        splits = [split for split in info.splits if split.name == args.split]
        if not splits:
            raise UnknownChoice(f"{info.name} split", args.split, [split.name for split in info.splits])
    if args.json:
        data: dict[str, Any] = {"benchmark": info.name, "default_split": info.default_split}
        data["splits"] = [split.model_dump(mode="json") for split in splits]
        data["unavailable_tasks"] = info.unavailable_tasks
        sys.stdout.write(json.dumps(data) + "\n")
        return 0
    from rich.table import Table  # start-up time: the tables

    # start-up time: the tables
    from hylo.evallog.table_fit import add_name_column, add_number_column, compact_table, print_fitting

    out = console()
    if not info.available:
        out.print(f"{info.name} cannot run here: {info.reason}", style="yellow", highlight=False, markup=False)
    for split in splits:
        default = " (the default split)" if split.name == info.default_split else ""
        title = f"{info.name} split {split.name}{default}: {len(split.tasks)} tasks"
        instructions = any(task.instruction for task in split.tasks)
        table = compact_table()
        add_name_column(table, "task")
        add_number_column(table, "step budget")
        if instructions:
            add_name_column(table, "instruction")
        lines = Table.grid(padding=(0, 2))
        lines.add_column(overflow="fold")
        for task in split.tasks:
            budget = "—" if task.step_budget is None else str(task.step_budget)
            table.add_row(task.name, budget, *([task.instruction or ""] if instructions else []))
            instruction = f": {task.instruction}" if task.instruction else ""
            lines.add_row(f"{task.name} ({budget} steps){instruction}")
        out.print(title, style="bold", highlight=False, markup=False)
        print_fitting(out, [[table], [lines]])
    if info.unavailable_tasks and args.split is None:
        out.print(f"{info.name}: {len(info.unavailable_tasks)} tasks cannot run here", style="bold", markup=False)
        for name, why in info.unavailable_tasks.items():
            out.print(f"  {name}: {why}", highlight=False, markup=False)
    return 0


def _described(name: str) -> BenchmarkInfo:
    """The benchmark `name` as `hylo list benchmarks` describes it (a `gym:<id>` too, built to list its task)."""
    # start-up time: the benchmark registry
    from hylo.envs.registry import BenchmarkInfo, SplitInfo, TaskInfo, describe_benchmark, get_benchmark

    if not name.startswith("gym:"):
        return describe_benchmark(name)
    bench = get_benchmark(name)
    splits = [
        SplitInfo(
            name=split,
            tasks=[
                TaskInfo(name=task, step_budget=bench.default_step_budget(task), instruction=bench.instruction(task))
                for task in bench.tasks(split)
            ],
        )
        for split in bench.splits()
    ]
    default = bench.default_split or splits[0].name
    return BenchmarkInfo(
        name=name, display_name=name, target="gymnasium", available=True, default_split=default, splits=splits
    )


def _agents(args: argparse.Namespace) -> int:
    # start-up time: the agent registry
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


def _protocols(args: argparse.Namespace) -> int:
    # start-up time: the evaluation stack
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
