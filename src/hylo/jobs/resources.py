"""Admission: what the machine has (measured), what jobs declare, and which queued jobs may start now.

The rules, in the order the queue is served (priority, then submission):

- a job that can never fit — more CPUs than the machine has, more RAM than its total, a GPU when there is none, more
  GPU memory than the largest GPU — is refused at submission
- a job fits now when its CPUs are at most the machine's minus those running jobs declared, its RAM at most the
  measured available RAM minus what running jobs declared, and, when it asks for a GPU, one GPU has no exclusive job,
  no job at all if this one is exclusive, and measured free memory minus what its running jobs declared of at least
  its `gpu_mem_gb`
- strict head of line: the first queued job that does not fit yet blocks every job behind it, so a large
  high-priority job is never starved by smaller ones
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil

from hylo.cpus import usable_cpus
from hylo.jobs.job import Job, Resources

logger = logging.getLogger(__name__)

GB = 1024**3
RAM_GB_PER_WORKER = 1.0
"""The default RAM a job declares per worker."""


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML reports it."""

    index: int
    name: str
    total_gb: float
    free_gb: float


@dataclass(frozen=True)
class Machine:
    """A snapshot of the machine's resources. Pass one (or a function returning one) to `JobScheduler` to simulate a
    machine."""

    cpus: int
    ram_total_gb: float
    ram_available_gb: float
    gpus: tuple[Gpu, ...] = ()


MachineProbe = Callable[[], Machine]


def measure_gpus() -> tuple[Gpu, ...]:
    """The GPUs NVML sees; none when nvidia-ml-py is missing or NVML cannot start (no driver, no GPU)."""
    try:
        import pynvml  # start-up time: NVML is loaded only when GPUs are measured
    except ImportError:
        return ()
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...: no GPU here
        return ()
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            gpus.append(Gpu(index, name, memory.total / GB, memory.free / GB))
        return tuple(gpus)
    except Exception as exc:
        logger.warning("could not read the GPUs through NVML: %r", exc)
        return ()
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception as exc:
            logger.debug("nvmlShutdown failed: %r", exc)


def measure_machine() -> Machine:
    """The machine now: usable CPUs, total and available RAM, every GPU with its free memory."""
    memory = psutil.virtual_memory()
    return Machine(usable_cpus(), memory.total / GB, memory.available / GB, measure_gpus())


def declared(
    spec_workers: int,
    *,
    cpus: int | None = None,
    ram_gb: float | None = None,
    gpu_mem_gb: float = 0.0,
    exclusive_gpu: bool = False,
    env_ram_gb: float | None = None,
    policy_host: bool = False,
    machine_cpus: int | None = None,
) -> Resources:
    """A job's declared resources, defaults filled in: `cpus` = its processes, `ram_gb` = per worker the RAM of one
    of its benchmark's envs (`env_ram_gb`, when the benchmark declares it) or else 1.0.

    A batched job (`policy_host`: `--batch`) runs one process more than its workers, the host that builds the agent,
    so its default `cpus` counts it; a default never asks for more than the machine's `machine_cpus`, so a batched
    run that `hylo eval` runs here is admitted too (it then holds the whole machine). `gpu_mem_gb` is the job's own
    figure, reserved once on one GPU: under `--batch` that is one copy of the model, whatever the worker count."""
    per_worker = RAM_GB_PER_WORKER if env_ram_gb is None else max(RAM_GB_PER_WORKER, env_ram_gb)
    if cpus is None:
        cpus = spec_workers + 1 if policy_host else spec_workers
        if machine_cpus is not None and policy_host:
            cpus = max(spec_workers, min(cpus, machine_cpus))
    return Resources(
        cpus=cpus,
        ram_gb=per_worker * spec_workers if ram_gb is None else ram_gb,
        gpu_mem_gb=gpu_mem_gb,
        exclusive_gpu=exclusive_gpu,
    )


def never_fits(resources: Resources, machine: Machine) -> tuple[str, str] | None:
    """(field, reason) when the job can never run on this machine, else None."""
    if resources.cpus > machine.cpus:
        return "cpus", f"cpus {resources.cpus} can never fit: this machine has {machine.cpus} usable CPUs"
    if resources.ram_gb > machine.ram_total_gb:
        return "ram_gb", (
            f"ram_gb {resources.ram_gb:g} can never fit: this machine has {machine.ram_total_gb:.1f} GB of RAM"
        )
    if resources.needs_gpu and not machine.gpus:
        field = "gpu_mem_gb" if resources.gpu_mem_gb > 0 else "exclusive_gpu"
        return field, f"{field} asks for a GPU, and this machine has none"
    largest = max((gpu.total_gb for gpu in machine.gpus), default=0.0)
    if resources.gpu_mem_gb > largest:
        return "gpu_mem_gb", (
            f"gpu_mem_gb {resources.gpu_mem_gb:g} can never fit: the largest GPU here has {largest:.1f} GB"
        )
    return None


@dataclass(frozen=True)
class Placement:
    """A running (or about to run) job's reservation: its declared resources and its GPU."""

    resources: Resources
    gpu: int | None = None


def place(resources: Resources, machine: Machine, running: Sequence[Placement]) -> tuple[bool, int | None]:
    """Whether a job fits now beside `running`, and on which GPU (None when it asks for none)."""
    free_cpus = machine.cpus - sum(p.resources.cpus for p in running)
    free_ram = machine.ram_available_gb - sum(p.resources.ram_gb for p in running)
    if resources.cpus > free_cpus or resources.ram_gb > free_ram:
        return False, None
    if not resources.needs_gpu:
        return True, None
    best: tuple[float, int] | None = None
    for gpu in machine.gpus:
        on_gpu = [p.resources for p in running if p.gpu == gpu.index]
        if any(r.exclusive_gpu for r in on_gpu) or (resources.exclusive_gpu and on_gpu):
            continue
        headroom = gpu.free_gb - sum(r.gpu_mem_gb for r in on_gpu)
        if resources.gpu_mem_gb <= headroom and (best is None or headroom > best[0]):
            best = (headroom, gpu.index)
    return (True, best[1]) if best is not None else (False, None)


@dataclass(frozen=True)
class Admission:
    """One scheduling pass: the jobs to start now (with their GPU), and the queued jobs that can no longer ever fit
    (the machine changed since they were submitted) with the reason."""

    start: list[tuple[Job, int | None]]
    refuse: list[tuple[Job, str]]


def admit(queued: Sequence[Job], running: Sequence[Placement], machine: Machine) -> Admission:
    """The jobs to start, taken in queue order (`queued` as the queue serves it) until one does not fit yet: strict
    head of line."""
    start: list[tuple[Job, int | None]] = []
    refuse: list[tuple[Job, str]] = []
    taken = list(running)
    for job in queued:
        never = never_fits(job.resources, machine)
        if never is not None:
            refuse.append((job, never[1]))
            continue
        fits, gpu = place(job.resources, machine, taken)
        if not fits:
            break
        start.append((job, gpu))
        taken.append(Placement(job.resources, gpu))
    return Admission(start, refuse)
