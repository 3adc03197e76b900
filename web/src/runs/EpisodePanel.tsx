// The selected episode: its outcome, its realtime figures under realtime timing, its video when it has one, the link
// to its viewer (step by step, `#/runs/<run>/episode/<id>`), and its recorded trace (each event with its kind, large
// arrays collapsed to their summary, filterable by kind, one attempt at a time).
import { useEffect, useMemo, useRef, useState } from "react";
import { api, errorMessage, withToken } from "../api";
import { StatusBadge } from "./Progress";
import { ms } from "./RealtimePanel";
import { pct } from "./format";
import { episodeHref } from "../router";
import { summarizeEventCompact, type TraceEvent } from "../trace";
import { runPath, type EpisodeRow, type EpisodeTrace, type RealtimeFigures } from "./types";

const SHOWN_STEP = 300;

export function EpisodePanel(props: { runId: string; episode: EpisodeRow; reveal?: boolean; onClose: () => void }) {
  const { runId, episode, reveal } = props;
  const panel = useRef<HTMLElement>(null);
  // Opened from a link (a comparison's flip): the panel is below the run's figures, so it is brought into view, and
  // kept there while the figures above it load (until the user scrolls).
  useKeptInView(panel, reveal === true, episode.episode_id);
  return (
    <aside ref={panel} className="panel episode-panel" data-testid="episode-panel" data-episode-id={episode.episode_id}>
      <div className="section-head">
        <h3 className="mono episode-title">{episode.episode_id}</h3>
        <button type="button" onClick={props.onClose} data-testid="episode-close">
          Close
        </button>
      </div>
      <p>
        <StatusBadge status={episode.status} /> {episode.reason} · {episode.steps} steps · seed{" "}
        <span className="mono">{episode.seed}</span>
      </p>
      <p>
        <a className="episode-viewer-link" href={episodeHref(runId, episode.episode_id)} data-testid="episode-open-viewer">
          Open viewer
        </a>{" "}
        <span className="muted">step by step: {episode.video ? "frames, " : ""}actions, reward, shield and events</span>
      </p>
      {episode.realtime && <EpisodeRealtime figures={episode.realtime} />}
      {episode.detail && <pre className="episode-detail">{episode.detail}</pre>}
      {episode.video && (
        <video
          key={episode.episode_id}
          className="episode-video"
          data-testid="episode-video"
          controls
          preload="metadata"
          src={withToken(runPath(runId, `/video?episode=${encodeURIComponent(episode.episode_id)}`))}
        />
      )}
      <TraceView key={`${episode.episode_id}#${episode.attempt}`} runId={runId} episodeId={episode.episode_id} />
    </aside>
  );
}

/** One line of an episode's realtime figures: median act latency (measured, virtual), control rate, stale, hold. */
function EpisodeRealtime({ figures: f }: { figures: RealtimeFigures }) {
  const parts = [
    `act latency p50 ${f.latency_s ? ms(f.latency_s.p50) : "—"}`,
    ...(f.virtual_latency_s ? [`virtual ${ms(f.virtual_latency_s.p50)}`] : []),
    `${f.control_rate_hz === null ? "—" : f.control_rate_hz.toFixed(2)} actions/s`,
    `stale ${pct(f.stale_ratio)}`,
    `hold ${pct(f.hold_ratio)}`,
    `${f.chunks} chunks`,
  ];
  return (
    <p className="muted" data-testid="episode-realtime">
      realtime: {parts.join(" · ")}
    </p>
  );
}

