// `#/runs`: the start form, the queue of jobs, every run with its agent's arguments, its health and success rate and
// its live progress, the A/B comparisons `hylo ab` recorded and the latency sweeps `hylo sweep` recorded. Polled
// every second while a job is queued or running, every few seconds otherwise (runs written by other processes appear
// too).
import { api } from "../api";
import { href } from "../router";
import { CancelButton } from "./CancelButton";
import { ProgressBar, StatusBadge } from "./Progress";
import { StartForm } from "./StartForm";
import { EVAL_API, type ABSummary, type JobStatus, type RunInfo, type SweepSummary } from "./types";
import { usePoll } from "./usePoll";
import { interval, pct, when } from "./format";
import { AgentCell, RunStatus } from "./RunIdentity";

interface Overview {
  runs: RunInfo[];
  jobs: JobStatus[];
  comparisons: ABSummary[];
  sweeps: SweepSummary[];
}

const FAST_MS = 1000;
const SLOW_MS = 5000;

async function loadOverview(): Promise<Overview> {
  const [runs, queue, ab, sweeps] = await Promise.all([
    api<{ runs: RunInfo[] }>(`${EVAL_API}/runs`),
    api<{ jobs: JobStatus[] }>(`${EVAL_API}/queue`),
    api<{ comparisons: ABSummary[] }>(`${EVAL_API}/ab`),
    api<{ sweeps: SweepSummary[] }>(`${EVAL_API}/sweeps`),
  ]);
  return { runs: runs.runs, jobs: queue.jobs, comparisons: ab.comparisons, sweeps: sweeps.sweeps };
}

function isActive(data: Overview | null): boolean {
  if (!data) return false;
  return data.jobs.length > 0 || data.runs.some((run) => run.status === "running");
}

export function RunsOverview() {
  const { data, error, reload } = usePoll("overview", loadOverview, (d) => (isActive(d) ? FAST_MS : SLOW_MS));
  return (
    <div className="runs-page">
      <div className="runs-side">
        <StartForm onStarted={reload} />
        <QueueTable jobs={data?.jobs ?? null} onChange={reload} />
      </div>
      <div className="runs-main">
        <div className="section-head">
          <h2>Runs</h2>
          <a href={href(["compare"])} data-testid="compare-link">
            Compare two runs
          </a>
        </div>
        {error && <div className="error-message">{error}</div>}
        {data ? <RunsTable runs={data.runs} /> : <p className="muted">Loading…</p>}
        <div className="ab-section">
          <div className="section-head">
            <h2>A/B comparisons</h2>
          </div>
          {data ? <ABTable comparisons={data.comparisons} /> : <p className="muted">Loading…</p>}
        </div>
        <div className="ab-section">
          <div className="section-head">
            <h2>Latency sweeps</h2>
          </div>
          {data ? <SweepTable sweeps={data.sweeps} /> : <p className="muted">Loading…</p>}
        </div>
      </div>
    </div>
  );
}

