// The path of an A/B comparison's statistic: log E after each scored pair against the pair number, the decision
// boundary log(1/alpha) as a horizontal line, and the point where the test decided marked. Plain SVG.
import { ChartSvg, niceStep, Rule, ticksBetween, XLabel, XTicks, xScale, YGrid, YLabel, yScale, type Box } from "./ChartAxes";
import type { ABRecord } from "./types";

const BOX: Box = { width: 560, height: 260, left: 48, right: 24, top: 16, bottom: 36 };

export function PathChart({ record }: { record: ABRecord }) {
  const path = record.path;
  const n = Math.max(path.length, 1);
  const low = Math.min(0, ...path);
  const high = Math.max(record.threshold, ...path) * 1.08 || 1;
  const x = xScale(BOX, 0, n);
  const y = yScale(BOX, low, high);
  const xTicks = ticksBetween(0, n, Math.max(1, Math.round(niceStep(n, 5))));
  const yTicks = ticksBetween(low, high, niceStep(high - low, 4));
  const line = [`${x(0)},${y(0)}`, ...path.map((value, i) => `${x(i + 1)},${y(value)}`)].join(" ");
  const decided = record.decision !== null && path.length > 0;
  const last = path.length;
  return (
    <ChartSvg
      className="path-chart"
      data-testid="path-chart"
      width={BOX.width}
      height={BOX.height}
      label="log E after each scored pair, with the decision boundary"
    >
      <YGrid box={BOX} ticks={yTicks} y={y} />
      <XTicks box={BOX} ticks={xTicks} x={x} />
      <Rule box={BOX} at={y(0)} className="path-axis" />
      <XLabel box={BOX}>scored pair</XLabel>
      <YLabel box={BOX}>log E</YLabel>
      <g className="path-boundary" data-testid="path-boundary" data-threshold={record.threshold}>
        <Rule box={BOX} at={y(record.threshold)} />
        <text x={BOX.left + 6} y={y(record.threshold) - 5} className="chart-tick">
          {`decision boundary log(1/α) = ${record.threshold.toFixed(2)}`}
        </text>
      </g>
      <polyline points={line} className="path-line" />
      {path.map((value, i) => (
        <circle key={i} cx={x(i + 1)} cy={y(value)} r={2.5} className="path-point" data-testid="path-point">
          <title>{`pair ${i + 1}: log E = ${value.toFixed(3)}`}</title>
        </circle>
      ))}
      {decided && (
        <g className="path-decided" data-testid="deciding-point" data-pair={last}>
          <circle cx={x(last)} cy={y(path[last - 1])} r={6} />
          <text x={x(last) - 8} y={y(path[last - 1]) - 9} textAnchor="end" className="chart-label">
            {`${record.decision} at pair ${last}`}
          </text>
        </g>
      )}
    </ChartSvg>
  );
}
