// What tells runs apart at a glance: the agent with its arguments (two runs that differ only in `-A gain=` are
// two different agents, not two digests), and a run's health beside its status, so that a run whose episodes all
// ended `error` never reads as a plain green "complete".
import { StatusBadge } from "./Progress";
import type { RunHealth, RunInfo } from "./types";

const HEALTH_WORDS: Record<Exclude<RunHealth, "ok">, string> = {
  some_errors: "some errors",
  mostly_errors: "mostly errors",
  all_errors: "all errors",
};

/** The abstentions that make a run unhealthy: the agent's faults and the infrastructure's. */
const ABSTAINED = ["error", "infra_invalid"] as const;

/** A run's health: the server's word for it, or (from a server that sends only the counts) the same rule applied to
 * its status counts: none abstained, some, at least half, all. Null when neither is known. */
export function runHealth(run: RunInfo): RunHealth | null {
  if (run.health) return run.health;
  const counts = run.status_counts;
  if (!counts) return null;
  const total = Object.values(counts).reduce((sum, n) => sum + n, 0);
  const abstained = ABSTAINED.reduce((sum, status) => sum + (counts[status] ?? 0), 0);
  if (abstained === 0) return "ok";
  if (abstained === total) return "all_errors";
  return 2 * abstained >= total ? "mostly_errors" : "some_errors";
}

/** `error 12, infra_invalid 3 of 15 episodes`: what the health is made of. */
function abstentions(run: RunInfo): string {
  const counts = run.status_counts ?? {};
  const total = Object.values(counts).reduce((sum, n) => sum + n, 0);
  const parts = ABSTAINED.filter((status) => counts[status]).map((status) => `${status} ${counts[status]}`);
  return parts.length ? `${parts.join(", ")} of ${total} episodes` : "";
}

/** A run's status in its colour, and beside it its health when some episodes abstained: an all-error or
 * mostly-error run's status is shown in the colour of an error, never a success's green. */
export function RunStatus({ run, testId }: { run: RunInfo; testId: string }) {
  const health = runHealth(run);
  if (!health || health === "ok") return <StatusBadge status={run.status} testId={testId} />;
  const tone = health === "some_errors" ? "" : ` badge-health-${health}`;
  return (
    <span className="run-status" data-health={health}>
      <span className={`badge badge-${run.status}${tone}`} data-testid={testId}>
        {run.status}
      </span>{" "}
      <span
        className={`badge badge-health badge-health-${health}`}
        data-testid={`${testId}-health`}
        title={abstentions(run)}
      >
        {HEALTH_WORDS[health]}
      </span>
    </span>
  );
}

/** The agent's arguments as `-A` gives them: `gain=10, chunk=2` (text as is, anything else as JSON); "" for none. */
export function agentArgs(spec: Record<string, unknown>): string {
  const args = spec.agent_args;
  if (!args || typeof args !== "object" || Array.isArray(args)) return "";
  return Object.entries(args as Record<string, unknown>)
    .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`)
    .join(", ");
}

/** The agent and, under it, its arguments. */
export function AgentCell({ run }: { run: RunInfo }) {
  const args = agentArgs(run.spec);
  return (
    <>
      {run.agent}
      {args && (
        <div className="mono muted agent-args" data-testid={`run-args-${run.run_id}`} title={args}>
          {args}
        </div>
      )}
    </>
  );
}