function QueueTable({ jobs, onChange }: { jobs: JobStatus[] | null; onChange: () => void }) {
  return (
    <section className="panel" data-testid="queue">
      <h3>Queue</h3>
      {jobs === null ? (
        <p className="muted">Loading…</p>
      ) : jobs.length === 0 ? (
        <p className="muted" data-testid="queue-empty">
          No job is queued or running.
        </p>
      ) : (
        <ul className="queue-list">
          {jobs.map((job) => (
            <li key={job.job_id} data-testid={`queue-row-${job.job_id}`} data-run-id={job.run_id}>
              <div className="queue-line">
                <a className="mono queue-run" href={href(["runs", job.run_id])}>
                  {job.run_id}
                </a>
                <StatusBadge status={job.state} testId={`job-state-${job.job_id}`} />
              </div>
              <div className="queue-line">
                <span className="mono muted">job {job.job_id}</span>
                {job.progress ? (
                  <ProgressBar done={job.progress.n_done} planned={job.progress.n_planned} />
                ) : (
                  <span className="muted">not started</span>
                )}
                <CancelButton runId={job.run_id} onDone={onChange} />
              </div>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function RunsTable({ runs }: { runs: RunInfo[] }) {
  if (runs.length === 0) {
    return (
      <p className="muted" data-testid="runs-list">
        No runs yet: start one with the form.
      </p>
    );
  }
  const newestFirst = [...runs].reverse();
  return (
    <table className="runs-table" data-testid="runs-list">
      <thead>
        <tr>
          <th>Run</th>
          <th>Benchmark</th>
          <th>Agent and arguments</th>
          <th>Status</th>
          <th className="num" title="successes over scored episodes, with the 95% Wilson interval">
            Success
          </th>
          <th>Progress</th>
          <th>Created</th>
        </tr>
      </thead>
      <tbody>
        {newestFirst.map((run) => (
          <tr key={run.run_id} data-testid={`run-row-${run.run_id}`}>
            <td className="mono">
              <a href={href(["runs", run.run_id])} data-testid={`run-link-${run.run_id}`}>
                {run.run_id}
              </a>
            </td>
            <td>
              {run.benchmark}
              {run.split ? <span className="muted"> / {run.split}</span> : null}
            </td>
            <td>
              <AgentCell run={run} />
            </td>
            <td>
              <RunStatus run={run} testId={`run-status-${run.run_id}`} />
            </td>
            <td className="num" data-testid={`run-success-${run.run_id}`}>
              {run.success_rate === undefined ? (
                <span className="muted">—</span>
              ) : (
                <>
                  {pct(run.success_rate)}
                  {run.success_ci && <div className="muted ci">{interval(run.success_ci)}</div>}
                </>
              )}
            </td>
            <td>
              <ProgressBar done={run.n_done} planned={run.n_planned} testId={`run-progress-${run.run_id}`} />
            </td>
            <td className="muted">{when(run.created_at)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function ABTable({ comparisons }: { comparisons: ABSummary[] }) {
  if (comparisons.length === 0) {
    return (
      <p className="muted" data-testid="ab-list">
        No A/B comparison yet: <span className="mono">hylo ab BENCH --a X --b Y --max-episodes N</span> records one.
      </p>
    );
  }
  return (
    <table className="ab-table" data-testid="ab-list">
      <thead>
        <tr>
          <th>Comparison</th>
          <th>A</th>
          <th>B</th>
          <th>Decision</th>
          <th>Pairs used</th>
        </tr>
      </thead>
      <tbody>
        {[...comparisons].reverse().map((ab) => (
          <tr key={ab.ab_id} data-testid={`ab-row-${ab.ab_id}`}>
            <td className="mono">
              <a href={href(["ab", ab.ab_id])} data-testid={`ab-link-${ab.ab_id}`}>
                {ab.ab_id}
              </a>
            </td>
            <td>{ab.agent_a}</td>
            <td>{ab.agent_b}</td>
            <td className={ab.decision ? "significant" : "muted"}>{ab.decision ?? "no decision"}</td>
            <td className="num">
              {ab.pairs_used} of {ab.max_pairs}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function SweepTable({ sweeps }: { sweeps: SweepSummary[] }) {
  if (sweeps.length === 0) {
    return (
      <p className="muted" data-testid="sweep-list">
        No sweep yet: <span className="mono">hylo sweep BENCH --agent A --latency-steps 0 1 2 --episodes N</span>{" "}
        records one.
      </p>
    );
  }
  return (
    <table className="ab-table" data-testid="sweep-list">
      <thead>
        <tr>
          <th>Sweep</th>
          <th>Agent</th>
          <th>Benchmark</th>
          <th>Latency d</th>
          <th>Horizon s</th>
        </tr>
      </thead>
      <tbody>
        {[...sweeps].reverse().map((sweep) => (
          <tr key={sweep.sweep_id} data-testid={`sweep-row-${sweep.sweep_id}`}>
            <td className="mono">
              <a href={href(["sweeps", sweep.sweep_id])} data-testid={`sweep-link-${sweep.sweep_id}`}>
                {sweep.sweep_id}
              </a>
            </td>
            <td>{sweep.agent}</td>
            <td>{sweep.benchmark}</td>
            <td className="num">{sweep.latency_steps.join(", ")}</td>
            <td className="num">{sweep.execution_steps ? sweep.execution_steps.join(", ") : "agent's own"}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
