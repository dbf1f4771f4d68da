// Latency histograms kept where the event happens and read on a /metrics scrape: a fixed set of
// bucket bounds, one Float64Array per histogram (counts per bucket, then the +Inf count, then
// the sum in seconds), over a SharedArrayBuffer when another thread writes it. One writer per
// histogram; a reader may see a count and the sum of slightly different moments, as any scrape.
// Observed per batch (a ring round trip, an fsync), never per command.

/** Upper bounds of the buckets, in seconds (10 µs .. 1 s). */
export const LATENCY_BOUNDS_S: readonly number[] = [
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
];
const N = LATENCY_BOUNDS_S.length;

/** A histogram's numbers: counts per bucket (not cumulative), the +Inf bucket, the sum. */
export function newHistogram(shared: boolean): Float64Array {
  const bytes = (N + 2) * 8;
  return new Float64Array(shared ? new SharedArrayBuffer(bytes) : new ArrayBuffer(bytes));
}

/** The sum of `hs` (counts and sums), or null if there are none. */
export function addedUp(hs: readonly Float64Array[]): Float64Array | null {
  if (hs.length === 0) return null;
  const out = new Float64Array(N + 2);
  for (const h of hs) for (let i = 0; i < out.length; i++) out[i] += h[i];
  return out;
}

export function observe(h: Float64Array, seconds: number): void {
  let i = 0;
  while (i < N && seconds > LATENCY_BOUNDS_S[i]) i++;
  h[i]++;
  h[N + 1] += seconds;
}

/** Cumulative counts per bound, +Inf last, and the sum: what the exposition format wants. */
export function cumulative(h: Float64Array): { buckets: [number, number][]; count: number; sum: number } {
  const buckets: [number, number][] = [];
  let c = 0;
  for (let i = 0; i < N; i++) {
    c += h[i];
    buckets.push([LATENCY_BOUNDS_S[i], c]);
  }
  c += h[N];
  return { buckets, count: c, sum: h[N + 1] };
}
