// A realtime run's figures (docs/evallog.md, Realtime metrics): act latency p50 / p95 / p99, measured and on the
// virtual clock, the effective control rate, the stale and hold ratios with their counts, chunks requested with their
// mean delay, and the watchdog ends. Pooled over the run's episodes: percentiles over every act, ratios of sums.
// Below them, charts per task (`GET /runs/{run}/realtime/tasks`): the latency percentiles and the stale and hold
// ratios, the whole run last.
import type { RealtimePerTask } from "./figures";
import { pct } from "./format";
import { type FigureRow, LatencyChart, RatioChart } from "./RealtimeCharts";
import { runPath, type LatencyPercentiles, type RealtimeFigures } from "./types";
import { useAnswer } from "./useAnswer";
import "./figures.css";

const PERCENTILES = ["p50", "p95", "p99"] as const;

/** Seconds as milliseconds, one decimal (three below 1 ms): `0.0125` → `12.5 ms`, `0.0000415` → `0.042 ms`. */
export function ms(seconds: number): string {
  return `${(seconds * 1000).toFixed(seconds >= 0.001 ? 1 : 3)} ms`;
}

function LatencyRow({ name, testId, values }: { name: string; testId: string; values: LatencyPercentiles | null }) {
  return (
    <tr data-testid={`realtime-${testId}`}>
      <th scope="row">{name}</th>
      {PERCENTILES.map((q) => (
        <td key={q} className="num" data-testid={`realtime-${testId}-${q}`}>
          {values ? ms(values[q]) : "—"}
        </td>
      ))}
    </tr>
  );
}

export function RealtimePanel(props: { runId: string; version: number; figures: RealtimeFigures }) {
  const f = props.figures;
  return (
    <section className="panel realtime-panel" data-testid="realtime-panel">
      <h3>Realtime</h3>
      <p className="muted">
        {f.episodes} episodes, {f.acts} acts, {f.sim_time_s.toFixed(2)} s simulated; latencies over every act, ratios
        of sums over the episodes.
      </p>
      <div className="summary-grid">
        <table className="task-table" data-testid="realtime-latency">
          <thead>
            <tr>
              <th>Act latency</th>
              {PERCENTILES.map((q) => (
                <th key={q} className="num">
                  {q}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            <LatencyRow name="measured" testId="latency" values={f.latency_s} />
            <LatencyRow name="virtual" testId="virtual-latency" values={f.virtual_latency_s} />
          </tbody>
        </table>
        <dl className="run-facts">
          <dt title="agent actions executed per second of simulated time">Control rate</dt>
          <dd data-testid="realtime-control-rate">
            {f.control_rate_hz === null ? "—" : `${f.control_rate_hz.toFixed(2)} actions/s`}
          </dd>
          <dt title="stale actions dropped / agent actions executed">Stale</dt>
          <dd data-testid="realtime-stale">
            {pct(f.stale_ratio)} ({f.dropped} / {f.executed})
          </dd>
          <dt title="hold steps / steps">Hold</dt>
          <dd data-testid="realtime-hold">
            {pct(f.hold_ratio)} ({f.holds} / {f.steps})
          </dd>
          <dt>Chunks requested</dt>
          <dd data-testid="realtime-chunks">{f.chunks}</dd>
          <dt title="control steps between a chunk's request and its merge">Mean delay</dt>
          <dd data-testid="realtime-delay">
            {f.mean_delay_steps === null ? "—" : `${f.mean_delay_steps.toFixed(2)} steps`}
          </dd>
          <dt title="episodes the watchdog ended">Watchdog ends</dt>
          <dd data-testid="realtime-watchdog">{f.watchdog_ends}</dd>
        </dl>
      </div>
      <RealtimeCharts runId={props.runId} version={props.version} overall={f} />
    </section>
  );
}

/** The per-task charts; while the tasks' figures load (or when they fail) the whole run's figures above stand. */
function RealtimeCharts(props: { runId: string; version: number; overall: RealtimeFigures }) {
  const { data, error } = useAnswer<RealtimePerTask>(runPath(props.runId, "/realtime/tasks"), props.version);
  if (error) {
    return (
      <div className="error-message" data-testid="realtime-charts-error">
        {error}
      </div>
    );
  }
  if (!data) return null;
  const rows: FigureRow[] = [
    ...Object.entries(data.value.per_task).map(([name, figures]) => ({ name, figures, overall: false })),
    { name: "All tasks", figures: props.overall, overall: true },
  ];
  return (
    <div className="figures-row realtime-charts" data-testid="realtime-charts">
      <figure className="figure">
        <figcaption>
          Act latency per task: <span className="latency-key latency-p50">●</span> p50{" "}
          <span className="latency-key latency-p95">●</span> p95 <span className="latency-key latency-p99">●</span> p99
        </figcaption>
        <LatencyChart rows={rows} which="latency_s" clock="measured" testId="realtime-latency-chart" />
        {props.overall.virtual_latency_s && (
          <LatencyChart rows={rows} which="virtual_latency_s" clock="virtual" testId="realtime-virtual-latency-chart" />
        )}
      </figure>
      <figure className="figure">
        <figcaption>
          Stale and hold per task: <span className="ratio-key ratio-stale">■</span> stale (dropped / executed){" "}
          <span className="ratio-key ratio-hold">■</span> hold (hold steps / steps)
        </figcaption>
        <RatioChart rows={rows} />
      </figure>
    </div>
  );
}
