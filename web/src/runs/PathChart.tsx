// The path of an A/B comparison's statistic: log E after each scored pair against the pair number, the decision
// boundary log(1/alpha) as a horizontal line, and the point where the test decided marked. Plain SVG.
import type { ABRecord } from "./types";

const WIDTH = 560;
const HEIGHT = 260;
const LEFT = 48;
const RIGHT = 24;
const TOP = 16;
const BOTTOM = 36;
const MID_Y = (TOP + HEIGHT - BOTTOM) / 2;

/** A round step that cuts `span` into about `parts` pieces (1, 2 or 5 times a power of ten). */
function niceStep(span: number, parts: number): number {
  const raw = span / parts;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].find((m) => m * power >= raw) ?? 10;
  return step * power;
}

function ticks(low: number, high: number, step: number): number[] {
  const out: number[] = [];
  for (let t = Math.ceil(low / step) * step; t <= high + step * 1e-9; t += step) out.push(Number(t.toFixed(6)));
  return out;
}

export function PathChart({ record }: { record: ABRecord }) {
  const path = record.path;
  const n = Math.max(path.length, 1);
  const low = Math.min(0, ...path);
  const high = Math.max(record.threshold, ...path) * 1.08 || 1;
  const x = (pair: number) => LEFT + (pair / n) * (WIDTH - LEFT - RIGHT);
  const y = (value: number) => TOP + ((high - value) / (high - low)) * (HEIGHT - TOP - BOTTOM);
  const xTicks = ticks(0, n, Math.max(1, Math.round(niceStep(n, 5))));
  const yTicks = ticks(low, high, niceStep(high - low, 4));
  const line = [`${x(0)},${y(0)}`, ...path.map((value, i) => `${x(i + 1)},${y(value)}`)].join(" ");
  const decided = record.decision !== null && path.length > 0;
  const last = path.length;
  return (
    <svg
      className="path-chart"
      data-testid="path-chart"
      width={WIDTH}
      height={HEIGHT}
      viewBox={`0 0 ${WIDTH} ${HEIGHT}`}
      role="img"
      aria-label="log E after each scored pair, with the decision boundary"
    >
      {yTicks.map((tick) => (
        <g key={`y${tick}`}>
          <line x1={LEFT} x2={WIDTH - RIGHT} y1={y(tick)} y2={y(tick)} className="chart-grid" />
          <text x={LEFT - 6} y={y(tick) + 4} textAnchor="end" className="chart-tick">
            {tick}
          </text>
        </g>
      ))}
      {xTicks.map((tick) => (
        <text key={`x${tick}`} x={x(tick)} y={HEIGHT - BOTTOM + 14} textAnchor="middle" className="chart-tick">
          {tick}
        </text>
      ))}
      <line x1={LEFT} x2={WIDTH - RIGHT} y1={y(0)} y2={y(0)} className="path-axis" />
      <text x={(LEFT + WIDTH - RIGHT) / 2} y={HEIGHT - 6} textAnchor="middle" className="chart-label">
        scored pair
      </text>
      <text x={12} y={MID_Y} textAnchor="middle" className="chart-label" transform={`rotate(-90 12 ${MID_Y})`}>
        log E
      </text>
      <g className="path-boundary" data-testid="path-boundary" data-threshold={record.threshold}>
        <line x1={LEFT} x2={WIDTH - RIGHT} y1={y(record.threshold)} y2={y(record.threshold)} />
        <text x={LEFT + 6} y={y(record.threshold) - 5} className="chart-tick">
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
    </svg>
  );
}
