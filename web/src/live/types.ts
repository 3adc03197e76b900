// The shapes the live surface of `hylo serve` answers with (docs/live.md): env panels, sessions, stream messages
// and the trace events the view reads.
import type { TraceEvent } from "../trace";

export type FieldKind = "select" | "number" | "text" | "slider";
export type EnabledWhen = "idle" | "running" | "paused" | "not_running" | "active" | "always";
export type SessionState = "starting" | "idle" | "running" | "paused" | "closing" | "closed" | "failed";

export interface PanelField {
  name: string;
  kind: FieldKind;
  label: string;
  options: unknown[] | null;
  min: number | null;
  max: number | null;
  step: number | null;
  dynamic: boolean;
  help: string;
  moves_episode: boolean;
}

export interface PanelAction {
  name: string;
  label: string;
  side_effect: "run_start" | "run_pause" | "run_stop" | "run_step" | "signal" | "none";
  enabled_when: EnabledWhen;
  signal_name: string | null;
}

export interface PanelContext {
  mode: "local" | "server";
  server_url: string | null;
  nodeset_name: string | null;
}

/** A row of `GET /api/env-panels`. */
export interface PanelSummary {
  name: string;
  display_name: string;
  context: PanelContext;
  session: string | null;
  state: SessionState;
}

/** `GET /api/env-panels/{name}`: the declaration, `on_load()` as `state`, and the session it belongs to. */
export interface PanelInfo {
  name: string;
  display_name: string;
  fields: PanelField[];
  actions: PanelAction[];
  context: PanelContext;
  state: Record<string, unknown>;
  session: SessionInfo | null;
}

export interface Outcome {
  status: string;
  success: boolean;
  steps: number;
  reason: string;
  safety_interventions: number;
  detail: unknown;
  metrics?: Record<string, unknown>;
}

export interface FrameRef {
  number: number;
  step: number;
  camera: string;
  url: string;
}

/** The brief state each stream update carries. */
export interface SessionBrief {
  id: string;
  state: SessionState;
  step: number;
  episode_id: string | null;
  executions: number;
  last_outcome: Outcome | null;
  frame: FrameRef | null;
}

/** `GET /api/sessions/{id}`. */
export interface SessionInfo extends SessionBrief {
  benchmark: string;
  graph: string;
  agent: string | null;
  panel: string | null;
  last_execution: { episode_id: string; steps: number; wall_s: number; steps_per_s: number | null } | null;
  containers: Record<string, unknown>;
  events: number;
  error: string | null;
}

export type StreamMessage =
  | { type: "hello"; session: SessionInfo }
  | { type: "update"; position: number; dropped: number; events: TraceEvent[]; session: SessionBrief };
