"""`hylo plan`: how many episodes telling two success rates apart takes, paired, unpaired and sequentially.

The paired counts depend on the correlation r of A's and B's outcomes on a pair, which no default can know: with
`--correlation` the paired and sequential figures are at that r; without it, the paired count is given at several r
(from none to strong) and the sequential figures, simulated at one r, wait for it. `hylo compare` of a pilot pair of
runs reports r. The sequential figures are given for each design of `hylo ab` (anytime and capped, each with and
without the futility stop at δ = `--min-effect`, by default the difference planned for)."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import textwrap
from typing import TYPE_CHECKING, Any

from hylo.cli.arguments import add_json

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers

PILOT_HINT = (
    "Estimate r from a pilot: both agents on the same 30-50 episodes (hylo eval of each, same tasks and seed), then "
    "hylo compare RUN_A RUN_B prints it; plan a little below it (from n pairs its standard error is about "
    "(1-r^2)/sqrt(n): 0.15 at 40)."
)


def add_parser(commands: Subparsers) -> None:
    """Add `plan` to `hylo`'s commands."""
    plan = commands.add_parser("plan", help="episodes needed to tell two success rates apart")
    plan.add_argument("--p-a", type=float, required=True, help="A's success rate")
    plan.add_argument("--p-b", type=float, required=True, help="B's success rate")
    plan.add_argument("--correlation", type=float, default=None,
                      help="of A's and B's outcomes on a pair (phi: hylo compare of a pilot prints it); without it, "
                      "the paired count at r = 0, 0.25, 0.5, 0.75")  # fmt: skip
    plan.add_argument("--alpha", type=float, default=0.05, help="two-sided (default 0.05)")
    plan.add_argument("--power", type=float, default=0.8, help="chance of deciding for the better one (default 0.8)")
    plan.add_argument("--min-effect", type=float, default=None, metavar="DELTA",
                      help="hylo ab's futility δ for the designs with futility (default: |p_b - p_a|)")  # fmt: skip
    add_json(plan)


def run(args: argparse.Namespace) -> int:
    """`hylo plan`: the counts, printed or as JSON."""
    # start-up time: the statistics
    from hylo.stats.planning import mcnemar_pairs, paired_by_correlation, two_proportion_per_side

    options = {"alpha": args.alpha, "power": args.power}
    if not 0.0 < args.alpha < 1.0:
        raise ValueError(f"--alpha must be in (0, 1), got {args.alpha}")
    per_side = two_proportion_per_side(args.p_a, args.p_b, **options)
    plan: dict[str, Any] = {
        "p_a": args.p_a,
        "p_b": args.p_b,
        "correlation": args.correlation,
        "alpha": args.alpha,
        "power": args.power,
        "paired_mcnemar": None,
        "paired_by_correlation": [],
        "unpaired_two_proportion": {"per_side": per_side, "episodes": 2 * per_side},
        "sequential": None,
        "min_effect": _min_effect(args),
        "designs": [],
    }
    if args.correlation is None:
        counts = paired_by_correlation(args.p_a, args.p_b, **options)
        plan["paired_by_correlation"] = [{"correlation": r, "pairs": n, "episodes": 2 * n} for r, n in counts]
    else:
        paired = mcnemar_pairs(args.p_a, args.p_b, correlation=args.correlation, **options)
        plan["paired_mcnemar"] = {"pairs": paired, "episodes": 2 * paired}
        plan["paired_by_correlation"] = [{"correlation": args.correlation, "pairs": paired, "episodes": 2 * paired}]
        plan["designs"] = design_plans(args.p_a, args.p_b, args.correlation, plan["min_effect"], **options)
        anytime = plan["designs"][0]
        plan["sequential"] = {key: anytime[key] for key in ("max_pairs", "mean_pairs", "p90_pairs")}
    if args.json:
        print(json.dumps(plan))
        return 0
    _print(plan)
    return 0


