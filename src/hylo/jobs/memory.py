"""A job's `ram_gb`, held to on the process tree it starts.

Admission reserves what a job declares (`hylo.jobs.resources`); this keeps the job to it, so that one job past its
figure cannot take the memory admission promised the others. Two means, each where it works:

- cgroup v2, where this process's cgroup can give its children the memory controller (it does already, or takes
  it now: a cgroup holding processes cannot, so a scheduler alone in its cgroup first moves into a leaf of it,
  `hylo-scheduler`, as a systemd service with `Delegate=yes` would): each job runs in a sub-cgroup
  `hylo-job-<id>` whose `memory.max` is its ram_gb, without swap, and whose whole tree the kernel ends at once when
  it goes past (`memory.oom.group`).
- elsewhere (cgroup v1, a cgroup this user may not write, a cgroup shared with other processes), every process of
  the job starts under RLIMIT_DATA: the job's ram_gb plus `DATA_HEADROOM_GB`, a backstop per process that makes one
  huge allocation fail at once instead of taking the machine. It counts a process's private writable mappings
  whole, touched or not (thread stacks, BLAS buffers): measured, a BabyAI job's process maps 0.17 GB, a Meta-World
  worker's 0.37 GB, the headroom covers a many-core BLAS and a model loader's reservations. Not RLIMIT_AS: that
  counts every mapping, and CUDA and JAX reserve (PROT_NONE, never backed) far more address space than any ram_gb,
  so a GPU job would fail to start under it; RLIMIT_DATA leaves those reservations and shared files out.

Either way the scheduler looks at each running job's tree (`MemoryLimit.exceeded`): the anonymous resident memory
of its processes summed past ram_gb, or an OOM kill in its cgroup, ends the job `aborted`, naming its ram_gb.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
from dataclasses import dataclass
from pathlib import Path

import psutil

logger = logging.getLogger(__name__)

GB = 1024**3
DATA_HEADROOM_GB = 4.0
"""What RLIMIT_DATA allows a job's process beyond the job's ram_gb (see the module's docstring)."""
JOB_CGROUP = "hylo-job-{job_id}"
SCHEDULER_LEAF = "hylo-scheduler"


def exceeded_message(ram_gb: float) -> str:
    """Why a job that went past its memory was stopped."""
    return (
        f"the job used more than its ram_gb {ram_gb:g} GB and was stopped; resubmit it with a larger ram_gb to "
        "resume (its finished episodes are kept)"
    )


def own_cgroup(proc: Path = Path("/proc/self")) -> Path | None:
    """This process's cgroup v2 directory; None without a cgroup v2 hierarchy (or off Linux)."""
    try:
        lines = (proc / "cgroup").read_text().splitlines()
        mounts = (proc / "mountinfo").read_text().splitlines()
    except OSError:
        return None
    member = next((line[3:] for line in lines if line.startswith("0::")), None)
    for mount in mounts:
        fields, _, fs = mount.partition(" - ")
        if member is None or fs.split(" ", 1)[0] != "cgroup2":
            continue
        root, mount_point = fields.split()[3:5]
        if member == root or member.startswith(root.rstrip("/") + "/"):
            return Path(mount_point) / member[len(root) :].lstrip("/")
    return None


@dataclass(frozen=True)
class JobCgroups:
    """The cgroup v2 directory whose sub-cgroups hold jobs: one that gives them the memory controller."""

    parent: Path

    @classmethod
    def find(cls) -> JobCgroups | None:
        """Jobs' cgroups under this process's own, where it can give them the memory controller (None: it cannot;
        jobs are held by RLIMIT_DATA and the scheduler's look instead)."""
        own = own_cgroup()
        return None if own is None else cls.delegating(own, os.getpid())

    @classmethod
    def delegating(cls, directory: Path, pid: int) -> JobCgroups | None:
        """`directory` as the parent of jobs' cgroups, when it has the memory controller and enables it for its
        children: it does already, or does now (process `pid`, alone in it, moves into its leaf first)."""
        try:
            if "memory" not in (directory / "cgroup.controllers").read_text().split():
                return None
            if "memory" in (directory / "cgroup.subtree_control").read_text().split():
                return cls(directory)
            members = (directory / "cgroup.procs").read_text().split()
            if members and members != [str(pid)]:
                return None  # other processes share it: they are not this scheduler's to move
            if members:
                leaf = directory / SCHEDULER_LEAF
                leaf.mkdir(exist_ok=True)
                (leaf / "cgroup.procs").write_text(str(pid))
            (directory / "cgroup.subtree_control").write_text("+memory")
        except OSError as exc:
            logger.debug("no cgroup v2 memory controller for jobs under %s: %r", directory, exc)
            return None
        return cls(directory)

    def of(self, job_id: str) -> Path:
        """Where job `job_id`'s cgroup is."""
        return self.parent / JOB_CGROUP.format(job_id=job_id)

    def make(self, job_id: str, limit: int) -> Path | None:
        """A job's cgroup, its memory at most `limit` bytes (None: it could not be made)."""
        directory = self.of(job_id)
        try:
            directory.mkdir(exist_ok=True)
            (directory / "memory.max").write_text(str(limit))
        except OSError as exc:
            logger.warning("could not make the cgroup of job %s (%r): it is held by RLIMIT_DATA instead", job_id, exc)
            return None
        for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
            with contextlib.suppress(OSError):
                (directory / name).write_text(value)
        return directory


class MemoryLimit:
    """One job's ram_gb on its process tree (see the module's docstring); `cgroup` is the job's own, if it has one."""

    def __init__(self, ram_gb: float, cgroup: Path | None = None) -> None:
        self.ram_gb = ram_gb
        self.limit = int(ram_gb * GB)
        self.cgroup = cgroup

    def preexec(self) -> None:
        """In the job's process, before it runs anything: into its cgroup, else under RLIMIT_DATA (which whatever it
        starts inherits)."""
        if self.cgroup is not None:
            try:
                (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))
                return
            except OSError:
                pass
        cap = self.limit + int(DATA_HEADROOM_GB * GB)
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))

    def exceeded(self, pid: int) -> bool:
        """Whether the job led by process `pid` went past its ram_gb: the kernel killed in its cgroup for want of
        memory, or its processes' anonymous resident memory adds up to more."""
        return self.oom_killed() or resident(pid) > self.limit

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the job's cgroup for want of memory."""
        if self.cgroup is None:
            return False
        try:
            events = (self.cgroup / "memory.events").read_text().split()
        except OSError:
            return False
        counts = dict(zip(events[::2], events[1::2], strict=False))
        return counts.get("oom_kill", "0") != "0" or counts.get("oom_group_kill", "0") != "0"

    def close(self) -> None:
        """Remove the job's cgroup, ending whatever of the job outlived it."""
        if self.cgroup is None:
            return
        with contextlib.suppress(OSError):
            (self.cgroup / "cgroup.kill").write_text("1")
        try:
            self.cgroup.rmdir()
        except OSError as exc:
            logger.debug("could not remove %s: %r", self.cgroup, exc)


def resident(pid: int) -> int:
    """The anonymous resident memory (what reclaim cannot drop: not file pages, not shared memory) of process `pid`
    and every process it started, in bytes; 0 once it is gone."""
    try:
        leader = psutil.Process(pid)
        tree = [leader, *leader.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for process in tree:
        with contextlib.suppress(psutil.Error):
            memory = process.memory_info()
            total += max(0, memory.rss - getattr(memory, "shared", 0))  # macOS tells no shared pages
    return total
