// What the catalog serves (`/api/graphs`, `/api/agents`), shaped as the server's models
// (`hylo.graph.store.GraphSummary`, `hylo.agents.registry.AgentInfo`), for every place that lists graphs or agents.

/** One graph of `GET /api/graphs`: a saved graph or a built-in example. `error` says why a saved file cannot be read
 * (its other fields are then empty). */
export interface GraphSummary {
  name: string;
  description: string;
  placement: { benchmark: string; split: string | null; task: string | null } | null;
  nodes: number;
  builtin: boolean;
  shadows_builtin: boolean;
  modified: number | null;
  error: string | null;
}

/** One registered agent of `GET /api/agents`; `available` is false, with the `reason`, when it cannot load here. */
export interface AgentInfo {
  name: string;
  description: string;
  available: boolean;
  reason: string | null;
}
