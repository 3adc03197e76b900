// The Live place: choose an env panel, place an episode with its fields, pick what runs (an agent or a saved graph)
// and drive it with the panel's actions; the panel's session is watched live beside it. While a session starts the
// page says so and takes no other click.
import { useEffect, useRef, useState } from "react";
import { api, errorMessage } from "../api";
import type { Route } from "../router";
import { EnvPanelForm, panelPath } from "./EnvPanelForm";
import { DEFAULT_PROGRAM, type Program, ProgramPicker, programOf, useCatalog } from "./ProgramPicker";
import { SessionView } from "./SessionView";
import { useLiveStream } from "./stream";
import type { PanelAction, PanelInfo, SessionInfo, SessionState } from "./types";
import { useActivePanel, usePanelInfo, usePanelList } from "./usePanel";
import "./live.css";

/** The placement values a new session takes from the panel, so it starts where the panel stands. */
const PLACEMENT_FIELDS = ["split", "task", "episode_index", "seed"] as const;

const NEEDS_SESSION = new Set<PanelAction["side_effect"]>(["run_start", "run_step"]);

export function LivePage(_props: { route: Route }) {
  const list = usePanelList();
  const [active, choose] = useActivePanel(list.panels);
  const panel = usePanelInfo(active);
  const session = panel.info?.session ?? null;
  const live = useLiveStream(session?.id ?? null);
  const catalog = useCatalog();
  const [program, setProgram] = useState<Program>(DEFAULT_PROGRAM);
  const [stepBudget, setStepBudget] = useState("");
  /** The program or budget was changed since the session was made: the next Play makes a new session. */
  const [dirty, setDirty] = useState(false);
  const [busy, setBusy] = useState(false);
  /** A session is being made for this program (its env and agent are built: seconds for Meta-World). */
  const [starting, setStarting] = useState<string | null>(null);
  const [message, setMessage] = useState<string | null>(null);

  const liveState = live.session && live.session.id === session?.id ? live.session.state : undefined;
  const state: SessionState = liveState ?? session?.state ?? "idle";
  const { reload } = panel;

  // The panel's session changes state (an execution ends, it is closed): read the panel and its session again.
  useEffect(() => {
    if (liveState || live.ended) void reload();
  }, [liveState, live.ended, reload]);

  // Show what the panel's session runs, unless the user is choosing something else.
  useEffect(() => {
    if (session && !dirty) setProgram(programOf(session));
  }, [session, dirty]);

  // Another panel: what was chosen for the previous one (its program, budget, message) does not carry over.
  useEffect(() => {
    setMessage(null);
    setDirty(false);
    setStepBudget("");
    setProgram(DEFAULT_PROGRAM);
  }, [active]);

  // No expert among the agents: start from the first available one.
  useEffect(() => {
    const agents = catalog.agents;
    if (dirty || session || !agents.length || program.kind !== "agent") return;
    if (!agents.some((a) => a.name === program.name)) {
      const first = agents.find((a) => a.available);
      if (first) setProgram({ kind: "agent", name: first.name });
    }
  }, [catalog.agents, dirty, session, program]);

  /** One request at a time: a second click (a double click, an impatient one while a session starts) is not sent
   * while the first is on its way, and the controls stay disabled until the panel has been read again after it. */
  const inFlight = useRef(false);
  const run = async (work: () => Promise<unknown>) => {
    if (inFlight.current) return;
    inFlight.current = true;
    setBusy(true);
    setMessage(null);
    try {
      await work();
    } catch (error) {
      setMessage(errorMessage(error));
    } finally {
      setStarting(null);
      await reload();
      list.reload();
      inFlight.current = false;
      setBusy(false);
    }
  };

  const onAction = (action: PanelAction) =>
    run(async () => {
      const info = panel.info;
      if (!info) return;
      if (NEEDS_SESSION.has(action.side_effect) && info.context.mode === "local" && (!session || dirty)) {
        // No session as this page last read the panel: the server may have made one since (it would refuse another).
        const current = session ?? (await api<PanelInfo>(panelPath(info.name))).session;
        if (!current || dirty) {
          setStarting(programLabel(program));
          if (current) await api(`/api/sessions/${encodeURIComponent(current.id)}`, { method: "DELETE" });
          await api<SessionInfo>("/api/sessions", { method: "POST", json: sessionRequest(info, program, stepBudget) });
          setDirty(false);
          await reload(); // the new session shows at once, not after the action
          setStarting(null);
        }
      }
      await api(panelPath(info.name, "action"), { method: "POST", json: { name: action.name } });
    });

  const onField = (name: string, value: unknown) =>
    run(() => api(panelPath(active ?? "", "field"), { method: "POST", json: { name, value } }));

  const closeSession = () =>
    run(async () => {
      if (session) await api(`/api/sessions/${encodeURIComponent(session.id)}`, { method: "DELETE" });
    });

  const info = panel.info;
  const running = state === "running" || state === "starting" || state === "closing";
  return (
    <div className="live-page">
      <aside className="live-side">
        <section className="live-card">
          <label className="panel-field">
            <span>Env panel</span>
            <select data-testid="panel-select" value={active ?? ""} onChange={(event) => choose(event.target.value)}>
              {!list.panels && <option value="">loading…</option>}
              {list.panels?.map((p) => (
                <option key={p.name} value={p.name}>
                  {p.display_name} ({p.name}){p.session ? ` · ${p.state}` : ""}
                </option>
              ))}
            </select>
          </label>
          {list.problem && <div className="error-message">{list.problem}</div>}
        </section>
        {info && (
          <section className="live-card">
            <h3>
              {info.display_name} <PanelStatus info={info} />
            </h3>
            <ProgramPicker
              catalog={catalog}
              benchmark={benchmarkOf(info)}
              program={program}
              stepBudget={stepBudget}
              defaultBudget={info.state.step_budget}
              disabled={running || info.context.mode !== "local"}
              onProgram={(next) => (setProgram(next), setDirty(true))}
              onStepBudget={(next) => (setStepBudget(next), setDirty(true))}
            />
            {dirty && session && <div className="muted hint">Play makes a new session with this choice.</div>}
            <EnvPanelForm
              info={info}
              revision={panel.revision}
              state={state}
              busy={busy}
              onField={onField}
              onAction={onAction}
            />
            {message && (
              <div className="error-message" data-testid="panel-message" role="alert">
                {message}
              </div>
            )}
            {session && (
              <button type="button" data-testid="close-session" disabled={busy} onClick={closeSession}>
                Close session
              </button>
            )}
          </section>
        )}
        {panel.problem && <div className="error-message">{panel.problem}</div>}
      </aside>
      <SessionView session={session} live={live} starting={starting} />
    </div>
  );
}

