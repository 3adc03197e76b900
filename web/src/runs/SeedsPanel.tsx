// A run of several seeds (`--seeds`), its scored episodes clustered by (task, index) as `hylo runs show` reports them
// (docs/statistics.md, Several seeds): the seeds and episode keys, the clustered 95% interval beside the plain Wilson
// one, the design effect, pass@k for each k and the success rate under each seed.
import { interval, pct } from "./format";
import type { RunSummary, SeedClusters } from "./types";

const DESIGN_EFFECT =
  "Korn & Graubard (1998): the cluster-robust variance of the success rate over its binomial variance, at least 1. " +
  "The episodes of one (task, index) under the seeds are a cluster: episodes that succeed or fail together count as " +
  "fewer trials, and the clustered interval is Wilson's at n / design effect.";

const PASS_AT_K =
  "the chance that at least one of k episodes of a (task, index) succeeds, 1 − C(n − c, k) / C(n, k) per key, " +
  "averaged over the keys (Chen et al. 2021)";

/** Keys that name numbers (`"10"`, `"2"`) in numeric order. */
function numeric(keys: string[]): string[] {
  return [...keys].sort((a, b) => Number(a) - Number(b));
}

export function SeedsPanel({ clusters: c, summary }: { clusters: SeedClusters; summary: RunSummary }) {
  const seeds = numeric(Object.keys(c.per_seed));
  const ks = numeric(Object.keys(c.pass_at_k));
  return (
    <section className="panel seeds-panel" data-testid="seeds-panel">
      <h3>Seeds</h3>
      <p className="muted">
        {c.seeds} seeds over {c.clusters} episode keys; the episodes of one (task, index) under its seeds form a
        cluster. Scored episodes only.
      </p>
      <div className="summary-grid">
        <dl className="run-facts">
          <dt>Seeds</dt>
          <dd data-testid="seeds-list">{seeds.join(", ")}</dd>
          <dt title="(task, index) keys, each run under every seed">Episode keys</dt>
          <dd data-testid="seeds-clusters">{c.clusters}</dd>
          <dt title="Wilson's interval over every scored episode, as if each were an independent trial">95% CI</dt>
          <dd data-testid="seeds-plain-ci">{interval(summary.success_ci)}</dd>
          <dt title="Wilson's interval at the effective sample size n / design effect">95% CI, clustered</dt>
          <dd data-testid="seeds-clustered-ci">{interval(c.success_ci)}</dd>
          <dt title={DESIGN_EFFECT} data-testid="seeds-design-effect-label">
            Design effect
          </dt>
          <dd data-testid="seeds-design-effect">{c.design_effect.toFixed(2)}</dd>
        </dl>
        <table className="task-table" data-testid="seeds-pass-at-k">
          <thead>
            <tr>
              <th title={PASS_AT_K}>k</th>
              <th className="num">pass@k</th>
            </tr>
          </thead>
          <tbody>
            {ks.map((k) => (
              <tr key={k} data-testid={`seeds-pass-${k}`}>
                <th scope="row">{k}</th>
                <td className="num" data-testid={`seeds-pass-${k}-rate`}>
                  {pct(c.pass_at_k[k])}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <table className="task-table" data-testid="seeds-per-seed">
          <thead>
            <tr>
              <th>Seed</th>
              <th className="num">Success rate</th>
            </tr>
          </thead>
          <tbody>
            {seeds.map((seed) => (
              <tr key={seed} data-testid={`seeds-seed-${seed}`}>
                <th scope="row">{seed}</th>
                <td className="num" data-testid={`seeds-seed-${seed}-rate`}>
                  {pct(c.per_seed[seed])}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}
