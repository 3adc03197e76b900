// The episode viewer's timeline: one SVG of lanes over the steps (the action's dimensions, the chunks with their
// stale actions, the reward, the shield's interventions, the act latency) and a cursor line at the current step.
// A click or a drag on it moves the cursor.
import { memo, useEffect, useMemo, useRef, useState, type PointerEvent } from "react";
import { linear, type Scale as ValueScale } from "./ChartAxes";
import type { EpisodeTimeline, TimelineChunk, TimelineStep } from "./types";

/** Colors of the action's dimensions, in order (repeated, dashed, past the tenth). */
export const DIM_COLORS = ["#2f6fed", "#e8590c", "#2b8a3e", "#c2255c", "#7048e8", "#0b7285", "#a61e4d", "#5c940d", "#d9480f", "#495057"];

const LABEL_W = 92;
const RIGHT_PAD = 12;
const LANES = { action: 130, chunks: 40, reward: 64, shield: 22, latency: 46 } as const;
const GAP = 8;

interface Scale {
  first: number;
  count: number;
  left: number;
  width: number;
}

function xOf(scale: Scale, step: number): number {
  return scale.left + ((step - scale.first + 0.5) * scale.width) / Math.max(scale.count, 1);
}

function stepAt(scale: Scale, x: number): number {
  const i = Math.floor(((x - scale.left) * scale.count) / Math.max(scale.width, 1));
  return scale.first + Math.min(Math.max(i, 0), scale.count - 1);
}

/** Lane tops, from the top of the SVG. */
function laneTops(): Record<keyof typeof LANES, number> & { height: number } {
  let y = 4;
  const tops = {} as Record<keyof typeof LANES, number>;
  for (const lane of Object.keys(LANES) as (keyof typeof LANES)[]) {
    tops[lane] = y;
    y += LANES[lane] + GAP;
  }
  return { ...tops, height: y + 10 };
}

/** The least and the most of the finite values (a span of 2 round a single one; 0 to 1 when none). */
function finiteRange(values: (number | null)[]): [number, number] {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (v === null || !Number.isFinite(v)) continue;
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  if (!Number.isFinite(lo)) return [0, 1];
  if (lo === hi) return [lo - 1, hi + 1];
  return [lo, hi];
}

/** A lane's value scale: `lo` near its bottom, `hi` near its top. */
function laneScale(top: number, height: number, [lo, hi]: [number, number]): ValueScale {
  return linear(lo, hi, top + height - 4, top + 4);
}

/** A lane's value range, `hi` at its top and `lo` at its bottom, in the label margin. */
function LaneRange({ top, height, range: [lo, hi] }: { top: number; height: number; range: [number, number] }) {
  return (
    <>
      <text x={LABEL_W - 4} y={top + 10} className="viewer-axis">
        {hi.toPrecision(3)}
      </text>
      <text x={LABEL_W - 4} y={top + height - 2} className="viewer-axis">
        {lo.toPrecision(3)}
      </text>
    </>
  );
}

/** A polyline's points over the steps, broken where a value is missing (several paths' `d`). */
function path(scale: Scale, steps: TimelineStep[], value: (s: TimelineStep) => number | null, y: ValueScale) {
  let d = "";
  let open = false;
  for (const s of steps) {
    const v = value(s);
    if (v === null || !Number.isFinite(v)) {
      open = false;
      continue;
    }
    d += `${open ? "L" : "M"}${xOf(scale, s.step).toFixed(1)},${y(v).toFixed(1)}`;
    open = true;
  }
  return d;
}

export function ViewerTimeline(props: { timeline: EpisodeTimeline; step: number; onStep: (step: number) => void }) {
  const { timeline, step, onStep } = props;
  const box = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(1200);
  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const observer = new ResizeObserver(() => setWidth(Math.max(element.clientWidth, 320)));
    observer.observe(element);
    setWidth(Math.max(element.clientWidth, 320));
    return () => observer.disconnect();
  }, []);
  const scale: Scale = {
    first: timeline.steps[0]?.step ?? timeline.first_step,
    count: timeline.steps.length,
    left: LABEL_W,
    width: width - LABEL_W - RIGHT_PAD,
  };
  const tops = laneTops();
  const dragging = useRef(false);
  const move = (event: PointerEvent<SVGSVGElement>) => {
    const rect = event.currentTarget.getBoundingClientRect();
    onStep(stepAt(scale, event.clientX - rect.left));
  };
  const x = xOf(scale, step);
  return (
    <div ref={box} className="viewer-timeline" data-testid="viewer-timeline">
      <svg
        width={width}
        height={tops.height}
        role="img"
        aria-label="the episode's timeline"
        onPointerDown={(event) => {
          dragging.current = true;
          event.currentTarget.setPointerCapture(event.pointerId);
          move(event);
        }}
        onPointerMove={(event) => dragging.current && move(event)}
        onPointerUp={() => (dragging.current = false)}
      >
        <Lanes timeline={timeline} scale={scale} tops={tops} />
        <line className="viewer-cursor" data-testid="viewer-cursor" x1={x} x2={x} y1={0} y2={tops.height - 8} data-step={step} />
        <text className="viewer-cursor-label" x={Math.min(x + 4, width - 60)} y={tops.height - 1}>
          step {step}
        </text>
      </svg>
    </div>
  );
}