function PanelStatus({ info }: { info: PanelInfo }) {
  const available = info.state.available !== false;
  const status = typeof info.state.status === "string" ? info.state.status : available ? "ready" : "unavailable";
  return (
    <span className={available ? "muted" : "status-error"} data-testid="panel-status">
      {status}
      {info.context.mode === "server" ? " · server mode" : ""}
      {typeof info.state.episode_id === "string" && (
        <span className="placed" data-testid="placed-episode">
          {info.state.episode_id}
        </span>
      )}
    </span>
  );
}

function benchmarkOf(info: PanelInfo): string {
  const named = info.state.benchmark;
  return typeof named === "string" ? named : info.name.replace(/^env_/, "").replace(/#\d+$/, "");
}

function programLabel(program: Program): string {
  return `${program.kind} ${program.name}`;
}

/** `POST /api/sessions` for this panel: the program, the panel's placement as it stands, the budget if given. */
function sessionRequest(info: PanelInfo, program: Program, stepBudget: string): Record<string, unknown> {
  const placement: Record<string, unknown> = { benchmark: benchmarkOf(info) };
  for (const name of PLACEMENT_FIELDS) {
    const value = info.state[name];
    if (value !== undefined && value !== null) placement[name] = value;
  }
  const request: Record<string, unknown> = { [program.kind]: program.name, placement };
  const budget = Number(stepBudget);
  if (stepBudget.trim() && Number.isInteger(budget) && budget > 0) request.step_budget = budget;
  return request;
}
