// `#/sweeps/<id>`: a latency sweep's record, as `hylo sweep` wrote it — the plot (success against latency, one line
// per execution horizon, Wilson bands) and the table of grid points, each linking to its run, with the points
// refused by the rule max(1, d) <= s <= H - d.
import { withToken } from "../api";
import { href } from "../router";
import { interval, pct, pValue } from "./format";
import { EVAL_API, type SweepRecord } from "./types";
import { useRecord } from "./useRecord";

export function SweepPage({ sweepId }: { sweepId: string }) {
  const { record, error } = useRecord<SweepRecord>(`${EVAL_API}/sweeps/${encodeURIComponent(sweepId)}`);

  return (
    <div className="compare-page sweep-page">
      <div className="crumbs">
        <a href={href(["runs"])}>← Runs</a>
      </div>
      {error && (
        <div className="error-message" data-testid="sweep-error">
          {error}
        </div>
      )}
      {!record && !error && <p className="muted">Loading…</p>}
      {record && <SweepResult record={record} />}
    </div>
  );
}

/** `s` as the table writes it: a number, or the agent's own. */
export function horizon(s: number | null): string {
  return s === null ? "agent's own" : String(s);
}

function SweepResult({ record: r }: { record: SweepRecord }) {
  const tasks = r.tasks && r.tasks.length > 0 ? r.tasks.join(", ") : "every task";
  return (
    <>
      <section className="panel" data-testid="sweep-result">
        <h2 className="mono">{r.sweep_id}</h2>
        <p className="muted" data-testid="sweep-what">
          {r.agent} on {r.benchmark} ({tasks}){r.chunk_size !== null ? `, H = ${r.chunk_size}` : ""}, {r.episodes}{" "}
          episodes per task, under the chunked-execution protocol on the virtual clock: latency d control steps, a new
          chunk every s steps. Each point is one run on the same episodes; p is McNemar's exact test against d = 0 at
          the same s.
        </p>
        <img
          className="sweep-plot"
          data-testid="sweep-plot"
          alt={`success against latency for ${r.sweep_id}`}
          src={withToken(`${EVAL_API}/sweeps/${encodeURIComponent(r.sweep_id)}/plot.svg`)}
        />
      </section>
      <section className="panel">
        <h3>Grid points</h3>
        <table className="sweep-table" data-testid="sweep-points">
          <thead>
            <tr>
              <th>d</th>
              <th>s</th>
              <th>Success</th>
              <th>95% CI</th>
              <th>Scored</th>
              <th>p vs d = 0</th>
              <th>Run</th>
            </tr>
          </thead>
          <tbody>
            {r.points.map((p) => (
              <tr key={p.run_id} data-testid={`sweep-point-${p.latency_steps}-${p.execution_steps ?? "own"}`}>
                <td className="num">{p.latency_steps}</td>
                <td className="num">{horizon(p.execution_steps)}</td>
                <td className="num" data-testid="sweep-rate">
                  {pct(p.success_rate)}
                </td>
                <td className="num">{interval(p.success_ci)}</td>
                <td className="num">
                  {p.scored}/{p.n}
                </td>
                <td className="num" data-testid="sweep-p">
                  {p.mcnemar_p === null ? "—" : pValue(p.mcnemar_p)}
                </td>
                <td className="mono">
                  <a href={href(["runs", p.run_id])} data-testid="sweep-run">
                    {p.run_id}
                  </a>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {r.refused.length > 0 && (
          <ul className="sweep-refused" data-testid="sweep-refused">
            {r.refused.map((p) => (
              <li key={`${p.latency_steps}-${p.execution_steps ?? "own"}`}>
                refused d = {p.latency_steps}, s = {horizon(p.execution_steps)}: {p.reason}
              </li>
            ))}
          </ul>
        )}
      </section>
    </>
  );
}
