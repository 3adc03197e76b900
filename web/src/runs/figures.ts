// What a run page's figures read (`/runs/{run}/distributions`, `/runs/{run}/realtime/tasks`) and the scales their
// plain-SVG charts share: round steps, ticks, and status colours as the page's badges show them.
import type { EpisodeStatus, RealtimeFigures } from "./types";

/** One quantity's histogram: bin i is `[edges[i], edges[i+1])`; every status's count per bin. No edges, no bins
 * when no episode had a value. */
export interface StatusHistogram {
  quantity: "steps" | "return";
  unit: string;
  edges: number[];
  counts: Record<EpisodeStatus, number[]>;
  n: number;
  missing: number;
}

/** The histograms of a run's final episodes, or of one task's; `returns` null when no episode recorded one. */
export interface RunDistributions {
  run_id: string;
  task: string | null;
  tasks: string[];
  episodes: number;
  steps: StatusHistogram;
  returns: StatusHistogram | null;
}

/** A realtime run's figures per task, in the run's task order. */
export interface RealtimePerTask {
  run_id: string;
  per_task: Record<string, RealtimeFigures>;
}

/** The order statuses stack in a bar, bottom up: the scored ones first. */
export const STACK_ORDER: readonly EpisodeStatus[] = ["success", "failure", "safety_abort", "error", "infra_invalid"];

/** A round step that cuts `span` into about `parts` pieces (1, 2 or 5 times a power of ten). */
export function niceStep(span: number, parts: number): number {
  if (!(span > 0)) return 1;
  const raw = span / parts;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].find((m) => m * power >= raw) ?? 10;
  return step * power;
}

/** The multiples of `step` from 0 up to `high` (its next multiple included when `high` is not one). */
export function ticksUpTo(high: number, step: number): number[] {
  const out: number[] = [];
  for (let i = 0; i * step < high + step * 0.999; i++) out.push(Number((i * step).toPrecision(12)));
  return out;
}

/** A number as short as it reads: `0.05`, `2.5`, `120`. */
export function short(value: number): string {
  return String(Number(value.toPrecision(6)));
}
