"""Admission: which jobs can never fit, which fit now, on which GPU, and strict head of line."""

from __future__ import annotations

import time

import pytest

from hylo.eval.spec import EvalSpec
from hylo.jobs import Gpu, Job, JobState, Machine, Placement, Resources, admit, declared, measure_machine, never_fits

GPU_BOX = Machine(
    cpus=8,
    ram_total_gb=64.0,
    ram_available_gb=48.0,
    gpus=(Gpu(0, "A", total_gb=24.0, free_gb=20.0), Gpu(1, "B", total_gb=16.0, free_gb=16.0)),
)
SPEC = EvalSpec(benchmark="babyai", agent="random")


def job(
    name: str,
    *,
    cpus: int | None = None,
    ram_gb: float | None = None,
    gpu_mem_gb: float = 0.0,
    exclusive_gpu: bool = False,
) -> Job:
    return Job(
        job_id=name,
        run_id=name,
        state=JobState.QUEUED,
        resources=declared(1, cpus=cpus, ram_gb=ram_gb, gpu_mem_gb=gpu_mem_gb, exclusive_gpu=exclusive_gpu),
        spec=SPEC,
        submitted_at=time.time(),
    )


def test_defaults_follow_the_spec_workers():
    assert declared(1) == Resources(cpus=1, ram_gb=1.0, gpu_mem_gb=0.0, exclusive_gpu=False)
    assert declared(4) == Resources(cpus=4, ram_gb=4.0)
    assert declared(4, cpus=2, ram_gb=0.5).cpus == 2


def test_a_batched_job_counts_its_policy_host_as_one_more_cpu_within_the_machine():
    assert declared(2, policy_host=True) == Resources(cpus=3, ram_gb=2.0)
    assert declared(2, policy_host=True, machine_cpus=8).cpus == 3
    assert declared(2, policy_host=True, machine_cpus=2).cpus == 2  # what `hylo eval` runs here is admitted
    assert declared(2, policy_host=True, cpus=5).cpus == 5  # a declared figure is taken as given


def test_a_batched_job_reserves_its_gpu_memory_once_whatever_its_workers():
    batched = Job(
        job_id="vla",
        run_id="vla",
        state=JobState.QUEUED,
        resources=declared(6, gpu_mem_gb=12.0, policy_host=True, machine_cpus=GPU_BOX.cpus),
        spec=SPEC.model_copy(update={"workers": 6, "batch": 6}),
        submitted_at=time.time(),
    )
    assert never_fits(batched.resources, GPU_BOX) is None  # 6 workers, one copy of the model: 12 GB, not 72
    assert batched.resources.cpus == 7
    assert admit([batched], [], GPU_BOX).start == [(batched, 0)]
    beside = Placement(declared(1, gpu_mem_gb=10.0), gpu=0)  # GPU 0 keeps 10 GB free, GPU 1 16 GB
    assert admit([batched], [beside], GPU_BOX).start == [(batched, 1)]


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ({"cpus": 9}, "cpus"),
        ({"ram_gb": 65.0}, "ram_gb"),
        ({"gpu_mem_gb": 30.0}, "gpu_mem_gb"),
    ],
)
def test_what_exceeds_the_machine_can_never_fit(resources: dict, field: str):
    never = never_fits(declared(1, **resources), GPU_BOX)
    assert never is not None and never[0] == field and field in never[1]


def test_a_gpu_asked_of_a_machine_without_one_can_never_fit():
    cpu_box = Machine(cpus=2, ram_total_gb=8.0, ram_available_gb=8.0)
    assert never_fits(declared(1, gpu_mem_gb=1.0), cpu_box) == (
        "gpu_mem_gb",
        "gpu_mem_gb asks for a GPU, and this machine has none",
    )
    assert (never_fits(declared(1, exclusive_gpu=True), cpu_box) or ("", ""))[0] == "exclusive_gpu"
    assert never_fits(declared(2, ram_gb=8.0), cpu_box) is None
    assert never_fits(declared(1, ram_gb=7.0), Machine(2, 8.0, 1.0)) is None  # only busy now: it waits


def test_jobs_start_while_cpus_last_and_the_first_that_does_not_fit_blocks_the_rest():
    queued = [job("a", cpus=4), job("b", cpus=3), job("big", cpus=2), job("small", cpus=1)]
    admission = admit(queued, [], GPU_BOX)
    assert [j.job_id for j, _ in admission.start] == ["a", "b"]  # 7 of 8 CPUs; "big" blocks "small"
    assert admission.refuse == []


def test_ram_fits_against_available_minus_what_running_jobs_declared():
    running = [Placement(declared(1, ram_gb=40.0))]
    assert [j.job_id for j, _ in admit([job("a", ram_gb=8.0)], running, GPU_BOX).start] == ["a"]
    assert admit([job("b", ram_gb=9.0), job("c", ram_gb=1.0)], running, GPU_BOX).start == []


def test_gpu_jobs_go_where_there_is_room_and_an_exclusive_one_shares_with_nobody():
    one = admit([job("x", gpu_mem_gb=10.0)], [], GPU_BOX).start
    assert [(j.job_id, gpu) for j, gpu in one] == [("x", 0)]  # most headroom: 20 GB free on GPU 0
    both = admit([job("x", gpu_mem_gb=10.0), job("y", gpu_mem_gb=12.0)], [], GPU_BOX).start
    assert [(j.job_id, gpu) for j, gpu in both] == [("x", 0), ("y", 1)]  # 10 left on 0, 16 on 1

    exclusive = Placement(declared(1, exclusive_gpu=True), gpu=1)
    sharing = Placement(declared(1, gpu_mem_gb=1.0), gpu=0)
    assert admit([job("e", exclusive_gpu=True)], [exclusive, sharing], GPU_BOX).start == []
    assert admit([job("s", gpu_mem_gb=1.0)], [exclusive], GPU_BOX).start[0][1] == 0
    assert admit([job("e", exclusive_gpu=True)], [sharing], GPU_BOX).start[0][1] == 1


def test_a_queued_job_the_machine_can_no_longer_hold_is_refused_not_left_blocking():
    smaller = Machine(cpus=2, ram_total_gb=8.0, ram_available_gb=8.0)
    admission = admit([job("huge", cpus=4), job("fine")], [], smaller)
    assert [(j.job_id, "cpus" in reason) for j, reason in admission.refuse] == [("huge", True)]
    assert [j.job_id for j, _ in admission.start] == ["fine"]


def test_the_measured_machine_is_this_one():
    machine = measure_machine()
    assert machine.cpus >= 1
    assert 0 < machine.ram_available_gb <= machine.ram_total_gb
    assert all(gpu.total_gb > 0 for gpu in machine.gpus)
