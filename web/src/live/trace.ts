// What the live view reads out of the trace events of a session: the current execution's steps (reward, shield
// interventions, chunk boundaries), its container checkpoints and the episode's instruction.
import type { TraceEvent } from "../trace";

export interface StepMark {
  step: number;
  reward: number | null;
  success: boolean;
  /** Why the shield changed or refused this step's action (null: it approved the action as is). */
  intervention: string[] | null;
  /** An action chunk was asked for at this step. */
  chunkStart: boolean;
}

export interface Execution {
  episodeId: string | null;
  steps: StepMark[];
  /** Container values at the end of each iteration, by step. */
  checkpoints: Map<number, Record<string, unknown>>;
  instruction: string | null;
}

/** The most steps (and container checkpoints) of one execution the view keeps: the latest ones. */
export const MAX_STEPS = 5000;
export const MAX_CHECKPOINTS = 1000;

export const EMPTY_EXECUTION: Execution = { episodeId: null, steps: [], checkpoints: new Map(), instruction: null };

function num(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** The latest execution, folded in event by event as the stream brings them (so it stays whole when the events
 * themselves have scrolled out of the view's window): it starts over at each `episode.start`. */
export class ExecutionFold {
  private episodeId: string | null = null;
  private instruction: string | null = null;
  private steps = new Map<number, StepMark>();
  private resulted: number[] = [];
  private checkpoints = new Map<number, Record<string, unknown>>();
  private review: string[] | null = null;
  private changed = false;
  private published: Execution = EMPTY_EXECUTION;
  /** The marks as last published (immutable), and the steps changed since: a snapshot copies only those, so an
   * unchanged step keeps its object and its bar is not drawn again. */
  private publishedMarks = new Map<number, StepMark>();
  private touched = new Set<number>();

  add(e: TraceEvent): void {
    let relevant = true;
    switch (e.event) {
      case "episode.start": {
        this.steps = new Map();
        this.publishedMarks = new Map();
        this.touched = new Set();
        this.resulted = [];
        this.checkpoints = new Map();
        this.review = null;
        this.instruction = null;
        this.episodeId = typeof e.episode_id === "string" ? e.episode_id : null;
        const task = e.task as { instruction?: unknown } | undefined;
        if (typeof task?.instruction === "string") this.instruction = task.instruction;
        break;
      }
      case "observation": {
        const obs = e.obs as { instruction?: unknown } | undefined;
        if (typeof obs?.instruction === "string") this.instruction = obs.instruction;
        break;
      }
      case "agent.chunk": {
        const at = num(e.requested_at);
        if (at !== null) this.mark(at).chunkStart = true;
        break;
      }
      case "safety.review":
        this.review =
          e.approved === false || e.modified === true ? (Array.isArray(e.reasons) ? e.reasons.map(String) : []) : null;
        break;
      case "action": {
        const step = num(e.step);
        if (step !== null && this.review) this.mark(step).intervention = this.review.length ? this.review : ["changed"];
        this.review = null;
        break;
      }
      case "step.result": {
        const step = num(e.step);
        if (step === null) break;
        const mark = this.mark(step);
        mark.reward = num(e.reward);
        mark.success = e.success === true;
        this.resulted.push(step);
        if (this.resulted.length > MAX_STEPS) {
          const gone = this.resulted.shift() ?? -1;
          this.steps.delete(gone);
          this.publishedMarks.delete(gone);
        }
        break;
      }
      case "container.checkpoint": {
        const step = num(e.step);
        if (step !== null && e.values && typeof e.values === "object") {
          this.checkpoints.set(step, e.values as Record<string, unknown>);
          if (this.checkpoints.size > MAX_CHECKPOINTS) this.checkpoints.delete(this.checkpoints.keys().next().value ?? -1);
        }
        break;
      }
      default:
        relevant = false;
    }
    if (relevant) this.changed = true;
  }

  /** An immutable view of the execution (the same object while nothing changed). */
  snapshot(): Execution {
    if (!this.changed) return this.published;
    this.changed = false;
    for (const step of this.touched) {
      const mark = this.steps.get(step);
      if (mark) this.publishedMarks.set(step, { ...mark });
    }
    this.touched.clear();
    const steps: StepMark[] = [];
    for (const step of this.resulted) {
      const mark = this.publishedMarks.get(step);
      if (mark) steps.push(mark);
    }
    steps.sort((a, b) => a.step - b.step);
    this.published = {
      episodeId: this.episodeId,
      steps,
      checkpoints: new Map(this.checkpoints),
      instruction: this.instruction,
    };
    return this.published;
  }

  /** The mark of `step`, to be changed (it is copied into the next snapshot). */
  private mark(step: number): StepMark {
    this.touched.add(step);
    let found = this.steps.get(step);
    if (!found) {
      found = { step, reward: null, success: false, intervention: null, chunkStart: false };
      this.steps.set(step, found);
    }
    return found;
  }
}

/** The checkpoint at `step`, else the latest one before it. */
export function checkpointAt(
  checkpoints: Map<number, Record<string, unknown>>,
  step: number | null,
): { step: number; values: Record<string, unknown> } | null {
  let best: number | null = null;
  for (const at of checkpoints.keys()) {
    if ((step === null || at <= step) && (best === null || at > best)) best = at;
  }
  return best === null ? null : { step: best, values: checkpoints.get(best) ?? {} };
}

/** The step an event is about, when it says. */
export function stepOf(e: TraceEvent): number | null {
  return num(e.step) ?? num(e.requested_at);
}
