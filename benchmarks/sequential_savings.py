"""How many pairs the sequential paired A/B test saves against the fixed-size paired McNemar test of equal power.

For each case (success rates p_a, p_b of A and B, their correlation, a design power): `fixed_pairs` is the fewest
pairs at which the exact two-sided McNemar test reaches that power at alpha (computed exactly,
`hylo.stats.planning.mcnemar_pairs`); for the sequential test (`hylo.stats.sequential`, looked at after every pair,
simulated by `hylo.stats.planning.sequential_plan`), `max_pairs` is the smallest cap on the pairs at which it reaches
the same power (it decides for the better side within the cap in that share of simulated runs), and
`sequential_mean_pairs` the mean number of pairs its runs use with that cap (a run stops when it decides, else at the
cap). `pairs_ratio` = sequential_mean_pairs / fixed_pairs.
Goal: ≤ 0.7 at a difference of 0.2.

    python benchmarks/sequential_savings.py            # a table
    python benchmarks/sequential_savings.py --json     # {"cases": [{"p_a", "p_b", "sequential_mean_pairs", ...}]}
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hylo.stats.planning import mcnemar_pairs, sequential_plan

CASES = ((0.5, 0.7), (0.3, 0.5), (0.7, 0.9), (0.2, 0.4), (0.5, 0.6), (0.6, 0.9))
POWERS = (0.8, 0.9)


def case(p_a: float, p_b: float, power: float, *, correlation: float, runs: int, alpha: float) -> dict[str, Any]:
    fixed = mcnemar_pairs(p_a, p_b, correlation=correlation, alpha=alpha, power=power)
    plan = sequential_plan(p_a, p_b, correlation=correlation, alpha=alpha, power=power, runs=runs)
    return {
        "p_a": p_a,
        "p_b": p_b,
        "correlation": correlation,
        "power": power,
        "sequential_mean_pairs": plan.mean_pairs,
        "max_pairs": plan.max_pairs,
        "fixed_pairs": fixed,
        "pairs_ratio": plan.mean_pairs / fixed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--runs", type=int, default=4000, help="simulated A/B runs per case (default 4000)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--correlation", type=float, default=0.0, help="of A's and B's outcomes (default 0)")
    args = parser.parse_args(argv)
    cases = [
        case(p_a, p_b, power, correlation=args.correlation, runs=args.runs, alpha=args.alpha)
        for p_a, p_b in CASES
        for power in POWERS
    ]
    if args.json:
        sys.stdout.write(json.dumps({"cases": cases}) + "\n")
        return 0
    print(f"{'p_a':>5} {'p_b':>5} {'power':>6} {'fixed':>6} {'seq mean':>9} {'seq cap':>8} {'ratio':>6}")
    for c in cases:
        print(f"{c['p_a']:>5} {c['p_b']:>5} {c['power']:>6} {c['fixed_pairs']:>6} {c['sequential_mean_pairs']:>9.1f} "
              f"{c['max_pairs']:>8} {c['pairs_ratio']:>6.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
