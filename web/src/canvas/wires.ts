// Wire types and ports: which wire may feed which (the server's `hylo.graph.wires.fits`, with the widening table
// `GET /api/nodes` serves), and the ports a node has given its type, its config and, for an iterIn, the carry ports
// of its paired iterOut.
import type { NodeSpec, NodeTypeSchema, PortSchema, Widening } from "./types";

/** Whether a value on a `source` wire may feed a `target` port: equal wires, `any` on either side, or a widening. */
export function fits(source: string, target: string, widens: Widening): boolean {
  if (source === target || source === "any" || target === "any") return true;
  return (widens[source] ?? []).includes(target);
}

type Carry = { name: string; wire: string };

function carryOf(config: Record<string, unknown> | undefined): Carry[] {
  const raw = config?.carry;
  if (!Array.isArray(raw)) return [];
  return raw.flatMap((item): Carry[] => {
    if (!item || typeof item !== "object") return [];
    const { name, wire } = item as { name?: unknown; wire?: unknown };
    return typeof name === "string" && name ? [{ name, wire: typeof wire === "string" ? wire : "any" }] : [];
  });
}

export type Ports = { inputs: PortSchema[]; outputs: PortSchema[] };

/** The ports of `node` (as the server's compiler computes them); `nodes` is the whole graph, for iterIn's pair. */
export function portsOf(node: NodeSpec, schema: NodeTypeSchema | undefined, nodes: readonly NodeSpec[]): Ports {
  if (!schema) return { inputs: [], outputs: [] };
  const config = node.config ?? {};
  if (schema.role === "loop_out") {
    const carry = carryOf(config);
    return {
      inputs: [...schema.inputs, ...carry.map((c) => ({ name: c.name, wire: c.wire, required: true }))],
      outputs: [...schema.outputs, ...carry.map((c) => ({ name: `final_${c.name}`, wire: c.wire, required: false }))],
    };
  }
  if (schema.role === "loop_in") {
    const partner = nodes.find((other) => other.id === config.pair);
    const carry = carryOf(partner?.config);
    return {
      inputs: [...schema.inputs, ...carry.map((c) => ({ name: `init_${c.name}`, wire: c.wire, required: false }))],
      outputs: [...schema.outputs, ...carry.map((c) => ({ name: c.name, wire: c.wire, required: false }))],
    };
  }
  if (schema.type === "constant") {
    const wire = typeof config.wire === "string" ? config.wire : "json";
    return { inputs: [], outputs: [{ name: "value", wire, required: true }] };
  }
  return { inputs: schema.inputs, outputs: schema.outputs };
}
