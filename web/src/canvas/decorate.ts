// What the canvas draws from its state: each node with its ports (those of its type and config, plus any port an
// edge names that the type lacks, so that no edge is lost), its problems (on the ports they name) and its state in
// the run beside the canvas, the loop region behind the loop band, and why a connection is refused.
import type { Connection, Edge } from "@xyflow/react";
import {
  edgeSpecs,
  loopBand,
  nodeSpecs,
  regionNode,
  type CanvasNode,
  type HyloNode,
  type NodeRun,
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

/** The ports a problem's message names (`input 'action'`, `output 'chunk'`, `takes 'result' from`), by side. */
function portsNamed(message: string): { inputs: Set<string>; outputs: Set<string> } {
  const named = { inputs: new Set<string>(), outputs: new Set<string>() };
  for (const match of message.matchAll(/\b(input|output|takes) '([^']+)'/g)) {
    (match[1] === "output" ? named.outputs : named.inputs).add(match[2]);
  }
  return named;
}

/** `ports`, each with the messages of the problems that name it. */
function withProblems(ports: PortView[], problems: readonly Problem[], side: "inputs" | "outputs"): PortView[] {
  if (!problems.length) return ports;
  const named = problems.map((problem) => ({ message: problem.message, ports: portsNamed(problem.message)[side] }));
  return ports.map((port) => {
    const messages = named.filter((entry) => entry.ports.has(port.name)).map((entry) => entry.message);
    return messages.length ? { ...port, problem: messages.join("; ") } : port;
  });
}

export function decorate(
  nodes: readonly HyloNode[],
  edges: readonly Edge[],
  schemas: ReadonlyMap<string, NodeTypeSchema> | null,
  problems: readonly Problem[],
  runs: Readonly<Record<string, NodeRun>> | null = null,
): { display: CanvasNode[]; views: Map<string, NodeView> } {
  const specs = nodeSpecs(nodes);
  const views = new Map<string, NodeView>();
  const decorated = nodes.map((node, i): HyloNode => {
    const schema = schemas?.get(node.data.nodeType);
    const ports = portsOf(specs[i], schema, specs);
    const mine = problems.filter((problem) => problem.node === node.id);
    const inputs = withEdgePorts(
      ports.inputs,
      edges.filter((edge) => edge.target === node.id).map((edge) => edge.targetHandle ?? ""),
    );
    const outputs = withEdgePorts(
      ports.outputs,
      edges.filter((edge) => edge.source === node.id).map((edge) => edge.sourceHandle ?? ""),
    );
    const view: NodeView = {
      schema,
      unknown: schemas !== null && schema === undefined,
      inputs: withProblems(inputs, mine, "inputs"),
      outputs: withProblems(outputs, mine, "outputs"),
      problems: mine,
      run: runs ? (runs[node.id] ?? { state: "idle", fires: 0 }) : undefined,
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
