"""What a run's code identity costs at its start: the time to take it for hylo's built-in agents and for a
`module:Class` agent, in a fresh process (the first run of a `hylo eval` command: every source file read and parsed,
the installed distributions' metadata read) and again in the same process (its memos warm), and the time to hash a
checkpoint file of `--gigabytes` GB the first time and again (memoised by path, size, times and inode). `*_cpu_s`
is the CPU time of the same call: on a busy machine the wall time grows, the CPU time does not.

The identity is taken once per run, in the process that starts it; episodes and workers never take it.

    python benchmarks/code_identity_cost.py --json
    python benchmarks/code_identity_cost.py --json --gigabytes 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AGENTS = ("random", "expert", "mlp", "mine:Agent")
MODULE = "from hylo.agents.basic import HoldAgent\n\n\nclass Agent(HoldAgent):\n    pass\n"


def take(agent: str, log_dir: str) -> dict[str, float]:
    """Seconds to take `agent`'s identity on babyai, first and again, in this process."""
    from hylo.eval import EvalSpec
    from hylo.eval.resolve import code_of, resolve

    resolved = resolve(EvalSpec(benchmark="babyai", agent=agent, tasks=["GoToLocal"], log_dir=log_dir))
    start, cpu = time.perf_counter(), time.process_time()
    code = code_of(resolved)
    first, first_cpu = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    code_of(resolved)
    again = time.perf_counter() - start
    return {"first_s": round(first, 3), "first_cpu_s": round(first_cpu, 3), "again_s": round(again, 3),
            "sources": len(code.sources())}  # fmt: skip


def hash_file(gigabytes: float, folder: Path) -> dict[str, float]:
    from hylo.eval.content_hash import file_hash

    path = folder / "checkpoint.bin"
    block = os.urandom(1 << 20)
    with path.open("wb") as file:
        for _ in range(int(gigabytes * 1024)):
            file.write(block)
    start, cpu = time.perf_counter(), time.process_time()
    file_hash(path)
    first, first_cpu = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    file_hash(path)
    again = time.perf_counter() - start
    size = path.stat().st_size
    path.unlink()
    return {"bytes": size, "first_s": round(first, 3), "first_cpu_s": round(first_cpu, 3), "again_s": round(again, 6),
            "mb_per_s": round(size / first / 1e6)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gigabytes", type=float, default=1.0, help="size of the checkpoint file to hash")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a single agent, in this (fresh) process
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if args.one is not None:
            sys.path.insert(0, os.getcwd())
            print(json.dumps(take(args.one, folder)))
            return
        Path(folder, "mine.py").write_text(MODULE)
        figures: dict[str, object] = {}
        for agent in AGENTS:  # each in a fresh process: what a `hylo eval` command pays
            out = subprocess.run([sys.executable, __file__, "--one", agent], cwd=folder, capture_output=True,
                                 text=True, check=True)  # fmt: skip
            figures[agent] = json.loads(out.stdout)
        figures["checkpoint"] = hash_file(args.gigabytes, Path(folder))
    if args.json:
        print(json.dumps(figures))
        return
    for name, value in figures.items():
        print(f"{name:>12}  {value}")


if __name__ == "__main__":
    main()
