"""Exceptions that carry meaning for an episode's status.

The Kernel maps each of these onto an `EpisodeStatus`; anything else raised by the agent is `error` and anything else
raised by the environment is `infra_invalid`.
"""

from __future__ import annotations

from collections.abc import Sequence


class HyloError(Exception):
    """Base class of hylo's own exceptions."""


class HyloFailure(HyloError):
    """Something broke at run time (a subprocess that crashed, a node that broke its contract, an execution ended
    from outside): never a refusal of what the user asked for, so the CLI does not report it as bad input."""


def shown(value: object, limit: int = 80) -> str:
    """A bad value as an error message names it: its repr, cut short when long; an integer of hundreds of digits
    by its size (Python refuses to print one of more than 4300)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


class UnknownChoice(HyloError, ValueError):
    """A name that is not one of the valid choices; the message names both."""

    def __init__(self, what: str, value: object, choices: Sequence[str]) -> None:
        listed = ", ".join(choices[:60]) + (f", … ({len(choices)} in all)" if len(choices) > 60 else "")
        super().__init__(f"unknown {what} {value!r}; choose from: {listed}")
        self.what = what
        self.value = value
        self.choices = list(choices)


class IncompatibleComponents(HyloError):
    """An environment and an agent (or a shield, or a timing mode) cannot work together.

    Raised at bind time, before any episode starts: a run that cannot be valid never starts.
    """

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


class SafetyAbort(HyloError):
    """A guard rejected an action: the episode ends as `safety_abort`."""

    def __init__(self, guard: str, reason: str) -> None:
        self.guard = guard
        self.reason = reason
        super().__init__(f"{guard}: {reason}")


class AgentTimeout(HyloError):
    """The agent took longer than `act_timeout_s` to act: the episode ends as `error`, reason `timeout`."""

    def __init__(self, latency_s: float | None, limit_s: float, call: str = "act") -> None:
        self.latency_s = latency_s
        self.limit_s = limit_s
        self.call = call
        took = "did not return in time" if latency_s is None else f"took {latency_s:.3f} s"
        super().__init__(f"{call} {took} (limit {limit_s:g} s)")


class OverLimit(HyloError):
    """A harness that limits how long the env's calls and the agent may take found the episode past a limit when an
    env call began or returned: the episode ends with `status` and `reason` (`env timeout`: the call ran past its
    limit; `agent timeout` / `timeout`: the agent's time ran out before it), whichever party's call raised it."""

    def __init__(self, status: str, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.reason = reason
        self.detail = detail


class SimulationDiverged(HyloError):
    """The simulator's state became invalid (e.g. MuJoCo BADQACC): the episode ends as `infra_invalid`.

    Environment adapters raise it; `warning` names what the simulator reported.
    """

    def __init__(self, warning: str, detail: str = "") -> None:
        self.warning = warning
        self.detail = detail
        super().__init__(f"simulation diverged: {warning}" + (f" ({detail})" if detail else ""))


class InvalidAction(HyloError):
    """The environment refused an action as malformed: the agent's fault, so the episode ends as `error`.

    Environment adapters raise it for faults that come from the action (e.g. MuJoCo BADCTRL) rather than from the
    simulator, so that they are not counted against the infrastructure.
    """


class SignalFailed(HyloError, RuntimeError):
    """The agent failed on a lifecycle signal delivered between episodes (`Kernel.signal`), e.g. `episode_reset`
    from an env panel. `reason` is the episode-style reason (`agent on_signal raised ...`); the episode the signal
    opened gets `status` (the agent's `error`; `infra_invalid` when a graph's env nodeset crashed on it)."""

    def __init__(self, reason: str, detail: str | None = None, status: str = "error") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.status = status
