// The canvas (`#/canvas`, `#/canvas/<graph>`): open a saved graph or an example (laid out left to right when it has
// no saved positions, fitted at a readable zoom), edit it with React Flow (palette, typed ports, config forms),
// validate it on the server and save it, with the server's problems shown on their nodes and ports, and run it beside
// the canvas: each node's state and each edge's last value shown as the run goes. Edits not saved are guarded: leaving
// the page or opening another graph asks first.
import {
  applyEdgeChanges,
  applyNodeChanges,
  Background,
  Controls,
  MiniMap,
  ReactFlow,
  ReactFlowProvider,
  useReactFlow,
  type Connection,
  type Edge,
  type EdgeChange,
  type NodeChange,
  type OnConnectEnd,
} from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import {
  useCallback,
  useEffect,
  useMemo,
  useRef,
  useState,
  type DragEvent,
  type MouseEvent as ReactMouseEvent,
} from "react";
import { api, ApiError, errorMessage } from "../api";
import type { GraphSummary } from "../catalog";
import { href, navigate, type Route } from "../router";
import "./canvas.css";
import { decorate, refusal } from "./decorate";
import { GraphNode, LoopRegion } from "./GraphNode";
import { DISCARD, useLeaveGuard } from "./guard";
import { READABLE_ZOOM, readableViewport } from "./layout";
import {
  contentKey,
  freeSpot,
  freshId,
  laidOutNodes,
  NODE_SIZE,
  REGION_ID,
  toDocument,
  toFlow,
  toFlowEdge,
  type CanvasNode,
  type HyloNode,
  type NodeRun,
} from "./model";
import { DRAG_TYPE, Palette } from "./Palette";
import { latestReport, useCanvasRun } from "./run";
import { RunPanel } from "./RunPanel";
import { Inspector, ProblemsPanel, type ProblemsSource } from "./SidePanel";
import { Toolbar, type Notice } from "./Toolbar";
import {
  isProblemList,
  type GraphDocument,
  type NodesAnswer,
  type NodeTypeSchema,
  type Problem,
  type Widening,
  type XY,
} from "./types";

const NODE_TYPES = { hylo: GraphNode, loopRegion: LoopRegion };
const DELETE_KEYS = ["Backspace", "Delete"];

function miniMapColor(node: CanvasNode): string {
  return node.type === "loopRegion" ? "rgba(47, 111, 237, 0.12)" : "#b8c2d3";
}

function emptyGraph(): GraphDocument {
  return { version: 1, nodes: [], edges: [], containers: [], nodesets: {}, layout: {} };
}

const NO_WIDENING: Widening = {};
const NO_RUNS: Record<string, NodeRun> = {};

/** The name a graph without one is checked and run under. */
const UNSAVED = "unsaved";

/** The server's validation of a graph document (`POST /api/graphs/validate`). */
type Validation = { valid: boolean; problems: Problem[] };

function plural(count: number, what: string): string {
  return `${count} ${what}${count === 1 ? "" : "s"}`;
}

export function CanvasPage({ route }: { route: Route }) {
  return (
    <ReactFlowProvider>
      <CanvasEditor graphName={route.parts[1] ?? ""} />
    </ReactFlowProvider>
  );
}

/** The node types of `GET /api/nodes` (null until they come; an empty map when they could not be had, with why:
 * kept apart from the notices of loads and saves, which would otherwise replace it). */
function useCatalog() {
  const [catalog, setCatalog] = useState<NodesAnswer | null>(null);
  const [schemas, setSchemas] = useState<Map<string, NodeTypeSchema> | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    api<NodesAnswer>("/api/nodes")
      .then((answer) => {
        if (cancelled) return;
        setCatalog(answer);
        setSchemas(new Map(answer.nodesets.flatMap((group) => group.nodes.map((node) => [node.type, node] as const))));
      })
      .catch((error: unknown) => {
        if (cancelled) return;
        setSchemas(new Map());
        setProblem(`the node types could not be loaded: ${errorMessage(error)}`);
      });
    return () => {
      cancelled = true;
    };
  }, []);
  return { catalog, schemas, problem };
}

