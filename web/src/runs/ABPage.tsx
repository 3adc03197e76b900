// `#/ab/<id>`: an A/B comparison's record, as `hylo ab` wrote it — the sequential test's decision, the pairs it
// used of the most allowed, the difference with its confidence sequence, the flips, the abstentions, both runs, and
// the path of log E against the decision boundary, the design with its futility δ, and B's lead over the pairs with
// both boundaries (efficacy and futility).
import { href } from "../router";
import { type ABDesignRecord, designNote, stoppedFor } from "./abDesign";
import { LeadChart } from "./LeadChart";
import { PathChart } from "./PathChart";
import { bound, points } from "./format";
import { EVAL_API, type ABRecord } from "./types";
import { useRecord } from "./useRecord";

export function ABPage({ abId }: { abId: string }) {
  const { record, error } = useRecord<ABDesignRecord>(`${EVAL_API}/ab/${encodeURIComponent(abId)}`);

  return (
    <div className="compare-page ab-page">
      <div className="crumbs">
        <a href={href(["runs"])}>← Runs</a>
      </div>
      {error && (
        <div className="error-message" data-testid="ab-error">
          {error}
        </div>
      )}
      {!record && !error && <p className="muted">Loading…</p>}
      {record && <ABResult record={record} />}
    </div>
  );
}

/** What the interval is, in one line, as `hylo ab` prints it under the interval. */
function confidenceNote(r: ABDesignRecord): string {
  if (r.confidence_sequence_kind === "betting") {
    return "an older record: its interval is a separate betting confidence sequence, which may contain 0 although the test decided";
  }
  if (r.confidence_sequence_kind === "anytime") {
    return `every B − A the anytime test has not ruled out at alpha ${r.alpha}, valid on its own; the capped design decides on its own boundary, which spends more of alpha by the cap`;
  }
  const ruledOut = `every B − A the test itself has not ruled out at alpha ${r.alpha}`;
  const decided = r.decision === "A better" || r.decision === "B better";
  return decided ? `${ruledOut}; it leaves out 0 exactly because the test decided` : `${ruledOut}; 0 is still among them: no decision`;
}

function ABResult({ record: r }: { record: ABDesignRecord }) {
  const [low, high] = r.confidence_sequence;
  return (
    <>
      <section className="panel" data-testid="ab-result">
        <h2 className="mono">{r.ab_id}</h2>
        <p className="muted">
          A is {r.agent_a}, B is {r.agent_b}, on the same episodes pair by pair, until the sequential paired test
          decides (alpha {r.alpha}). The difference is B − A.
        </p>
        <div className="compare-stats">
          <dl className="run-facts">
            <dt>Decision</dt>
            <dd data-testid="ab-decision" className={r.decision ? "significant" : "muted"}>
              {r.decision ?? "no decision"}
            </dd>
            <dt>Design</dt>
            <dd data-testid="ab-design">
              {r.design ?? "anytime"}
              <div className="muted" data-testid="ab-design-note">
                {designNote(r)}
              </div>
            </dd>
            <dt>Smallest difference (δ)</dt>
            <dd data-testid="ab-min-effect">{r.min_effect ?? "none"}</dd>
            <dt>Stopped</dt>
            <dd data-testid="ab-stopped-for">{stoppedFor(r)}</dd>
            <dt>Pairs used</dt>
            <dd data-testid="ab-pairs">
              {r.pairs_used} of {r.max_pairs}
            </dd>
            <dt>Difference (B − A)</dt>
            <dd data-testid="ab-difference">{points(r.difference)}</dd>
            <dt>Confidence sequence</dt>
            <dd data-testid="ab-confidence">
              [{bound(low)}, {bound(high)}]
              <div className="muted" data-testid="ab-confidence-note">
                {confidenceNote(r)}
              </div>
            </dd>
            <dt>Abstentions</dt>
            <dd data-testid="ab-abstentions">{r.abstentions}</dd>
            <dt>log E</dt>
            <dd data-testid="ab-log-evalue">
              {r.log_evalue.toFixed(3)} <span className="muted">(decides at {r.threshold.toFixed(3)})</span>
            </dd>
            {r.reuse_runs && (
              <>
                <dt>Runs</dt>
                <dd data-testid="ab-reuse">the runs hylo eval made, extended (--reuse-runs)</dd>
              </>
            )}
            <dt>Run A ({r.agent_a})</dt>
            <dd className="mono">
              <a href={href(["runs", r.run_a])} data-testid="ab-run-a">
                {r.run_a}
              </a>
            </dd>
            <dt>Run B ({r.agent_b})</dt>
            <dd className="mono">
              <a href={href(["runs", r.run_b])} data-testid="ab-run-b">
                {r.run_b}
              </a>
            </dd>
          </dl>
          <table className="pair-table" data-testid="ab-flips">
            <thead>
              <tr>
                <th />
                <th>B success</th>
                <th>B not</th>
              </tr>
            </thead>
            <tbody>
              <tr>
                <th scope="row">A success</th>
                <td className="num" data-testid="ab-both">
                  {r.flips.both}
                </td>
                <td className="num" data-testid="ab-a-wins">
                  {r.flips.a_wins}
                </td>
              </tr>
              <tr>
                <th scope="row">A not</th>
                <td className="num" data-testid="ab-b-wins">
                  {r.flips.b_wins}
                </td>
                <td className="num" data-testid="ab-neither">
                  {r.flips.neither}
                </td>
              </tr>
            </tbody>
          </table>
        </div>
        <p>
          <a href={href(["compare"], { a: r.run_a, b: r.run_b })} data-testid="ab-compare-link">
            Compare the two runs episode by episode
          </a>
        </p>
      </section>
      {r.lead_path && r.lead_path.length > 0 && (
        <section className="panel">
          <h3>B's lead over the pairs, with both boundaries</h3>
          <LeadChart record={r} />
        </section>
      )}
      {(r.design ?? "anytime") === "anytime" && (
        <section className="panel">
          <h3>The path of the statistic</h3>
          <PathChart record={r as ABRecord} />
        </section>
      )}
    </>
  );
}
