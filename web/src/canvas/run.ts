// The canvas' run: the open graph's document sent to `POST /api/sessions` (checked there as a saved graph is, never
// saved), its env panel's Play pressed, and the session's live stream read for the run's frame, outcome, node states
// and edge values. One run at a time: a new one closes the last, and so does leaving the canvas.
import { useCallback, useEffect, useRef, useState } from "react";
import { api, ApiError } from "../api";
import { panelPath } from "../live/EnvPanelForm";
import { useLiveStream, type StreamSnapshot } from "../live/stream";
import type { SessionInfo } from "../live/types";
import type { TraceEvent } from "../trace";
import type { NodeRun } from "./model";
import type { GraphDocument } from "./types";

/** What a `graph.nodes` event says (hylo.graph.watch): each node's state and each edge's last value, summarised. */
export type NodesReport = {
  phase: string;
  step: number;
  status?: string;
  nodes: Record<string, NodeRun>;
  values: Record<string, string>;
};

const NO_REPORT: NodesReport = { phase: "start", step: 0, nodes: {}, values: {} };

/** The newest `graph.nodes` report of the stream's current execution: an empty one when the execution began after
 * the last report (its nodes are all idle), null when no execution has begun. */
export function latestReport(events: readonly TraceEvent[]): NodesReport | null {
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i];
    if (event.event === "graph.nodes") return event as unknown as NodesReport;
    if (event.event === "episode.start") return NO_REPORT;
  }
  return null;
}

async function closeSession(id: string): Promise<void> {
  try {
    await api(`/api/sessions/${encodeURIComponent(id)}`, { method: "DELETE" });
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
  }
}

export type CanvasRun = {
  session: SessionInfo | null;
  live: StreamSnapshot;
  /** A run is being started (its env and agents are built). */
  starting: boolean;
  start: (doc: GraphDocument) => Promise<void>;
  stop: () => Promise<void>;
  close: () => Promise<void>;
};

export function useCanvasRun(): CanvasRun {
  const [session, setSession] = useState<SessionInfo | null>(null);
  const [starting, setStarting] = useState(false);
  const live = useLiveStream(session?.id ?? null);
  const current = useRef<string | null>(null);

  // leaving the canvas ends its run
  useEffect(
    () => () => {
      if (current.current) void closeSession(current.current).catch(() => undefined);
    },
    [],
  );

  const close = useCallback(async () => {
    const id = current.current;
    current.current = null;
    setSession(null);
    if (id) await closeSession(id);
  }, []);

  const start = useCallback(
    async (doc: GraphDocument) => {
      setStarting(true);
      try {
        await close();
        const created = await api<SessionInfo>("/api/sessions", { method: "POST", json: { document: doc } });
        current.current = created.id;
        setSession(created);
        if (!created.panel) throw new Error(`session ${created.id} has no env panel to press Play on`);
        await api(panelPath(created.panel, "action"), { method: "POST", json: { name: "play" } });
      } finally {
        setStarting(false);
      }
    },
    [close],
  );

  const stop = useCallback(async () => {
    if (session?.panel) await api(panelPath(session.panel, "action"), { method: "POST", json: { name: "stop" } });
  }, [session]);

  return { session, live, starting, start, stop, close };
}
