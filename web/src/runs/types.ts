// The shapes `/api/eval/v2` answers with, as the runs dashboard reads them.
import type { TraceEvent } from "../trace";

export const STATUSES = ["success", "failure", "error", "infra_invalid", "safety_abort"] as const;
export type EpisodeStatus = (typeof STATUSES)[number];

/** How a run's episodes ended, in one word: `ok` (no abstention), `some_errors`, `mostly_errors` (at least half
 * are `error` or `infra_invalid`), `all_errors` (every one). */
export type RunHealth = "ok" | "some_errors" | "mostly_errors" | "all_errors";

export interface RunInfo {
  run_id: string;
  status: string;
  mode: string;
  benchmark: string;
  split: string | null;
  agent: string;
  digest: string;
  spec: Record<string, unknown>;
  n_planned: number;
  n_done: number;
  created_at: number;
  updated_at: number;
  message: string | null;
  /** The final episodes' statuses, counted (absent from a server that predates it). */
  status_counts?: Record<string, number>;
  scored?: number;
  successes?: number;
  /** Over scored episodes; null when none was scored. */
  success_rate?: number | null;
  /** The success rate's 95% Wilson interval. */
  success_ci?: [number, number] | null;
  /** Episodes that abstained (`error`, `infra_invalid`). */
  abstained?: number;
  health?: RunHealth;
}

export interface RunProgress {
  status: string;
  message: string | null;
  n_done: number;
  n_planned: number;
  status_counts: Record<string, number>;
}

export interface JobStatus {
  job_id: string;
  run_id: string;
  state: string;
  message: string;
  priority: number;
  submitted_at: number;
  started_at: number | null;
  ended_at: number | null;
  exit_code: number | null;
  progress: RunProgress | null;
}

export interface Summary {
  n: number;
  status_counts: Record<string, number>;
  scored: number;
  successes: number;
  success_rate: number | null;
  success_ci: [number, number] | null;
  conservative_success_rate: number | null;
  mean_steps: number | null;
  mean_return: number | null;
  return_std: number | null;
  success_signal: boolean;
}

export interface RunSummary extends Summary {
  per_task: Record<string, Summary>;
}

/** The p50 / p95 / p99 of act latencies, in seconds. */
export interface LatencyPercentiles {
  p50: number;
  p95: number;
  p99: number;
}

/** A run's (or an episode's) realtime figures, docs/evallog.md "Realtime metrics": counts are sums over the episodes,
 * ratios are ratios of sums, percentiles are over every act of every episode; null where nothing divides. */
export interface RealtimeFigures {
  episodes: number;
  steps: number;
  executed: number;
  holds: number;
  dropped: number;
  chunks: number;
  acts: number;
  watchdog_ends: number;
  sim_time_s: number;
  latency_s: LatencyPercentiles | null;
  /** null under the wall clock. */
  virtual_latency_s: LatencyPercentiles | null;
  /** Agent actions executed per second of simulated time. */
  control_rate_hz: number | null;
  /** dropped / executed. */
  stale_ratio: number | null;
  /** holds / steps. */
  hold_ratio: number | null;
  mean_delay_steps: number | null;
}

/** A run of several seeds, its scored episodes clustered by (task, index), docs/statistics.md "Several seeds". */
export interface SeedClusters {
  /** How many seeds the run ran each (task, index) under. */
  seeds: number;
  /** How many (task, index) keys: the clusters. */
  clusters: number;
  /** The cluster-robust variance of the success rate over the binomial one, at least 1. */
  design_effect: number;
  /** The 95% Wilson interval at the effective sample size n / design_effect. */
  success_ci: [number, number];
  /** k (as a string) → the chance that at least one of k episodes of a key succeeds. */
  pass_at_k: Record<string, number>;
  /** seed (as a string) → the success rate under it; null where none was scored. */
  per_seed: Record<string, number | null>;
}

/** One piece of the code that defines an agent (docs/evallog.md): a source file by its sha256, a versioned
 * distribution by its version, or a file or directory an argument names, by the hash of its content. */
export type CodePart =
  | { kind: "source"; path: string; sha256: string }
  | { kind: "distribution"; name: string; version: string }
  | {
      kind: "argument";
      arg: string;
      path: string;
      sha256: string;
      size: number;
      files: number | null;
      method: "content" | "stat";
    };

/** One agent's code (each `reason` node's agent of a graph run has its own). */
export interface AgentCode {
  agent: string;
  node: string | null;
  /** The modules that define it: where the walk of its imports starts. */
  modules: string[];
  parts: CodePart[];
}

