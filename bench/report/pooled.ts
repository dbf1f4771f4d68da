// Several rounds' latency histograms pooled into one distribution, and how far the rounds' swing
// moves a pooled percentile. A round's p99 on a shared 2-core VM swings several-fold from one
// round to the next (bench/RESULTS.md, sessions 13–16), so the median of the rounds' p99s rests on
// a handful of samples each; the pooled p99 rests on every job measured.

/** A histogram's non-empty buckets: [value in µs, count], as tools/bench-c-cycle.c lists them. */
export type Buckets = [number, number][];

/** Several histograms' buckets added up into one: the counts of equal values summed, in order of value. */
export function addBuckets(histograms: readonly Buckets[]): Buckets {
  const counts = new Map<number, number>();
  for (const buckets of histograms) for (const [v, c] of buckets) counts.set(v, (counts.get(v) ?? 0) + c);
  return [...counts.entries()].sort((a, b) => a[0] - b[0]);
}

/** The q-quantile in µs of the rounds' buckets added up: the smallest value with at least q of the samples at or below it (the generator's own rule). */
export function pooledQuantile(rounds: readonly Buckets[], q: number): number {
  const all = addBuckets(rounds);
  const n = all.reduce((a, [, c]) => a + c, 0);
  if (n === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil(q * n - 1e-9));
  let seen = 0;
  for (const [v, c] of all) {
    seen += c;
    if (seen >= rank) return v;
  }
  return Number.NaN;
}

/**
 * The ratio of two servers' pooled q-quantiles over paired rounds (round k of each, run side by
 * side), with the 5th and 95th percentiles of that ratio over `resamples` resamplings of the rounds
 * with replacement (a paired bootstrap; seeded, so a report is reproducible). An interval that
 * holds 1 says the rounds' swing alone could make the difference.
 */
export function pooledRatio(pairs: readonly (readonly [Buckets, Buckets])[], q: number, resamples = 2000): { ratio: number; low: number; high: number } {
  const ratio = (ps: readonly (readonly [Buckets, Buckets])[]): number => pooledQuantile(ps.map(([a]) => a), q) / pooledQuantile(ps.map(([, b]) => b), q);
  let seed = 20261127;
  const next = (): number => (seed = (seed * 48271) % 2147483647) / 2147483647;
  const ratios = Array.from({ length: resamples }, () => ratio(pairs.map(() => pairs[Math.floor(next() * pairs.length)]!))).sort((a, b) => a - b);
  const at = (p: number): number => ratios[Math.min(ratios.length - 1, Math.floor(p * ratios.length))]!;
  return { ratio: ratio(pairs), low: at(0.05), high: at(0.95) };
}
