"""The JobScheduler from Python: real `hylo eval` processes, a durable queue, refusals, cancel and stop."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from job_specs import quick, slow

from hylo.envs.babyai import BabyAIBenchmark
from hylo.evallog.store import EvalLog
from hylo.jobs import (
    Gpu,
    JobConflict,
    JobNotFound,
    JobRefused,
    JobScheduler,
    JobState,
    JobStatus,
    Machine,
    SchedulerBusy,
)


def wait_for_episodes(scheduler: JobScheduler, job_id: str, n: int, timeout: float = 60) -> JobStatus:
    deadline = time.monotonic() + timeout
    while True:
        status = scheduler.status(job_id)
        if status.state is JobState.RUNNING and status.progress is not None and status.progress.n_done >= n:
            return status
        assert not status.state.final and time.monotonic() < deadline, status
        time.sleep(0.1)


def test_a_job_runs_as_hylo_eval_in_the_schedulers_log_dir(tmp_path: Path):
    log_dir = tmp_path / "runs"
    with JobScheduler(log_dir) as scheduler:
        queued = scheduler.submit(quick(fresh=True))
        assert queued.state is JobState.QUEUED and queued.progress is None
        assert queued.spec.run_id == queued.run_id and not queued.spec.fresh  # fixed at submission
        assert queued.spec.log_dir == str(log_dir.resolve()) and queued.spec.tasks == ["GoToLocal"]
        scheduler.start()
        done = scheduler.wait(queued.job_id, timeout=60)
    assert done.state is JobState.DONE and done.exit_code == 0 and done.executed_now == 3
    assert done.progress is not None and done.progress.status_counts["success"] == 3
    assert done.started_at is not None and done.ended_at is not None and done.pid is not None
    job_dir = log_dir / "jobs" / done.job_id
    assert json.loads((job_dir / "spec.json").read_text())["run_id"] == done.run_id
    assert json.loads((job_dir / "stdout.log").read_text())["executed_now"] == 3
    assert (log_dir / done.run_id / "evallog.sqlite").is_file() and (log_dir / "jobs.sqlite").is_file()


def test_bad_input_found_when_the_run_binds_fails_the_job_with_the_error_line(tmp_path: Path):
    with JobScheduler(tmp_path / "runs") as scheduler:
        scheduler.start()
        job = scheduler.submit(quick(timing="realtime"))  # BabyAI has no hold action: refused when it binds
        failed = scheduler.wait(job.job_id, timeout=60)
    assert failed.state is JobState.FAILED and failed.exit_code == 2
    assert failed.message.startswith("hylo: error:") and "hold action" in failed.message


def test_the_queue_outlives_its_scheduler(tmp_path: Path):
    log_dir = tmp_path / "runs"
    with JobScheduler(log_dir) as first:
        later = first.submit(quick(seed=1))
        sooner = first.submit(quick(seed=2), priority=3)
    with JobScheduler(log_dir) as second:
        assert [job.job_id for job in second.queue()] == [sooner.job_id, later.job_id]
        second.start()
        finals = [second.wait(job.job_id, timeout=60) for job in (sooner, later)]
    assert [status.state for status in finals] == [JobState.DONE, JobState.DONE]


def test_one_scheduler_owns_a_log_dir_at_a_time(tmp_path: Path):
    log_dir = tmp_path / "runs"
    first = JobScheduler(log_dir)
    with pytest.raises(SchedulerBusy, match="another job scheduler"):
        JobScheduler(log_dir)
    first.close()
    JobScheduler(log_dir).close()


@pytest.mark.parametrize(
    ("spec", "kwargs", "field"),
    [
        (quick(log_dir="/elsewhere"), {}, "log_dir"),
        (quick(agent="tests.agents:Sneaky"), {}, "agent"),
        (quick(benchmark="gym:evil.module:Env-v0"), {}, "benchmark"),
        (quick(tasks=["Nowhere"]), {}, "tasks"),
        (quick(run_id="jobs"), {}, "run_id"),
        (quick(run_id="graphs"), {}, "run_id"),
        (quick(run_id="jobs.sqlite-wal"), {}, "run_id"),
        (quick(), {"cpus": 0}, "cpus"),
        (quick(), {"ram_gb": 0.0}, "ram_gb"),
        (quick(), {"cpus": 4096}, "cpus"),
    ],
)
def test_refused_submissions_name_the_field_and_queue_nothing(tmp_path: Path, spec, kwargs, field):
    with JobScheduler(tmp_path / "runs") as scheduler:
        with pytest.raises(JobRefused) as refused:
            scheduler.submit(spec, **kwargs)
        assert refused.value.field == field
        assert scheduler.jobs() == []


def test_the_schedulers_own_log_dir_may_be_named(tmp_path: Path):
    with JobScheduler(tmp_path / "runs") as scheduler:
        assert scheduler.submit(quick(log_dir=str(tmp_path / "runs"))).state is JobState.QUEUED


def test_cancelling_a_queued_job_is_immediate_and_final(tmp_path: Path):
    with JobScheduler(tmp_path / "runs") as scheduler:
        job = scheduler.submit(quick())
        cancelled = scheduler.cancel(job.job_id)
        assert cancelled.state is JobState.CANCELLED and scheduler.queue() == []
        with pytest.raises(JobConflict, match="already cancelled"):
            scheduler.cancel(job.job_id)
        with pytest.raises(JobNotFound):
            scheduler.cancel("nope")
        assert scheduler.submit(quick()).state is JobState.QUEUED  # the run may be queued again


def test_a_gpu_job_is_placed_on_a_gpu_of_a_simulated_gpu_machine(tmp_path: Path):
    gpu_box = Machine(cpus=2, ram_total_gb=8.0, ram_available_gb=8.0, gpus=(Gpu(0, "Simulated", 16.0, 16.0),))
    with JobScheduler(tmp_path / "runs", machine=gpu_box) as scheduler:
        scheduler.start()
        job = scheduler.submit(quick(), gpu_mem_gb=4.0, exclusive_gpu=True)
        done = scheduler.wait(job.job_id, timeout=60)
    assert done.state is JobState.DONE and done.gpu == 0 and done.resources.exclusive_gpu


def _environ(pid: int) -> dict[bytes, bytes]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.split(b"=", 1) for entry in entries if b"=" in entry)


def test_on_a_gpu_machine_a_job_sees_its_gpu_or_none_and_still_renders(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("MUJOCO_EGL_DEVICE_ID", raising=False)
    gpu_box = Machine(cpus=2, ram_total_gb=8.0, ram_available_gb=8.0, gpus=(Gpu(0, "Simulated", 16.0, 16.0),))
    seen = {}
    with JobScheduler(tmp_path / "runs", machine=gpu_box) as scheduler:
        scheduler.start()
        for name, gpu in (("no gpu", {}), ("a gpu", {"gpu_mem_gb": 4.0})):
            job = scheduler.submit(slow(seed=len(seen)), **gpu)
            running = wait_for_episodes(scheduler, job.job_id, 0)
            assert running.pid is not None
            environ = _environ(running.pid)  # read while it ran
            seen[name] = (environ.get(b"CUDA_VISIBLE_DEVICES"), environ.get(b"MUJOCO_EGL_DEVICE_ID"))
            scheduler.cancel(job.job_id)
    # no CUDA device for a job that declared none, and EGL device 0 for its renderer: robosuite (LIBERO) would read
    # the empty CUDA_VISIBLE_DEVICES as its EGL devices and render nothing
    assert seen == {"no gpu": (b"", b"0"), "a gpu": (b"0", None)}


def test_a_batched_job_is_admitted_with_its_policy_host_and_one_copy_of_its_gpu_memory(tmp_path: Path):
    gpu = (Gpu(0, "Simulated", 16.0, 16.0),)
    with JobScheduler(tmp_path / "four", machine=Machine(4, 8.0, 8.0, gpu)) as scheduler:
        batched = scheduler.submit(quick(workers=2, batch=2), gpu_mem_gb=10.0)
        assert batched.resources.cpus == 3 and batched.resources.gpu_mem_gb == 10.0  # two workers and the host
        assert scheduler.submit(quick(workers=2, seed=1)).resources.cpus == 2
    with JobScheduler(tmp_path / "two", machine=Machine(2, 8.0, 8.0, gpu)) as scheduler:
        whole = scheduler.submit(quick(workers=2, batch=2), gpu_mem_gb=10.0)
        assert whole.resources.cpus == 2  # the whole machine, not a job that can never fit


def test_stopping_the_scheduler_stops_running_jobs_resumably(tmp_path: Path):
    log_dir = tmp_path / "runs"
    scheduler = JobScheduler(log_dir).start()
    job = scheduler.submit(slow())
    wait_for_episodes(scheduler, job.job_id, 1)
    scheduler.stop()
    stopped = scheduler.status(job.job_id)
    scheduler.close()
    assert stopped.state is JobState.ABORTED and "resume" in stopped.message
    with EvalLog.open(log_dir / job.run_id) as log:
        info = log.info()
    assert 1 <= info.n_done < 12 and info.status == "interrupted"


def test_stopping_without_terminating_lets_running_jobs_finish(tmp_path: Path):
    with JobScheduler(tmp_path / "runs") as scheduler:
        scheduler.start()
        job = scheduler.submit(quick())
        while scheduler.status(job.job_id).state is JobState.QUEUED:
            time.sleep(0.05)
        scheduler.stop(terminate=False)
        assert not scheduler.running
        assert scheduler.status(job.job_id).state is JobState.DONE


@pytest.mark.parametrize("given", ["env", "os.environ"])
def test_a_job_never_gets_the_api_token_in_its_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given):
    monkeypatch.setenv("HYLO_TOKEN", "s3cret-token")  # as `HYLO_TOKEN=... hylo serve` has it
    monkeypatch.setenv("HYLO_TEST_MARK", "kept")
    env = dict(os.environ) if given == "env" else None
    with JobScheduler(tmp_path / "runs", env=env) as scheduler:
        scheduler.start()
        job = scheduler.submit(slow())
        running = wait_for_episodes(scheduler, job.job_id, 0)
        assert running.pid is not None
        environ = Path(f"/proc/{running.pid}/environ").read_bytes().split(b"\0")
    assert b"HYLO_TEST_MARK=kept" in environ  # the job's own environment, read while it ran
    assert not [entry for entry in environ if entry.startswith(b"HYLO_TOKEN=") or b"s3cret-token" in entry]


def test_a_benchmarks_env_memory_is_what_its_jobs_declare_and_are_admitted_by(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(BabyAIBenchmark, "env_ram_gb", 1.9)
    box = Machine(cpus=2, ram_total_gb=8.0, ram_available_gb=8.0)
    with JobScheduler(tmp_path / "runs", machine=box) as scheduler:
        job = scheduler.submit(quick(workers=2, run_id="two"))
        assert job.resources.ram_gb == pytest.approx(3.8)  # 2 workers × 1.9 GB
        assert scheduler.submit(quick(run_id="given"), ram_gb=0.5).resources.ram_gb == 0.5  # what the user says
        monkeypatch.setattr(BabyAIBenchmark, "env_ram_gb", 6.0)
        with pytest.raises(JobRefused, match=r"ram_gb 12 can never fit: this machine has 8\.0 GB") as refused:
            scheduler.submit(quick(workers=2, run_id="big"))
        assert refused.value.field == "ram_gb"