/** A run's code identity: the digest of every agent's code, part of the run's own digest. */
export interface CodeIdentity {
  digest: string;
  agents: AgentCode[];
}

/** One part that differs from the other run's code. */
export interface CodeChange {
  kind: "source" | "distribution" | "argument";
  name: string;
  change: "changed" | "added" | "removed";
  was: string | null;
  now: string | null;
}

/** How a run's code differs from that of `against`, the latest other run of the same configuration. */
export interface CodeChanges {
  run_id: string;
  against: string;
  against_created_at: number;
  changes: CodeChange[];
  same_code: boolean;
}

export interface RunDetail {
  run: RunInfo;
  /** The agent's code (null: a run made before runs recorded it; absent from a server that predates it). */
  code?: CodeIdentity | null;
  /** null: no other run of the same configuration recorded its code. */
  code_changes?: CodeChanges | null;
  summary: RunSummary;
  /** null for a run without realtime timing (absent from a server that predates it). */
  realtime?: RealtimeFigures | null;
  /** null for a run of one seed (absent from a server that predates it). */
  seed_clusters?: SeedClusters | null;
  /** The suite-level aggregates over the run's tasks (absent from a server that predates them). */
  suite?: SuiteFigures | null;
  job: JobStatus | null;
}

export interface EpisodeRow {
  episode_id: string;
  task: string;
  split: string;
  index: number;
  seed: number;
  status: EpisodeStatus;
  reason: string;
  success: boolean;
  steps: number;
  attempt: number;
  detail: string | null;
  video: string | null;
  metrics: Record<string, unknown>;
  /** Under realtime timing: the episode's own realtime figures. */
  realtime?: RealtimeFigures;
}

export interface EpisodePage {
  run_id: string;
  total: number;
  offset: number;
  limit: number;
  episodes: EpisodeRow[];
}

export interface EpisodeTrace {
  run_id: string;
  episode_id: string;
  attempt: number;
  attempts: number[];
  events: TraceEvent[];
}

export interface Flip {
  episode_id: string;
  task: string;
  status_a: string;
  status_b: string;
}

/** One task's part of a comparison: its scored pairs, rates, McNemar's exact p and that p adjusted by Holm's
 * method over every task of the comparison. */
export interface TaskComparison {
  n_pairs: number;
  both_success: number;
  a_only: number;
  b_only: number;
  neither: number;
  rate_a: number | null;
  rate_b: number | null;
  difference: number | null;
  p_value: number;
  p_holm: number;
}

export interface Comparison {
  run_a: string;
  run_b: string;
  /** Task → its part, tasks sorted (absent from a server that predates it). */
  per_task?: Record<string, TaskComparison>;
  n_pairs: number;
  only_in_a: number;
  only_in_b: number;
  abstained: number;
  both_success: number;
  a_only: number;
  b_only: number;
  neither: number;
  rate_a: number | null;
  rate_b: number | null;
  difference: number | null;
  p_value: number;
  flips: Flip[];
  /** P(b > a) over the tasks (absent from a server that predates it). */
  improvement?: Improvement | null;
}

/** An A/B comparison as `GET /ab` lists it. */
export interface ABSummary {
  ab_id: string;
  agent_a: string;
  agent_b: string;
  run_a: string;
  run_b: string;
  /** "A better", "B better", or null when the test did not decide within `max_pairs`. */
  decision: string | null;
  pairs_used: number;
  max_pairs: number;
}

/** An A/B record (`hylo ab show --json`): the sequential test's decision, its difference and path. */
export interface ABRecord extends ABSummary {
  /** rate_b − rate_a over the scored pairs. */
  difference: number | null;
  /** The B − A values the sequential test has not ruled out (it excludes 0 exactly when the test decided). */
  confidence_sequence: [number, number];
  /** "test": the test's own interval; "betting": a record made before, whose separate interval may contain 0 though
   * the test decided. */
  confidence_sequence_kind: "test" | "betting";
  /** The comparison extended the runs `hylo eval` made (`--reuse-runs`) instead of runs of its own. */
  reuse_runs: boolean;
  flips: { b_wins: number; a_wins: number; both: number; neither: number };
  abstentions: number;
  alpha: number;
  log_evalue: number;
  /** log(1/alpha): the test decides once log E reaches it. */
  threshold: number;
  /** log E after each scored pair. */
  path: number[];
}

export interface BenchmarkInfo {
  name: string;
  display_name?: string;
  available: boolean;
  reason: string | null;
  default_split: string | null;
  splits: { name: string; tasks: { name: string }[] }[];
}

export const EVAL_API = "/api/eval/v2";

/** The API path of a run, with its id encoded. */
export function runPath(runId: string, rest = ""): string {
  return `${EVAL_API}/runs/${encodeURIComponent(runId)}${rest}`;
}

