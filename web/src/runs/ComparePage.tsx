// `#/compare?a=&b=`: two runs paired by episode id — the 2x2 table of paired outcomes, both rates, their difference,
// McNemar's exact p-value, the probability of improvement P(b > a) over the tasks with its bootstrap interval, the
// same per task with the p-values adjusted by Holm's method over the tasks, and every flipped episode, each linked to
// its episode in either run.
import { useEffect, useState } from "react";
import { api, errorMessage } from "../api";
import { href, navigate } from "../router";
import { StatusBadge } from "./Progress";
import { pValue, pct, points } from "./format";
import { agentArgs } from "./RunIdentity";
import { ImprovementFacts } from "./SuitePanel";
import { EVAL_API, type Comparison, type RunInfo, type TaskComparison } from "./types";

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
            {run.run_id} ({[run.agent, agentArgs(run.spec)].filter(Boolean).join(" ")}, {run.n_done} episodes)
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
          {r.improvement && <ImprovementFacts improvement={r.improvement} />}
        </dl>
      </div>
      {r.per_task && Object.keys(r.per_task).length > 0 && <PerTaskTable perTask={r.per_task} />}
      <FlipList result={r} />
    </section>
  );
}

/** Each task's pairs, rates, difference and McNemar p, and that p adjusted by Holm's method over the tasks: a task
 * reads as different only by its adjusted p (several tests at once, one chance of a false alarm). */
function PerTaskTable({ perTask }: { perTask: Record<string, TaskComparison> }) {
  return (
    <div className="per-task-area">
      <h3>Per task</h3>
      <table className="per-task-table" data-testid="per-task-table">
        <thead>
          <tr>
            <th>Task</th>
            <th className="num">Pairs</th>
            <th className="num" title="a succeeded, b did not / b succeeded, a did not">
              a only / b only
            </th>
            <th className="num">Rate a</th>
            <th className="num">Rate b</th>
            <th className="num">Difference (b − a)</th>
            <th className="num">McNemar p</th>
            <th className="num" title="adjusted by Holm's method over every task of the comparison">
              Holm p
            </th>
          </tr>
        </thead>
        <tbody>
          {Object.entries(perTask).map(([task, t]) => (
            <tr key={task} data-testid={`per-task-row-${task}`}>
              <th scope="row">{task}</th>
              <td className="num" data-testid="pt-pairs">
                {t.n_pairs}
              </td>
              <td className="num" data-testid="pt-discordant">
                {t.a_only} / {t.b_only}
              </td>
              <td className="num" data-testid="pt-rate-a">
                {pct(t.rate_a)}
              </td>
              <td className="num" data-testid="pt-rate-b">
                {pct(t.rate_b)}
              </td>
              <td className="num" data-testid="pt-difference">
                {points(t.difference)}
              </td>
              <td className="num" data-testid="pt-p">
                {pValue(t.p_value)}
              </td>
              <td
                className={`num ${t.p_holm < 0.05 ? "significant" : ""}`}
                data-testid="pt-p-holm"
                data-value={t.p_holm}
              >
                {pValue(t.p_holm)}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
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
            <th title="opens the episode in run a">a</th>
            <th title="opens the episode in run b">b</th>
          </tr>
        </thead>
        <tbody>
          {flips.slice(0, shown).map((flip) => (
            <tr key={flip.episode_id} data-testid="flip-row" data-episode-id={flip.episode_id}>
              <td className="mono">{flip.episode_id}</td>
              <td>{flip.task}</td>
              <td>
                <a
                  className="flip-link"
                  href={href(["runs", result.run_a], { episode: flip.episode_id })}
                  data-testid="flip-link-a"
                  title={`this episode in run a (${result.run_a})`}
                >
                  <StatusBadge status={flip.status_a} />
                </a>
              </td>
              <td>
                <a
                  className="flip-link"
                  href={href(["runs", result.run_b], { episode: flip.episode_id })}
                  data-testid="flip-link-b"
                  title={`this episode in run b (${result.run_b})`}
                >
                  <StatusBadge status={flip.status_b} />
                </a>
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
