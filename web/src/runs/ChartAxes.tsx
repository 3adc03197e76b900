// The frame every plain-SVG chart of the run pages shares: a box with margins round its plot area, linear scales
// into it, round ticks, grid lines with their tick labels, a rule across the plot and the axis labels. They draw in
// the classes of runs.css (`chart-grid`, `chart-tick`, `chart-label`), so every chart's axes look alike.
import type { ReactNode, SVGProps } from "react";

/** A chart's size and the margins round its plot area, in SVG units. */
export interface Box {
  width: number;
  height: number;
  left: number;
  right: number;
  top: number;
  bottom: number;
}

/** A scale: a value to its SVG coordinate. */
export type Scale = (value: number) => number;

/** The map that takes `from` to `at` and `to` to `until`, in a straight line (either end may be the larger). */
export function linear(from: number, to: number, at: number, until: number): Scale {
  return (value) => at + ((value - from) / (to - from)) * (until - at);
}

/** The box's horizontal scale: `low` at the left margin, `high` at the right one. */
export function xScale(box: Box, low: number, high: number): Scale {
  return linear(low, high, box.left, box.width - box.right);
}

/** The box's vertical scale: `high` at the top margin, `low` at the bottom one (SVG's y grows downwards). */
export function yScale(box: Box, low: number, high: number): Scale {
  return linear(high, low, box.top, box.height - box.bottom);
}

/** A round step that cuts `span` into about `parts` pieces (1, 2 or 5 times a power of ten). */
export function niceStep(span: number, parts: number): number {
  if (!(span > 0)) return 1;
  const raw = span / parts;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].find((m) => m * power >= raw) ?? 10;
  return step * power;
}

/** The multiples of `step` from 0 up to `high` (its next multiple included when `high` is not one). */
export function ticksUpTo(high: number, step: number): number[] {
  const out: number[] = [];
  for (let i = 0; i * step < high + step * 0.999; i++) out.push(Number((i * step).toPrecision(12)));
  return out;
}

/** The multiples of `step` from `low` to `high`, both included where they are one. */
export function ticksBetween(low: number, high: number, step: number): number[] {
  const out: number[] = [];
  for (let t = Math.ceil(low / step) * step; t <= high + step * 1e-9; t += step) out.push(Number(t.toFixed(6)));
  return out;
}

/** A number as short as it reads: `0.05`, `2.5`, `120`. */
export function short(value: number): string {
  return String(Number(value.toPrecision(6)));
}

/** A chart's `<svg>`, as big as its box says, an image named by `label`; other attributes (a class, a test id, data)
 * pass through. */
export function ChartSvg(
  props: { width: number; height: number; label: string; children: ReactNode } & SVGProps<SVGSVGElement>,
) {
  const { width, height, label, children, ...attributes } = props;
  return (
    <svg {...attributes} width={width} height={height} viewBox={`0 0 ${width} ${height}`} role="img" aria-label={label}>
      {children}
    </svg>
  );
}

/** A grid line across the plot at each tick of a vertical axis, labelled in the left margin. */
export function YGrid(props: { box: Box; ticks: number[]; y: Scale; text?: (tick: number) => string }) {
  const { box, y, text = String } = props;
  return props.ticks.map((tick) => (
    <g key={`y${tick}`}>
      <line x1={box.left} x2={box.width - box.right} y1={y(tick)} y2={y(tick)} className="chart-grid" />
      <text x={box.left - 6} y={y(tick) + 4} textAnchor="end" className="chart-tick">
        {text(tick)}
      </text>
    </g>
  ));
}

/** A grid line down the plot (from a little above it) at each tick of a horizontal axis, labelled above the plot or
 * under it. */
export function XGrid(props: {
  box: Box;
  ticks: number[];
  x: Scale;
  labels: "above" | "below";
  text?: (tick: number) => string;
}) {
  const { box, x, text = String } = props;
  const bottom = box.height - box.bottom;
  const labelY = props.labels === "above" ? box.top - 8 : bottom + 14;
  return props.ticks.map((tick) => (
    <g key={`x${tick}`}>
      <line x1={x(tick)} x2={x(tick)} y1={box.top - 4} y2={bottom} className="chart-grid" />
      <text x={x(tick)} y={labelY} textAnchor="middle" className="chart-tick">
        {text(tick)}
      </text>
    </g>
  ));
}

/** The labels of a horizontal axis's ticks under the plot, no grid lines. */
export function XTicks(props: { box: Box; ticks: number[]; x: Scale; text?: (tick: number) => string }) {
  const { box, x, text = String } = props;
  return props.ticks.map((tick) => (
    <text key={`x${tick}`} x={x(tick)} y={box.height - box.bottom + 14} textAnchor="middle" className="chart-tick">
      {text(tick)}
    </text>
  ));
}

/** A line across the plot at the height `at`: the zero of an axis, a boundary. */
export function Rule(props: { box: Box; at: number; className?: string }) {
  const { box, at } = props;
  return <line x1={box.left} x2={box.width - box.right} y1={at} y2={at} className={props.className} />;
}

/** The horizontal axis's name, centred under the plot, `drop` above the chart's bottom edge. */
export function XLabel(props: { box: Box; drop?: number; children: ReactNode }) {
  const { box, drop = 6 } = props;
  return (
    <text x={(box.left + box.width - box.right) / 2} y={box.height - drop} textAnchor="middle" className="chart-label">
      {props.children}
    </text>
  );
}

/** The vertical axis's name, turned upright at `x` beside the plot's middle. */
export function YLabel(props: { box: Box; x?: number; children: ReactNode }) {
  const { box, x = 12 } = props;
  const mid = (box.top + box.height - box.bottom) / 2;
  return (
    <text x={x} y={mid} textAnchor="middle" className="chart-label" transform={`rotate(-90 ${x} ${mid})`}>
      {props.children}
    </text>
  );
}
