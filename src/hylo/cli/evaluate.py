"""`hylo eval`: an evaluation from flags or a spec file, with a progress bar, a summary and exit statuses."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from hylo.cli.output import EXIT_ABORTED, EXIT_STRICT, console, fail
from hylo.core.errors import HyloError, HyloFailure

if TYPE_CHECKING:
    from hylo.eval.spec import EvalSpec


def _spec_from_flags(args: argparse.Namespace) -> EvalSpec:
    from hylo.agents.registry import parse_agent_args
    from hylo.argtypes import parse_json_pairs
    from hylo.eval.spec import EvalSpec

    timing_options = {
        key: value
        for key, value in (
            ("refill_steps", args.refill_steps),
            ("max_hold_steps", args.max_hold_steps),
            ("latency_s", args.latency),
            ("clock", args.clock),
        )
        if value is not None
    }
    return EvalSpec(
        benchmark=args.benchmark,
        env_args=parse_json_pairs(args.env_args, "-E"),
        split=args.split,
        tasks=args.tasks,
        agent=args.agent,
        agent_args=parse_agent_args(args.agent_args),
        timing=args.timing,
        timing_options=timing_options,
        **run_options(args),
    )


def run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The EvalSpec fields of the options `_add_run_options` added (shared by `hylo eval` and `hylo graph run`)."""
    return {
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


def _spec_file(args: argparse.Namespace) -> EvalSpec:
    """`--spec FILE`: the whole spec as JSON (what the JobScheduler hands its jobs); spec flags are refused with it."""
    from hylo.eval.resolve import EvalError
    from hylo.eval.spec import EvalSpec

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
    from hylo.eval.resolve import EvalError

    if args.spec is not None:
        spec = _spec_file(args)
    else:
        if args.benchmark is None or args.agent is None:
            missing = "a benchmark" if args.benchmark is None else "--agent"
            raise EvalError(f"hylo eval needs {missing} (or --spec FILE)")
        spec = _spec_from_flags(args)
    return run_evaluation(spec, json_out=args.json)


def run_evaluation(spec: EvalSpec, *, json_out: bool) -> int:
    """Run (or resume) `spec` with a progress bar on stderr; print the summary, or with `json_out` one JSON object on
    stdout. Returns the exit status."""
    from hylo.envs.quiet import stdout_to_stderr
    from hylo.eval.progress import ProgressBar
    from hylo.eval.report import print_summary, seeds_note
    from hylo.eval.runner import Evaluation
    from hylo.eval.writer import RunAborted

    _interrupt_on_sigterm()  # a scheduler's SIGTERM ends the run like Ctrl-C: finished episodes are committed first
    with stdout_to_stderr():  # simulators that print (minigrid, MuJoCo's C code) never reach stdout
        evaluation = Evaluation(spec)
        try:
            with ProgressBar(console(stderr=True), f"{spec.benchmark} · {spec.agent}") as bar:
                evaluation.progress = bar.update
                result = evaluation.run()
        except Exception as exc:
            bad_input = isinstance(exc, (HyloError, ValueError, LookupError, ValidationError)) and not isinstance(
                exc, HyloFailure
            )
            if bad_input and not evaluation.started and not isinstance(exc, RunAborted):
                raise  # refused before anything ran: bad input, one line, exit 2
            what = str(exc) if isinstance(exc, RunAborted) else f"{type(exc).__name__}: {exc}"
            advice = "" if "resume" in what else "; fix the cause and re-run to resume"
            return fail(EXIT_ABORTED, f"run {evaluation.run_id} aborted: {what}{advice}")
    if json_out:
        sys.stdout.write(json.dumps(result.to_json()) + "\n")
    else:
        out = console()
        print_summary(out, f"{result.run_id}: {spec.agent} on {spec.benchmark}", result.per_task, result.summary)
        if result.seed_clusters is not None:
            out.print(seeds_note(result.seed_clusters), highlight=False)
        out.print(
            f"run {result.run_id}: {len(result.episodes)} episodes ({result.executed_now} run now), "
            f"log {result.log_dir}"
        )
        if result.batching is not None:
            out.print(batching_line(result.batching, spec))
    if spec.strict and (result.statuses.get("error", 0) or result.statuses.get("infra_invalid", 0)):
        return EXIT_STRICT
    return 0


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


# -- runs, compare, list -----------------------------------------------------------------------------------------------
