"""`hylo plan`: how many episodes telling two success rates apart takes, paired, unpaired and sequentially."""

from __future__ import annotations

import argparse
import json
import math

from hylo.eval.planning import mcnemar_pairs, sequential_plan, two_proportion_per_side


def run(args: argparse.Namespace) -> int:
    options = {"alpha": args.alpha, "power": args.power}
    if not 0.0 < args.alpha < 1.0:
        raise ValueError(f"--alpha must be in (0, 1), got {args.alpha}")
    paired = mcnemar_pairs(args.p_a, args.p_b, correlation=args.correlation, **options)
    per_side = two_proportion_per_side(args.p_a, args.p_b, **options)
    sequential = sequential_plan(args.p_a, args.p_b, correlation=args.correlation, **options)
    plan = {
        "p_a": args.p_a,
        "p_b": args.p_b,
        "correlation": args.correlation,
        "alpha": args.alpha,
        "power": args.power,
        "paired_mcnemar": {"pairs": paired, "episodes": 2 * paired},
        "unpaired_two_proportion": {"per_side": per_side, "episodes": 2 * per_side},
        "sequential": {
            "max_pairs": sequential.max_pairs,
            "mean_pairs": sequential.mean_pairs,
            "p90_pairs": sequential.p90_pairs,
        },
    }
    if args.json:
        print(json.dumps(plan))
        return 0
    print(f"telling {args.p_a} from {args.p_b} (correlation {args.correlation}) at alpha {args.alpha}, "
          f"power {args.power}:")  # fmt: skip
    print(f"  paired, exact McNemar:            {paired} pairs (A and B on the same episode keys)")
    print(f"  unpaired, two-proportion z-test:  {per_side} episodes per side")
    print(f"  sequential paired test (hylo ab): {math.ceil(sequential.mean_pairs)} pairs on average, 90% of "
          f"comparisons at most {sequential.p90_pairs}, with --max-episodes {sequential.max_pairs}")  # fmt: skip
    return 0
