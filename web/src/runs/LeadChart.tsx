// B's lead over the pairs of an A/B comparison (its discordant wins less A's) with both of the test's boundaries:
// the efficacy boundary ±c (the test decides once |lead| reaches it) and, with a futility δ, the futility band ±u
// (it stops with "no difference ≥ δ" while |lead| is inside it). Plain SVG.
import type { ABDesignRecord } from "./abDesign";
import { ChartSvg, XLabel, xScale, YGrid, YLabel, yScale, type Box, type Scale } from "./ChartAxes";

const BOX: Box = { width: 560, height: 280, left: 48, right: 24, top: 16, bottom: 36 };

/** Step lines through (pair, value) points, one polyline per run of pairs that have a value. */
function segments(values: (number | null)[], x: Scale, y: Scale): string[] {
  const out: string[] = [];
  let current: string[] = [];
  values.forEach((value, i) => {
    if (value === null) {
      if (current.length) out.push(current.join(" "));
      current = [];
      return;
    }
    current.push(`${x(i + 0.5)},${y(value)}`, `${x(i + 1.5)},${y(value)}`);
  });
  if (current.length) out.push(current.join(" "));
  return out;
}

export function LeadChart({ record }: { record: ABDesignRecord }) {
  const lead = record.lead_path ?? [];
  const efficacy = record.efficacy_boundary ?? [];
  const futility = record.futility_boundary ?? [];
  const n = Math.max(lead.length, 1);
  const reach = Math.max(
    2,
    ...lead.map(Math.abs),
    ...efficacy.filter((v): v is number => v !== null),
    ...futility.filter((v): v is number => v !== null),
  );
  const high = Math.ceil(reach * 1.1);
  const x = xScale(BOX, 0, n + 1);
  const y = yScale(BOX, -high, high);
  const line = [`${x(0)},${y(0)}`, ...lead.map((value, i) => `${x(i + 1)},${y(value)}`)].join(" ");
  const boundary = (values: (number | null)[], sign: number) =>
    segments(
      values.map((v) => (v === null ? null : sign * v)),
      x,
      y,
    );
  return (
    <ChartSvg
      className="path-chart lead-chart"
      data-testid="lead-chart"
      width={BOX.width}
      height={BOX.height}
      label="B's lead after each scored pair, with the efficacy and futility boundaries"
    >
      <YGrid box={BOX} ticks={[-high, 0, high]} y={y} />
      <XLabel box={BOX}>{`scored pair (of ${lead.length})`}</XLabel>
      <YLabel box={BOX}>B's lead (b − a)</YLabel>
      <g className="path-boundary" data-testid="efficacy-boundary" data-values={JSON.stringify(efficacy)}>
        {[1, -1].flatMap((sign) =>
          boundary(efficacy, sign).map((points, i) => <polyline key={`e${sign}${i}`} points={points} fill="none" />),
        )}
        <title>efficacy boundary: the test decides once |lead| reaches it</title>
      </g>
      {record.min_effect !== null && (
        <g className="futility-boundary" data-testid="futility-boundary" data-values={JSON.stringify(futility)}>
          {[1, -1].flatMap((sign) =>
            boundary(futility, sign).map((points, i) => (
              <polyline key={`f${sign}${i}`} points={points} fill="none" strokeDasharray="4 3" />
            )),
          )}
          <title>{`futility boundary: "no difference ≥ ${record.min_effect}" while |lead| is inside it`}</title>
        </g>
      )}
      <polyline points={line} className="path-line" />
      {lead.map((value, i) => (
        <circle key={i} cx={x(i + 1)} cy={y(value)} r={2.5} className="path-point" data-testid="lead-point">
          <title>{`pair ${i + 1}: lead ${value}`}</title>
        </circle>
      ))}
    </ChartSvg>
  );
}
