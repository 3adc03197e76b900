// `#/runs/<id>`: one run — its state, health and progress (polled while it runs), its agent's arguments, protocol and
// timing, cancel, the per-task table and chart, the distributions of episode length and return by status, the
// agent's code and what changed against the run before it of the same configuration, the realtime figures of a
// realtime run, the clustered figures of a run of several seeds, the suite figures of a run of several tasks (the
// mean over tasks and the IQM with their bootstrap intervals), and its episodes with the selected episode's trace and
// video (`?episode=<id>` selects one from a link).
import { useEffect, useState } from "react";
import { api, errorMessage } from "../api";
import { href, navigate } from "../router";
import { CancelButton } from "./CancelButton";
import { CodePanel } from "./CodePanel";
import { DistributionsPanel } from "./Distributions";
import { EpisodeList } from "./EpisodeList";
import { EpisodePanel } from "./EpisodePanel";
import { ProgressBar, StatusBadge } from "./Progress";
import { RealtimePanel } from "./RealtimePanel";
import { agentArgs, RunStatus } from "./RunIdentity";
import { SeedsPanel } from "./SeedsPanel";
import { SuccessChart } from "./SuccessChart";
import { SuitePanel } from "./SuitePanel";
import { TaskTable } from "./TaskTable";
import { when } from "./format";
import { runPath, type EpisodeRow, type RunDetail } from "./types";
import { usePoll } from "./usePoll";

const FAST_MS = 1000;
const SLOW_MS = 10000;

function isActive(detail: RunDetail | null): boolean {
  return !!detail && (detail.job !== null || detail.run.status === "running");
}

/** The episode named in the address (`#/runs/<id>?episode=<episode id>`, a comparison's flip links there): its row,
 * read once per id; a row chosen in the list is taken as is. */
function useSelectedEpisode(runId: string, episodeId: string | null) {
  const [selected, setSelected] = useState<EpisodeRow | null>(null);
  /** Whether the episode came from the address (a link): the page scrolls to it. */
  const [linked, setLinked] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    setError(null);
    if (!episodeId) {
      setSelected(null);
      return;
    }
    if (selected?.episode_id === episodeId) return;
    let cancelled = false;
    const query = new URLSearchParams({ episode: episodeId });
    api<{ episode: EpisodeRow }>(runPath(runId, `/episode?${query.toString()}`))
      .then((answer) => {
        if (cancelled) return;
        setSelected(answer.episode);
        setLinked(true);
      })
      .catch((e: unknown) => !cancelled && setError(errorMessage(e)));
    return () => {
      cancelled = true;
    };
  }, [runId, episodeId]); // not on `selected`: a row chosen in the list is not read again
  const select = (episode: EpisodeRow | null) => {
    setSelected(episode);
    setLinked(false);
    navigate(["runs", runId], episode ? { episode: episode.episode_id } : undefined);
  };
  return { selected: episodeId ? selected : null, linked, error, select };
}

export function RunPage({ runId, episodeId }: { runId: string; episodeId: string | null }) {
  const { data, error, reload } = usePoll(
    runId,
    () => api<RunDetail>(runPath(runId)),
    (d) => (isActive(d) ? FAST_MS : SLOW_MS),
  );
  const { selected, linked, error: episodeError, select: setSelected } = useSelectedEpisode(runId, episodeId);

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
          {data.suite && data.suite.tasks + data.suite.left_out.length > 1 && <SuitePanel suite={data.suite} />}
          <DistributionsPanel
            runId={data.run.run_id}
            tasks={Object.keys(data.summary.per_task)}
            version={data.run.n_done}
          />
          {data.code !== undefined && <CodePanel code={data.code} changes={data.code_changes ?? null} />}
          {data.realtime && (
            <RealtimePanel runId={data.run.run_id} version={data.run.n_done} figures={data.realtime} />
          )}
          {data.seed_clusters && <SeedsPanel clusters={data.seed_clusters} summary={data.summary} />}
          {episodeError && (
            <div className="error-message" data-testid="episode-error">
              {episodeError}
            </div>
          )}
          <div className="episodes-area">
            <EpisodeList
              runId={data.run.run_id}
              tasks={Object.keys(data.summary.per_task)}
              version={data.run.n_done}
              selected={selected?.episode_id ?? null}
              onSelect={setSelected}
            />
            {selected && (
              <EpisodePanel
                runId={data.run.run_id}
                episode={selected}
                reveal={linked}
                onClose={() => setSelected(null)}
              />
            )}
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
        <RunStatus run={run} testId="run-status" />
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
        <dd data-testid="run-agent">{run.agent}</dd>
        <dt>Arguments</dt>
        <dd className="mono" data-testid="run-agent-args">
          {agentArgs(run.spec) || <span className="muted">none</span>}
        </dd>
        <dt>Digest</dt>
        <dd className="mono" data-testid="run-digest" title="the configuration's digest (the run id ends with it)">
          {run.digest}
        </dd>
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