type Tops = ReturnType<typeof laneTops>;

/** Everything but the cursor: drawn again only when the timeline or the width changes. */
const Lanes = memo(function Lanes({ timeline, scale, tops }: { timeline: EpisodeTimeline; scale: Scale; tops: Tops }) {
  const steps = timeline.steps;
  const stepW = scale.width / Math.max(scale.count, 1);
  return (
    <g>
      <InterventionBands steps={steps} scale={scale} stepW={stepW} height={tops.height - 12} />
      <ActionLane timeline={timeline} scale={scale} top={tops.action} stepW={stepW} />
      <ChunkLane chunks={timeline.chunks} steps={steps} scale={scale} top={tops.chunks} stepW={stepW} />
      <RewardLane steps={steps} scale={scale} top={tops.reward} />
      <ShieldLane steps={steps} scale={scale} top={tops.shield} stepW={stepW} />
      <LatencyLane chunks={timeline.chunks} scale={scale} top={tops.latency} stepW={stepW} />
    </g>
  );
});

function LaneLabel(props: { scale: Scale; top: number; height: number; label: string; note?: string }) {
  const { scale, top, height, label, note } = props;
  return (
    <g className="viewer-lane-label">
      <rect x={scale.left} y={top} width={scale.width} height={height} className="viewer-lane-bg" />
      <text x={4} y={top + 14}>
        {label}
      </text>
      {note && (
        <text x={4} y={top + 27} className="viewer-lane-note">
          {note}
        </text>
      )}
    </g>
  );
}

/** A light band over every lane at each step the shield changed or refused the action. */
function InterventionBands(props: { steps: TimelineStep[]; scale: Scale; stepW: number; height: number }) {
  const { steps, scale, stepW, height } = props;
  return (
    <g className="viewer-intervention-bands">
      {steps
        .filter((s) => s.review && (s.review.modified || !s.review.approved))
        .map((s) => (
          <rect key={s.step} x={xOf(scale, s.step) - stepW / 2} y={0} width={Math.max(stepW, 2)} height={height} />
        ))}
    </g>
  );
}

function ActionLane(props: { timeline: EpisodeTimeline; scale: Scale; top: number; stepW: number }) {
  const { timeline, scale, top, stepW } = props;
  const h = LANES.action;
  const range = useMemo(() => finiteRange(timeline.steps.flatMap((s) => s.action ?? [])), [timeline]);
  const [lo, hi] = range;
  const y = laneScale(top, h, range);
  const dims = timeline.dim_names.length;
  return (
    <g data-testid="viewer-lane-action">
      <LaneLabel scale={scale} top={top} height={h} label="action" note={`${dims} dim${dims === 1 ? "" : "s"}`} />
      {timeline.steps
        .filter((s) => s.hold)
        .map((s) => (
          <rect
            key={s.step}
            className="viewer-hold"
            data-testid="viewer-hold"
            data-step={s.step}
            x={xOf(scale, s.step) - stepW / 2}
            y={top}
            width={stepW}
            height={h}
          >
            <title>step {s.step}: the env's hold action</title>
          </rect>
        ))}
      {lo < 0 && hi > 0 && <line className="viewer-zero" x1={scale.left} x2={scale.left + scale.width} y1={y(0)} y2={y(0)} />}
      {timeline.dim_names.map((name, d) => (
        <path
          key={name}
          className="viewer-action-line"
          data-dim={d}
          d={path(scale, timeline.steps, (s) => s.action?.[d] ?? null, y)}
          stroke={DIM_COLORS[d % DIM_COLORS.length]}
          strokeDasharray={d >= DIM_COLORS.length ? "4 2" : undefined}
        />
      ))}
      <LaneRange top={top} height={h} range={range} />
    </g>
  );
}

/** Each chunk from the step it was merged at to the next one's (alternating shades), a tick at its start, and its
 * stale actions (those dropped: meant for the steps between its request and its merge) in red before it. */