/** A latency sweep as `GET /sweeps` lists it. */
export interface SweepSummary {
  sweep_id: string;
  benchmark: string;
  agent: string;
  latency_steps: number[];
  /** The execution horizons swept; null: the agent's own. */
  execution_steps: number[] | null;
  /** H, when the agent declares it. */
  chunk_size: number | null;
}

/** One grid point's run (`hylo sweep show --json`). */
export interface SweepPoint {
  latency_steps: number;
  execution_steps: number | null;
  success_rate: number | null;
  success_ci: [number, number] | null;
  /** McNemar's exact p against the zero-latency run at the same horizon; null for that run, or without one. */
  mcnemar_p: number | null;
  run_id: string;
  n: number;
  scored: number;
  successes: number;
  status_counts: Record<string, number>;
}

/** A sweep's record: its points ordered by latency then horizon, the points refused with the rule each breaks. */
export interface SweepRecord extends SweepSummary {
  split: string | null;
  tasks: string[] | null;
  episodes: number;
  seeds: number[];
  points: SweepPoint[];
  refused: { latency_steps: number; execution_steps: number | null; reason: string }[];
}

/** The shield's review of one step's action (`safety.review`): not approved when it aborted the episode, modified
 * when it changed the action (an intervention). */
export interface TimelineReview {
  approved: boolean;
  modified: boolean;
  reasons: string[];
  guard: string | null;
}

/** One env step of an episode's timeline (`GET /runs/{run}/timeline`). */
export interface TimelineStep {
  step: number;
  /** False for the step whose review aborted the episode: no action ran. */
  executed: boolean;
  /** The action's numbers, one per dimension; null when it is not numbers (a digest, text). */
  action: (number | null)[] | null;
  hold: boolean;
  reward: number | null;
  terminated: boolean;
  truncated: boolean;
  success: boolean;
  review: TimelineReview | null;
  /** The sequence numbers of the step's trace events, inclusive. */
  seq_first: number;
  seq_last: number;
}

/** A chunk the agent returned: asked for at `requested_at`, merged at `start_step`, its first `dropped` stale. */
export interface TimelineChunk {
  seq: number;
  requested_at: number;
  start_step: number;
  size: number;
  execution_steps: number;
  latency_s: number | null;
  virtual_latency_s: number | null;
  dropped: number;
  delay_steps: number;
}

/** One camera's video: frame `k + frame_offset` shows the observation step k acted on. */
export interface TimelineVideo {
  camera: string | null;
  fps: number;
  frames: number;
  frame_offset: number;
}

export interface EpisodeTimeline {
  run_id: string;
  episode_id: string;
  attempt: number;
  attempts: number[];
  first_step: number;
  total_steps: number;
  total_dims: number;
  dim_names: string[];
  dt: number | null;
  steps: TimelineStep[];
  chunks: TimelineChunk[];
  end: { status: EpisodeStatus; reason: string; success: boolean; steps: number; safety_interventions: number } | null;
  /** What the answer left out (steps, action dimensions), in words; null when nothing. */
  cut: string | null;
  videos: TimelineVideo[];
}

/** How a suite figure's interval was drawn: stratified bootstrap resamples from a fixed-seed generator. */
export interface SuiteBootstrap {
  resamples: number;
  seed: number;
  confidence: number;
}

/** A run's suite-level aggregates, docs/statistics.md "Suite-level aggregates". */
export interface SuiteFigures {
  /** The tasks counted: those with a scored episode. */
  tasks: number;
  seeds: number;
  /** What the bootstrap resamples within a task: "episode" or "(task, index) cluster". */
  unit: string;
  /** The mean over tasks of the per-task success rates; null (with `reason`) for a run of one task. */
  mean: number | null;
  mean_ci: [number, number] | null;
  /** The interquartile mean of the per-(seed, task) success rates. */
  iqm: number | null;
  iqm_ci: [number, number] | null;
  /** Tasks without a scored episode. */
  left_out: string[];
  bootstrap: SuiteBootstrap;
  reason: string | null;
}

/** The probability of improvement P(b > a) of a comparison over its tasks. */
export interface Improvement {
  probability: number | null;
  ci: [number, number] | null;
  tasks: number;
  /** A task's scores: "seed" (per-seed success rates) or "episode" (the episodes' 0/1 outcomes). */
  scores: string;
  unit_a: string;
  unit_b: string;
  per_task: Record<string, number>;
  /** Task → why it is left out. */
  left_out: Record<string, string>;
  bootstrap: SuiteBootstrap;
  reason: string | null;
}
