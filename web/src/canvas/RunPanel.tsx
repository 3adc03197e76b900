// The run beside the canvas: the session's state and step, its latest frame and the outcome of its execution (the
// live view's own frame and outcome card), with Stop and Close.
import { LiveFrame } from "../live/LiveFrame";
import { OutcomeCard } from "../live/SessionView";
import type { CanvasRun } from "./run";

type Props = { run: CanvasRun; busy: boolean; onStop: () => void; onClose: () => void };

export function RunPanel({ run, busy, onStop, onClose }: Props) {
  const { session, live, starting } = run;
  if (!session) {
    if (!starting) return null;
    return (
      <section className="canvas-run live-starting" data-testid="run-starting" aria-busy="true" role="status">
        <span className="spinner" aria-hidden="true" />
        Starting the run: building the env and the agents…
      </section>
    );
  }
  const brief = live.session ?? session;
  const running = brief.state === "running" || brief.state === "paused";
  return (
    <section className="canvas-run" data-testid="run-panel">
      <h3>
        Run <span className="muted">{session.graph}</span>
      </h3>
      <div className="run-status">
        <span className={`state state-${brief.state}`} data-testid="run-state">
          {brief.state}
        </span>
        <span className="muted">
          step <span data-testid="run-step">{brief.step}</span>
        </span>
        {brief.episode_id && <span className="muted run-episode">{brief.episode_id}</span>}
      </div>
      <LiveFrame frame={brief.frame} />
      <OutcomeCard outcome={brief.executions > 0 ? brief.last_outcome : null} />
      {session.error && <div className="error-message">{session.error}</div>}
      {live.ended && <div className="muted">{live.ended}</div>}
      <div className="run-actions">
        <button type="button" onClick={onStop} disabled={busy || !running} data-testid="stop-run">
          Stop
        </button>
        <button type="button" onClick={onClose} disabled={busy} data-testid="close-run">
          Close run
        </button>
      </div>
    </section>
  );
}
