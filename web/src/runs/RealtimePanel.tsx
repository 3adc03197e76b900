// A realtime run's figures (docs/evallog.md, Realtime metrics): act latency p50 / p95 / p99, measured and on the
// virtual clock, the effective control rate, the stale and hold ratios with their counts, chunks requested with their
// mean delay, and the watchdog ends. Pooled over the run's episodes: percentiles over every act, ratios of sums.
import { pct } from "./format";
import type { LatencyPercentiles, RealtimeFigures } from "./types";

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

export function RealtimePanel({ figures: f }: { figures: RealtimeFigures }) {
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
    </section>
  );
}