function TraceView({ runId, episodeId }: { runId: string; episodeId: string }) {
  const [attempt, setAttempt] = useState<number | null>(null);
  const [trace, setTrace] = useState<EpisodeTrace | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [kind, setKind] = useState("");
  const [shown, setShown] = useState(SHOWN_STEP);

  useEffect(() => {
    let cancelled = false;
    setError(null);
    const params = new URLSearchParams({ episode: episodeId });
    if (attempt !== null) params.set("attempt", String(attempt));
    api<EpisodeTrace>(runPath(runId, `/trace?${params.toString()}`))
      .then((answer) => !cancelled && setTrace(answer))
      .catch((e: unknown) => !cancelled && setError(errorMessage(e)));
    return () => {
      cancelled = true;
    };
  }, [runId, episodeId, attempt]);

  const kinds = useMemo(() => [...new Set(trace?.events.map(eventKind) ?? [])].sort(), [trace]);
  const events = useMemo(() => (trace?.events ?? []).filter((e) => !kind || eventKind(e) === kind), [trace, kind]);

  if (error) {
    return (
      <div className="error-message" data-testid="trace-error">
        {error}
      </div>
    );
  }
  if (!trace) return <p className="muted">Loading the trace…</p>;
  return (
    <div className="trace">
      <div className="section-head">
        <h4>Trace</h4>
        <span className="muted" data-testid="trace-count">
          {trace.events.length} events
        </span>
        {trace.attempts.length > 1 && (
          <select
            data-testid="trace-attempt"
            value={trace.attempt}
            onChange={(e) => setAttempt(Number(e.target.value))}
          >
            {trace.attempts.map((a) => (
              <option key={a} value={a}>
                attempt {a}
              </option>
            ))}
          </select>
        )}
        <select
          data-testid="trace-kind"
          value={kind}
          onChange={(e) => {
            setKind(e.target.value);
            setShown(SHOWN_STEP);
          }}
        >
          <option value="">every kind</option>
          {kinds.map((k) => (
            <option key={k} value={k}>
              {k}
            </option>
          ))}
        </select>
      </div>
      {trace.events.length === 0 ? (
        <p className="muted" data-testid="episode-trace">
          No trace was recorded for this attempt.
        </p>
      ) : (
        <ol className="episode-trace-events" data-testid="episode-trace">
          {events.slice(0, shown).map((event, i) => (
            <TraceLine key={`${event.seq ?? i}`} event={event} />
          ))}
        </ol>
      )}
      {events.length > shown && (
        <button type="button" onClick={() => setShown((n) => n + SHOWN_STEP)} data-testid="trace-more">
          Show more ({events.length - shown} left)
        </button>
      )}
    </div>
  );
}

function eventKind(event: TraceEvent): string {
  return typeof event.event === "string" ? event.event : "?";
}

function TraceLine({ event }: { event: TraceEvent }) {
  const kind = eventKind(event);
  return (
    <li className="episode-trace-event" data-testid="trace-event" data-kind={kind}>
      <span className="trace-seq mono">{event.seq ?? ""}</span>
      <span className={`trace-kind kind-${kind.split(".")[0]}`} data-testid="trace-kind-label">
        {kind}
      </span>
      <span className="trace-time mono">{typeof event.sim_time === "number" ? `t=${event.sim_time.toFixed(2)}` : ""}</span>
      <span className="trace-fields mono">{summarizeEventCompact(event)}</span>
    </li>
  );
}

/** How long, at most, an element brought into view is kept there while the page above it grows (its panels
 * loading; on a busy machine or a large run they can take many seconds). The user's first scroll, click or key
 * ends it sooner. */
const KEEP_IN_VIEW_MS = 60_000;

/** Scrolls `target` to the top of the view when `active` (again when `key` changes), and keeps it there while
 * what is above it grows, until the user scrolls, clicks or types, or KEEP_IN_VIEW_MS have passed. */
function useKeptInView(target: React.RefObject<HTMLElement | null>, active: boolean, key: string) {
  useEffect(() => {
    if (!active || !target.current) return;
    const reveal = () => target.current?.scrollIntoView({ block: "start" });
    reveal();
    const grown = new ResizeObserver(reveal);
    for (const content of scrolledContent(target.current)) grown.observe(content);
    const stop = () => {
      grown.disconnect();
      clearTimeout(timer);
      for (const kind of USER_SCROLLS) window.removeEventListener(kind, stop);
    };
    const timer = setTimeout(stop, KEEP_IN_VIEW_MS);
    for (const kind of USER_SCROLLS) window.addEventListener(kind, stop, { passive: true });
    return stop;
  }, [target, active, key]);
}

const USER_SCROLLS = ["wheel", "touchmove", "keydown", "mousedown"] as const;

/** What scrolls with `element`: the children of its nearest scrolling ancestor (the page's own scroller, not the
 * window: the app's frame is one screen high), whose growth above it moves it; the document's body without one. */
function scrolledContent(element: HTMLElement): Element[] {
  for (let node = element.parentElement; node; node = node.parentElement) {
    const { overflowY } = getComputedStyle(node);
    if (overflowY === "auto" || overflowY === "scroll") return Array.from(node.children);
  }
  return [document.body];
}
