// The design part of an A/B record (`hylo ab --design`, `--min-effect`) and how the page words it.
import type { ABRecord } from "./types";

/** An A/B record with its design: records made before the designs lack these fields (anytime, no δ). */
export interface ABDesignRecord extends Omit<ABRecord, "confidence_sequence_kind"> {
  /** "test": the anytime test's own interval; "anytime": the anytime interval beside a capped design; "betting":
   * a record made before, whose separate interval may contain 0 though the test decided. */
  confidence_sequence_kind: "test" | "anytime" | "betting";
  design?: "anytime" | "capped";
  /** δ of the futility stop ("no difference ≥ δ"); null: none. */
  min_effect?: number | null;
  /** "efficacy", "futility", "curtailment" (capped: no rejection reachable by the cap), "cap", or null. */
  stopped_for?: string | null;
  extendable?: boolean;
  /** B's lead (b_wins − a_wins) after each scored pair. */
  lead_path?: number[];
  /** The |lead| that decided at each pair (null where none could). */
  efficacy_boundary?: (number | null)[];
  /** The |lead| below which it stopped for futility at each pair (null where it could not). */
  futility_boundary?: (number | null)[];
}

/** The design in one line, as `hylo ab` prints it. */
export function designNote(r: ABDesignRecord): string {
  const delta = r.min_effect ?? null;
  const futility = delta !== null ? `, futility at δ = ${delta}` : ", no futility stop (no --min-effect)";
  if (r.design === "capped") {
    return `capped at ${r.max_pairs} pairs${futility}; valid up to the cap only: this capped record cannot be extended with a larger --max-episodes`;
  }
  return `anytime${futility}; valid whenever it stops, and a larger --max-episodes extends it`;
}

/** Why the comparison stopped, in words. */
export function stoppedFor(r: ABDesignRecord): string {
  switch (r.stopped_for) {
    case "efficacy":
      return "the test decided";
    case "futility":
      return `a difference of ${r.min_effect} or more became unlikely (futility)`;
    case "curtailment":
      return `no decision was reachable within ${r.max_pairs} pairs any more (curtailed)`;
    case "cap":
      return `every pair allowed (${r.max_pairs}) is in`;
    default:
      return "—";
  }
}
