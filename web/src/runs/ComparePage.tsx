// `#/compare?a=&b=`: two runs paired by episode id — the 2x2 table of paired outcomes, both rates, their difference,
// McNemar's exact p-value and every flipped episode.
import { useEffect, useState } from "react";
import { api, errorMessage } from "../api";
import { href, navigate } from "../router";
import { StatusBadge } from "./Progress";
import { pValue, pct, points } from "./format";
import { EVAL_API, type Comparison, type RunInfo } from "./types";

const FLIPS_STEP = 200;

export function ComparePage({ a, b }: { a: string; b: string }) {
  const [runs, setRuns] = useState<RunInfo[] | null>(null);
  const [result, setResult] = useState<Comparison | null>(null);
  const [error, setError] = useState<string | null>(null);
  /** Why the list of runs could not be had: kept apart, so that choosing a run does not clear it. */
  const [runsError, setRunsError] = useState<string | null>(null);

  useEffect(() => {
    let cancelled = false;
    api<{ runs: RunInfo[] }>(`${EVAL_API}/runs`)
      .then((answer) => !cancelled && setRuns(answer.runs))
      .catch((e: unknown) => !cancelled && setRunsError(`the list of runs could not be loaded: ${errorMessage(e)}`));
    return () => {
      cancelled = true;
    };
  }, []);

  useEffect(() => {
    setResult(null);
    setError(null);
    if (!a || !b) return;
    let cancelled = false;
    const params = new URLSearchParams({ a, b });
    api<Comparison>(`${EVAL_API}/compare?${params.toString()}`)
      .then((answer) => !cancelled && setResult(answer))
      .catch((e: unknown) => !cancelled && setError(errorMessage(e)));
    return () => {
      cancelled = true;
    };
  }, [a, b]);

  const choose = (side: "a" | "b", value: string) => {
    const query: Record<string, string> = {};
    const next = { a, b, [side]: value };
    if (next.a) query.a = next.a;
    if (next.b) query.b = next.b;
    navigate(["compare"], query);
  };

  return (
    <div className="compare-page">
      <div className="crumbs">
        <a href={href(["runs"])}>← Runs</a>
      </div>
      <section className="panel">
        <h2>Compare two runs</h2>
        <p className="muted">
          Episodes are paired by id; only pairs both runs scored enter McNemar's exact test. The difference is b − a.
        </p>
        <div className="compare-pickers">
          <RunPicker label="Run a" testId="compare-a" value={a} runs={runs} onChange={(v) => choose("a", v)} />
          <RunPicker label="Run b" testId="compare-b" value={b} runs={runs} onChange={(v) => choose("b", v)} />
        </div>
        {runsError && <div className="error-message">{runsError}</div>}
        {error && (
          <div className="error-message" data-testid="compare-error">
            {error}
          </div>
        )}
      </section>
      {result && <CompareResult key={`${result.run_a}\n${result.run_b}`} result={result} />}
    </div>
  );
}

function RunPicker(props: {
  label: string;
  testId: string;
  value: string;
  runs: RunInfo[] | null;
  onChange: (value: string) => void;
}) {
  const known = props.runs?.some((r) => r.run_id === props.value) ?? false;
  return (
    <label className="field">
      <span className="field-label">{props.label}</span>
      <select data-testid={props.testId} value={props.value} onChange={(e) => props.onChange(e.target.value)}>
        <option value="">choose a run…</option>
        {props.value && !known && <option value={props.value}>{props.value}</option>}
        {[...(props.runs ?? [])].reverse().map((run) => (
          <option key={run.run_id} value={run.run_id}>
            {run.run_id} ({run.agent}, {run.n_done} episodes)
          </option>
        ))}
      </select>
    </label>
  );
}

function CompareResult({ result: r }: { result: Comparison }) {
  return (
    <section className="panel" data-testid="compare-result">
      <div className="compare-stats">
        <table className="pair-table" data-testid="pair-table">
          <thead>
            <tr>
              <th />
              <th>b success</th>
              <th>b not</th>
            </tr>
          </thead>
          <tbody>
            <tr>
              <th scope="row">a success</th>
              <td className="num" data-testid="both-success">
                {r.both_success}
              </td>
              <td className="num" data-testid="a-only">
                {r.a_only}
              </td>
            </tr>
            <tr>
              <th scope="row">a not</th>
              <td className="num" data-testid="b-only">
                {r.b_only}
              </td>
              <td className="num" data-testid="neither">
                {r.neither}
              </td>
            </tr>
          </tbody>
        </table>
        <dl className="run-facts">
          <dt>Run a</dt>
          <dd className="mono">
            <a href={href(["runs", r.run_a])}>{r.run_a}</a>
          </dd>
          <dt>Run b</dt>
          <dd className="mono">
            <a href={href(["runs", r.run_b])}>{r.run_b}</a>
          </dd>
          <dt>Scored pairs</dt>
          <dd data-testid="n-pairs">{r.n_pairs}</dd>
          <dt>Abstained pairs</dt>
          <dd data-testid="abstained">{r.abstained}</dd>
          <dt>Only in a / b</dt>
          <dd data-testid="unpaired">
            {r.only_in_a} / {r.only_in_b}
          </dd>
          <dt>Rate a</dt>
          <dd data-testid="rate-a">{pct(r.rate_a)}</dd>
          <dt>Rate b</dt>
          <dd data-testid="rate-b">{pct(r.rate_b)}</dd>
          <dt>Difference (b − a)</dt>
          <dd data-testid="difference">{points(r.difference)}</dd>
          <dt>McNemar p</dt>
          <dd data-testid="p-value" data-value={r.p_value} className={r.p_value < 0.05 ? "significant" : ""}>
            {pValue(r.p_value)}
          </dd>
        </dl>
      </div>
      <FlipList result={r} />
    </section>
  );
}

function FlipList({ result }: { result: Comparison }) {
  const [shown, setShown] = useState(FLIPS_STEP);
  const flips = result.flips;
  return (
    <div className="flips-area">
      <h3>
        Flipped episodes <span className="muted" data-testid="flip-count">{flips.length}</span>
      </h3>
      <table className="flips" data-testid="flips">
        <thead>
          <tr>
            <th>Episode</th>
            <th>Task</th>
            <th>a</th>
            <th>b</th>
          </tr>
        </thead>
        <tbody>
          {flips.slice(0, shown).map((flip) => (
            <tr key={flip.episode_id} data-testid="flip-row" data-episode-id={flip.episode_id}>
              <td className="mono">{flip.episode_id}</td>
              <td>{flip.task}</td>
              <td>
                <StatusBadge status={flip.status_a} />
              </td>
              <td>
                <StatusBadge status={flip.status_b} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {flips.length > shown && (
        <button type="button" data-testid="flips-more" onClick={() => setShown((n) => n + FLIPS_STEP)}>
          Show more ({flips.length - shown} left)
        </button>
      )}
    </div>
  );
}
