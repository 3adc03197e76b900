// `#/runs/<run>/episode/<episode id>` (`?attempt=<n>`): one episode step by step. Its video's frame of the current
// step, a scrubber (← / → one step, Home / End, PageUp / PageDown ten), the timeline of its actions, chunks, reward,
// shield reviews and act latency with a cursor at the step, the step's values, and the step's trace events with
// every large array collapsed to its summary (a click shows it whole).
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { api, errorMessage, withToken } from "../api";
import { href } from "../router";
import { collapsedValue, eventFields, type TraceEvent } from "../trace";
import { StatusBadge } from "./Progress";
import { DIM_COLORS, latencyText, ViewerTimeline } from "./EpisodeViewerTimeline";
import { runPath, type EpisodeTimeline, type EpisodeTrace, type TimelineStep, type TimelineVideo } from "./types";
import "./runs.css";
import "./viewer.css";

const PLAY_HZ_MAX = 30;

export function EpisodeViewerPage(props: { runId: string; episodeId: string; attempt: number | null }) {
  const { runId, episodeId, attempt } = props;
  const [firstStep, setFirstStep] = useState(0);
  const [timeline, setTimeline] = useState<EpisodeTimeline | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    setError(null);
    const query = new URLSearchParams({ episode: episodeId, first_step: String(firstStep) });
    if (attempt !== null) query.set("attempt", String(attempt));
    api<EpisodeTimeline>(runPath(runId, `/timeline?${query.toString()}`))
      .then((answer) => !cancelled && setTimeline(answer))
      .catch((e: unknown) => !cancelled && setError(errorMessage(e)));
    return () => {
      cancelled = true;
    };
  }, [runId, episodeId, attempt, firstStep]);

  return (
    <div className="run-page viewer-page" data-testid="episode-viewer-page">
      <div className="crumbs">
        <a href={href(["runs", runId], { episode: episodeId })} data-testid="viewer-back">
          ← run {runId}
        </a>
      </div>
      {error && (
        <div className="error-message" data-testid="viewer-error">
          {error}
        </div>
      )}
      {timeline ? (
        <>
          <ViewerHeader timeline={timeline} />
          {timeline.cut && <WindowNote timeline={timeline} onFirstStep={setFirstStep} />}
          {timeline.steps.length === 0 ? (
            <p className="muted panel" data-testid="viewer-empty">
              This attempt has no step to show.
            </p>
          ) : (
            <EpisodeViewer key={`${timeline.attempt}@${timeline.first_step}`} runId={runId} timeline={timeline} />
          )}
        </>
      ) : (
        !error && <p className="muted">Loading the episode…</p>
      )}
    </div>
  );
}

function ViewerHeader({ timeline }: { timeline: EpisodeTimeline }) {
  const { end } = timeline;
  return (
    <section className="panel viewer-header">
      <h2 className="mono episode-title" data-testid="viewer-episode-id">
        {timeline.episode_id}
      </h2>
      {end ? (
        <span>
          <StatusBadge status={end.status} /> {end.reason} · {end.steps} steps · {end.safety_interventions} shield
          intervention{end.safety_interventions === 1 ? "" : "s"}
        </span>
      ) : (
        <span className="muted">the episode has no end in its trace</span>
      )}
      {timeline.dt !== null && <span className="muted">{(1 / timeline.dt).toFixed(3).replace(/\.?0+$/, "")} Hz</span>}
      {timeline.attempts.length > 1 && (
        <span className="viewer-attempts">
          {timeline.attempts.map((a) => (
            <a
              key={a}
              className={a === timeline.attempt ? "active" : ""}
              href={href(["runs", timeline.run_id, "episode", timeline.episode_id], { attempt: String(a) })}
              data-testid={`viewer-attempt-${a}`}
            >
              attempt {a}
            </a>
          ))}
        </span>
      )}
    </section>
  );
}

/** What the answer left out, and the way to the steps before and after the ones shown. */
function WindowNote({ timeline, onFirstStep }: { timeline: EpisodeTimeline; onFirstStep: (step: number) => void }) {
  const shown = timeline.steps.length;
  const first = timeline.first_step;
  return (
    <p className="viewer-cut" data-testid="viewer-cut">
      {timeline.cut}
      {first > 0 && (
        <button type="button" onClick={() => onFirstStep(Math.max(first - Math.max(shown, 1), 0))}>
          earlier steps
        </button>
      )}
      {first + shown < timeline.total_steps && (
        <button type="button" onClick={() => onFirstStep(first + shown)}>
          later steps
        </button>
      )}
    </p>
  );
}

