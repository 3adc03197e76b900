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

/** Arrays of more numbers than this are shown by their summary (`float[39] min -0.3 max 1`), not their values. */
export const COLLAPSE_OVER = 8;

/** What a large array holds: its shape, the kind of its numbers, their least and greatest (null: none finite). */
export interface ArraySummary {
  shape: number[];
  kind: "float" | "int" | "bool";
  min: number | null;
  max: number | null;
}

/** A (nested, rectangular or not) array of numbers as its summary; null when it holds anything but numbers (or
 * nulls, as NaN is written) or is not an array. The shape is read along the first element of each level. */
export function arraySummary(value: unknown): ArraySummary | null {
  if (!Array.isArray(value)) return null;
  const shape: number[] = [];
  for (let level: unknown = value; Array.isArray(level); level = level[0]) shape.push(level.length);
  let kind: ArraySummary["kind"] = "bool";
  let min = Infinity;
  let max = -Infinity;
  const stack: unknown[] = [value];
  while (stack.length) {
    const item = stack.pop();
    if (Array.isArray(item)) {
      for (const inner of item) stack.push(inner);
    } else if (typeof item === "number") {
      if (kind !== "float") kind = Number.isInteger(item) ? "int" : "float";
      if (item < min) min = item;
      if (item > max) max = item;
    } else if (typeof item === "boolean") {
      const bit = item ? 1 : 0;
      if (bit < min) min = bit;
      if (bit > max) max = bit;
    } else if (item !== null) {
      return null;
    }
  }
  const finite = Number.isFinite(min);
  return { shape, kind, min: finite ? min : null, max: finite ? max : null };
}

/** A value's one-line summary when it is too large to show (an array of more than `COLLAPSE_OVER` numbers, or a
 * large array the trace keeps by its digest), e.g. `float[39] min -0.3 max 1` or `uint8[128×128×3] digest 1a2b3c4d`;
 * null for a value to show as it is. */
export function collapsedValue(value: unknown): string | null {
  if (isDigest(value)) {
    const shape = Array.isArray(value.shape) ? value.shape.join("×") : "?";
    return `${String(value.dtype ?? "array")}[${shape}] digest ${String(value.digest).slice(0, 8)}`;
  }
  const summary = arraySummary(value);
  if (!summary || summary.shape.reduce((a, b) => a * b, 1) <= COLLAPSE_OVER) return null;
  const range = summary.min === null ? "" : ` min ${shortNumber(summary.min)} max ${shortNumber(summary.max ?? 0)}`;
  return `${summary.kind}[${summary.shape.join("×")}]${range}`;
}

/** An array the trace recorded by its digest (`{"digest", "shape", "dtype"}`, docs/trace.md). */
function isDigest(value: unknown): value is { digest: unknown; shape: unknown; dtype?: unknown } {
  return !!value && typeof value === "object" && !Array.isArray(value) && "digest" in value && "shape" in value;
}

/** A number in at most 4 significant digits (`-0.3`, `1`, `1.235e+4`). */
export function shortNumber(value: number): string {
  return String(Number(value.toPrecision(4)));
}

/** A value in one line with every large array in it collapsed to its summary (`collapsedValue`). */
export function compactValue(value: unknown): string {
  const collapsed = collapsedValue(value);
  if (collapsed !== null) return collapsed;
  if (Array.isArray(value)) return `[${value.map(compactValue).join(", ")}]`;
  if (value && typeof value === "object") {
    const parts = Object.entries(value as Record<string, unknown>).map(([k, v]) => `${k}: ${compactValue(v)}`);
    return `{${parts.join(", ")}}`;
  }
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

/** An event's own fields in one line as `summarizeEvent` writes them, large arrays collapsed (`compactValue`). */
export function summarizeEventCompact(event: TraceEvent, perValue = 160, total = 400): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(event)) {
    if (BOOKKEEPING.has(key) || value === null || value === undefined) continue;
    parts.push(`${key}=${cut(typeof value === "string" ? value : compactValue(value), perValue)}`);
  }
  return cut(parts.join("  "), total);
}

/** An event's own fields (those `summarizeEvent` shows), in order. */
export function eventFields(event: TraceEvent): [string, unknown][] {
  return Object.entries(event).filter(([key, value]) => !BOOKKEEPING.has(key) && value !== undefined);
}
