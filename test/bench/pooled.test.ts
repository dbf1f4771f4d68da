// bench/report/pooled.ts: rounds' histograms pooled into one distribution, and the paired
// bootstrap's interval for a ratio of two servers' pooled percentiles.

import { describe, expect, it } from 'vitest';
import { addBuckets, pooledQuantile, pooledRatio, type Buckets } from '../../bench/report/pooled.ts';

/** One round: `n` samples spread evenly over 1..n µs times `scale`, and a tail of `slow` samples at `tail` µs. */
function round(n: number, scale: number, slow = 0, tail = 0): Buckets {
  const b: Buckets = Array.from({ length: n }, (_, i) => [(i + 1) * scale, 1]);
  if (slow > 0) b.push([tail, slow]);
  return b;
}

describe('addBuckets', () => {
  it('sums the counts of equal values, in order of value, and keeps every sample', () => {
    const a: Buckets = [[10, 1], [30, 2]];
    const b: Buckets = [[20, 5], [10, 3], [40, 1]];
    expect(addBuckets([a, b])).toEqual([[10, 4], [20, 5], [30, 2], [40, 1]]);
    expect(addBuckets([a])).toEqual(a);
    expect(addBuckets([])).toEqual([]);
    // Two generators' jobs as one distribution: the quantile of the sum (2 µs), not the worse of
    // the two generators' own p99s (50 µs: 2 of its 100 jobs).
    const stalled: Buckets = [[1, 98], [50, 2]];
    const calm: Buckets = [[2, 100]];
    expect(pooledQuantile([stalled], 0.99)).toBe(50);
    expect(pooledQuantile([addBuckets([stalled, calm])], 0.99)).toBe(2);
  });
});

describe('pooledQuantile', () => {
  it('adds the rounds up before it ranks, by the smallest value with at least q of the samples at or below it', () => {
    expect(pooledQuantile([[[10, 1], [20, 1], [30, 2]]], 0.5)).toBe(20);
    expect(pooledQuantile([[[10, 1], [20, 1], [30, 2]]], 0.51)).toBe(30);
    // Two rounds whose p99s are about 1 and 100 µs: pooled, the tail of the second is 1% of 200 samples, not of 100.
    const calm = round(100, 0.01);
    const stormy: Buckets = [[1, 98], [100, 2]];
    expect(pooledQuantile([calm], 0.99)).toBe(0.99);
    expect(pooledQuantile([stormy], 0.99)).toBe(100);
    expect(pooledQuantile([calm, stormy], 0.99)).toBe(1);
    expect(pooledQuantile([calm, stormy], 0.995)).toBe(100);
  });

  it('has no quantile of nothing', () => {
    expect(pooledQuantile([], 0.5)).toBeNaN();
    expect(pooledQuantile([[]], 0.99)).toBeNaN();
  });
});

describe('pooledRatio', () => {
  it('gives 1 for the same rounds, and an interval that holds it', () => {
    const rounds = [round(200, 1, 3, 900), round(200, 1, 1, 400), round(200, 1, 5, 2000)];
    const r = pooledRatio(rounds.map((b) => [b, b] as const), 0.99);
    expect(r).toEqual({ ratio: 1, low: 1, high: 1 });
  });

  it('gives the ratio of the pooled percentiles, with the rounds\' swing in the interval', () => {
    // Server A is twice as slow as B in every round, whatever the round's own spread.
    const pairs = [1, 3, 2, 5, 1, 4].map((s) => [round(300, 2 * s), round(300, s)] as const);
    const r = pooledRatio(pairs, 0.99);
    expect(r.ratio).toBeCloseTo(2, 1);
    expect(r.low).toBeGreaterThan(1.5);
    expect(r.high).toBeLessThan(2.5);
    expect(r.low).toBeLessThanOrEqual(r.ratio);
    expect(r.high).toBeGreaterThanOrEqual(r.ratio);
    // One stormy round of A's in six: the pooled ratio moves, and the interval widens to hold 1.
    const stormy = pairs.map(([a, b], k) => [k === 0 ? round(300, 1, 10, 5000) : b, b] as const);
    const s = pooledRatio(stormy, 0.99);
    expect(s.low).toBeLessThanOrEqual(1);
    expect(s.high).toBeGreaterThan(1);
  });
});
