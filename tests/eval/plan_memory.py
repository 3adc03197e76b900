"""Run as a script: start a BabyAI run of EPISODES × SEEDS episodes on workers that finish each episode at once, stop
it after STARTED episodes, and print (JSON) how much the process's peak resident memory grew while it ran.

`python plan_memory.py EPISODES SEEDS STARTED LOG_DIR`: a process of its own, so that the peak is this run's alone.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys

from hylo.core.status import EpisodeOutcome, EpisodeStatus
from hylo.eval.runner import Evaluation
from hylo.eval.spec import EvalSpec
from hylo.eval.worker import EpisodeJob, EpisodeResult
from hylo.evallog.rows import EpisodeRow


class InstantPool:
    """One worker whose episodes end as soon as they start; interrupted (as by Ctrl-C) after `started` of them."""

    def __init__(self, started: int) -> None:
        self.started = started
        self.running: list[EpisodeJob] = []
        self.finished = 0

    def start(self) -> None:
        pass

    def idle(self) -> int:
        return 0 if self.running else 1

    def busy(self) -> int:
        return len(self.running)

    def submit(self, job: EpisodeJob) -> bool:
        self.running.append(job)
        return True

    def poll(self, timeout: float) -> list[EpisodeResult]:
        if self.finished >= self.started:
            raise KeyboardInterrupt
        outcome = EpisodeOutcome(EpisodeStatus.FAILURE, 1, "max_steps")
        results = [
            EpisodeResult(EpisodeRow.of(job.task, outcome, started_at=0.0, ended_at=0.0, metrics={}), [])
            for job in self.running
        ]
        self.finished += len(results)
        self.running = []
        return results

    def close(self, *, kill: bool = False) -> None:
        pass


def peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def main(episodes: int, seeds: int, started: int, log_dir: str) -> None:
    spec = EvalSpec(benchmark="babyai", agent="random", tasks=["GoToLocal"], episodes=episodes,
                    seeds=list(range(seeds)), max_steps=1, log_dir=log_dir)  # fmt: skip
    evaluation = Evaluation(spec)
    pool = InstantPool(started)
    evaluation._pool = lambda: pool  # type: ignore[method-assign]
    before = peak_bytes()
    with contextlib.suppress(KeyboardInterrupt):  # the pool's stop, after `started` episodes
        evaluation.run()
    print(json.dumps({"growth": peak_bytes() - before, "finished": pool.finished}))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
