// How the dashboard writes numbers: rates as percentages with one decimal, intervals as `[lo, hi]`.

/** `0.4385` → `43.9%`; null (nothing scored) → `—`. */
export function pct(value: number | null | undefined): string {
  if (value === null || value === undefined) return "—";
  return `${(value * 100).toFixed(1)}%`;
}

/** `[0.4385, 1]` → `[43.9%, 100.0%]`. */
export function interval(ci: readonly [number, number] | null | undefined): string {
  if (!ci) return "—";
  return `[${pct(ci[0])}, ${pct(ci[1])}]`;
}

/** A mean return with its spread, two decimals: `12.50 ± 3.04`; `—` when no episode has one. */
export function returns(mean: number | null | undefined, std: number | null | undefined): string {
  if (mean === null || mean === undefined) return "—";
  const text = mean.toFixed(2);
  return std === null || std === undefined ? text : `${text} ± ${std.toFixed(2)}`;
}

/** A signed difference of two rates in percentage points: `+5.0 pp`. */
export function points(value: number | null | undefined): string {
  if (value === null || value === undefined) return "—";
  const text = (value * 100).toFixed(1);
  return `${value > 0 ? "+" : ""}${text} pp`;
}

/** A bound of an interval in percentage points: as `points`, except that a bound too close to 0 to show in one
 * decimal is written in scientific notation (`+1.9e-2 pp`), so that a bound beside 0 never reads as 0. */
export function bound(value: number): string {
  if (value === 0 || Math.abs(value * 100) >= 0.05) return points(value);
  return `${value > 0 ? "+" : ""}${(value * 100).toExponential(1)} pp`;
}

/** A p-value: four decimals, or scientific notation below 0.001. */
export function pValue(value: number): string {
  if (value >= 0.001) return value.toFixed(4);
  return value.toExponential(2);
}

/** A Unix time in seconds as local date and time. */
export function when(seconds: number | null | undefined): string {
  if (!seconds) return "—";
  return new Date(seconds * 1000).toLocaleString();
}
