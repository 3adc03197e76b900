// Where the canvas puts a graph's nodes and how far it zooms out: a layered left-to-right layout (dagre) for a graph
// without saved positions or on "Layout", and a fit that never shrinks the nodes' text below a readable size.
import dagre from "@dagrejs/dagre";
import type { Rect, Viewport } from "@xyflow/react";
import type { EdgeSpec, XY } from "./types";

/** The smallest font of a node's text (canvas.css), in flow pixels. */
export const NODE_MIN_FONT_PX = 15;

/** The smallest text a user should have to read on screen, in CSS pixels. */
export const READABLE_TEXT_PX = 11;

/** The least zoom a fit uses: the nodes' smallest text stays at READABLE_TEXT_PX on screen. A graph too wide for the
 * view at this zoom is shown from its start (its left edge), the rest a pan (or the minimap) away. */
export const READABLE_ZOOM = Math.ceil((READABLE_TEXT_PX / NODE_MIN_FONT_PX) * 100) / 100;

export const FIT_PADDING = 24;
const MAX_FIT_ZOOM = 1.2;

export type Box = { id: string; width: number; height: number };

/** Top-left positions for `boxes`, layered left to right along the edges (sources left of their targets), each
 * layer's nodes stacked and ordered to keep edges from crossing. Edges to unknown nodes or to themselves are left
 * out. */
export function layered(boxes: readonly Box[], edges: readonly EdgeSpec[]): Record<string, XY> {
  const graph = new dagre.graphlib.Graph({ multigraph: true });
  graph.setGraph({ rankdir: "LR", nodesep: 36, ranksep: 56, marginx: 0, marginy: 0 });
  graph.setDefaultEdgeLabel(() => ({}));
  const known = new Set(boxes.map((box) => box.id));
  for (const box of boxes) graph.setNode(box.id, { width: box.width, height: box.height });
  edges.forEach((edge, i) => {
    if (known.has(edge.source) && known.has(edge.target) && edge.source !== edge.target) {
      graph.setEdge(edge.source, edge.target, {}, `e${i}`);
    }
  });
  dagre.layout(graph);
  const out: Record<string, XY> = {};
  for (const box of boxes) {
    const placed = graph.node(box.id);
    out[box.id] = { x: Math.round(placed.x - box.width / 2), y: Math.round(placed.y - box.height / 2) };
  }
  return out;
}

/** The viewport showing `bounds` (flow coordinates) in a `width` x `height` view: the whole of it when that keeps
 * the text readable, else at READABLE_ZOOM from its left edge, centred vertically where it fits. */
export function readableViewport(bounds: Rect, width: number, height: number): Viewport {
  const room = { width: Math.max(1, width - 2 * FIT_PADDING), height: Math.max(1, height - 2 * FIT_PADDING) };
  const whole = Math.min(room.width / Math.max(1, bounds.width), room.height / Math.max(1, bounds.height));
  const zoom = Math.min(MAX_FIT_ZOOM, Math.max(READABLE_ZOOM, whole));
  const shown = { width: bounds.width * zoom, height: bounds.height * zoom };
  const x = shown.width <= room.width ? (width - shown.width) / 2 : FIT_PADDING;
  const y = shown.height <= room.height ? (height - shown.height) / 2 : FIT_PADDING;
  return { x: x - bounds.x * zoom, y: y - bounds.y * zoom, zoom };
}
