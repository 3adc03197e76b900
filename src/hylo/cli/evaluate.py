"""`hylo eval`: an evaluation from flags or a spec file, with a progress bar, a summary and exit statuses."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hylo.argtypes import parse_json_pairs
from hylo.cli.arguments import DEFAULT_LOG_DIR, JSON_HELP, add_agent, add_json, add_placement, add_run_options
from hylo.cli.output import EXIT_ABORTED, EXIT_BAD_INPUT, EXIT_STRICT, console, exit_code, fail
from hylo.core.errors import HyloError
from hylo.core.timing import CHUNKED_OPTIONS

if TYPE_CHECKING:
    from hylo.cli.arguments import Subparsers
    from hylo.eval.rerun_recording import RerunRecorder
    from hylo.eval.runner import Evaluation
    from hylo.eval.spec import EvalSpec
    from hylo.evallog.lerobot_dataset import DatasetExport
    from hylo.evallog.rows import EpisodeRow


def add_parser(commands: Subparsers) -> None:
    """Add `eval` to `hylo`'s commands."""
    ev = commands.add_parser("eval", help="evaluate an agent on a benchmark (resumes the same run when re-run)")
    ev.add_argument("benchmark", nargs="?", help="a registered benchmark (hylo list benchmarks) or gym:<id>")
    add_placement(
        ev,
        options="benchmark option (JSON literal): gymnasium.make's keyword argument for gym:<id>, e.g. -E "
        "obs_type=pixels",
    )
    add_agent(ev, "random, hold, expert, a registered agent or module:Class")
    add_run_options(ev)
    ev.add_argument(
        "--record-dataset",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep every episode's steps and write them as a LeRobot dataset into DIR, a new directory (hylo[lerobot])",
    )
    ev.add_argument(
        "--rerun",
        type=Path,
        default=None,
        metavar="FILE.rrd",
        help="write the episodes to a Rerun recording as they finish (hylo[rerun]; camera frames with --video N)",
    )
    ev.add_argument("--spec", type=Path, default=None, metavar="FILE", help="read the whole spec from a JSON file")
    add_json(ev, JSON_HELP)


def spec_from_flags(args: argparse.Namespace, options: dict[str, Any] | None = None) -> EvalSpec:
    """The EvalSpec of a command's benchmark and agent flags, with `options` (default: `run_options(args)`)."""
    from hylo.agents.registry import parse_agent_args  # start-up time: the agent registry
    from hylo.eval.spec import EvalSpec  # start-up time: the evaluation stack

    return EvalSpec(
        benchmark=args.benchmark,
        env_args=parse_json_pairs(args.env_args, "-E"),
        split=args.split,
        tasks=args.tasks,
        agent=args.agent,
        agent_args=parse_agent_args(args.agent_args),
        **(run_options(args) if options is None else options),
    )


def run_options(args: argparse.Namespace, *, grid: bool = True) -> dict[str, Any]:
    """The EvalSpec fields of the options `add_run_options` added (shared by `hylo eval`, `hylo graph run`,
    `hylo ab` and, with `grid` False, `hylo sweep`, which sets latency_steps and execution_steps per point)."""
    return {
        **timing_fields(args, grid=grid),
        "episodes": args.episodes,
        "seed": args.seed,
        "seeds": args.seeds,
        "max_steps": args.max_steps,
        "act_timeout": args.act_timeout,
        "shield": not args.no_shield,
        "log_dir": str(args.log_dir),
        "run_id": args.run_id,
        "fresh": args.fresh,
        "video": args.video,
        "video_size": args.video_size,
        "no_images": args.no_images,
        "strict": args.strict,
        "workers": args.workers,
        "backend": args.backend,
        "address": args.address,
        "retry_infra": args.retry_infra,
        "max_infra_failures": args.max_infra_failures,
        "episode_timeout": args.episode_timeout,
        "env_timeout": args.env_timeout,
        "batch": args.batch,
        "batch_wait_ms": args.batch_wait_ms,
        "host_gpus": args.host_gpus,
    }


