// A run's distributions of episode length and of return, stacked by status (`GET /runs/{run}/distributions`), for
// the whole run or one task chosen here; read again as the run's episodes come in.
import { useState } from "react";
import { type RunDistributions, STACK_ORDER, type StatusHistogram } from "./figures";
import { Histogram } from "./Histogram";
import { runPath } from "./types";
import { useAnswer } from "./useAnswer";
import "./figures.css";

function distributionsPath(runId: string, task: string): string {
  return runPath(runId, task ? `/distributions?${new URLSearchParams({ task }).toString()}` : "/distributions");
}

export function DistributionsPanel({ runId, tasks, version }: { runId: string; tasks: string[]; version: number }) {
  const [task, setTask] = useState("");
  const path = distributionsPath(runId, task);
  const { data, error } = useAnswer<RunDistributions>(path, version);
  const shown = data?.value ?? null;
  return (
    <section className="panel figures-panel" data-testid="distributions-panel">
      <div className="section-head">
        <h3>Distributions</h3>
        <label>
          of{" "}
          <select data-testid="distributions-task" value={task} onChange={(e) => setTask(e.target.value)}>
            <option value="">the whole run</option>
            {tasks.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </label>
        {shown && (
          <span className="muted" data-testid="distributions-scope">
            {shown.episodes} final episodes{shown.task ? ` of ${shown.task}` : ""}
            {data?.path !== path ? " (loading…)" : ""}
          </span>
        )}
      </div>
      {error && (
        <div className="error-message" data-testid="distributions-error">
          {error}
        </div>
      )}
      {shown && <Figures distributions={shown} />}
    </section>
  );
}

function Figures({ distributions: d }: { distributions: RunDistributions }) {
  if (d.episodes === 0) return <p className="muted">No episodes yet.</p>;
  return (
    <>
      <Legend hist={d.steps} />
      <div className="figures-row">
        <figure className="figure" data-testid="steps-figure">
          <figcaption>Episode length</figcaption>
          <Histogram hist={d.steps} axis="episode length (steps)" testId="steps-histogram" />
        </figure>
        <figure className="figure" data-testid="return-figure">
          <figcaption>Return</figcaption>
          {d.returns ? (
            <>
              <Histogram hist={d.returns} axis="return (sum of rewards)" testId="return-histogram" />
              {d.returns.missing > 0 && (
                <p className="muted" data-testid="return-missing">
                  {d.returns.missing} episodes recorded no return.
                </p>
              )}
            </>
          ) : (
            <p className="muted figure-empty" data-testid="no-return">
              no return recorded
            </p>
          )}
        </figure>
      </div>
    </>
  );
}

/** The statuses present, each in its colour with its count. */
function Legend({ hist }: { hist: StatusHistogram }) {
  const present = STACK_ORDER.filter((status) => hist.counts[status].some((count) => count > 0));
  return (
    <ul className="figure-legend" data-testid="distributions-legend">
      {present.map((status) => (
        <li key={status} data-testid={`legend-${status}`}>
          <svg width={12} height={12} aria-hidden="true">
            <rect width={12} height={12} className={`figure-status figure-${status}`} />
          </svg>
          {status} {hist.counts[status].reduce((sum, count) => sum + count, 0)}
        </li>
      ))}
    </ul>
  );
}
