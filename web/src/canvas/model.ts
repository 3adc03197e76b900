// The canvas' model: a graph document turned into React Flow nodes and edges and back (laid out left to right when it
// has no saved positions), and the loop band (iterIn, the body, iterOut) drawn as a shaded region.
import { MarkerType, type Edge, type Node } from "@xyflow/react";
import { layered } from "./layout";
import type { EdgeSpec, GraphDocument, NodeSpec, NodeTypeSchema, PortSchema, Problem, XY } from "./types";

/** A port as a node shows it: `unknown` when its type lacks it, `problem` the messages of the problems naming it. */
export type PortView = PortSchema & { unknown?: boolean; problem?: string };

/** What a node shows besides its id, type and config: computed on each render from the whole graph. */
export type NodeView = {
  schema: NodeTypeSchema | undefined;
  /** The server's catalog is loaded and has no such type. */
  unknown: boolean;
  inputs: PortView[];
  outputs: PortView[];
  problems: Problem[];
  /** The node's state in the canvas' run, when one is shown. */
  run?: NodeRun;
};

/** Where a node stands in the run shown beside the canvas (the server's `graph.nodes` events). */
export type NodeRunState = "idle" | "firing" | "done" | "failed";
export type NodeRun = { state: NodeRunState; fires: number };

export type HyloNodeData = { nodeType: string; config: Record<string, unknown>; view?: NodeView };
export type HyloNode = Node<HyloNodeData, "hylo">;
export type RegionNode = Node<{ label: string; count: number }, "loopRegion">;
export type CanvasNode = HyloNode | RegionNode;

export const REGION_ID = "__loop_region__";
/** A node's size before it is measured (its width is canvas.css'; its height depends on its ports). */
export const NODE_SIZE = { width: 180, height: 130 };

/** The colour of edges and their arrowheads. */
export const EDGE_COLOR = "#5b6577";

/** The arrowhead at an edge's target (in flow pixels, not in multiples of the edge's width). */
const ARROWHEAD = {
  type: MarkerType.ArrowClosed,
  width: 28,
  height: 28,
  color: EDGE_COLOR,
  markerUnits: "userSpaceOnUse",
};

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
    markerEnd: ARROWHEAD,
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

/** A document's nodes and edges for React Flow: saved positions, and the automatic layout when a node has none
 (`laidOut`: the canvas lays it out again once the nodes are measured). */
export function toFlow(doc: GraphDocument): { nodes: HyloNode[]; edges: Edge[]; laidOut: boolean } {
  const saved = savedPositions(doc);
  const ids = doc.nodes.map((node) => node.id);
  const laidOut = !ids.every((id) => saved[id]);
  const auto = laidOut ? layered(ids.map((id) => ({ id, ...NODE_SIZE })), doc.edges) : {};
  const nodes = doc.nodes.map(
    (node): HyloNode => ({
      id: node.id,
      type: "hylo",
      position: saved[node.id] ?? auto[node.id] ?? { x: 0, y: 0 },
      data: { nodeType: node.type, config: { ...(node.config ?? {}) } },
    }),
  );
  return { nodes, edges: doc.edges.map(toFlowEdge), laidOut };
}

/** The nodes moved to the automatic layout, at their measured sizes. */
export function laidOutNodes(nodes: readonly HyloNode[], edges: readonly Edge[]): HyloNode[] {
  const boxes = nodes.map((node) => ({
    id: node.id,
    width: node.measured?.width ?? NODE_SIZE.width,
    height: node.measured?.height ?? NODE_SIZE.height,
  }));
  const placed = layered(boxes, edgeSpecs(edges));
  return nodes.map((node) => ({ ...node, position: placed[node.id] ?? node.position }));
}

/** What the unsaved-changes guard compares: the nodes (type, config, position) and the edges. */
export function contentKey(nodes: readonly HyloNode[], edges: readonly Edge[]): string {
  const positions = nodes.map((node) => [Math.round(node.position.x), Math.round(node.position.y)]);
  return JSON.stringify([nodeSpecs(nodes), positions, edgeSpecs(edges)]);
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