function CanvasEditor({ graphName }: { graphName: string }) {
  const flow = useReactFlow<CanvasNode, Edge>();
  const wrapper = useRef<HTMLDivElement>(null);
  const [notice, setNotice] = useState<Notice | null>(null);
  const { catalog, schemas, problem: catalogProblem } = useCatalog();
  const widens = catalog?.widens ?? NO_WIDENING;
  const [graphs, setGraphs] = useState<GraphSummary[]>([]);
  const [graphsProblem, setGraphsProblem] = useState<string | null>(null);
  const [base, setBase] = useState<GraphDocument>(emptyGraph);
  const [loaded, setLoaded] = useState<string | null>(null);
  const [name, setName] = useState("");
  const [nodes, setNodes] = useState<HyloNode[]>([]);
  const [edges, setEdges] = useState<Edge[]>([]);
  const [problems, setProblems] = useState<Problem[]>([]);
  const [problemsFrom, setProblemsFrom] = useState<ProblemsSource>("save");
  const [refused, setRefused] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const [checking, setChecking] = useState(false);
  const [opened, setOpened] = useState(0);
  const [savedKey, setSavedKey] = useState(() => contentKey([], []));
  const [hovered, setHovered] = useState<{ id: string; x: number; y: number } | null>(null);
  const loadedRef = useRef<string | null>(null);
  const request = useRef(0);
  const run = useCanvasRun();
  const closeRun = run.close;

  const key = useMemo(() => contentKey(nodes, edges), [nodes, edges]);
  const dirty = key !== savedKey;
  const dirtyRef = useRef(dirty);
  dirtyRef.current = dirty;
  /** The user has agreed to drop the edits for the next graph opened. */
  const confirmed = useRef(false);
  useLeaveGuard(dirty);

  const refreshGraphs = useCallback(() => {
    api<{ graphs: GraphSummary[] }>("/api/graphs")
      .then((answer) => {
        setGraphs(answer.graphs);
        setGraphsProblem(null);
      })
      .catch((error: unknown) => setGraphsProblem(`the list of graphs could not be loaded: ${errorMessage(error)}`));
  }, []);
  useEffect(refreshGraphs, [refreshGraphs]);

  /** Lay the nodes out again once they are measured (a graph opened without saved positions). */
  const layoutPending = useRef(false);
  const open = useCallback(
    (doc: GraphDocument, as: string) => {
      const flowState = toFlow(doc);
      loadedRef.current = as;
      layoutPending.current = flowState.laidOut;
      setLoaded(as);
      setBase(doc);
      setName(as);
      setNodes(flowState.nodes);
      setEdges(flowState.edges);
      setSavedKey(contentKey(flowState.nodes, flowState.edges));
      setProblems([]);
      setRefused(null);
      setOpened((n) => n + 1);
      void closeRun().catch(() => undefined); // its node states belong to the graph left
    },
    [closeRun],
  );

  /** Open `graph` (the empty string: a new one), after asking when the canvas has unsaved edits. */
  const openGraph = (graph: string) => {
    if (dirty && !window.confirm(DISCARD)) return;
    confirmed.current = true;
    navigate(graph ? ["canvas", graph] : ["canvas"]);
  };

  useEffect(() => {
    // Every route change outdates the loads still on their way (A, then B, then back to A before B came: B's answer
    // must not open B under A's address).
    const mine = ++request.current;
    if (loadedRef.current === graphName) return;
    const agreed = confirmed.current;
    confirmed.current = false;
    if (loadedRef.current !== null && dirtyRef.current && !agreed && !window.confirm(DISCARD)) {
      // another address (the browser's Back, a typed one) while the edits are kept: back to the graph shown
      const shown = loadedRef.current;
      location.replace(href(shown ? ["canvas", shown] : ["canvas"]));
      return;
    }
    if (!graphName) {
      open(emptyGraph(), "");
      setNotice(null);
      return;
    }
    api<GraphDocument>(`/api/graphs/${encodeURIComponent(graphName)}`)
      .then((doc) => {
        if (mine !== request.current) return;
        open(doc, graphName);
        setNotice(null);
      })
      .catch((error: unknown) => {
        if (mine !== request.current) return;
        const text = `graph ${JSON.stringify(graphName)} could not be opened: ${errorMessage(error)}`;
        setNotice({ kind: "error", text });
      });
  }, [graphName, open]);

  // Once all its nodes have been measured: lay out a graph opened without positions, then fit it at a readable zoom
  // (on opening a graph, and on Layout).
  const [fitWanted, setFitWanted] = useState(0);
  const fitted = useRef(0);
  /** How many fits have been applied (the flow's `data-fits`: a fitted view is one to measure). */
  const [fits, setFits] = useState(0);
  useEffect(() => setFitWanted((n) => n + 1), [opened]);
  useEffect(() => {
    if (fitWanted === fitted.current || !nodes.length || !nodes.every((node) => node.measured?.width)) return;
    if (layoutPending.current) {
      layoutPending.current = false;
      const laid = laidOutNodes(nodes, edges);
      setNodes(laid);
      setSavedKey(contentKey(laid, edges)); // laid out on opening: not an edit
      return;
    }
    const frame = requestAnimationFrame(() => {
      fitted.current = fitWanted;
      const box = wrapper.current?.getBoundingClientRect();
      if (!box) return;
      const bounds = flow.getNodesBounds(flow.getNodes());
      void flow.setViewport(readableViewport(bounds, box.width, box.height)).then(() => setFits((n) => n + 1));
    });
    return () => cancelAnimationFrame(frame);
  }, [nodes, edges, fitWanted, flow]);

  const layout = () => {
    setNodes((current) => laidOutNodes(current, edges));
    setFitWanted((n) => n + 1);
  };

  const report = useMemo(() => (run.session ? latestReport(run.live.events) : null), [run.session, run.live.events]);
  const runs = useMemo(() => (run.session ? (report?.nodes ?? NO_RUNS) : null), [run.session, report]);
  const values = report?.values;
  const { display, views } = useMemo(
    () => decorate(nodes, edges, schemas, problems, runs),
    [nodes, edges, schemas, problems, runs],
  );
  const shownEdges = useMemo(
    () => (values ? edges.map((edge) => (edge.id in values ? { ...edge, className: "has-value" } : edge)) : edges),
    [edges, values],
  );

  const onNodesChange = useCallback((changes: NodeChange<CanvasNode>[]) => {
    const mine = changes.filter((change) => !("id" in change) || change.id !== REGION_ID);
    if (mine.length) setNodes((current) => applyNodeChanges(mine as NodeChange<HyloNode>[], current));
  }, []);
  const onEdgesChange = useCallback((changes: EdgeChange<Edge>[]) => {
    setEdges((current) => applyEdgeChanges(changes, current));
  }, []);

  const isValidConnection = useCallback(
    (connection: Connection | Edge) => refusal(connection, views, edges, widens) === null,
    [views, edges, widens],
  );
  const onConnect = useCallback(
    (connection: Connection) => {
      const why = refusal(connection, views, edges, widens);
      if (why) return setRefused(why);
      if (!connection.sourceHandle || !connection.targetHandle) return;
      const edge = toFlowEdge({
        source: connection.source,
        sourceHandle: connection.sourceHandle,
        target: connection.target,
        targetHandle: connection.targetHandle,
      });
      setEdges((current) => (current.some((e) => e.id === edge.id) ? current : [...current, edge]));
      setRefused(null);
    },
    [views, edges, widens],
  );
  const onConnectEnd: OnConnectEnd = useCallback(
    (_event, state) => {
      const from = state.fromHandle;
      const to = state.toHandle;
      if (state.isValid !== false || !from || !to) return;
      if (from.type === to.type) {
        const both = from.type === "source" ? "two outputs" : "two inputs";
        setRefused(`refused: ${both} cannot be connected; drag from an output (right) to an input (left)`);
        return;
      }
      const [src, dst] = from.type === "source" ? [from, to] : [to, from];
      const connection: Connection = {
        source: src.nodeId,
        sourceHandle: src.id ?? null,
        target: dst.nodeId,
        targetHandle: dst.id ?? null,
      };
      setRefused(refusal(connection, views, edges, widens) ?? "refused: these ports cannot be connected");
    },
    [views, edges, widens],
  );

  const addNode = useCallback(
    (type: string, at: XY, avoidOverlap: boolean) => {
      setNodes((current) => {
        const id = freshId(type, new Set(current.map((node) => node.id)));
        const position = avoidOverlap
          ? freeSpot(at, current)
          : { x: Math.round(at.x - NODE_SIZE.width / 2), y: Math.round(at.y - 20) };
        const added: HyloNode = { id, type: "hylo", position, data: { nodeType: type, config: {} }, selected: true };
        return [...current.map((node) => (node.selected ? { ...node, selected: false } : node)), added];
      });
      setEdges((current) => current.map((edge) => (edge.selected ? { ...edge, selected: false } : edge)));
    },
    [],
  );
  const addAtCenter = useCallback(
    (type: string) => {
      const box = wrapper.current?.getBoundingClientRect();
      const center = box ? { x: box.left + box.width / 2, y: box.top + box.height / 2 } : { x: 0, y: 0 };
      addNode(type, flow.screenToFlowPosition(center), true);
    },
    [addNode, flow],
  );
  const onDragOver = (event: DragEvent) => {
    if (!event.dataTransfer.types.includes(DRAG_TYPE)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "copy";
  };
  const onDrop = (event: DragEvent) => {
    const type = event.dataTransfer.getData(DRAG_TYPE);
    if (!type) return;
    event.preventDefault();
    addNode(type, flow.screenToFlowPosition({ x: event.clientX, y: event.clientY }), false);
  };

  /** Set (or, with `undefined`, remove) one config key of node `id`, on the nodes as they are now. */
  const setConfigKey = useCallback((id: string, key: string, value: unknown) => {
    setNodes((current) =>
      current.map((node) => {
        if (node.id !== id) return node;
        const config = { ...node.data.config };
        if (value === undefined) delete config[key];
        else config[key] = value;
        return { ...node, data: { ...node.data, config } };
      }),
    );
  }, []);
  const pickNode = useCallback(
    (id: string) => {
      const node = nodes.find((candidate) => candidate.id === id);
      setNodes((current) => current.map((candidate) => ({ ...candidate, selected: candidate.id === id })));
      if (node) {
        const width = node.measured?.width ?? NODE_SIZE.width;
        void flow.setCenter(node.position.x + width / 2, node.position.y + 60, { zoom: flow.getZoom() });
      }
    },
    [nodes, flow],
  );

  /** The open graph as a document (unsaved edits included), named for the server's checks and runs. */
  const currentDocument = () => toDocument(base, name.trim() || loaded || UNSAVED, nodes, edges);

  /** Show the problems the server found (on their nodes and ports, and listed), with what found them. */
  const showProblems = (found: Problem[], from: ProblemsSource) => {
    setProblems(found);
    setProblemsFrom(from);
  };

  const validate = async () => {
    setChecking(true);
    setNotice(null);
    const mine = request.current;
    try {
      const answer = await api<Validation>("/api/graphs/validate", { method: "POST", json: currentDocument() });
      if (mine !== request.current) return;
      showProblems(answer.problems, "check");
      const found = plural(answer.problems.length, "problem");
      setNotice(
        answer.valid
          ? { kind: "info", text: "valid: the server found no problem in this graph" }
          : { kind: "error", text: `invalid: the server found ${found} (listed beside and on the nodes)` },
      );
    } catch (error) {
      if (mine === request.current) setNotice({ kind: "error", text: `not validated: ${errorMessage(error)}` });
    } finally {
      setChecking(false);
    }
  };

  const startRun = async () => {
    setChecking(true);
    setNotice(null);
    try {
      await run.start(currentDocument());
      showProblems([], "run");
    } catch (error) {
      if (error instanceof ApiError && error.status === 422 && isProblemList(error.detail)) {
        showProblems(error.detail, "run");
        const count = plural(error.detail.length, "problem");
        setNotice({ kind: "error", text: `not run: the server found ${count} (listed beside and on the nodes)` });
      } else {
        setNotice({ kind: "error", text: `not run: ${errorMessage(error)}` });
      }
    } finally {
      setChecking(false);
    }
  };

  const runAction = (work: () => Promise<void>) => {
    setChecking(true);
    work()
      .catch((error: unknown) => setNotice({ kind: "error", text: errorMessage(error) }))
      .finally(() => setChecking(false));
  };

  const save = async () => {
    const target = name.trim();
    if (!target) {
      setNotice({ kind: "error", text: "give the graph a name to save it under" });
      return;
    }
    setSaving(true);
    setNotice(null);
    const mine = request.current;
    try {
      const saved = await api<GraphDocument>(`/api/graphs/${encodeURIComponent(target)}`, {
        method: "PUT",
        json: toDocument(base, target, nodes, edges),
      });
      if (mine !== request.current) {
        refreshGraphs(); // another graph was opened meanwhile: the canvas is no longer the one saved
        return;
      }
      setBase(saved);
      setSavedKey(contentKey(nodes, edges));
      setProblems([]);
      setNotice({ kind: "info", text: `saved as ${target}` });
      loadedRef.current = target;
      setLoaded(target);
      refreshGraphs();
      if (graphName !== target) navigate(["canvas", target]);
    } catch (error) {
      if (mine !== request.current) return;
      if (error instanceof ApiError && error.status === 422 && isProblemList(error.detail)) {
        const count = error.detail.length;
        showProblems(error.detail, "save");
        setNotice({
          kind: "error",
          text: `not saved: the server found ${count} problem${count === 1 ? "" : "s"} (listed below and on the nodes)`,
        });
      } else {
        setNotice({ kind: "error", text: `not saved: ${errorMessage(error)}` });
      }
    } finally {
      setSaving(false);
    }
  };

  const hover = (event: ReactMouseEvent, edge: Edge) => {
    const box = wrapper.current?.getBoundingClientRect();
    if (box) setHovered({ id: edge.id, x: event.clientX - box.left, y: event.clientY - box.top });
  };

  const selectedNode = display.find((node): node is HyloNode => node.type === "hylo" && node.selected === true);
  const selectedEdge = edges.find((edge) => edge.selected);

  return (
    <div className="canvas-page">
      <Toolbar
        graphs={graphs}
        loaded={loaded}
        name={name}
        saving={saving}
        dirty={dirty}
        checking={checking || run.starting}
        onOpen={openGraph}
        onName={setName}
        onSave={() => void save()}
        onValidate={() => void validate()}
        onRun={() => void startRun()}
        onLayout={layout}
      />
      {[catalogProblem, graphsProblem].map(
        (text) =>
          text && (
            <div key={text} className="canvas-notice error-message" data-testid="catalog-problem">
              {text}
            </div>
          ),
      )}
      {notice && (
        <div
          className={`canvas-notice ${notice.kind === "error" ? "error-message" : "canvas-info"}`}
          data-testid="canvas-message"
        >
          {notice.text}
          <button type="button" className="dismiss" aria-label="dismiss" onClick={() => setNotice(null)}>
            ×
          </button>
        </div>
      )}
      <div className="canvas-body">
        <Palette catalog={catalog} onAdd={addAtCenter} />
        <div
          className="canvas-flow"
          ref={wrapper}
          onDragOver={onDragOver}
          onDrop={onDrop}
          data-testid="canvas-flow"
          data-fits={fits}
        >
          {refused && (
            <div className="connection-refused error-message" data-testid="connection-refused" role="alert">
              {refused}
              <button type="button" className="dismiss" aria-label="dismiss" onClick={() => setRefused(null)}>
                ×
              </button>
            </div>
          )}
          {hovered && run.session && (
            <div className="edge-value" data-testid="edge-value" style={{ left: hovered.x + 12, top: hovered.y + 12 }}>
              <span className="edge-name">{hovered.id}</span>
              <span>{values?.[hovered.id] ?? "no value has crossed it yet"}</span>
            </div>
          )}
          <ReactFlow<CanvasNode, Edge>
            nodes={schemas ? display : []}
            edges={schemas ? shownEdges : []}
            nodeTypes={NODE_TYPES}
            onNodesChange={onNodesChange}
            onEdgesChange={onEdgesChange}
            onConnect={onConnect}
            onConnectEnd={onConnectEnd}
            isValidConnection={isValidConnection}
            onEdgeMouseEnter={hover}
            onEdgeMouseMove={hover}
            onEdgeMouseLeave={() => setHovered(null)}
            deleteKeyCode={DELETE_KEYS}
            minZoom={0.2}
            maxZoom={2}
            proOptions={{ hideAttribution: true }}
          >
            <Background gap={20} />
            <Controls showInteractive={false} fitViewOptions={{ padding: 0.05, minZoom: READABLE_ZOOM }} />
            <MiniMap pannable zoomable nodeColor={miniMapColor} />
          </ReactFlow>
        </div>
        <aside className="canvas-side">
          <RunPanel
            run={run}
            busy={checking}
            onStop={() => runAction(run.stop)}
            onClose={() => runAction(run.close)}
          />
          <Inspector
            node={selectedNode}
            edge={selectedNode ? undefined : selectedEdge}
            formKey={opened}
            onConfig={setConfigKey}
            onDeleteNode={(id) => void flow.deleteElements({ nodes: [{ id }] })}
            onDeleteEdge={(id) => void flow.deleteElements({ edges: [{ id }] })}
          />
          <ProblemsPanel problems={problems} source={problemsFrom} onPick={pickNode} />
        </aside>
      </div>
    </div>
  );
}
