// The shapes the canvas exchanges with `hylo serve`: node-type schemas (`GET /api/nodes`), graph summaries and
// documents (`/api/graphs`), and the per-node problems of a refused save (422).

/** The subset of JSON Schema the config form understands (pydantic's output). */
export type JsonSchema = {
  type?: string | string[];
  enum?: unknown[];
  $ref?: string;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  $defs?: Record<string, JsonSchema>;
  title?: string;
  description?: string;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  pattern?: string;
};

export type PortSchema = {
  name: string;
  wire: string;
  required: boolean;
  description?: string;
};

export type NodeTypeSchema = {
  type: string;
  nodeset: string;
  description: string;
  role: string;
  owner: string;
  inputs: PortSchema[];
  outputs: PortSchema[];
  dynamic_ports: boolean;
  config: JsonSchema | null;
  async: boolean;
};

export type NodesetSchemas = {
  nodeset: string;
  owner: string;
  description: string;
  nodes: NodeTypeSchema[];
};

/** For each wire, the other wires its values may go to. */
export type Widening = Record<string, readonly string[]>;

export type NodesAnswer = {
  nodesets: NodesetSchemas[];
  unavailable: { nodeset: string; reason: string }[];
  widens: Widening;
};

export type NodeSpec = { id: string; type: string; config?: Record<string, unknown> };

export type EdgeSpec = { source: string; sourceHandle: string; target: string; targetHandle: string; id?: string };

export type XY = { x: number; y: number };

/** A graph document as the server sends and takes it; the fields the canvas does not edit are kept as they came. */
export type GraphDocument = {
  version?: number;
  name?: string;
  description?: string;
  placement?: Record<string, unknown>;
  step_budget?: number;
  nodes: NodeSpec[];
  edges: EdgeSpec[];
  containers?: unknown[];
  nodesets?: Record<string, unknown>;
  layout?: Record<string, unknown>;
};

/** One problem of a refused graph: the node at fault (null for the graph as a whole), the rule and its message. */
export type Problem = { node: string | null; rule: string; message: string };

export function isProblemList(detail: unknown): detail is Problem[] {
  return (
    Array.isArray(detail) &&
    detail.every(
      (item) =>
        item !== null && typeof item === "object" && typeof (item as Problem).rule === "string" &&
        typeof (item as Problem).message === "string",
    )
  );
}
