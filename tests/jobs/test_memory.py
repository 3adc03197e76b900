"""A job is held to its `ram_gb` on the whole process tree it starts: past it, the job is stopped and ends `aborted`
naming its figure, while a normal job under its default figure runs as before."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from job_specs import quick, slow

from hylo.evallog.store import EvalLog
from hylo.jobs import JobScheduler, JobState
from hylo.jobs.memory import DATA_HEADROOM_GB, GB, JobCgroups, MemoryLimit, exceeded_message, own_cgroup

HERE = Path(__file__).parent


def scheduler_of(tmp_path: Path) -> JobScheduler:
    """A scheduler whose jobs can import this directory's agents."""
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    return JobScheduler(tmp_path / "runs", env={**os.environ, "PYTHONPATH": path})


def test_a_job_past_its_ram_gb_is_stopped_and_ends_aborted_naming_it(tmp_path: Path) -> None:
    # the agent holds 64 MB more at each act, up to 1.5 GB: unchecked, its three 200-step episodes end in ~30 s
    with scheduler_of(tmp_path) as scheduler:
        scheduler.start()
        spec = quick(agent="memory_agents:Hoarder", max_steps=200)
        job = scheduler.submit(spec, ram_gb=0.5, allow_import=True)
        ended = scheduler.wait(job.job_id, timeout=120)
    assert ended.state is JobState.ABORTED, ended.message
    assert ended.message == exceeded_message(0.5)
    assert "used more than its ram_gb 0.5 GB" in ended.message
    assert ended.progress is not None and (ended.progress.status, ended.progress.message) == ("aborted", ended.message)
    assert ended.progress.n_done < 3


def test_a_normal_job_under_its_default_ram_gb_runs_to_done(tmp_path: Path) -> None:
    with scheduler_of(tmp_path) as scheduler:
        scheduler.start()
        job = scheduler.submit(slow(episodes=4, workers=2, timing="sync", timing_options={}))
        ended = scheduler.wait(job.job_id, timeout=300)
    assert ended.resources.ram_gb == 2.0  # the default: 1 GB a worker
    assert ended.state is JobState.DONE and ended.executed_now == 4, ended.message


def test_one_allocation_past_what_a_process_may_map_fails_at_once(tmp_path: Path) -> None:
    # where no cgroup holds the job, RLIMIT_DATA does: 8 GB asked at once of a job of 0.5 GB is refused (granted, it
    # would cost nothing until written to, so the look at resident memory could not see it)
    with scheduler_of(tmp_path) as scheduler:
        if scheduler.cgroups is not None:
            pytest.skip("jobs are held by a cgroup here, which charges memory as it is written, not as it is mapped")
        scheduler.start()
        reserved = 0.5 + DATA_HEADROOM_GB + 3.5
        job = scheduler.submit(quick(agent="memory_agents:Reserver", agent_args={"gb": reserved}), ram_gb=0.5,
                               allow_import=True)  # fmt: skip
        ended = scheduler.wait(job.job_id, timeout=120)
        log = scheduler.run_dir(ended.run_id)
    assert ended.state is JobState.DONE, ended.message
    assert ended.progress is not None and ended.progress.status_counts["error"] == 3
    with EvalLog.open(log) as opened:
        reasons = {row.reason for row in opened.final_episodes()}
    (reason,) = reasons  # every episode's, the same
    assert reason.startswith("agent reset raised MemoryError: Unable to allocate 8.00 GiB")


def test_a_job_in_a_cgroup_is_placed_there_and_an_oom_kill_in_it_ends_it_aborted(tmp_path: Path) -> None:
    # the kernel's side stands in as files: what the scheduler writes, and the event it reads back
    parent = tmp_path / "cgroup"
    parent.mkdir()
    with scheduler_of(tmp_path) as scheduler:
        scheduler.cgroups = JobCgroups(parent)
        scheduler.start()
        job = scheduler.submit(slow(), ram_gb=1.5)
        cgroup = parent / f"hylo-job-{job.job_id}"
        deadline = time.monotonic() + 60
        while scheduler.status(job.job_id).pid is None and time.monotonic() < deadline:
            time.sleep(0.05)
        running = scheduler.status(job.job_id)
        assert running.state is JobState.RUNNING
        assert (cgroup / "cgroup.procs").read_text() == str(running.pid)  # joined before it ran anything
        assert (cgroup / "memory.max").read_text() == str(int(1.5 * GB))
        assert (cgroup / "memory.swap.max").read_text() == "0" and (cgroup / "memory.oom.group").read_text() == "1"
        (cgroup / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\noom_group_kill 1\n")
        ended = scheduler.wait(job.job_id, timeout=60)
    assert ended.state is JobState.ABORTED and ended.message == exceeded_message(1.5)
    assert (cgroup / "cgroup.kill").read_text() == "1"  # whatever was left of it is ended with the cgroup


def _cgroup(directory: Path, controllers: str, subtree: str, procs: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (("cgroup.controllers", controllers), ("cgroup.subtree_control", subtree),
                       ("cgroup.procs", procs)):  # fmt: skip
        (directory / name).write_text(text)
    return directory


def test_jobs_get_cgroups_only_where_the_memory_controller_can_be_given_to_them(tmp_path: Path) -> None:
    v1_machine = _cgroup(tmp_path / "hybrid", "hugetlb", "", "")  # memory on cgroup v1: nothing to give
    assert JobCgroups.delegating(v1_machine, 42) is None
    delegated = _cgroup(tmp_path / "delegated", "cpu memory pids", "memory pids", "")
    assert JobCgroups.delegating(delegated, 42) == JobCgroups(delegated)
    shared = _cgroup(tmp_path / "shared", "cpu memory", "", "42\n77\n")  # a terminal's scope: not ours to move
    assert JobCgroups.delegating(shared, 42) is None and (shared / "cgroup.subtree_control").read_text() == ""
    alone = _cgroup(tmp_path / "alone", "cpu memory", "", "42\n")  # a service's: the scheduler moves into a leaf
    assert JobCgroups.delegating(alone, 42) == JobCgroups(alone)
    assert (alone / "hylo-scheduler" / "cgroup.procs").read_text() == "42"
    assert (alone / "cgroup.subtree_control").read_text() == "+memory"


def test_a_process_finds_its_cgroup_v2_directory_from_proc(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text("4:memory:/docker/abc\n0::/system.slice/hylo.service\n")
    (proc / "mountinfo").write_text(
        "25 30 0:22 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "26 30 0:23 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
    )
    assert own_cgroup(proc) == Path("/sys/fs/cgroup/system.slice/hylo.service")
    (proc / "cgroup").write_text("4:memory:/\n")  # cgroup v1 only
    assert own_cgroup(proc) is None
    assert MemoryLimit(0.5).oom_killed() is False  # and a job without a cgroup was never OOM-killed in one