/** The viewer proper over the steps of one timeline: the cursor is the index of a step among them. */
export function EpisodeViewer({ runId, timeline }: { runId: string; timeline: EpisodeTimeline }) {
  const steps = timeline.steps;
  const first = steps[0].step;
  const last = steps[steps.length - 1].step;
  const [step, setStepRaw] = useState(first);
  const setStep = useCallback((next: number) => setStepRaw(Math.min(Math.max(next, first), last)), [first, last]);
  const [playing, setPlaying] = useState(false);
  const row = steps[step - first];
  const video = timeline.videos[0] ?? null;
  useSteppingKeys(step, setStep, first, last);
  usePlayback(playing, setPlaying, step, setStep, last, playRate(timeline, video));

  return (
    <div className="viewer" data-testid="episode-viewer" data-step={step}>
      <div className="viewer-top">
        {video ? (
          <FrameView runId={runId} episodeId={timeline.episode_id} video={video} step={step} />
        ) : (
          <div className="viewer-no-video muted" data-testid="viewer-no-video">
            No video was recorded for this {timeline.attempts.length > 1 ? "attempt" : "episode"}: the timeline alone.
          </div>
        )}
        <section className="panel viewer-timeline-panel">
          <DimLegend names={timeline.dim_names} total={timeline.total_dims} />
          <ViewerTimeline timeline={timeline} step={step} onStep={setStep} />
        </section>
      </div>
      <div className="viewer-scrub panel">
        <button type="button" onClick={() => setStep(step - 1)} disabled={step <= first} aria-label="previous step">
          ◀
        </button>
        <button type="button" onClick={() => setPlaying(!playing)} data-testid="viewer-play">
          {playing ? "Pause" : "Play"}
        </button>
        <button type="button" onClick={() => setStep(step + 1)} disabled={step >= last} aria-label="next step">
          ▶
        </button>
        <input
          type="range"
          className="viewer-scrubber"
          data-testid="viewer-scrubber"
          aria-label="step"
          min={first}
          max={last}
          step={1}
          value={step}
          onChange={(e) => setStep(Number(e.target.value))}
        />
        <span className="mono" data-testid="viewer-step">
          step {step} / {timeline.total_steps - 1}
        </span>
        <span className="muted viewer-keys">← → step · Home End · PgUp PgDn ×10</span>
      </div>
      <div className="viewer-bottom">
        <StepValues timeline={timeline} row={row} />
        <StepEvents runId={runId} timeline={timeline} row={row} />
      </div>
    </div>
  );
}

/** ← / → one step, Home / End, PageUp / PageDown ten; not while typing in a field (the scrubber is the viewer's). */
function useSteppingKeys(step: number, setStep: (step: number) => void, first: number, last: number) {
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      const target = event.target as HTMLElement | null;
      const typing = target?.closest("input, select, textarea") && !target.classList.contains("viewer-scrubber");
      if (typing || event.altKey || event.ctrlKey || event.metaKey) return;
      const moves: Record<string, number> = {
        ArrowLeft: step - 1,
        ArrowRight: step + 1,
        ArrowDown: step - 1,
        ArrowUp: step + 1,
        PageUp: step - 10,
        PageDown: step + 10,
        Home: first,
        End: last,
      };
      if (!(event.key in moves)) return;
      event.preventDefault();
      setStep(moves[event.key]);
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [step, setStep, first, last]);
}

/** Steps per second when playing: the video's rate, else the env's, at most `PLAY_HZ_MAX`. */
function playRate(timeline: EpisodeTimeline, video: TimelineVideo | null): number {
  const rate = video?.fps ?? (timeline.dt ? 1 / timeline.dt : 10);
  return Math.min(rate, PLAY_HZ_MAX);
}

/** While playing, the cursor moves on at `hz`; it stops at the last step. */
function usePlayback(
  playing: boolean,
  setPlaying: (playing: boolean) => void,
  step: number,
  setStep: (step: number) => void,
  last: number,
  hz: number,
) {
  useEffect(() => {
    if (!playing) return;
    if (step >= last) {
      setPlaying(false);
      return;
    }
    const timer = window.setTimeout(() => setStep(step + 1), 1000 / hz);
    return () => window.clearTimeout(timer);
  }, [playing, step, last, hz, setStep, setPlaying]);
}

/** The seconds into a video at which the frame of `step` is on screen (the middle of its frame). */
export function frameTime(video: TimelineVideo, step: number): number {
  const frame = Math.min(Math.max(step + video.frame_offset, 0), video.frames - 1);
  return (frame + 0.5) / video.fps;
}

