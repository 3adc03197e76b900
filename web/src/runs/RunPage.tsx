// `#/runs/<id>`: one run — its state and progress (polled while it runs), its protocol and timing, cancel, the
// per-task table and chart, the realtime figures of a realtime run, the clustered figures of a run of several seeds, and
// its episodes with the selected episode's trace and video.
import { useState } from "react";
import { api } from "../api";
import { href } from "../router";
import { CancelButton } from "./CancelButton";
import { EpisodeList } from "./EpisodeList";
import { EpisodePanel } from "./EpisodePanel";
import { ProgressBar, StatusBadge } from "./Progress";
import { RealtimePanel } from "./RealtimePanel";
import { SeedsPanel } from "./SeedsPanel";
import { SuccessChart } from "./SuccessChart";
import { TaskTable } from "./TaskTable";
import { when } from "./format";
import { runPath, type EpisodeRow, type RunDetail } from "./types";
import { usePoll } from "./usePoll";

const FAST_MS = 1000;
const SLOW_MS = 10000;

function isActive(detail: RunDetail | null): boolean {
  return !!detail && (detail.job !== null || detail.run.status === "running");
}

export function RunPage({ runId }: { runId: string }) {
  const { data, error, reload } = usePoll(
    runId,
    () => api<RunDetail>(runPath(runId)),
    (d) => (isActive(d) ? FAST_MS : SLOW_MS),
  );
  const [selected, setSelected] = useState<EpisodeRow | null>(null);

  return (
    <div className="run-page" data-testid="run-page">
      <div className="crumbs">
        <a href={href(["runs"])} data-testid="back-to-runs">
          ← Runs
        </a>
        <a href={href(["compare"], { a: runId })}>Compare with another run</a>
      </div>
      {error && (
        <div className="error-message" data-testid="run-error">
          {error}
        </div>
      )}
      {data ? (
        <>
          <RunHeader detail={data} onCancelled={reload} />
          <section className="panel">
            <h3>Per task</h3>
            <div className="summary-grid">
              <TaskTable summary={data.summary} />
              <SuccessChart summary={data.summary} />
            </div>
          </section>
          {data.realtime && <RealtimePanel figures={data.realtime} />}
          {data.seed_clusters && <SeedsPanel clusters={data.seed_clusters} summary={data.summary} />}
          <div className="episodes-area">
            <EpisodeList
              runId={data.run.run_id}
              tasks={Object.keys(data.summary.per_task)}
              version={data.run.n_done}
              selected={selected?.episode_id ?? null}
              onSelect={setSelected}
            />
            {selected && <EpisodePanel runId={data.run.run_id} episode={selected} onClose={() => setSelected(null)} />}
          </div>
        </>
      ) : (
        !error && <p className="muted">Loading…</p>
      )}
    </div>
  );
}

function RunHeader({ detail, onCancelled }: { detail: RunDetail; onCancelled: () => void }) {
  const { run, job } = detail;
  return (
    <section className="panel run-header">
      <div className="run-title">
        <h2 className="mono" data-testid="run-id">
          {run.run_id}
        </h2>
        <span className="muted">run</span>
        <StatusBadge status={run.status} testId="run-status" />
        {job && <span className="muted">job</span>}
        {job && <StatusBadge status={job.state} testId="run-job-state" />}
        {job && <CancelButton runId={run.run_id} onDone={onCancelled} />}
      </div>
      <dl className="run-facts">
        <dt>Benchmark</dt>
        <dd>
          {run.benchmark}
          {run.split ? ` / ${run.split}` : ""}
        </dd>
        <dt>Agent</dt>
        <dd>{run.agent}</dd>
        {typeof run.spec.protocol === "string" && (
          <>
            <dt>Protocol</dt>
            <dd data-testid="run-protocol">{run.spec.protocol}</dd>
          </>
        )}
        <dt>Timing</dt>
        <dd data-testid="run-timing">{timing(run.spec)}</dd>
        <dt>Progress</dt>
        <dd>
          <ProgressBar done={run.n_done} planned={run.n_planned} testId="run-progress" />
        </dd>
        <dt>Created</dt>
        <dd>{when(run.created_at)}</dd>
        {run.message && (
          <>
            <dt>Message</dt>
            <dd data-testid="run-message">{run.message}</dd>
          </>
        )}
        {job?.message && (
          <>
            <dt>Job</dt>
            <dd>{job.message}</dd>
          </>
        )}
      </dl>
    </section>
  );
}

/** A run's timing and its options, as `hylo runs show` writes them: `realtime: latency_steps=2, schedule=chunked`. */
export function timing(spec: Record<string, unknown>): string {
  const name = typeof spec.timing === "string" ? spec.timing : "sync";
  const options = spec.timing_options;
  if (!options || typeof options !== "object") return name;
  const shown = Object.keys(options)
    .sort()
    .map((key) => `${key}=${option((options as Record<string, unknown>)[key])}`);
  return shown.length ? `${name}: ${shown.join(", ")}` : name;
}

function option(value: unknown): string {
  if (Array.isArray(value)) return value.length > 4 ? `[${value.length} values]` : `[${value.map(option).join(", ")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).map(([key, inner]) => `${key}: ${option(inner)}`);
    return `{${entries.join(", ")}}`;
  }
  return String(value);
}
