// The per-task table of a run: episodes, the count of every status, success rate over scored episodes with its 95%
// Wilson interval, the conservative rate over all episodes, and the mean return (± its standard deviation) over
// scored episodes; the whole run in the last row. An env without a success signal shows "no signal" for its rates.
import { interval, pct, returns } from "./format";
import { STATUSES, type RunSummary, type Summary } from "./types";

/** What a rate cell says when the env has no success signal (it only rewards). */
export const NO_SIGNAL = "no signal";

/** The key of the whole-run row in cell test ids. */
export const OVERALL = "overall";

export function TaskTable({ summary }: { summary: RunSummary }) {
  const statuses = [...new Set<string>([...STATUSES, ...Object.keys(summary.status_counts)])];
  return (
    <table className="task-table" data-testid="task-table">
      <thead>
        <tr>
          <th>Task</th>
          <th className="num">n</th>
          {statuses.map((status) => (
            <th key={status} className={`num status-${status}`}>
              {status}
            </th>
          ))}
          <th className="num">Success rate</th>
          <th>95% CI</th>
          <th className="num" title="successes over every episode, abstentions counted as failures">
            Conservative
          </th>
          <th className="num" title="mean return ± standard deviation over scored episodes">
            Return
          </th>
        </tr>
      </thead>
      <tbody>
        {Object.entries(summary.per_task).map(([task, s]) => (
          <SummaryRow key={task} name={task} cellKey={task} summary={s} statuses={statuses} testId={`task-row-${task}`} />
        ))}
      </tbody>
      <tfoot>
        <SummaryRow name="All tasks" cellKey={OVERALL} summary={summary} statuses={statuses} testId="overall-row" />
      </tfoot>
    </table>
  );
}

function SummaryRow(props: { name: string; cellKey: string; summary: Summary; statuses: string[]; testId: string }) {
  const { cellKey: key, summary: s } = props;
  const signalled = s.success_signal !== false;
  return (
    <tr data-testid={props.testId}>
      <th scope="row">{props.name}</th>
      <td className="num" data-testid={`cell-n-${key}`}>
        {s.n}
      </td>
      {props.statuses.map((status) => {
        const count = s.status_counts[status] ?? 0;
        return (
          <td
            key={status}
            className={`num ${count ? `status-${status}` : "muted"}`}
            data-testid={`cell-count-${status}-${key}`}
          >
            {count}
          </td>
        );
      })}
      <td className="num" data-testid={`cell-success-rate-${key}`}>
        {signalled ? pct(s.success_rate) : NO_SIGNAL}
      </td>
      <td data-testid={`cell-ci-${key}`}>{signalled ? interval(s.success_ci) : "—"}</td>
      <td className="num" data-testid={`cell-conservative-${key}`}>
        {signalled ? pct(s.conservative_success_rate) : "—"}
      </td>
      <td className="num" data-testid={`cell-return-${key}`}>
        {returns(s.mean_return, s.return_std)}
      </td>
    </tr>
  );
}
