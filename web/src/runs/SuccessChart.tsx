// Per-task success rate as horizontal bars with their 95% Wilson interval as whiskers, drawn as plain SVG; the whole
// run last. Tasks with nothing scored show no bar.
import { ChartSvg, XGrid, xScale, type Scale } from "./ChartAxes";
import { interval, pct } from "./format";
import type { RunSummary, Summary } from "./types";

const LABEL_W = 170;
const PLOT_W = 320;
const VALUE_W = 60;
const ROW_H = 22;
const TOP = 24;
const RATE_TICKS = [0, 0.25, 0.5, 0.75, 1];

export function SuccessChart({ summary }: { summary: RunSummary }) {
  const rows: [string, Summary][] = [...Object.entries(summary.per_task), ["All tasks", summary]];
  const height = TOP + rows.length * ROW_H + 8;
  const box = { width: LABEL_W + PLOT_W + VALUE_W, height, left: LABEL_W, right: VALUE_W, top: TOP, bottom: 8 };
  const x = xScale(box, 0, 1);
  return (
    <ChartSvg
      className="success-chart"
      data-testid="success-chart"
      width={box.width}
      height={box.height}
      label="success rate per task with 95% intervals"
    >
      <XGrid box={box} ticks={RATE_TICKS} x={x} labels="above" text={(tick) => `${tick * 100}%`} />
      {rows.map(([name, s], i) => (
        <ChartRow key={i} name={name} summary={s} y={TOP + i * ROW_H} x={x} overall={i === rows.length - 1} />
      ))}
    </ChartSvg>
  );
}

function ChartRow(props: { name: string; summary: Summary; y: number; x: Scale; overall: boolean }) {
  const { name, summary: s, y, x } = props;
  const mid = y + ROW_H / 2;
  return (
    <g className={props.overall ? "chart-row chart-overall" : "chart-row"} data-task={name}>
      <title>{`${name}: ${pct(s.success_rate)} ${interval(s.success_ci)} (${s.successes}/${s.scored} scored)`}</title>
      <text x={LABEL_W - 8} y={mid + 4} textAnchor="end" className="chart-label">
        {name.length > 24 ? `${name.slice(0, 23)}…` : name}
      </text>
      {s.success_rate !== null && (
        <rect x={x(0)} y={y + 4} width={x(s.success_rate) - x(0)} height={ROW_H - 8} className="chart-bar" />
      )}
      {s.success_ci && (
        <g className="chart-ci">
          <line x1={x(s.success_ci[0])} x2={x(s.success_ci[1])} y1={mid} y2={mid} />
          <line x1={x(s.success_ci[0])} x2={x(s.success_ci[0])} y1={mid - 5} y2={mid + 5} />
          <line x1={x(s.success_ci[1])} x2={x(s.success_ci[1])} y1={mid - 5} y2={mid + 5} />
        </g>
      )}
      <text x={x(1) + 8} y={mid + 4} className="chart-value">
        {pct(s.success_rate)}
      </text>
    </g>
  );
}
