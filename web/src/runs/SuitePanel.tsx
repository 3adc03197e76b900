// A run over several tasks summed up over them, as `hylo runs show` reports it (docs/statistics.md, Suite-level
// aggregates): the mean over tasks and the interquartile mean with their stratified bootstrap intervals, the tasks
// and seeds they count, how the intervals were drawn, and the tasks left out; why there are none, when there are none.
import { interval, pct } from "./format";
import type { Improvement, SuiteBootstrap, SuiteFigures } from "./types";

const CITATION =
  'Agarwal et al. 2021, "Deep reinforcement learning at the edge of the statistical precipice" (NeurIPS)';

const MEAN =
  "the mean over tasks of each task's success rate: every task counts the same, however many episodes it has";

function iqmTitle(seeds: number): string {
  const scores = seeds > 1 ? "per-(seed, task) success rates" : "per-task success rates";
  return (
    `the interquartile mean: the mean of the middle half of the ${scores} (a quarter cut from each end), ` +
    "robust to a task or two at 0% or 100%"
  );
}

/** What a bootstrap resamples within each task, in words. */
function units(unit: string): string {
  return unit === "episode" ? "episodes" : "(task, index) clusters (every seed of an index together)";
}

/** How an interval was drawn, in one line. */
export function method(bootstrap: SuiteBootstrap, resampled: string): string {
  const confidence = Math.round(bootstrap.confidence * 100);
  return (
    `${confidence}% percentile intervals of a stratified bootstrap: ${resampled} resampled within each task, ` +
    `${bootstrap.resamples} times (generator seed ${bootstrap.seed}); ${CITATION}`
  );
}

export function SuitePanel({ suite: s }: { suite: SuiteFigures }) {
  const line = method(s.bootstrap, `the ${units(s.unit)}`);
  return (
    <section className="panel suite-panel" data-testid="suite-panel">
      <h3>Suite</h3>
      {s.mean === null ? (
        <p className="muted" data-testid="suite-reason">
          No suite figures: {s.reason}
        </p>
      ) : (
        <>
          <dl className="run-facts">
            <dt title={MEAN}>Mean over tasks</dt>
            <dd data-testid="suite-mean">
              {pct(s.mean)} <span className="muted">{interval(s.mean_ci)}</span>
            </dd>
            <dt title={iqmTitle(s.seeds)}>IQM</dt>
            <dd data-testid="suite-iqm">
              {pct(s.iqm)} <span className="muted">{interval(s.iqm_ci)}</span>
            </dd>
            <dt>Counted</dt>
            <dd data-testid="suite-counted">
              {s.tasks} tasks, {s.seeds} {s.seeds === 1 ? "seed" : "seeds"}
            </dd>
          </dl>
          <p className="muted" data-testid="suite-method" title={line}>
            {line}
          </p>
        </>
      )}
      {s.left_out.length > 0 && (
        <p className="muted" data-testid="suite-left-out">
          Left out (no scored episode): {s.left_out.join(", ")}
        </p>
      )}
    </section>
  );
}

/** A comparison's P(b > a) over its tasks with its interval; why there is none, for runs of several tasks. */
export function ImprovementFacts({ improvement: i }: { improvement: Improvement }) {
  const several = i.tasks + Object.keys(i.left_out).length > 1;
  if (!several) return null;
  const scores =
    i.scores === "seed"
      ? "each seed's success rate"
      : "the episodes' 0/1 outcomes, i.e. ½ + ½ (rate b − rate a) per task";
  const resampled =
    i.unit_a === i.unit_b
      ? `both runs' ${units(i.unit_a)}`
      : `run a's ${units(i.unit_a)} and run b's ${units(i.unit_b)}`;
  const title =
    `P(X_b > X_a) + ½ P(X_b = X_a) per task over ${scores}, averaged over the tasks. ` +
    method(i.bootstrap, `${resampled} (each run on its own)`);
  return (
    <>
      <dt title={title} data-testid="improvement-label">
        P(b &gt; a)
      </dt>
      <dd data-testid="improvement">
        {i.probability === null ? (
          <span className="muted">none: {i.reason}</span>
        ) : (
          <>
            {i.probability.toFixed(3)} <span className="muted">{ci(i.ci)}</span>{" "}
            <span className="muted">over {i.tasks} tasks</span>
          </>
        )}
      </dd>
    </>
  );
}

function ci(value: [number, number] | null): string {
  return value ? `[${value[0].toFixed(3)}, ${value[1].toFixed(3)}]` : "—";
}