function FrameView(props: { runId: string; episodeId: string; video: TimelineVideo; step: number }) {
  const { runId, episodeId, video, step } = props;
  const element = useRef<HTMLVideoElement>(null);
  const seek = useCallback(() => {
    const player = element.current;
    if (player) player.currentTime = frameTime(video, step);
  }, [video, step]);
  useEffect(seek, [seek]);
  const frame = step + video.frame_offset;
  return (
    <figure className="viewer-frame">
      <video
        ref={element}
        data-testid="viewer-video"
        muted
        playsInline
        preload="auto"
        onLoadedMetadata={seek}
        src={withToken(runPath(runId, `/video?episode=${encodeURIComponent(episodeId)}`))}
      />
      <figcaption className="muted" data-testid="viewer-frame">
        {frame < video.frames
          ? `frame ${frame} of ${video.frames}: what step ${step} acted on`
          : `no frame for step ${step} (the video has ${video.frames})`}
        {video.camera ? ` · ${video.camera}` : ""}
      </figcaption>
    </figure>
  );
}

function DimLegend({ names, total }: { names: string[]; total: number }) {
  if (!names.length) return <p className="muted viewer-legend">The actions are not numbers: no action lines.</p>;
  return (
    <p className="viewer-legend">
      {names.map((name, d) => (
        <span key={name} className="viewer-legend-dim">
          <i style={{ background: DIM_COLORS[d % DIM_COLORS.length] }} />
          {name}
        </span>
      ))}
      {total > names.length && <span className="muted">(+{total - names.length} not shown)</span>}
    </p>
  );
}

/** A number as the viewer writes a step's values: four decimals. */
export function value4(value: number | null): string {
  return value === null ? "—" : value.toFixed(4);
}

function StepValues({ timeline, row }: { timeline: EpisodeTimeline; row: TimelineStep }) {
  const returned = useMemo(
    () => timeline.steps.filter((s) => s.step <= row.step).reduce((sum, s) => sum + (s.reward ?? 0), 0),
    [timeline, row.step],
  );
  const chunk = [...timeline.chunks].reverse().find((c) => c.start_step <= row.step) ?? null;
  const flags = [
    row.hold && "hold",
    row.success && "success",
    row.terminated && "terminated",
    row.truncated && "truncated",
    !row.executed && "not executed",
  ].filter(Boolean);
  return (
    <section className="panel viewer-values" data-testid="viewer-values">
      <h3>Step {row.step}</h3>
      <table className="viewer-values-table">
        <tbody>
          <tr>
            <th>action</th>
            <td data-testid="viewer-action">
              {row.action === null ? (
                <span className="muted">{row.executed ? "not numbers (see its event below)" : "none: not executed"}</span>
              ) : (
                <span className="viewer-action-values">
                  {row.action.map((v, d) => (
                    <span key={d} className="viewer-action-dim" data-testid={`viewer-action-${d}`}>
                      <i style={{ background: DIM_COLORS[d % DIM_COLORS.length] }} />
                      <span className="muted">{timeline.dim_names[d] ?? d}</span>{" "}
                      <span className="mono" data-testid="viewer-action-value">
                        {value4(v)}
                      </span>
                    </span>
                  ))}
                </span>
              )}
              {row.hold && (
                <div className="muted" data-testid="viewer-held">
                  held: no action of the agent's was ready, so the env's hold action ran
                </div>
              )}
            </td>
          </tr>
          <tr>
            <th>reward</th>
            <td className="mono" data-testid="viewer-reward">
              {value4(row.reward)}
            </td>
          </tr>
          <tr>
            <th>return</th>
            <td className="mono" data-testid="viewer-return">
              {returned.toFixed(4)}
            </td>
          </tr>
          <tr>
            <th>shield</th>
            <td data-testid="viewer-shield">
              <ShieldVerdict row={row} />
            </td>
          </tr>
          <tr>
            <th>chunk</th>
            <td data-testid="viewer-latency">
              {chunk ? (
                <>
                  {chunk.start_step === row.step ? "merged here" : `from step ${chunk.start_step}`} · asked at step{" "}
                  {chunk.requested_at} · {chunk.size} action{chunk.size === 1 ? "" : "s"} · latency{" "}
                  <span className="mono">{chunk.latency_s === null ? "—" : latencyText(chunk.latency_s)}</span>
                  {chunk.virtual_latency_s !== null && ` (virtual ${latencyText(chunk.virtual_latency_s)})`}
                  {chunk.dropped > 0 && <span className="viewer-stale"> · {chunk.dropped} stale dropped</span>}
                </>
              ) : (
                <span className="muted">none yet</span>
              )}
            </td>
          </tr>
          <tr>
            <th>flags</th>
            <td data-testid="viewer-flags">{flags.length ? flags.join(", ") : <span className="muted">—</span>}</td>
          </tr>
        </tbody>
      </table>
    </section>
  );
}

