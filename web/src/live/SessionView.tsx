// The live view of a panel's session (or that one is starting): its latest frame and instruction, step counter and
// state, the outcome of its last execution, the timeline of the current execution's steps, the trace events and the
// state containers.
import { useEffect, useState } from "react";
import { Containers } from "./Containers";
import { LiveFrame } from "./LiveFrame";
import type { StreamSnapshot } from "./stream";
import { Timeline } from "./Timeline";
import { TraceEvents } from "./TraceEvents";
import type { Outcome, SessionBrief, SessionInfo } from "./types";

interface Props {
  session: SessionInfo | null;
  live: StreamSnapshot;
  /** What a session being started runs (null: none is starting). */
  starting: string | null;
}

export function SessionView({ session, live, starting }: Props) {
  const brief: SessionBrief | null = live.session ?? session;
  const execution = live.execution;
  const [selected, setSelected] = useState<number | null>(null);
  const executions = brief?.executions ?? 0;
  useEffect(() => setSelected(null), [executions, brief?.id]);

  if (starting) {
    return (
      <div className="session-view">
        <section className="live-card live-starting" data-testid="session-starting" aria-busy="true" role="status">
          <span className="spinner" aria-hidden="true" />
          Starting a session with {starting}: building the env and the agent…
        </section>
      </div>
    );
  }
  if (!brief) {
    return (
      <div className="session-view">
        <section className="live-card muted" data-testid="no-session">
          No session on this panel yet: choose the episode and the agent, then press Play (or Step).
        </section>
      </div>
    );
  }
  return (
    <div className="session-view">
      <div className="live-top">
        <LiveFrame frame={brief.frame} />
        <section className="live-card live-status">
          <div className="instruction" data-testid="live-instruction">
            {execution.instruction ?? <span className="muted">no instruction yet</span>}
          </div>
          <dl>
            <dt>State</dt>
            <dd>
              <span className={`state state-${brief.state}`} data-testid="session-status">
                {brief.state}
              </span>
              {!live.connected && !live.ended && <span className="muted"> (connecting…)</span>}
              {live.ended && <span className="muted"> ({live.ended})</span>}
            </dd>
            <dt>Step</dt>
            <dd data-testid="step-counter">{brief.step}</dd>
            <dt>Episode</dt>
            <dd data-testid="episode-id">{brief.episode_id ?? "—"}</dd>
            <dt>Executions</dt>
            <dd>{brief.executions}</dd>
            <dt>Program</dt>
            <dd>{session ? (session.agent ? `agent ${session.agent}` : `graph ${session.graph}`) : "—"}</dd>
            {live.dropped > 0 && (
              <>
                <dt>Dropped</dt>
                <dd className="dropped">{live.dropped} events (this page fell behind the run)</dd>
              </>
            )}
          </dl>
          {session?.error && <div className="error-message">{session.error}</div>}
          <OutcomeCard outcome={brief.last_outcome} />
        </section>
      </div>
      <Timeline steps={execution.steps} selected={selected} onSelect={setSelected} />
      <div className="live-bottom">
        <TraceEvents events={live.events} base={live.eventsBase} dropped={live.dropped} selected={selected} />
        <Containers
          checkpoints={execution.checkpoints}
          selected={selected}
          reported={session?.containers ?? live.info?.containers ?? null}
        />
      </div>
    </div>
  );
}

export function OutcomeCard({ outcome }: { outcome: Outcome | null }) {
  if (!outcome) return <div className="outcome muted">no outcome yet</div>;
  const metrics = Object.entries(outcome.metrics ?? {});
  return (
    <div className="outcome" data-testid="outcome">
      <div>
        Last outcome:{" "}
        <strong className={`status-${outcome.status}`} data-testid="outcome-status">
          {outcome.status}
        </strong>{" "}
        after {outcome.steps} steps
      </div>
      <div className="muted" data-testid="outcome-reason">
        {outcome.reason}
      </div>
      {outcome.safety_interventions > 0 && <div>{outcome.safety_interventions} shield interventions</div>}
      {metrics.length > 0 && (
        <div className="muted">
          {metrics.map(([key, value]) => `${key} ${typeof value === "number" ? value.toFixed(3) : String(value)}`).join(" · ")}
        </div>
      )}
    </div>
  );
}
