// A session's live stream (`WS /api/sessions/{id}/stream`) kept in bounded memory: the latest MAX_EVENTS events,
// the brief state and a dropped count. Messages are folded in as they come; subscribers are told at most once per
// animation frame (and the execution's view is built then, not per message), so a fast execution never makes the
// page queue renders behind it.
import { useEffect, useState, useSyncExternalStore } from "react";
import { wsUrl } from "../api";
import { EMPTY_EXECUTION, type Execution, ExecutionFold } from "./trace";
import type { TraceEvent } from "../trace";
import type { SessionBrief, SessionInfo, StreamMessage } from "./types";

/** How many recent events the view keeps. */
export const MAX_EVENTS = 2000;

const RECONNECT_MS = 1000;

/** The close code the server's token check answers a websocket with (a wrong or missing token). */
const POLICY_VIOLATION = 1008;
/** The close code for a session the server does not have. */
const NO_SESSION = 4404;

export interface StreamSnapshot {
  /** What the hello said (containers, last execution); the brief below is newer. */
  info: SessionInfo | null;
  session: SessionBrief | null;
  events: TraceEvent[];
  /** How many events the stream brought before `events[0]` (so `eventsBase + i` names event `i` for good). */
  eventsBase: number;
  /** Events the server skipped because this client fell behind (the view itself keeps only the latest MAX_EVENTS). */
  dropped: number;
  position: number;
  /** The latest execution, folded from every event the stream brought (not only the kept ones). */
  execution: Execution;
  connected: boolean;
  /** Why the stream ended for good (the session is gone), or null. */
  ended: string | null;
}

const EMPTY: StreamSnapshot = {
  info: null,
  session: null,
  events: [],
  eventsBase: 0,
  dropped: 0,
  position: 0,
  execution: EMPTY_EXECUTION,
  connected: false,
  ended: null,
};

export class LiveStream {
  private snapshot: StreamSnapshot = EMPTY;
  private pending: StreamSnapshot = EMPTY;
  private listeners = new Set<() => void>();
  private frame = 0;
  private socket: WebSocket | null = null;
  private retry = 0;
  private stopped = false;
  private fold = new ExecutionFold();
  /** Every event the stream has brought (kept or not). */
  private received = 0;

  constructor(readonly sessionId: string) {}

  start(): void {
    this.stopped = false;
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    window.clearTimeout(this.retry);
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    const socket = this.socket;
    this.socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      socket.close();
    }
  }

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  getSnapshot = (): StreamSnapshot => this.snapshot;

  private connect(): void {
    const path = `/api/sessions/${encodeURIComponent(this.sessionId)}/stream?after=${this.pending.position}`;
    const socket = new WebSocket(wsUrl(path));
    this.socket = socket;
    socket.onopen = () => this.update({ connected: true });
    socket.onmessage = (message: MessageEvent<string>) => {
      let parsed: StreamMessage;
      try {
        parsed = JSON.parse(message.data) as StreamMessage;
      } catch {
        this.update({ ended: "the server sent a message that is not JSON" });
        return;
      }
      this.receive(parsed);
    };
    socket.onclose = (close: CloseEvent) => {
      this.socket = null;
      const state = this.pending.session?.state;
      let ended: string | null = null;
      if (close.code === POLICY_VIOLATION) {
        ended = "the server refused this page's token (set it again and reload)";
      } else if (close.code === NO_SESSION || state === "closed" || state === "failed") {
        ended = close.reason || `session ${this.sessionId} is closed`;
      }
      this.update({ connected: false, ended });
      if (ended === null && !this.stopped) this.retry = window.setTimeout(() => this.connect(), RECONNECT_MS);
    };
  }

  private receive(message: StreamMessage): void {
    if (message.type === "hello") {
      this.update({ info: message.session, session: message.session });
      return;
    }
    let events = this.pending.events;
    const dropped = this.pending.dropped + message.dropped;
    if (message.events.length) {
      for (const event of message.events) this.fold.add(event);
      this.received += message.events.length;
      events = events.concat(message.events);
      if (events.length > MAX_EVENTS) {
        events = events.slice(events.length - MAX_EVENTS);
      }
    }
    const eventsBase = this.received - events.length;
    this.update({ session: message.session, events, eventsBase, dropped, position: message.position });
  }

  /** Fold a change in; publish it on the next animation frame (one render per frame at most). The execution's
   * view is taken from the fold then, once per frame, however many messages came in between. */
  private update(change: Partial<StreamSnapshot>): void {
    this.pending = { ...this.pending, ...change };
    if (this.frame || this.stopped) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.pending = { ...this.pending, execution: this.fold.snapshot() };
      this.snapshot = this.pending;
      this.listeners.forEach((listener) => listener());
    });
  }
}

/** The live state of session `sessionId` (EMPTY when null); the stream is closed when the id changes or the page
 * goes, and a stream of another session is never shown, not even for the render before the new one opens. */
export function useLiveStream(sessionId: string | null): StreamSnapshot {
  const [stream, setStream] = useState<LiveStream | null>(null);
  useEffect(() => {
    if (!sessionId) {
      setStream(null);
      return;
    }
    const opened = new LiveStream(sessionId);
    opened.start();
    setStream(opened);
    return () => opened.stop();
  }, [sessionId]);
  const current = stream && stream.sessionId === sessionId ? stream : null;
  return useSyncExternalStore(current ? current.subscribe : noSubscribe, current ? current.getSnapshot : emptySnapshot);
}

const noSubscribe = () => () => undefined;
const emptySnapshot = () => EMPTY;
