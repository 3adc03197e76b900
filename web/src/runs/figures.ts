// What a run page's figures read (`/runs/{run}/distributions`, `/runs/{run}/realtime/tasks`) and the order their
// status colours stack in, as the page's badges show them. Their axes are ChartAxes.tsx's.
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
