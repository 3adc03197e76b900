// The canvas' model: a graph document turned into React Flow nodes and edges and back, the automatic left-to-right
// layout of a graph that has none, and the loop band (iterIn, the body, iterOut) drawn as a shaded region.
import type { Edge, Node } from "@xyflow/react";
import type { EdgeSpec, GraphDocument, NodeSpec, NodeTypeSchema, PortSchema, Problem, XY } from "./types";

export type PortView = PortSchema & { unknown?: boolean };

/** What a node shows besides its id, type and config: computed on each render from the whole graph. */
export type NodeView = {
  schema: NodeTypeSchema | undefined;
  /** The server's catalog is loaded and has no such type. */
  unknown: boolean;
  inputs: PortView[];
  outputs: PortView[];
  problems: Problem[];
};

export type HyloNodeData = { nodeType: string; config: Record<string, unknown>; view?: NodeView };
export type HyloNode = Node<HyloNodeData, "hylo">;
export type RegionNode = Node<{ label: string; count: number }, "loopRegion">;
export type CanvasNode = HyloNode | RegionNode;

export const REGION_ID = "__loop_region__";
export const NODE_SIZE = { width: 200, height: 110 };
const COLUMN = 260;
const ROW = 170;

export function edgeId(edge: EdgeSpec): string {
  return `${edge.source}.${edge.sourceHandle}->${edge.target}.${edge.targetHandle}`;
}

export function toFlowEdge(edge: EdgeSpec): Edge {
  return {
    id: edgeId(edge),
    source: edge.source,
    sourceHandle: edge.sourceHandle,
    target: edge.target,
    targetHandle: edge.targetHandle,
  };
}

function isXY(value: unknown): value is XY {
  if (!value || typeof value !== "object") return false;
  const { x, y } = value as Record<string, unknown>;
  return typeof x === "number" && Number.isFinite(x) && typeof y === "number" && Number.isFinite(y);
}

/** The positions kept in a document's `layout.positions`, the malformed ones left out. */
export function savedPositions(doc: GraphDocument): Record<string, XY> {
  const raw = doc.layout?.positions;
  if (!raw || typeof raw !== "object") return {};
  const out: Record<string, XY> = {};
  for (const [id, value] of Object.entries(raw as Record<string, unknown>)) {
    if (isXY(value)) out[id] = { x: value.x, y: value.y };
  }
  return out;
}

/** Left to right by topological level (so the pre-loop band, the loop, the after-loop band follow each other); the
 * nodes of one level stacked. Nodes on a cycle go after the rest. */
export function autoLayout(nodeIds: readonly string[], edges: readonly EdgeSpec[]): Record<string, XY> {
  const known = new Set(nodeIds);
  const preds = new Map<string, string[]>(nodeIds.map((id) => [id, []]));
  const succs = new Map<string, string[]>(nodeIds.map((id) => [id, []]));
  for (const edge of edges) {
    if (!known.has(edge.source) || !known.has(edge.target) || edge.source === edge.target) continue;
    preds.get(edge.target)!.push(edge.source);
    succs.get(edge.source)!.push(edge.target);
  }
  const level = new Map<string, number>();
  const waiting = new Map(nodeIds.map((id) => [id, preds.get(id)!.length]));
  const queue = nodeIds.filter((id) => waiting.get(id) === 0);
  for (const id of queue) level.set(id, 0);
  while (queue.length) {
    const id = queue.shift()!;
    for (const next of succs.get(id)!) {
      level.set(next, Math.max(level.get(next) ?? 0, level.get(id)! + 1));
      waiting.set(next, waiting.get(next)! - 1);
      if (waiting.get(next) === 0) queue.push(next);
    }
  }
  const last = Math.max(-1, ...level.values()) + 1;
  const rows = new Map<number, number>();
  const out: Record<string, XY> = {};
  for (const id of nodeIds) {
    const column = level.get(id) ?? last;
    const row = rows.get(column) ?? 0;
    rows.set(column, row + 1);
    out[id] = { x: column * COLUMN, y: row * ROW };
  }
  return out;
}

/** A document's nodes and edges for React Flow: saved positions, and the automatic layout for nodes without one. */
export function toFlow(doc: GraphDocument): { nodes: HyloNode[]; edges: Edge[] } {
  const saved = savedPositions(doc);
  const ids = doc.nodes.map((node) => node.id);
  const auto = ids.every((id) => saved[id]) ? {} : autoLayout(ids, doc.edges);
  const nodes = doc.nodes.map(
    (node): HyloNode => ({
      id: node.id,
      type: "hylo",
      position: saved[node.id] ?? auto[node.id] ?? { x: 0, y: 0 },
      data: { nodeType: node.type, config: { ...(node.config ?? {}) } },
    }),
  );
  return { nodes, edges: doc.edges.map(toFlowEdge) };
}

