"""What `hylo eval --rerun FILE.rrd` costs the evaluation loop, and what an export of a run costs.

The same short Meta-World run (reach-v3, the random agent, same seed, every episode its full step budget, inline, its
episodes on video) is made alternately without a recording (`bare`) and with one (`rerun`: a `RerunRecorder` handed
each finished episode, as `hylo eval --rerun` does). The loop's figure is the run's steps per second up to the end of
`Evaluation.run()`; the recorder's writer may still be busy then, and the time it took after that to finish the file
(`drain_s`) is reported beside it, with the frames and episodes it dropped. Each figure is the best of `--repeats`.
Then the first two episodes of the last run are exported (`hylo runs export RUN --format rrd`): its time and the
file's size. Wall time moves with the machine's load: compare figures taken together.

    python benchmarks/rerun_overhead.py [--json] [--repeats N] [--episodes N] [--max-steps N]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

from hylo.envs.quiet import stdout_to_stderr
from hylo.eval.rerun_recording import RerunRecorder
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec
from hylo.evallog.rrd import export_rrd
from hylo.evallog.store import EvalLog


def run_once(tmp: Path, episodes: int, max_steps: int, *, rerun: bool) -> dict[str, Any]:
    """One fresh run; its steps per second, and with `rerun` what the recorder did after the loop ended."""
    spec = EvalSpec(benchmark="metaworld", tasks=["reach-v3"], agent="random", episodes=episodes, seed=0,
                    max_steps=max_steps, video=episodes, log_dir=str(tmp / ("rerun" if rerun else "bare")))  # fmt: skip
    evaluation = Evaluation(spec)
    recorder = RerunRecorder(tmp / "live.rrd", evaluation.run_dir, evaluation.run_id) if rerun else None
    if recorder is not None:
        recorder.start()
        evaluation.on_result = lambda result: recorder.put(result.row, result.trace)
    start = time.perf_counter()
    result = evaluation.run()
    loop_s = time.perf_counter() - start
    steps = sum(row.steps for row in result.episodes)
    figures: dict[str, Any] = {"steps": steps, "steps_per_s": steps / loop_s, "run_dir": evaluation.run_dir}
    if recorder is not None:
        summary = recorder.close()
        figures.update(drain_s=time.perf_counter() - start - loop_s, frames_dropped=summary.frames_dropped,
                       episodes_dropped=summary.episodes_dropped)  # fmt: skip
    return figures


def measure(repeats: int, episodes: int, max_steps: int) -> dict[str, Any]:
    best: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            for name in ("bare", "rerun"):
                where = Path(tmp) / f"{name}-{repeat}"
                where.mkdir()
                figures = run_once(where, episodes, max_steps, rerun=name == "rerun")
                if name not in best or figures["steps_per_s"] > best[name]["steps_per_s"]:
                    best[name] = figures
        run_dir = best["rerun"]["run_dir"]
        out = Path(tmp) / "export.rrd"
        start = time.perf_counter()
        written = export_rrd(run_dir, out, episodes=episode_ids(run_dir)[:2])
        export_s = time.perf_counter() - start
    bare, rerun = best["bare"], best["rerun"]
    return {
        "steps": bare["steps"],
        "bare_steps_per_s": bare["steps_per_s"],
        "rerun_steps_per_s": rerun["steps_per_s"],
        "ratio": rerun["steps_per_s"] / bare["steps_per_s"],
        "drain_s": rerun["drain_s"],
        "frames_dropped": rerun["frames_dropped"],
        "episodes_dropped": rerun["episodes_dropped"],
        "export_episodes": written.episodes,
        "export_frames": written.frames,
        "export_s": export_s,
        "export_bytes": written.size_bytes,
    }


def episode_ids(run_dir: Path) -> list[str]:
    """The run's final episode ids, sorted."""
    with EvalLog.open(run_dir) as log:
        return sorted(row.episode_id for row in log.final_episodes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--max-steps", type=int, default=100)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    with stdout_to_stderr():
        r = measure(args.repeats, args.episodes, args.max_steps)
    if args.json:
        sys.stdout.write(json.dumps(r) + "\n")
        return 0
    print(f"metaworld reach-v3, {args.episodes} episodes x {args.max_steps} steps, inline, on video")
    print(f"eval loop: bare {r['bare_steps_per_s']:.1f} steps/s, --rerun {r['rerun_steps_per_s']:.1f} steps/s, "
          f"ratio {r['ratio']:.3f}; the recording finished {r['drain_s']:.2f} s after the loop "
          f"(dropped {r['frames_dropped']} frames, {r['episodes_dropped']} episodes)")  # fmt: skip
    print(f"export of {r['export_episodes']} episodes ({r['export_frames']} frames): {r['export_s']:.2f} s, "
          f"{r['export_bytes'] / 1e6:.2f} MB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
