// A realtime run's figures per task as plain-SVG charts: act latency p50 / p95 / p99 (one chart for the measured
// latencies, one for the virtual clock's) and the stale and hold ratios as bars; the whole run last in each.
import type { ReactNode } from "react";
import { pct } from "./format";
import { ChartSvg, niceStep, short, ticksUpTo, XGrid, XLabel, xScale, type Box, type Scale } from "./ChartAxes";
import type { LatencyPercentiles, RealtimeFigures } from "./types";

const LABEL_W = 150;
const PLOT_W = 300;
const RIGHT = 20;
const ROW_H = 24;
const TOP = 22;
const BOTTOM = 34;
const QUANTILES = ["p50", "p95", "p99"] as const;

/** A row of a chart: a task's figures, or the whole run's (`overall`). */
export interface FigureRow {
  name: string;
  figures: RealtimeFigures;
  overall: boolean;
}

function cut(name: string): string {
  return name.length > 20 ? `${name.slice(0, 19)}…` : name;
}

/** The box of a chart of `rows`: their names in the left margin, the value axis under them. */
function frameBox(rows: FigureRow[]): Box {
  const height = TOP + rows.length * ROW_H + BOTTOM;
  return { width: LABEL_W + PLOT_W + RIGHT, height, left: LABEL_W, right: RIGHT, top: TOP, bottom: BOTTOM };
}

/** The frame every chart here shares: rows down the left, a value axis along the bottom with its label. */
function Frame(props: {
  testId: string;
  label: string;
  rows: FigureRow[];
  ticks: number[];
  tickText: (tick: number) => string;
  x: Scale;
  axis: string;
  children: ReactNode;
}) {
  const box = frameBox(props.rows);
  return (
    <ChartSvg className="realtime-chart" data-testid={props.testId} width={box.width} height={box.height} label={props.label}>
      <XGrid box={box} ticks={props.ticks} x={props.x} labels="below" text={props.tickText} />
      {props.rows.map((row, i) => (
        <text
          key={row.name}
          x={LABEL_W - 8}
          y={TOP + i * ROW_H + ROW_H / 2 + 4}
          textAnchor="end"
          className={row.overall ? "chart-label figure-overall" : "chart-label"}
        >
          {cut(row.name)}
        </text>
      ))}
      {props.children}
      <XLabel box={box}>{props.axis}</XLabel>
    </ChartSvg>
  );
}

/** Act latency percentiles per task in milliseconds: a line from p50 to p99, a mark at each percentile. */
export function LatencyChart(props: {
  rows: FigureRow[];
  which: "latency_s" | "virtual_latency_s";
  clock: string;
  testId: string;
}) {
  const values = props.rows.map((row) => row.figures[props.which]);
  const highest = Math.max(...values.map((v) => (v ? v.p99 * 1000 : 0)), 0);
  const step = niceStep(highest || 1, 4);
  const ticks = ticksUpTo(highest || 1, step);
  const x = xScale(frameBox(props.rows), 0, ticks[ticks.length - 1]);
  return (
    <Frame
      testId={props.testId}
      label={`${props.clock} act latency p50, p95 and p99 per task`}
      rows={props.rows}
      ticks={ticks}
      tickText={short}
      x={x}
      axis={`${props.clock} act latency (ms)`}
    >
      {props.rows.map((row, i) => (
        <LatencyMarks
          key={row.name}
          row={row}
          values={values[i]}
          clock={props.clock}
          mid={TOP + i * ROW_H + ROW_H / 2}
          x={x}
        />
      ))}
    </Frame>
  );
}

function LatencyMarks(props: {
  row: FigureRow;
  values: LatencyPercentiles | null;
  clock: string;
  mid: number;
  x: Scale;
}) {
  const { values: v, x } = props;
  if (!v) return null;
  const at = (q: (typeof QUANTILES)[number]) => x(v[q] * 1000);
  return (
    <g className={props.row.overall ? "latency-row figure-overall" : "latency-row"} data-task={props.row.name}>
      <line x1={at("p50")} x2={at("p99")} y1={props.mid} y2={props.mid} className="latency-span" />
      {QUANTILES.map((q) => (
        <circle
          key={q}
          cx={at(q)}
          cy={props.mid}
          r={q === "p50" ? 5 : 4}
          className={`latency-mark latency-${q}`}
          data-quantile={q}
        >
          <title>{`${props.row.name}, ${props.clock} ${q}: ${(v[q] * 1000).toFixed(v[q] >= 0.001 ? 1 : 3)} ms`}</title>
        </circle>
      ))}
    </g>
  );
}

const RATIOS = [
  { key: "stale_ratio", name: "stale", counts: (f: RealtimeFigures) => `${f.dropped} dropped / ${f.executed} executed` },
  { key: "hold_ratio", name: "hold", counts: (f: RealtimeFigures) => `${f.holds} hold steps / ${f.steps} steps` },
] as const;

/** The stale ratio (dropped / executed) and hold ratio (holds / steps) per task, as two bars a row. */
export function RatioChart({ rows }: { rows: FigureRow[] }) {
  const highest = Math.max(...rows.flatMap((row) => RATIOS.map((r) => row.figures[r.key] ?? 0)), 0);
  const step = niceStep(highest || 0.1, 4);
  const ticks = ticksUpTo(highest || 0.1, step);
  const x = xScale(frameBox(rows), 0, ticks[ticks.length - 1]);
  const barH = (ROW_H - 6) / 2;
  return (
    <Frame
      testId="realtime-ratio-chart"
      label="stale and hold ratios per task"
      rows={rows}
      ticks={ticks}
      tickText={(tick) => `${short(tick * 100)}%`}
      x={x}
      axis="share of actions dropped stale / of steps held (%)"
    >
      {rows.map((row, i) => (
        <g key={row.name} className={row.overall ? "ratio-row figure-overall" : "ratio-row"} data-task={row.name}>
          {RATIOS.map((ratio, j) => {
            const value = row.figures[ratio.key];
            if (value === null) return null;
            return (
              <rect
                key={ratio.key}
                className={`ratio-bar ratio-${ratio.name}`}
                data-ratio={ratio.name}
                x={x(0)}
                width={Math.max(value > 0 ? 1 : 0, x(value) - x(0))}
                y={TOP + i * ROW_H + 3 + j * barH}
                height={barH}
              >
                <title>{`${row.name}, ${ratio.name}: ${pct(value)} (${ratio.counts(row.figures)})`}</title>
              </rect>
            );
          })}
        </g>
      ))}
    </Frame>
  );
}
