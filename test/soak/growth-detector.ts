/**
 * The soak's verdict on one sampled series: does it still grow at the end of the run, or has it
 * levelled off? Pure arithmetic, so the rule is unit-tested (test/soak.test.ts) apart from any load.
 *
 * The rule (docs/reliability.md, "Soak"). Only the second half of the run is judged: the first is
 * warm-up (heaps growing to their working size, JIT, Redis filling to the retention window). Over
 * that half:
 * 1. a least-squares line; its slope, carried over a horizon as long as the whole run ("what if
 *    the next run of this length grew the same way"), is the projected growth;
 * 2. the median of the last quarter of the run against the median of the third quarter: the rise.
 * A series with a GC sawtooth can be judged by its lower envelope (`lowerEnvelopeS`).
 * The series fails when the projected growth exceeds `tolerance` × the half's mean (and the
 * series' `floor`, an absolute amount below which growth is noise) AND the rise exceeds an eighth
 * of that same limit, i.e. half of what a straight leak at that limit gives between the two
 * quarters (a straight line rises a quarter of its projection from one quarter's median to the
 * next). The second condition is what makes the rule robust: a GC sawtooth or a single slow spike
 * can tilt a least-squares line, but leaves two medians about equal; a step that levelled off
 * early in the judged half also leaves them equal; a leak keeps both conditions true.
 */

export interface Sample {
  /** Seconds since the soak began. */
  t: number;
  v: number;
}

export interface GrowthRule {
  /** Projected growth over the horizon, as a fraction of the judged mean, that fails. @defaultValue 0.1 */
  tolerance?: number;
  /** Growth in the series' own unit that is never a failure (noise, allocator granularity). @defaultValue 0 */
  floor?: number;
  /**
   * Judge the lower envelope instead of the samples: each replaced by the least sample of the
   * preceding `lowerEnvelopeS` seconds. For a GC heap, whose samples land anywhere on a sawtooth,
   * the envelope follows the troughs (what survived the last collection), which is what a leak raises.
   */
  lowerEnvelopeS?: number;
}

export interface GrowthVerdict {
  start: number;
  end: number;
  min: number;
  max: number;
  /** Mean of the judged (second) half. */
  mean: number;
  /** Least-squares slope over the judged half, per second. */
  slopePerS: number;
  /** slopePerS × the whole run's length. */
  projected: number;
  /** Median of the last quarter minus median of the third. */
  rise: number;
  /** The growth that fails: max(tolerance × mean, floor). */
  limit: number;
  grows: boolean;
}

export function median(values: number[]): number {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Ordinary least squares through the points: the slope (0 for fewer than two distinct times). */
export function leastSquaresSlope(points: Sample[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mt = points.reduce((s, p) => s + p.t, 0) / n;
  const mv = points.reduce((s, p) => s + p.v, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.t - mt) * (p.v - mv);
    den += (p.t - mt) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** Each sample replaced by the least value of the samples in the `windowS` seconds up to it. */
export function lowerEnvelope(series: Sample[], windowS: number): Sample[] {
  return series.map((p) => ({ t: p.t, v: Math.min(...series.filter((q) => q.t <= p.t && q.t >= p.t - windowS).map((q) => q.v)) }));
}

/** Judges one series; it needs at least eight samples (two per quarter) to say anything. */
export function judgeGrowth(series: Sample[], rule: GrowthRule = {}): GrowthVerdict {
  if (series.length < 8) throw new Error(`a growth verdict needs at least 8 samples, got ${series.length}`);
  const tolerance = rule.tolerance ?? 0.1;
  const floor = rule.floor ?? 0;
  const judged = rule.lowerEnvelopeS ? lowerEnvelope(series, rule.lowerEnvelopeS) : series;
  const t0 = series[0]!.t;
  const span = series[series.length - 1]!.t - t0;
  const half = judged.filter((p) => p.t >= t0 + span / 2);
  const third = half.filter((p) => p.t < t0 + (span * 3) / 4).map((p) => p.v);
  const fourth = half.filter((p) => p.t >= t0 + (span * 3) / 4).map((p) => p.v);
  const values = series.map((p) => p.v);
  const mean = half.reduce((s, p) => s + p.v, 0) / half.length;
  const slopePerS = leastSquaresSlope(half);
  const projected = slopePerS * span;
  const rise = median(fourth) - median(third);
  const limit = Math.max(tolerance * Math.abs(mean), floor);
  return {
    start: values[0]!,
    end: values[values.length - 1]!,
    min: Math.min(...values),
    max: Math.max(...values),
    mean,
    slopePerS,
    projected,
    rise,
    limit,
    grows: projected > limit && rise > limit / 8,
  };
}