export function nodeSpecs(nodes: readonly HyloNode[]): NodeSpec[] {
  return nodes.map((node) => ({ id: node.id, type: node.data.nodeType, config: node.data.config }));
}

export function edgeSpecs(edges: readonly Edge[]): EdgeSpec[] {
  return edges.map((edge) => ({
    source: edge.source,
    sourceHandle: edge.sourceHandle ?? "",
    target: edge.target,
    targetHandle: edge.targetHandle ?? "",
  }));
}

/** The document to save: `base`'s other fields as they came, the canvas' nodes, edges and positions. */
export function toDocument(base: GraphDocument, name: string, nodes: readonly HyloNode[], edges: readonly Edge[]) {
  const positions: Record<string, XY> = {};
  for (const node of nodes) positions[node.id] = { x: Math.round(node.position.x), y: Math.round(node.position.y) };
  const doc: GraphDocument = {
    ...base,
    name,
    nodes: nodeSpecs(nodes),
    edges: edgeSpecs(edges),
    layout: { ...(base.layout ?? {}), positions },
  };
  return doc;
}

function reach(start: string, succs: Map<string, string[]>, stop?: string): Set<string> {
  const seen = new Set([start]);
  const stack = [start];
  while (stack.length) {
    const id = stack.pop()!;
    if (id === stop) continue;
    for (const next of succs.get(id) ?? []) {
      if (!seen.has(next)) {
        seen.add(next);
        stack.push(next);
      }
    }
  }
  return seen;
}

/** The ids of the loop band: the paired iterIn and iterOut and the body between them (as the compiler bands it);
 * empty when the graph has no paired loop. */
export function loopBand(nodes: readonly NodeSpec[], edges: readonly EdgeSpec[], roleOf: (type: string) => string) {
  const loopIn = nodes.find((node) => roleOf(node.type) === "loop_in");
  const loopOut = nodes.find((node) => node.id === loopIn?.config?.pair && roleOf(node.type) === "loop_out");
  if (!loopIn || !loopOut) return new Set<string>();
  const succs = new Map<string, string[]>();
  for (const edge of edges) succs.set(edge.source, [...(succs.get(edge.source) ?? []), edge.target]);
  const post = reach(loopOut.id, succs);
  post.delete(loopOut.id);
  const body = reach(loopIn.id, succs, loopOut.id);
  body.add(loopOut.id);
  for (const id of post) body.delete(id);
  return body;
}

/** The shaded rectangle behind the loop band's nodes, or null when there is no loop. */
export function regionNode(nodes: readonly HyloNode[], band: ReadonlySet<string>): RegionNode | null {
  const inside = nodes.filter((node) => band.has(node.id));
  if (!inside.length) return null;
  const pad = 24;
  const top = 30;
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  for (const node of inside) {
    const width = node.measured?.width ?? NODE_SIZE.width;
    const height = node.measured?.height ?? NODE_SIZE.height;
    minX = Math.min(minX, node.position.x);
    minY = Math.min(minY, node.position.y);
    maxX = Math.max(maxX, node.position.x + width);
    maxY = Math.max(maxY, node.position.y + height);
  }
  const width = maxX - minX + 2 * pad;
  const height = maxY - minY + pad + top;
  return {
    id: REGION_ID,
    type: "loopRegion",
    position: { x: minX - pad, y: minY - top },
    width,
    height,
    style: { width, height },
    data: { label: "loop", count: inside.length },
    draggable: false,
    selectable: false,
    focusable: false,
    deletable: false,
    connectable: false,
    zIndex: -1,
  };
}

/** An id for a new node of `type`: its last dotted part, numbered when taken. */
export function freshId(type: string, taken: ReadonlySet<string>): string {
  const base = (type.split(".").pop() || "node").replace(/[^A-Za-z0-9_-]/g, "_");
  if (!taken.has(base)) return base;
  for (let i = 2; ; i++) if (!taken.has(`${base}_${i}`)) return `${base}_${i}`;
}

/** A free spot near `at`: moved down until it overlaps no node. */
export function freeSpot(at: XY, nodes: readonly HyloNode[]): XY {
  const spot = { x: Math.round(at.x - NODE_SIZE.width / 2), y: Math.round(at.y - NODE_SIZE.height / 2) };
  const overlaps = () =>
    nodes.some((node) => {
      const width = node.measured?.width ?? NODE_SIZE.width;
      const height = node.measured?.height ?? NODE_SIZE.height;
      return (
        spot.x < node.position.x + width + 20 &&
        spot.x + NODE_SIZE.width + 20 > node.position.x &&
        spot.y < node.position.y + height + 20 &&
        spot.y + NODE_SIZE.height + 20 > node.position.y
      );
    });
  for (let i = 0; i < 50 && overlaps(); i++) spot.y += 40;
  return spot;
}