function ShieldVerdict({ row }: { row: TimelineStep }) {
  const review = row.review;
  if (!review) return <span className="muted">no review</span>;
  const reasons = review.reasons.length ? `: ${review.reasons.join("; ")}` : "";
  if (!review.approved) {
    return (
      <span className="viewer-intervention-text">
        refused{review.guard ? ` by ${review.guard}` : ""}
        {reasons} (the episode ended)
      </span>
    );
  }
  if (review.modified) return <span className="viewer-intervention-text">modified (an intervention){reasons}</span>;
  return <span>approved{reasons}</span>;
}

/** The trace events of the cursor's step, read by their sequence numbers (a little after the cursor settles). */
function StepEvents({ runId, timeline, row }: { runId: string; timeline: EpisodeTimeline; row: TimelineStep }) {
  const cache = useRef(new Map<number, TraceEvent[]>());
  const [events, setEvents] = useState<{ step: number; events: TraceEvent[] } | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const known = cache.current.get(row.step);
    if (known) {
      setEvents({ step: row.step, events: known });
      return;
    }
    let cancelled = false;
    const timer = window.setTimeout(() => {
      const query = new URLSearchParams({
        episode: timeline.episode_id,
        attempt: String(timeline.attempt),
        from_seq: String(row.seq_first),
        to_seq: String(row.seq_last),
      });
      api<EpisodeTrace>(runPath(runId, `/trace?${query.toString()}`))
        .then((answer) => {
          cache.current.set(row.step, answer.events);
          if (!cancelled) {
            setError(null);
            setEvents({ step: row.step, events: answer.events });
          }
        })
        .catch((e: unknown) => !cancelled && setError(errorMessage(e)));
    }, 80);
    return () => {
      cancelled = true;
      window.clearTimeout(timer);
    };
  }, [runId, timeline, row]);
  const current = events?.step === row.step ? events.events : null;
  return (
    <section className="panel viewer-events" data-testid="viewer-events" data-step={current ? row.step : undefined}>
      <div className="section-head">
        <h3>Events of step {row.step}</h3>
        <span className="muted">
          seq {row.seq_first}–{row.seq_last}
        </span>
      </div>
      {error && <div className="error-message">{error}</div>}
      {current ? (
        <ol className="viewer-event-list">
          {current.map((event, i) => (
            <EventView key={`${event.seq ?? i}`} event={event} />
          ))}
        </ol>
      ) : (
        !error && <p className="muted">Loading…</p>
      )}
    </section>
  );
}

function EventView({ event }: { event: TraceEvent }) {
  const kind = typeof event.event === "string" ? event.event : "?";
  return (
    <li className="viewer-event" data-testid="viewer-event" data-kind={kind}>
      <span className="trace-seq mono">{event.seq ?? ""}</span>
      <span className={`trace-kind kind-${kind.split(".")[0]}`}>{kind}</span>
      <span className="viewer-event-fields mono">
        {eventFields(event).map(([key, value]) => (
          <span key={key} className="viewer-field">
            <span className="viewer-field-key">{key}</span>=<ValueView value={value} depth={0} />
          </span>
        ))}
      </span>
    </li>
  );
}

/** A field's value: a large array as its summary (a click shows it whole, another hides it), a dict or list of
 * such values field by field, anything else as JSON. */
function ValueView({ value, depth }: { value: unknown; depth: number }) {
  const [open, setOpen] = useState(false);
  const collapsed = collapsedValue(value);
  if (collapsed !== null) {
    return (
      <span className="viewer-collapsed-wrap">
        <button
          type="button"
          className="viewer-collapsed"
          data-testid="viewer-collapsed"
          aria-expanded={open}
          onClick={() => setOpen(!open)}
        >
          {collapsed}
        </button>
        {open && <span className="viewer-expanded" data-testid="viewer-expanded">{JSON.stringify(value)}</span>}
      </span>
    );
  }
  if (depth < 6 && value && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
    const [opening, closing] = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
    return (
      <span>
        {opening}
        {entries.map(([key, inner], i) => (
          <span key={key}>
            {i > 0 && ", "}
            {!Array.isArray(value) && `${key}: `}
            <ValueView value={inner} depth={depth + 1} />
          </span>
        ))}
        {closing}
      </span>
    );
  }
  return <span>{JSON.stringify(value) ?? String(value)}</span>;
}
