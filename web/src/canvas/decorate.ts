// What the canvas draws from its state: each node with its ports (those of its type and config, plus any port an
// edge names that the type lacks, so that no edge is lost) and its problems, the loop region behind the loop band,
// and why a connection is refused.
import type { Connection, Edge } from "@xyflow/react";
import {
  edgeSpecs,
  loopBand,
  nodeSpecs,
  regionNode,
  type CanvasNode,
  type HyloNode,
  type NodeView,
  type PortView,
} from "./model";
import type { NodeTypeSchema, Problem, Widening } from "./types";
import { fits, portsOf } from "./wires";

function withEdgePorts(ports: PortView[], names: string[]): PortView[] {
  const have = new Set(ports.map((port) => port.name));
  const extra = [...new Set(names)].filter((name) => name && !have.has(name));
  return [...ports, ...extra.map((name) => ({ name, wire: "any", required: false, unknown: true }))];
}

export function decorate(
  nodes: readonly HyloNode[],
  edges: readonly Edge[],
  schemas: ReadonlyMap<string, NodeTypeSchema> | null,
  problems: readonly Problem[],
): { display: CanvasNode[]; views: Map<string, NodeView> } {
  const specs = nodeSpecs(nodes);
  const views = new Map<string, NodeView>();
  const decorated = nodes.map((node, i): HyloNode => {
    const schema = schemas?.get(node.data.nodeType);
    const ports = portsOf(specs[i], schema, specs);
    const view: NodeView = {
      schema,
      unknown: schemas !== null && schema === undefined,
      inputs: withEdgePorts(
        ports.inputs,
        edges.filter((edge) => edge.target === node.id).map((edge) => edge.targetHandle ?? ""),
      ),
      outputs: withEdgePorts(
        ports.outputs,
        edges.filter((edge) => edge.source === node.id).map((edge) => edge.sourceHandle ?? ""),
      ),
      problems: problems.filter((problem) => problem.node === node.id),
    };
    views.set(node.id, view);
    return { ...node, data: { ...node.data, view } };
  });
  const band = loopBand(specs, edgeSpecs(edges), (type) => schemas?.get(type)?.role ?? "");
  const region = regionNode(nodes, band);
  return { display: region ? [region, ...decorated] : decorated, views };
}

/** Why `connection` may not be drawn (a readable line), or null when it may. */
export function refusal(
  connection: Connection | Edge,
  views: ReadonlyMap<string, NodeView>,
  edges: readonly Edge[],
  widens: Widening,
): string | null {
  const { source, target, sourceHandle, targetHandle } = connection;
  if (source === target) return `refused: ${source} cannot feed itself`;
  const out = views.get(source)?.outputs.find((port) => port.name === sourceHandle);
  const into = views.get(target)?.inputs.find((port) => port.name === targetHandle);
  if (!out || !into) return null;
  if (!fits(out.wire, into.wire, widens)) {
    const from = `\`${out.name}\` (${out.wire}) of ${source}`;
    return `refused: ${from} cannot feed \`${into.name}\` (${into.wire}) of ${target}`;
  }
  const taken = edges.find((edge) => edge.target === target && edge.targetHandle === targetHandle);
  if (taken) {
    const feeder = `${taken.source}.${taken.sourceHandle}`;
    return `refused: \`${into.name}\` of ${target} is already fed by ${feeder} (an input takes one edge: delete that one first)`;
  }
  return null;
}
