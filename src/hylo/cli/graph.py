"""`hylo graph validate|run` and `hylo nodes`: graphs from the command line.

`hylo graph run FILE|NAME` runs a graph — a file, or a built-in example by name (`hylo graph run babyai_expert`) —
through the same evaluation runner, env panels and EvalLog as `hylo eval`, with the same `--json` shape and exit
codes. The graph's own placement (benchmark, split, task) is used unless `--split` / `--task` say otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from hylo.cli.arguments import JSON_HELP, add_json, add_placement, add_run_options
from hylo.cli.evaluate import run_evaluation, run_options
from hylo.cli.output import EXIT_BAD_INPUT, EXIT_INVALID
from hylo.core.types import NodesetMode

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers

GRAPH_ARGUMENT_HELP = "a graph file, or the name of a built-in example (babyai_expert, ...; a wrong name lists them)"


def add_parser(commands: Subparsers) -> None:
    """Add `graph` and `nodes` to `hylo`'s commands; `graph run` takes the run options of `eval`."""
    graph = commands.add_parser("graph", help="validate or run a graph: a file, or a built-in example by name")
    actions = graph.add_subparsers(dest="graph_command", metavar="ACTION", required=True, parser_class=type(graph))
    validate = actions.add_parser("validate", help="check a graph; exit 1 with its typed errors when invalid")
    validate.add_argument("file", metavar="FILE|NAME", help=GRAPH_ARGUMENT_HELP)
    add_json(validate, "print {valid, errors} as JSON")
    run = actions.add_parser("run", help="evaluate a graph on its benchmark (resumes the same run when re-run)")
    run.add_argument("file", metavar="FILE|NAME", help=GRAPH_ARGUMENT_HELP)
    run.add_argument("--benchmark", default=None, help="the benchmark (default: the graph's placement)")
    add_placement(run, options=None, split="the split (default: the graph's placement, else the benchmark's)")
    run.add_argument(
        "--server", dest="server", action="append", default=[], metavar="NODESET",
        help="run this nodeset in a subprocess of its own (one per worker)",
    )  # fmt: skip
    add_run_options(run)
    add_json(run, JSON_HELP)
    nodes = commands.add_parser("nodes", help="every node type's schema (ports, wires, config), by nodeset")
    nodes.add_argument("--nodeset", action="append", default=[], metavar="NAME", help="only these nodesets")
    add_json(nodes, "print the schemas as JSON")


def run(args: argparse.Namespace) -> int:
    """`hylo nodes`, `hylo graph validate` or `hylo graph run`."""
    if args.command == "nodes":
        return _nodes(args)
    if args.graph_command == "validate":
        return _validate(args)
    return _run(args)


def _validate(args: argparse.Namespace) -> int:
    from hylo.graph.compile import check_graph  # start-up time: the graph stack
    from hylo.graph.store import find_graph  # start-up time: the graph stack

    graph = find_graph(args.file)
    errors = check_graph(graph)
    if args.json:
        sys.stdout.write(json.dumps({"graph": graph.name, "valid": not errors,
                                     "errors": [e.to_json() for e in errors]}) + "\n")  # fmt: skip
    elif errors:
        count = f"{len(errors)} error{'s' if len(errors) != 1 else ''}"
        print(f"{args.file}: graph {graph.name!r} is invalid ({count})", file=sys.stderr)
        for error in errors:
            print(f"  {error}", file=sys.stderr)
    else:
        print(f"{args.file}: graph {graph.name!r} is valid ({len(graph.nodes)} nodes, {len(graph.edges)} edges)")
    return EXIT_INVALID if errors else 0


def _run(args: argparse.Namespace) -> int:
    from hylo.eval.resolve import EvalError  # start-up time: the evaluation stack
    from hylo.eval.spec import EvalSpec  # start-up time: the evaluation stack
    from hylo.graph.compile import GraphInvalid, compile_graph  # start-up time: the graph stack
    from hylo.graph.model import NodesetOptions  # start-up time: the graph stack
    from hylo.graph.store import find_graph  # start-up time: the graph stack

    graph = find_graph(args.file)
    if args.server:
        server = {name: NodesetOptions(mode=NodesetMode.SERVER) for name in args.server}
        graph = graph.model_copy(update={"nodesets": {**graph.nodesets, **server}})
    try:
        plan = compile_graph(graph)
    except GraphInvalid as exc:
        raise EvalError(str(exc), field="graph") from None
    placement = graph.placement
    benchmark = args.benchmark or (placement.benchmark if placement else None)
    if benchmark is None:
        if len(plan.benchmarks) != 1:
            raise EvalError(f"graph {graph.name!r} has no placement: pass --benchmark (its env nodes: "
                            f"{plan.benchmarks or 'none'})")  # fmt: skip
        benchmark = plan.benchmarks[0]
    split, tasks = args.split, list(args.tasks)
    if placement is not None and benchmark == placement.benchmark:
        split = split if split is not None else placement.split
        if not tasks and placement.task is not None and (args.split is None or args.split == placement.split):
            tasks = [placement.task]
    spec = EvalSpec(
        benchmark=benchmark,
        agent=f"graph:{graph.name}",
        graph=graph.to_json(),
        split=split,
        tasks=tasks,
        **run_options(args),
    )
    return run_evaluation(spec, json_out=args.json)


def _nodes(args: argparse.Namespace) -> int:
    from hylo.graph.nodesets import all_schemas  # start-up time: every nodeset

    problems: list[str] = []
    schemas = all_schemas(args.nodeset or None, on_error=lambda name, exc: problems.append(f"{name}: {exc}"))
    for problem in problems:
        print(f"hylo: warning: nodeset {problem}", file=sys.stderr)
    if args.nodeset and problems:
        return EXIT_BAD_INPUT
    if args.json:
        sys.stdout.write(json.dumps(schemas) + "\n")
        return 0
    for group in schemas:
        print(f"{group['nodeset']}  ({group['owner']}) {group['description']}")
        for node in group["nodes"]:  # type: ignore[attr-defined]
            ins = ", ".join(f"{p['name']}:{p['wire']}" + ("" if p["required"] else "?") for p in node["inputs"])
            outs = ", ".join(f"{p['name']}:{p['wire']}" + ("" if p["required"] else "?") for p in node["outputs"])
            print(f"  {node['type']:<28} ({ins}) -> ({outs})")
    return 0
