"""The env panel of a server-mode env nodeset, seen from the worker.

When the env nodeset runs in server mode, its panel lives in the nodeset's subprocess, beside the env. The worker
talks to it through a `RemoteEnvPanelProxy`: a panel that mirrors the real one's name (with the replica's suffix,
`env_babyai#1`), display name, fields and actions, and forwards each hook over the subprocess' connection (the ops
`/env-panel/state`, `/env-panel/field`, `/env-panel/action`, `/env-panel/options` and `/env-panel/task`). Whatever
reads a panel — the batch runner's `PanelDriver`, an interactive session, the REST surface — cannot tell it from a
local one, except by its `name#k` and its context (`mode="server"`).

The answers travel as they are (`PanelState`, `PanelReply`); a refusal (`PanelRefused`) travels by type, so the proxy
raises it as the real panel did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from hylo.core.child import carry
from hylo.core.errors import HyloError
from hylo.core.types import NodesetMode, TaskInstance
from hylo.panels.base import (
    BaseEnvPanel,
    EnvPanelAction,
    EnvPanelField,
    PanelContext,
    PanelRefused,
    PanelReply,
    PanelState,
)

PanelRequest = Callable[..., Any]
"""`request(op, **fields)`: send one request to the subprocess the panel lives in and return its answer (or raise)."""

INFO_OP = "/env-panel/info"
STATE_OP = "/env-panel/state"
FIELD_OP = "/env-panel/field"
ACTION_OP = "/env-panel/action"
OPTIONS_OP = "/env-panel/options"
TASK_OP = "/env-panel/task"
PLACE_OP = "/env-panel/place"
PANEL_OPS: tuple[str, ...] = (INFO_OP, STATE_OP, FIELD_OP, ACTION_OP, OPTIONS_OP, TASK_OP, PLACE_OP)
"""The requests a subprocess hosting an env panel answers."""


carry(PanelRefused)  # a refusal in the subprocess is raised in the worker as itself


class RemotePanelError(HyloError):
    """A remote env panel could not answer: its subprocess died (or could not be restarted), the hook raised, or a
    value could not travel. The message names the panel, the request and the cause."""


class RemoteEnvPanelProxy(BaseEnvPanel):
    """The worker's stand-in for the env panel living in a server-mode nodeset's subprocess.

    - `request`: the transport, `request(op, **fields) -> answer`; it raises when the subprocess cannot answer
    - `tag`: the replica's tag, `<nodeset>#<k>`; the proxy is named `<panel>#<k>` and its context says
      `mode="server"`, `nodeset_name=tag`

    The declaration (name, display name, fields, actions) is fetched once, at construction. Each hook forwards to the
    real panel and returns its answer unchanged (a refused value raises `PanelRefused`, as locally); a failed request
    raises `RemotePanelError` naming the panel rather than hanging (over `ServerNodesets`' connection, a
    subprocess that dies during a request is noticed within a second).

    Thread-safety: the proxy shares the connection of the runner whose nodes live in that subprocess, which serves
    one request at a time. Call it only from the thread that drives that runner, between its executions or at an
    iteration boundary — never while an execution is inside a node call. The async hooks block that thread for the
    round trip (a millisecond or so on one machine); they do not yield to the event loop.
    """

    def __init__(self, request: PanelRequest, tag: str) -> None:
        super().__init__()
        self._request = request
        self.tag = tag
        self.remote_name = ""  # the real panel's name, once it has told it
        info = self._call(INFO_OP)
        if not isinstance(info, Mapping):
            self._bad_answer(INFO_OP, info, "a panel's declaration")
        try:
            real = str(info["name"])
            fields = tuple(EnvPanelField(**spec) for spec in info.get("fields") or ())
            actions = tuple(EnvPanelAction(**spec) for spec in info.get("actions") or ())
        except (KeyError, TypeError, ValueError) as exc:
            what = f"{INFO_OP} answered a declaration it cannot mirror"
            raise RemotePanelError(f"{self._label()}: {what}: {type(exc).__name__}: {exc}") from exc
        _, _, replica = tag.rpartition("#")
        self.remote_name = real
        self.name = f"{real}#{replica}" if replica else real
        self.display_name = str(info.get("display_name") or real)
        self.fields = fields
        self.actions = actions
        self._context = PanelContext(mode=NodesetMode.SERVER, nodeset_name=tag)

    # -- the hooks --------------------------------------------------------------------------------------------------

    async def on_load(self) -> PanelState:
        return self.state()

    async def on_field_change(self, name: str, value: Any) -> PanelReply:
        return self._reply(FIELD_OP, name=name, value=value)

    async def on_action(self, name: str) -> PanelReply:
        return self._reply(ACTION_OP, name=name)

    async def on_options(self, name: str) -> PanelReply:
        return self._reply(OPTIONS_OP, name=name)

    # -- synchronous helpers ----------------------------------------------------------------------------------------

    def state(self) -> PanelState:
        """The real panel's `on_load()`: status, step budget and the current field values."""
        answer = self._call(STATE_OP)
        if not isinstance(answer, PanelState):
            self._bad_answer(STATE_OP, answer, "a PanelState")
        return answer

    def task_instance(self) -> TaskInstance:
        """The episode the real panel currently places."""
        task = self._call(TASK_OP)
        if not isinstance(task, TaskInstance):
            self._bad_answer(TASK_OP, task, "a TaskInstance")
        return task

    def place(self, task: TaskInstance) -> PanelReply:
        """Place the planned episode `task` in the real panel, by its own `place` (one request): all of it or, refused,
        none of it, as a local panel. Raises `PanelRefused` as the real panel does."""
        return self._reply(PLACE_OP, task=task)

    # -- transport --------------------------------------------------------------------------------------------------

    def _reply(self, op: str, **fields: Any) -> PanelReply:
        answer = self._call(op, **fields)
        if not isinstance(answer, PanelReply):
            self._bad_answer(op, answer, "a PanelReply")
        return answer

    def _call(self, op: str, **fields: Any) -> Any:
        try:
            return self._request(op, **fields)
        except PanelRefused:
            raise
        except Exception as exc:
            what = f" {fields['name']!r}" if "name" in fields else ""
            raise RemotePanelError(f"{self._label()}: {op}{what} failed: {type(exc).__name__}: {exc}") from exc

    def _bad_answer(self, op: str, answer: Any, wanted: str) -> NoReturn:
        raise RemotePanelError(f"{self._label()}: {op} answered a {type(answer).__name__}, not {wanted}: {answer!r}")

    def _label(self) -> str:
        if not self.remote_name:
            return f"the env panel of nodeset {self.tag}"
        return f"env panel {self.name!r} (nodeset {self.tag})"

    def __repr__(self) -> str:
        return f"RemoteEnvPanelProxy({self.name!r}, tag={self.tag!r})"