function ChunkLane(props: { chunks: TimelineChunk[]; steps: TimelineStep[]; scale: Scale; top: number; stepW: number }) {
  const { chunks, steps, scale, top, stepW } = props;
  const h = LANES.chunks;
  const end = (steps[steps.length - 1]?.step ?? 0) + 1;
  const dropped = chunks.reduce((n, c) => n + c.dropped, 0);
  return (
    <g data-testid="viewer-lane-chunks">
      <LaneLabel scale={scale} top={top} height={h} label="chunks" note={`${chunks.length}${dropped ? `, ${dropped} stale` : ""}`} />
      {chunks.map((c, i) => {
        const next = chunks.slice(i + 1).find((later) => later.start_step > c.start_step)?.start_step ?? end;
        const runs = Math.max(Math.min(next, end, c.start_step + Math.max(c.size - c.dropped, 1)) - c.start_step, 1);
        const x0 = xOf(scale, c.start_step) - stepW / 2;
        return (
          <g key={c.seq} className="viewer-chunk" data-testid="viewer-chunk" data-start={c.start_step} data-dropped={c.dropped}>
            <rect className={i % 2 ? "viewer-chunk-odd" : "viewer-chunk-even"} x={x0} y={top + 12} width={runs * stepW} height={h - 18}>
              <title>
                chunk requested at step {c.requested_at}, merged at step {c.start_step}: {c.size} actions
                {c.execution_steps ? `, ${c.execution_steps} to execute` : ""}
                {c.dropped ? `, ${c.dropped} stale dropped` : ""}
              </title>
            </rect>
            <line className="viewer-chunk-tick" x1={x0} x2={x0} y1={top + 8} y2={top + h - 2} />
            {c.dropped > 0 && (
              <rect
                className="viewer-dropped"
                data-testid="viewer-dropped"
                data-count={c.dropped}
                x={x0 - c.dropped * stepW}
                y={top + 2}
                width={c.dropped * stepW}
                height={8}
              >
                <title>
                  {c.dropped} stale action{c.dropped === 1 ? "" : "s"} dropped (requested at step {c.requested_at})
                </title>
              </rect>
            )}
          </g>
        );
      })}
    </g>
  );
}

function RewardLane(props: { steps: TimelineStep[]; scale: Scale; top: number }) {
  const { steps, scale, top } = props;
  const h = LANES.reward;
  const range = useMemo(() => finiteRange(steps.map((s) => s.reward)), [steps]);
  const y = laneScale(top, h, range);
  return (
    <g data-testid="viewer-lane-reward">
      <LaneLabel scale={scale} top={top} height={h} label="reward" />
      <path className="viewer-reward-line" d={path(scale, steps, (s) => s.reward, y)} />
      {steps
        .filter((s) => s.success || s.terminated || s.truncated)
        .map((s) => (
          <circle key={s.step} className={s.success ? "viewer-success" : "viewer-ended"} cx={xOf(scale, s.step)} cy={top + 6} r={3.5}>
            <title>
              step {s.step}: {[s.success && "success", s.terminated && "terminated", s.truncated && "truncated"].filter(Boolean).join(", ")}
            </title>
          </circle>
        ))}
      <LaneRange top={top} height={h} range={range} />
    </g>
  );
}

/** A mark per reviewed step: approved as is (faint), modified (an intervention) or refused (the episode's abort). */
function ShieldLane(props: { steps: TimelineStep[]; scale: Scale; top: number; stepW: number }) {
  const { steps, scale, top, stepW } = props;
  const h = LANES.shield;
  const interventions = steps.filter((s) => s.review && (s.review.modified || !s.review.approved)).length;
  return (
    <g data-testid="viewer-lane-shield">
      <LaneLabel scale={scale} top={top} height={h} label={interventions ? `shield (${interventions})` : "shield"} />
      {steps
        .filter((s) => s.review)
        .map((s) => {
          const review = s.review!;
          const verdict = !review.approved ? "refused" : review.modified ? "modified" : "approved";
          return (
            <rect
              key={s.step}
              className={`viewer-review viewer-review-${verdict}`}
              data-testid={verdict === "approved" ? undefined : "viewer-intervention"}
              x={xOf(scale, s.step) - stepW / 2}
              y={top + 3}
              width={Math.max(stepW - 1, 1)}
              height={h - 6}
            >
              <title>
                step {s.step}: {verdict}
                {review.reasons.length ? ` (${review.reasons.join("; ")})` : ""}
              </title>
            </rect>
          );
        })}
    </g>
  );
}

function LatencyLane(props: { chunks: TimelineChunk[]; scale: Scale; top: number; stepW: number }) {
  const { chunks, scale, top, stepW } = props;
  const h = LANES.latency;
  const most = Math.max(...chunks.map((c) => c.latency_s ?? 0), 0);
  return (
    <g data-testid="viewer-lane-latency">
      <LaneLabel scale={scale} top={top} height={h} label="act latency" note={most > 0 ? `max ${latencyText(most)}` : "—"} />
      {most > 0 &&
        chunks.map((c) => {
          const bar = ((c.latency_s ?? 0) / most) * (h - 6);
          return (
            <rect
              key={c.seq}
              className="viewer-latency-bar"
              x={xOf(scale, c.start_step) - stepW / 2}
              y={top + h - bar}
              width={Math.max(stepW * 0.8, 1.5)}
              height={bar}
            >
              <title>
                chunk merged at step {c.start_step}: {latencyText(c.latency_s ?? 0)}
              </title>
            </rect>
          );
        })}
    </g>
  );
}

/** A latency in ms (or s past a second). */
export function latencyText(seconds: number): string {
  return seconds >= 1 ? `${seconds.toFixed(2)} s` : `${(seconds * 1000).toFixed(seconds < 0.01 ? 2 : 1)} ms`;
}