MAX_SAMPLES_FILE_BYTES = 8 * 1024 * 1024
"""The largest `--latency-samples` file read."""


def timing_fields(args: argparse.Namespace, *, grid: bool = True) -> dict[str, Any]:
    """The spec's `protocol`, `timing_options` and (when the flags decide it) `timing`, from the timing flags
    (docs/protocols.md). `--latency-steps`, `--execution-steps`, `--latency-lognormal` and `--latency-samples`
    select realtime timing with the chunked schedule on the virtual clock (under `--protocol`, the protocol does);
    with `--refill-steps` or `--timing sync` they are refused."""
    from hylo.eval.resolve import EvalError, find_protocol, timing_conflict  # start-up time: the evaluation stack

    if args.protocol is not None and args.timing is not None:
        protocol = find_protocol(args.protocol)
        if args.timing != protocol.timing:
            raise EvalError(timing_conflict(args.timing, protocol))
    latency_steps = args.latency_steps if grid else None
    execution_steps = args.execution_steps if grid else None
    model = latency_model(args.latency_lognormal, args.latency_samples)
    chunked = [
        flag
        for flag, value in (
            ("--latency-steps", latency_steps),
            ("--execution-steps", execution_steps),
            ("--latency-lognormal", args.latency_lognormal),
            ("--latency-samples", args.latency_samples),
        )
        if value is not None
    ]
    if chunked and args.refill_steps is not None:
        raise EvalError(
            f"{chunked[0]} runs the chunked schedule, which asks for a new chunk every s control steps; "
            "--refill-steps is the refill schedule's threshold: drop one of them"
        )
    if chunked and args.timing == "sync":
        raise EvalError(f"{chunked[0]} is realtime timing's; --timing sync waits for every act: drop one of them")
    if args.ensemble_m is not None and args.strategy != "ensemble" and args.protocol is None:
        raise EvalError(f"--ensemble-m {args.ensemble_m:g} weighs the ensemble strategy: add --strategy ensemble")
    options = {
        key: value
        for key, value in (
            ("refill_steps", args.refill_steps),
            ("max_hold_steps", args.max_hold_steps),
            ("latency_s", args.latency),
            ("latency_steps", latency_steps),
            ("latency_model", model),
            ("execution_steps", execution_steps),
            ("clock", args.clock),
            ("strategy", args.strategy),
            ("ensemble_m", args.ensemble_m),
        )
        if value is not None
    }
    fields: dict[str, Any] = {"protocol": args.protocol}
    if args.timing is not None:
        fields["timing"] = args.timing
    if chunked and args.protocol is None:
        fields["timing"] = "realtime"
        options = {**CHUNKED_OPTIONS, **options}
    fields["timing_options"] = options
    return fields


def latency_model(lognormal: list[float] | None, samples: Path | None) -> dict[str, Any] | None:
    """The latency model `--latency-lognormal MEDIAN_S SIGMA` or `--latency-samples FILE` gives, or None."""
    from hylo.eval.resolve import EvalError  # start-up time: the evaluation stack

    if lognormal is not None:
        median, sigma = lognormal
        if not median > 0:
            raise EvalError(f"--latency-lognormal: MEDIAN_S must be a number of seconds > 0, got {median:g}")
        return {"kind": "lognormal", "median_s": median, "sigma": sigma}
    if samples is not None:
        return {"kind": "empirical", "samples_s": read_latency_samples(samples)}
    return None


