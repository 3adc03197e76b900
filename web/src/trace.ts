// A trace event as the server sends it (docs/trace.md): `event` is its kind, the rest depends on it. Shared by the
// live view (events of a running session) and a run's episode trace (events read back from the EvalLog).

export interface TraceEvent {
  event: string;
  seq?: number;
  sim_time?: number;
  [field: string]: unknown;
}

/** The fields every event carries, left out of a summary. */
const BOOKKEEPING = new Set(["event", "run_id", "episode_id", "seq", "sim_time", "wall_time"]);

/** An event's own fields in one line, `key=value` (each value cut to `perValue` characters, the line to `total`). */
export function summarizeEvent(event: TraceEvent, perValue = 80, total = 400): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(event)) {
    if (BOOKKEEPING.has(key) || value === null || value === undefined) continue;
    parts.push(`${key}=${cut(typeof value === "string" ? value : JSON.stringify(value), perValue)}`);
  }
  return cut(parts.join("  "), total);
}

function cut(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}
