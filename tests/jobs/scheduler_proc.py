"""A scheduler in its own process, for the restart tests: submits one job, reports it once the job has run
`episodes` episodes, then waits to be killed.

    python scheduler_proc.py LOG_DIR DIE_WITH_SCHEDULER(0|1) EPISODES SPEC_JSON
"""

from __future__ import annotations

import json
import sys
import time

from hylo.eval.spec import EvalSpec
from hylo.jobs import JobScheduler, JobState


def main() -> None:
    log_dir, die, episodes, spec = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4]
    scheduler = JobScheduler(log_dir, die_with_scheduler=die).start()
    job = scheduler.submit(EvalSpec.model_validate(json.loads(spec)))
    while True:
        status = scheduler.status(job.job_id)
        if status.state is JobState.RUNNING and (status.progress.n_done if status.progress else 0) >= episodes:
            break
        if status.state.final:
            raise SystemExit(f"job ended before it was reported: {status.state.value} {status.message}")
        time.sleep(0.05)
    print(json.dumps({"job_id": job.job_id, "pid": status.pid, "run_id": job.run_id}), flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