def read_latency_samples(path: Path) -> list[float]:
    """The latencies (seconds) a `--latency-samples` file holds: a JSON list, or one number a line (blank lines and
    `#` comments skipped); 1 to 100,000 finite numbers >= 0, in a file of at most 8 MiB. Refuses anything else
    naming the file and the bad value."""
    from hylo.eval.resolve import EvalError  # start-up time: the evaluation stack
    from hylo.eval.spec import MAX_LATENCY_SAMPLES, MAX_SECONDS  # start-up time: the evaluation stack

    where = f"--latency-samples {str(path)!r}"
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_SAMPLES_FILE_BYTES + 1)
    except OSError as exc:
        raise EvalError(f"cannot read {where}: {exc.strerror}") from None
    if len(data) > MAX_SAMPLES_FILE_BYTES:
        raise EvalError(f"{where} is larger than {MAX_SAMPLES_FILE_BYTES // (1024 * 1024)} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise EvalError(f"{where} is not UTF-8 text") from None
    values: list[tuple[str, object]]
    if text.lstrip().startswith("["):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvalError(f"{where} is not a JSON list: {exc}") from None
        if not isinstance(parsed, list):
            raise EvalError(f"{where} holds JSON that is not a list")
        values = [(f"item {index}", item) for index, item in enumerate(parsed)]
    else:
        values = []
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if line and not line.startswith("#"):
                values.append((f"line {number}", line))
    if not values:
        raise EvalError(f"{where} holds no latencies")
    if len(values) > MAX_LATENCY_SAMPLES:
        raise EvalError(f"{where} holds {len(values):,} latencies, more than the {MAX_LATENCY_SAMPLES:,} it may")
    samples: list[float] = []
    for place, value in values:
        sample = _seconds_value(value)
        if sample is None or not 0 <= sample <= MAX_SECONDS:
            raise EvalError(f"{where} {place}: expected a latency in seconds (a finite number >= 0), got {value!r}")
        samples.append(sample)
    return samples


def _seconds_value(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _spec_file(args: argparse.Namespace) -> EvalSpec:
    """`--spec FILE`: the whole spec as JSON (what the JobScheduler hands its jobs); spec flags are refused with it."""
    from hylo.eval.resolve import EvalError  # start-up time: the evaluation stack
    from hylo.eval.spec import EvalSpec  # start-up time: the evaluation stack

    given = [flag for flag, value in (("benchmark", args.benchmark), ("--agent", args.agent)) if value is not None]
    given += ["-E"] if args.env_args else []
    if given:
        raise EvalError(f"--spec FILE holds the whole spec; drop {', '.join(given)}")
    try:
        data = json.loads(args.spec.read_text())
    except OSError as exc:
        raise EvalError(f"cannot read --spec {str(args.spec)!r}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise EvalError(f"--spec {str(args.spec)!r} is not JSON: {exc}") from None
    return EvalSpec.model_validate(data)


def run(args: argparse.Namespace) -> int:
    """`hylo eval`: run the spec its flags (or `--spec FILE`) give, as `run_evaluation` does."""
    from hylo.eval.resolve import EvalError  # start-up time: the evaluation stack

    if args.spec is not None:
        spec = _spec_file(args)
    else:
        if args.benchmark is None or args.agent is None:
            missing = "a benchmark" if args.benchmark is None else "--agent"
            raise EvalError(f"hylo eval needs {missing} (or --spec FILE)")
        spec = spec_from_flags(args)
    if args.record_dataset is not None:
        from hylo.evallog.lerobot_dataset import check_out, require_lerobot  # start-up time: the dataset writer

        require_lerobot()  # refused before any episode runs, not after the last
        check_out(args.record_dataset)
        spec = spec.model_copy(update={"record_rollouts": True})
    if args.rerun is not None:
        from hylo.evallog.rrd import check_rrd_path, require_rerun  # start-up time: the recording writer

        require_rerun()  # refused before any episode runs
        check_rrd_path(args.rerun)
    return run_evaluation(spec, json_out=args.json, dataset=args.record_dataset, rerun=args.rerun)


def run_evaluation(spec: EvalSpec, *, json_out: bool, dataset: Path | None = None, rerun: Path | None = None) -> int:
    """Run (or resume) `spec` with a progress bar on stderr; print the summary, or with `json_out` one JSON object on
    stdout; with `dataset`, write the run's recorded episodes there as a LeRobot dataset; with `rerun`, write the
    episodes run now to that Rerun recording as they finish (no file when the run is refused before it starts).
    Returns the exit status."""
    from hylo.envs.quiet import stdout_to_stderr  # start-up time: the envs package
    from hylo.eval.progress import ProgressBar  # start-up time: the evaluation stack
    from hylo.eval.runner import Evaluation  # start-up time: the evaluation stack
    from hylo.evallog.report import print_reasons, print_summary, seeds_note  # start-up time: the report tables

    _interrupt_on_sigterm()  # a scheduler's SIGTERM ends the run like Ctrl-C: finished episodes are committed first
    with stdout_to_stderr():  # simulators that print (minigrid, MuJoCo's C code) never reach stdout
        evaluation = Evaluation(spec)
        recorder = _recorder(evaluation, rerun) if rerun is not None else None
        try:
            with ProgressBar(console(stderr=True), f"{spec.benchmark} · {spec.agent}") as bar:
                evaluation.progress = bar.update
                result = evaluation.run()
        except Exception as exc:
            what = abort_cause(exc, evaluation)
            if what is None:
                raise  # refused before anything ran: bad input, one line, exit 2
            advice = "" if "resume" in what else "; fix the cause and re-run to resume"
            return fail(EXIT_ABORTED, f"run {evaluation.run_id} aborted: {what}{advice}")
        finally:
            # what finished is in the file; a run refused before it started leaves none
            recording = recorder.close(keep_empty=evaluation.started) if recorder is not None else None
        written = _write_dataset(result.run_id, result.log_dir, dataset) if dataset is not None else None
        if isinstance(written, int):
            return written
    if json_out:
        data = result.to_json()
        if written is not None:
            data["dataset"] = written.to_json()
        if recording is not None:
            data["rerun"] = recording.to_json()
        sys.stdout.write(json.dumps(data) + "\n")
    else:
        out = console()
        print_summary(out, f"{result.run_id}: {spec.agent} on {spec.benchmark}", result.per_task, result.summary)
        if result.seed_clusters is not None:
            out.print(seeds_note(result.seed_clusters), highlight=False)
        print_reasons(
            out, result.episodes, more=f"each episode's reason and detail: {_export_command(result.run_id, spec)}"
        )
        out.print(
            f"run {result.run_id}: {len(result.episodes)} episodes ({result.executed_now} run now), "
            f"log {result.log_dir}",
            highlight=False,
            soft_wrap=True,  # a path: never broken
        )
        if spec.video:
            out.print(video_line(result.episodes, result.log_dir), highlight=False, soft_wrap=True)
        if written is not None:
            out.print(dataset_line(written), highlight=False, soft_wrap=True)
        if recording is not None:
            out.print(recording.line(), highlight=False, soft_wrap=True, markup=False)
        out.print(timing_line(evaluation.spec), highlight=False, markup=False)
        if result.batching is not None:
            out.print(batching_line(result.batching, spec))
    if spec.strict and (result.statuses.get("error", 0) or result.statuses.get("infra_invalid", 0)):
        return EXIT_STRICT
    return 0


def _recorder(evaluation: Evaluation, path: Path) -> RerunRecorder:
    """`--rerun FILE.rrd`: a recorder of the episodes the evaluation runs, handed each one as it comes back (its
    file made with the first, so that a run refused at its start leaves none)."""
    from hylo.eval.rerun_recording import RerunRecorder  # start-up time: the recording writer

    recorder = RerunRecorder(path, evaluation.run_dir, evaluation.run_id)
    recorder.start()
    evaluation.on_result = lambda result: recorder.put(result.row, result.trace)
    return recorder


def abort_cause(exc: Exception, evaluation: Evaluation | None) -> str | None:
    """What the error line of `evaluation`, aborted by `exc`, says of the cause (exit 1, re-running resumes it): a
    `RunAborted`'s own message, else the exception's type and message. None when no run began, or when `exc` is bad
    input refused before the run started: the caller raises it again, for `hylo` to report in one line (exit 2)."""
    from hylo.evallog.writer import RunAborted  # start-up time: the EvalLog writer

    if evaluation is None:
        return None
    if isinstance(exc, RunAborted):
        return str(exc)
    if exit_code(exc) == EXIT_BAD_INPUT and not evaluation.started:
        return None
    return f"{type(exc).__name__}: {exc}"


def _write_dataset(run_id: str, run_dir: Path, out: Path) -> DatasetExport | int:
    """`--record-dataset DIR`: the run's recorded episodes written as a LeRobot dataset, or the exit status of a
    failure (the run is kept: the export can be made again)."""
    from hylo.evallog.lerobot_dataset import export_dataset  # start-up time: the dataset writer

    try:
        return export_dataset(run_dir, out)
    except HyloError as exc:  # LeRobot's own failures come as DatasetError: the run is complete either way
        again = f"hylo runs export {run_id} --log-dir {shlex.quote(str(run_dir.parent))} --format lerobot --out DIR"
        return fail(EXIT_ABORTED, f"run {run_id} is complete, but its dataset was not written: {exc}; write it with "
                    f"{again}")  # fmt: skip


def _export_command(run_id: str, spec: EvalSpec) -> str:
    """The command that exports a run of `spec` (its `--log-dir` named unless it is the default)."""
    log_dir = "" if Path(spec.log_dir) == DEFAULT_LOG_DIR else f" --log-dir {shlex.quote(spec.log_dir)}"
    return f"hylo runs export {run_id}{log_dir}"


def dataset_line(written: DatasetExport) -> str:
    """What an export wrote, in one line."""
    line = f"dataset: {written.root} ({written.episodes} episodes, {written.frames} frames)"
    if written.unrecorded:
        line += f"; {len(written.unrecorded)} chosen episodes kept no steps (recorded without --record-dataset)"
    return line


def video_line(episodes: Sequence[EpisodeRow], run_dir: Path) -> str:
    """Where a run's videos are, or why there are none."""
    videos = [row for row in episodes if row.video]
    if videos:
        return f"videos: {run_dir / 'videos'} ({len(videos)} mp4 files, named by episode and status)"
    errors = [str(row.metrics["video_error"]) for row in episodes if row.metrics.get("video_error")]
    return f"videos: none was written ({errors[0]})" if errors else "videos: none was written"


def timing_line(spec: EvalSpec) -> str:
    """The timing a run ran under, as its summary ends: the protocol's name when it names one, and the options."""
    from hylo.eval.resolve import option_text  # start-up time: the evaluation stack

    options = ", ".join(f"{key} {option_text(value)}" for key, value in spec.timing_options.items())
    timing = f"{spec.timing} ({options})" if options else spec.timing
    return f"timing: protocol {spec.protocol}: {timing}" if spec.protocol is not None else f"timing: {timing}"


def batching_line(figures: dict[str, Any], spec: EvalSpec) -> str:
    """The figures a batched run ends with, from which B and W are tuned (README, Batched inference)."""
    line = (
        f"policy host: {figures['calls']} act_batch calls for {figures['requests']} requests, mean batch "
        f"{figures['mean_batch_size']:.2f} of --batch {spec.batch}, mean queue wait "
        f"{figures['mean_queue_wait_ms']:.1f} ms (--batch-wait-ms {spec.batch_wait_ms:g}), host busy "
        f"{100 * figures['host_utilisation']:.0f}% of the time it served"
    )
    if figures["host_restarts"]:
        line += f", restarted {figures['host_restarts']} times"
    return line


def _interrupt_on_sigterm() -> None:
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)