def _print(plan: dict[str, Any]) -> None:
    correlation = plan["correlation"]
    assumed = "correlation not given" if correlation is None else f"correlation {correlation}, as given"
    print(f"telling {plan['p_a']} from {plan['p_b']} at alpha {plan['alpha']}, power {plan['power']} ({assumed}):")
    print(f"  unpaired, two-proportion z-test:  {plan['unpaired_two_proportion']['per_side']} episodes per side")
    if correlation is not None:
        print(f"  paired, exact McNemar:            {plan['paired_mcnemar']['pairs']} pairs (A and B on the same "
              "episode keys)")  # fmt: skip
        sequential = plan["sequential"]
        mean, p90, cap = math.ceil(sequential["mean_pairs"]), sequential["p90_pairs"], sequential["max_pairs"]
        print(f"  sequential paired test (hylo ab): {mean} pairs on average, 90% of comparisons at most {p90}, "
              f"with --max-episodes {cap}")  # fmt: skip
        print(f"  hylo ab by design (--design, --min-effect; futility at δ = {plan['min_effect']:g}):")
        for entry in plan["designs"]:
            print(f"    {_design_name(entry):<28} {math.ceil(entry['mean_pairs']):>6} pairs on average, 90% at "
                  f"most {entry['p90_pairs']}, with --max-episodes {entry['max_pairs']} "
                  f"(type II {entry['type_ii']:.2f})")  # fmt: skip
        _note("anytime: valid whenever a comparison stops, and a larger --max-episodes extends it; capped: calibrated "
              "to its --max-episodes, fewer pairs, valid up to that cap only (it cannot be extended).")  # fmt: skip
        _note(f"r = {correlation}: the correlation of A's and B's outcomes on a pair (phi). {PILOT_HINT}")
        return
    counts = " · ".join(f"r = {entry['correlation']:g}: {entry['pairs']}" for entry in plan["paired_by_correlation"])
    print("  paired, exact McNemar (same episode keys), pairs by correlation r:")
    print(f"    {counts}")
    print("  sequential paired test (hylo ab): simulated at one r; give --correlation r")
    _note(
        "Pairing saves episodes as far as A and B succeed and fail on the same episodes (r > 0); at r = 0 the exact "
        f"paired test needs about as many as the unpaired one. No r is assumed. {PILOT_HINT}"
    )


def _min_effect(args: argparse.Namespace) -> float:
    """δ for the designs with futility: `--min-effect`, or the difference planned for."""
    if args.min_effect is None:
        return round(abs(float(args.p_b) - float(args.p_a)), 10)
    if not 0.0 < args.min_effect < 1.0:
        raise ValueError(f"--min-effect must be a difference in (0, 1), got {args.min_effect}")
    return float(args.min_effect)


def design_plans(
    p_a: float, p_b: float, correlation: float, min_effect: float, *, alpha: float, power: float
) -> list[dict[str, Any]]:
    """Each design's plan (anytime, anytime with futility, capped, capped with futility): its cap, mean and 90th
    percentile of pairs, and type II at the difference planned for."""
    from hylo.stats.planning import sequential_plan  # start-up time: the statistics

    plans = []
    for design in ("anytime", "capped"):
        for delta in (None, min_effect):
            found = sequential_plan(p_a, p_b, correlation=correlation, alpha=alpha, power=power, design=design,
                                    min_effect=delta)  # fmt: skip
            plans.append({"design": design, "min_effect": delta, "max_pairs": found.max_pairs,
                          "mean_pairs": found.mean_pairs, "p90_pairs": found.p90_pairs, "power": found.power,
                          "type_ii": found.type_ii})  # fmt: skip
    return plans


def _design_name(entry: dict[str, Any]) -> str:
    futility = f" + futility (δ {entry['min_effect']:g})" if entry["min_effect"] is not None else ""
    return f"{entry['design']}{futility}:"


def _note(text: str) -> None:
    """A paragraph under the figures, wrapped to the terminal (at most 100 columns)."""
    print(textwrap.fill(text, width=min(100, shutil.get_terminal_size().columns)))
