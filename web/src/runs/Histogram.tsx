// A histogram of one quantity over a run's episodes, each bin's bar stacked by status in the colours of the status
// badges, drawn as plain SVG. Every bin shares the figure's edges; hovering a bar's part gives its count.
import { ChartSvg, niceStep, Rule, short, ticksUpTo, XLabel, XTicks, xScale, YGrid, YLabel, yScale, type Box } from "./ChartAxes";
import { STACK_ORDER, type StatusHistogram } from "./figures";
import type { EpisodeStatus } from "./types";

const BOX: Box = { width: 480, height: 230, left: 52, right: 14, top: 12, bottom: 44 };
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
  const x = xScale(BOX, hist.edges[0], hist.edges[bins]);
  const y = yScale(BOX, 0, yMax);
  const every = Math.ceil((bins + 1) / MAX_X_LABELS);
  return (
    <ChartSvg
      className="histogram"
      data-testid={testId}
      data-bins={bins}
      width={BOX.width}
      height={BOX.height}
      label={`episodes by ${axis}, stacked by status`}
    >
      <YGrid box={BOX} ticks={yTicks} y={y} />
      <XTicks box={BOX} ticks={hist.edges.filter((_, i) => i % every === 0)} x={x} text={short} />
      {totals.map((_, bin) => (
        <Bar key={bin} hist={hist} bin={bin} x0={x(hist.edges[bin])} x1={x(hist.edges[bin + 1])} y={y} />
      ))}
      <Rule box={BOX} at={y(0)} className="figure-axis" />
      <XLabel box={BOX} drop={8}>
        {axis}
      </XLabel>
      <YLabel box={BOX} x={14}>
        episodes
      </YLabel>
    </ChartSvg>
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
