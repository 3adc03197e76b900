"""`hylo ab`: agents A and B on the same episodes, pair by pair, until the sequential test decides; `hylo ab show`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from hylo.argtypes import parse_json_pairs, positive_int
from hylo.cli.arguments import JSON_HELP, add_json, add_placement, add_run_options
from hylo.cli.evaluate import run_options
from hylo.cli.output import console

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers


def add_parser(commands: Subparsers) -> None:
    """Add `ab` to `hylo`'s commands: the run options of `eval`, less `--episodes` (it runs pairs until it decides)."""
    ab = commands.add_parser(
        "ab", help="compare agents A and B pair by pair, stopping when the sequential test decides (ab show ID)"
    )
    ab.add_argument("benchmark", help="the benchmark both run on (or `show`, then the A/B id)")
    ab.add_argument("ab_id", nargs="?", help=argparse.SUPPRESS)
    add_placement(ab)
    ab.add_argument("--a", dest="agent_a", help="agent A")
    ab.add_argument("-A", dest="agent_args_a", action="append", default=[], metavar="K=V", help="A's argument")
    ab.add_argument("--b", dest="agent_b", help="agent B")
    ab.add_argument("-B", dest="agent_args_b", action="append", default=[], metavar="K=V", help="B's argument")
    ab.add_argument("--max-episodes", type=positive_int, default=None, metavar="N", help="at most N pairs")
    ab.add_argument("--alpha", type=float, default=0.05, help="the test's two-sided level (default 0.05)")
    ab.add_argument(
        "--design",
        choices=("anytime", "capped"),
        default="anytime",
        help="anytime (default): valid whenever it stops, a larger --max-episodes extends it; capped: "
        "calibrated to --max-episodes N, fewer pairs, valid up to N only (cannot be extended)",
    )
    ab.add_argument("--min-effect", type=float, default=None, metavar="DELTA",
                    help="the smallest difference worth finding: also stop with \"no difference >= DELTA\" once one "
                    "that large is unlikely")  # fmt: skip
    ab.add_argument(
        "--reuse-runs", action="store_true", help="compare on the runs hylo eval made for A and B, extending them"
    )
    add_run_options(ab, episodes=False)
    add_json(ab, JSON_HELP)


def run(args: argparse.Namespace) -> int:
    """`hylo ab` and `hylo ab show ID`."""
    from hylo.experiments.ab import ABError, read_ab  # start-up time: the experiments stack

    if args.benchmark == "show":
        if args.ab_id is None:
            raise ABError("hylo ab show needs the A/B id (ab-...)")
        record = read_ab(args.log_dir, args.ab_id)
        _print(record, json_out=args.json)
        return 0
    return _compare(args)


def _compare(args: argparse.Namespace) -> int:
    from hylo.agents.registry import parse_agent_args  # start-up time: the agent registry
    from hylo.envs.quiet import stdout_to_stderr  # start-up time: the envs package
    from hylo.eval.spec import EvalSpec  # start-up time: the evaluation stack
    from hylo.experiments.ab import ABError, run_ab  # start-up time: the experiments stack

    missing = [flag for flag, value in (("--a", args.agent_a), ("--b", args.agent_b)) if value is None]
    if args.ab_id is not None:
        raise ABError(f"hylo ab takes one benchmark, got {args.benchmark!r} and {args.ab_id!r}")
    if missing:
        raise ABError(f"hylo ab needs {' and '.join(missing)} (the two agents to compare)")
    if args.max_episodes is None:
        raise ABError("hylo ab needs --max-episodes N: the most pairs it may run before it stops undecided")
    if args.run_id is not None:
        raise ABError("hylo ab names its two runs itself; drop --run-id")
    common: dict[str, Any] = {
        "benchmark": args.benchmark,
        "env_args": parse_json_pairs(args.env_args, "-E"),
        "split": args.split,
        "tasks": args.tasks,
        **run_options(argparse.Namespace(**{**vars(args), "episodes": 1})),
    }
    spec_a = EvalSpec(agent=args.agent_a, agent_args=parse_agent_args(args.agent_args_a), **common)
    spec_b = EvalSpec(agent=args.agent_b, agent_args=parse_agent_args(args.agent_args_b), **common)
    with stdout_to_stderr():  # simulators that print never reach stdout
        result = run_ab(spec_a, spec_b, max_pairs=args.max_episodes, alpha=args.alpha, reuse_runs=args.reuse_runs,
                        design=args.design, min_effect=args.min_effect)  # fmt: skip
    record = result.to_json()
    if result.reuse_runs:
        out = console(stderr=args.json)  # --json: stdout holds the record alone
        for side in ("a", "b"):
            out.print(reused_note(side, record[f"run_{side}"], (result.logged_before or {}).get(side, 0)),
                      highlight=False)  # fmt: skip
    _print(record, json_out=args.json)
    return 0


