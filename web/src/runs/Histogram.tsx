// A histogram of one quantity over a run's episodes, each bin's bar stacked by status in the colours of the status
// badges, drawn as plain SVG. Every bin shares the figure's edges; hovering a bar's part gives its count.
import { niceStep, short, STACK_ORDER, ticksUpTo, type StatusHistogram } from "./figures";
import type { EpisodeStatus } from "./types";

const WIDTH = 480;
const HEIGHT = 230;
const LEFT = 52;
const RIGHT = 14;
const TOP = 12;
const BOTTOM = 44;
const MAX_X_LABELS = 8;

/** What a bin holds, as its hover text says: `10–19 steps`, `12 steps`, `return 0.5 to 0.55`. */
export function binLabel(hist: StatusHistogram, bin: number): string {
  const low = hist.edges[bin];
  const high = hist.edges[bin + 1];
  if (hist.quantity === "steps") return high - low === 1 ? `${low} steps` : `${low}–${high - 1} steps`;
  return `return ${short(low)} to ${short(high)}`;
}

/** The hover text of one status's part of a bin: `failure: 3 of 7 episodes of 10–19 steps`. */
export function partTitle(hist: StatusHistogram, bin: number, status: EpisodeStatus): string {
  const total = STACK_ORDER.reduce((sum, s) => sum + hist.counts[s][bin], 0);
  return `${status}: ${hist.counts[status][bin]} of ${total} episodes of ${binLabel(hist, bin)}`;
}

export function Histogram({ hist, axis, testId }: { hist: StatusHistogram; axis: string; testId: string }) {
  const bins = hist.edges.length - 1;
  const totals = Array.from({ length: bins }, (_, bin) => STACK_ORDER.reduce((sum, s) => sum + hist.counts[s][bin], 0));
  const yStep = Math.max(1, Math.round(niceStep(Math.max(...totals, 1), 4)));
  const yTicks = ticksUpTo(Math.max(...totals, 1), yStep);
  const yMax = yTicks[yTicks.length - 1];
  const low = hist.edges[0];
  const high = hist.edges[bins];
  const x = (value: number) => LEFT + ((value - low) / (high - low)) * (WIDTH - LEFT - RIGHT);
  const y = (count: number) => HEIGHT - BOTTOM - (count / yMax) * (HEIGHT - TOP - BOTTOM);
  const every = Math.ceil((bins + 1) / MAX_X_LABELS);
  return (
    <svg
      className="histogram"
      data-testid={testId}
      data-bins={bins}
      width={WIDTH}
      height={HEIGHT}
      viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
      role="img"
      aria-label={`episodes by ${axis}, stacked by status`}
    >
      {yTicks.map((tick) => (
        <g key={`y${tick}`}>
          <line x1={LEFT} x2={WIDTH - RIGHT} y1={y(tick)} y2={y(tick)} className="chart-grid" />
          <text x={LEFT - 6} y={y(tick) + 4} textAnchor="end" className="chart-tick">
            {tick}
          </text>
        </g>
      ))}
      {hist.edges.map((edge, i) =>
        i % every === 0 ? (
          <text key={`x${i}`} x={x(edge)} y={HEIGHT - BOTTOM + 14} textAnchor="middle" className="chart-tick">
            {short(edge)}
          </text>
        ) : null,
      )}
      {totals.map((_, bin) => (
        <Bar key={bin} hist={hist} bin={bin} x0={x(hist.edges[bin])} x1={x(hist.edges[bin + 1])} y={y} />
      ))}
      <line x1={LEFT} x2={WIDTH - RIGHT} y1={y(0)} y2={y(0)} className="figure-axis" />
      <text x={(LEFT + WIDTH - RIGHT) / 2} y={HEIGHT - 8} textAnchor="middle" className="chart-label">
        {axis}
      </text>
      <text
        x={14}
        y={(TOP + HEIGHT - BOTTOM) / 2}
        textAnchor="middle"
        transform={`rotate(-90 14 ${(TOP + HEIGHT - BOTTOM) / 2})`}
        className="chart-label"
      >
        episodes
      </text>
    </svg>
  );
}

/** One bin's bar: a part per status with episodes there, stacked bottom up in `STACK_ORDER`. */
function Bar(props: { hist: StatusHistogram; bin: number; x0: number; x1: number; y: (count: number) => number }) {
  const { hist, bin, y } = props;
  const gap = props.x1 - props.x0 > 6 ? 1 : 0;
  let below = 0;
  return (
    <g className="histogram-bin" data-bin={bin}>
      {STACK_ORDER.map((status) => {
        const count = hist.counts[status][bin];
        if (!count) return null;
        const top = y(below + count);
        const bottom = y(below);
        below += count;
        return (
          <rect
            key={status}
            className={`figure-status figure-${status}`}
            data-status={status}
            data-count={count}
            x={props.x0 + gap}
            width={Math.max(1, props.x1 - props.x0 - 2 * gap)}
            y={top}
            height={bottom - top}
          >
            <title>{partTitle(hist, bin, status)}</title>
          </rect>
        );
      })}
    </g>
  );
}
