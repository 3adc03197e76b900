// The steps of the current execution as an SVG strip: the reward of each step (up green, down red), the shield's
// interventions (orange marks) and the chunk boundaries (blue lines). Clicking a step selects it. When the view
// keeps only the latest steps of a long execution, the strip starts at the first step kept.
import { memo } from "react";
import type { StepMark } from "./trace";

const HEIGHT = 96;
const MID = 56;
const TOP = 14;

interface Props {
  steps: StepMark[];
  selected: number | null;
  onSelect: (step: number) => void;
}

export function Timeline({ steps, selected, onSelect }: Props) {
  const count = steps.length ? steps[steps.length - 1].step + 1 : 0;
  /** The first step drawn: 0, or later when the earliest steps are no longer kept. */
  const first = steps.length ? steps[0].step : 0;
  const span = count - first;
  const width = Math.max(3, Math.min(24, Math.floor(960 / Math.max(1, span))));
  const drawn = Math.max(span * width, 200);
  const scale = Math.max(1e-9, ...steps.map((s) => Math.abs(s.reward ?? 0)));
  const total = steps.reduce((sum, s) => sum + (s.reward ?? 0), 0);
  const interventions = steps.filter((s) => s.intervention).length;
  const chunks = steps.filter((s) => s.chunkStart).length;
  /** One chunk per step marks nothing worth a line. */
  const boundaries = chunks > 0 && chunks < steps.length;
  return (
    <section className="live-card">
      <h3>
        Timeline{" "}
        <span className="muted">
          {count} steps{first > 0 ? ` (the last ${steps.length} kept)` : ""} · return {round(total)} ·{" "}
          {interventions} shield interventions ·{" "}
          {boundaries || chunks === 0 ? `${chunks} chunks` : "one chunk per step"}
        </span>
      </h3>
      <div className="timeline-scroll">
        <svg
          data-testid="timeline"
          className="timeline"
          width={drawn}
          height={HEIGHT}
          role="img"
          aria-label="reward per step"
        >
          <line x1={0} x2={drawn} y1={MID} y2={MID} className="axis" />
          {steps.map((s) => (
            <StepBar
              key={s.step}
              mark={s}
              x={(s.step - first) * width}
              width={width}
              scale={scale}
              boundary={boundaries && s.chunkStart}
              selected={s.step === selected}
              onSelect={onSelect}
            />
          ))}
        </svg>
      </div>
      {count === 0 && <div className="muted">no steps yet: press Play or Step</div>}
    </section>
  );
}

/** One step's bar; memoized, as a long execution draws thousands and the fold keeps an unchanged step's mark. */
const StepBar = memo(function StepBar({
  mark,
  x,
  width,
  scale,
  boundary,
  selected,
  onSelect,
}: {
  mark: StepMark;
  x: number;
  width: number;
  scale: number;
  boundary: boolean;
  selected: boolean;
  onSelect: (step: number) => void;
}) {
  const reward = mark.reward ?? 0;
  const size = Math.max(2, (Math.abs(reward) / scale) * (MID - TOP - 4));
  const y = reward >= 0 ? MID - size : MID;
  const tip = [
    `step ${mark.step}: reward ${mark.reward === null ? "n/a" : round(reward)}`,
    mark.success ? "success" : "",
    mark.chunkStart ? "a new action chunk" : "",
    mark.intervention ? `shield: ${mark.intervention.join(", ")}` : "",
  ]
    .filter(Boolean)
    .join("\n");
  const classes = ["step", selected ? "selected" : "", mark.intervention ? "intervened" : ""].filter(Boolean);
  return (
    <g
      className={classes.join(" ")}
      data-testid={`timeline-step-${mark.step}`}
      data-step={mark.step}
      onClick={() => onSelect(mark.step)}
    >
      <title>{tip}</title>
      <rect className="hit" x={x} y={0} width={width} height={HEIGHT} />
      <rect
        className={reward > 0 ? "bar positive" : reward < 0 ? "bar negative" : "bar zero"}
        x={x + 1}
        y={y}
        width={Math.max(1, width - 2)}
        height={reward === 0 ? 2 : size}
      />
      {boundary && <line className="chunk" data-testid="timeline-chunk" x1={x + 0.5} x2={x + 0.5} y1={TOP} y2={HEIGHT - 4} />}
      {mark.intervention && (
        <path
          className="intervention"
          data-testid="timeline-intervention"
          d={`M${x + width / 2 - 4},2 L${x + width / 2 + 4},2 L${x + width / 2},${TOP - 2} Z`}
        />
      )}
    </g>
  );
});

function round(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(3);
}