def reused_note(side: str, run_id: str, logged: int) -> str:
    """What `--reuse-runs` did with a side's run: took the run `hylo eval` made, or made the one it would resume."""
    if logged:
        episodes = f"{logged} episode" + ("s" if logged != 1 else "")
        return f"{side.upper()}: --reuse-runs: reusing run {run_id} ({episodes} already in it), extending it"
    return f"{side.upper()}: --reuse-runs: no run of this configuration yet; made {run_id}, which hylo eval resumes"


def interval_note(record: dict[str, Any]) -> str:
    """One line on what the interval is, and how it stands to the decision."""
    if record.get("confidence_sequence_kind") != "test":
        return ("an older record: its interval is a separate betting confidence sequence, which may contain 0 "
                "although the test decided")  # fmt: skip
    decided = record["decision"] in ("A better", "B better")
    if record.get("confidence_sequence_kind") == "anytime":
        return (f"every B − A the anytime test has not ruled out at alpha {record['alpha']}, valid on its own; the "
                "capped design decides on its own boundary, which spends more of alpha by the cap")  # fmt: skip
    ruled = f"every B − A the test itself has not ruled out at alpha {record['alpha']}"
    if not decided:
        return f"{ruled}; 0 is still among them: no decision"
    return f"{ruled}; it leaves out 0 exactly because the test decided"


def design_note(record: dict[str, Any]) -> str:
    """The design in one line: which, δ, and what a larger --max-episodes does to it."""
    delta = record.get("min_effect")
    futility = f", futility at δ = {delta:g}" if delta is not None else ", no futility stop (no --min-effect)"
    if record.get("design") == "capped":
        return (f"design: capped at {record['max_pairs']} pairs{futility}; valid up to the cap only: this capped "
                "record cannot be extended with a larger --max-episodes")  # fmt: skip
    return f"design: anytime{futility}; valid whenever it stops, and a larger --max-episodes extends it"


def outcome(record: dict[str, Any]) -> str:
    """The outcome in words: the decision, "no difference ≥ δ", or no decision (and why it stopped)."""
    if record["decision"] is not None:
        return str(record["decision"])
    if record.get("stopped_for") == "curtailment":
        return f"no decision: none was reachable within {record['max_pairs']} pairs"
    return f"no decision within {record['max_pairs']} pairs"


def bound(value: float) -> str:
    """A bound of the interval to three decimals, or in scientific notation where those would print a bound that is
    not 0 as ±0.000 (an interval that leaves out 0 never reads as if it held it)."""
    shown = f"{value:+.3f}"
    return f"{value:+.1e}" if value != 0 and float(shown) == 0 else shown


def _print(record: dict[str, Any], *, json_out: bool) -> None:
    if json_out:
        sys.stdout.write(json.dumps(record) + "\n")
        return
    out = console()
    decision = outcome(record)
    reused = " (--reuse-runs: the runs hylo eval made)" if record.get("reuse_runs") else ""
    out.print(f"A/B {record['ab_id']}: A = {record['agent_a']} ({record['run_a']}), "
              f"B = {record['agent_b']} ({record['run_b']}){reused}", highlight=False)  # fmt: skip
    out.print(f"decision: {decision} (after {record['pairs_used']} pairs, alpha {record['alpha']})", highlight=False)
    out.print(design_note(record), highlight=False)
    difference = record["difference"]
    low, high = record["confidence_sequence"]
    if difference is not None:
        out.print(f"B − A: {difference:+.3f}, confidence sequence [{bound(low)}, {bound(high)}]", highlight=False)
        out.print(f"  ({interval_note(record)})", highlight=False)
    flips = record["flips"]
    out.print(f"pairs: only A succeeded {flips['a_wins']}, only B {flips['b_wins']}, both {flips['both']}, "
              f"neither {flips['neither']}; with an abstention {record['abstentions']}", highlight=False)  # fmt: skip
