// ReclaimPolicy (src/shared/reclaim.ts): when a thread runs its one memory-reducing collection.
// Driven with made-up heap sizes and times: a quiet thread reclaims after its heap grew by
// RECLAIM_GROWTH_BYTES or after a burst, never while it is not quiet, never twice within
// RECLAIM_MIN_INTERVAL_MS, and a steady light load (quiet, never busy, no growth) never pays.

import { describe, expect, it } from 'vitest';
import {
  BurstMeter, isBurst, RECLAIM_BUSY_UTILIZATION, RECLAIM_BUSY_WORK, RECLAIM_GROWTH_BYTES, RECLAIM_MIN_INTERVAL_MS,
  RECLAIM_QUIET_UTILIZATION, ReclaimPolicy, reclaimIfDue,
} from '../../src/shared/reclaim.ts';

const MIB = 1024 * 1024;

describe('ReclaimPolicy', () => {
  it('reclaims a quiet thread whose heap grew by RECLAIM_GROWTH_BYTES, and not before', () => {
    const p = new ReclaimPolicy(20 * MIB);
    expect(p.check(20 * MIB + RECLAIM_GROWTH_BYTES - 1, true, false, 0)).toBe(false);
    expect(p.check(20 * MIB + RECLAIM_GROWTH_BYTES, false, false, 1000)).toBe(false); // not quiet
    expect(p.check(20 * MIB + RECLAIM_GROWTH_BYTES, true, false, 2000)).toBe(true);
  });

  it('remembers the peak: growth seen while busy counts once the thread is quiet, even if the heap shrank meanwhile', () => {
    const p = new ReclaimPolicy(20 * MIB);
    expect(p.check(200 * MIB, false, false, 0)).toBe(false);
    expect(p.check(25 * MIB, true, false, 1000)).toBe(true);
  });

  it('reclaims a quiet thread after a burst, however little its heap grew', () => {
    const p = new ReclaimPolicy(20 * MIB);
    expect(p.check(20 * MIB, false, true, 0)).toBe(false);
    expect(p.check(20 * MIB, true, false, 1000)).toBe(true);
  });

  it('never reclaims under a steady light load: quiet, never busy, no growth', () => {
    const p = new ReclaimPolicy(20 * MIB);
    for (let t = 0; t < 600_000; t += 1000) expect(p.check(20 * MIB + (t % 7) * MIB, true, false, t)).toBe(false);
  });

  it('after a reclaim: nothing until a new burst or growth, and not within RECLAIM_MIN_INTERVAL_MS', () => {
    const p = new ReclaimPolicy(20 * MIB);
    expect(p.check(20 * MIB, true, true, 0)).toBe(true);
    p.done(12 * MIB, 0);
    expect(p.check(12 * MIB, true, false, 10_000)).toBe(false);
    expect(p.check(12 * MIB, true, true, RECLAIM_MIN_INTERVAL_MS - 1)).toBe(false); // a burst, but too soon
    expect(p.check(12 * MIB, true, false, RECLAIM_MIN_INTERVAL_MS)).toBe(true); // the burst was remembered
    p.done(12 * MIB, RECLAIM_MIN_INTERVAL_MS);
    expect(p.check(12 * MIB + RECLAIM_GROWTH_BYTES, true, false, 3 * RECLAIM_MIN_INTERVAL_MS)).toBe(true);
  });
});

describe('isBurst', () => {
  it('a window is a burst by its event-loop utilisation or by the work done in it (50,000 pipelined deletes barely show on the loop)', () => {
    expect(isBurst(RECLAIM_BUSY_UTILIZATION, 0)).toBe(true);
    expect(isBurst(0.05, RECLAIM_BUSY_WORK)).toBe(true);
    expect(isBurst(RECLAIM_BUSY_UTILIZATION - 0.01, RECLAIM_BUSY_WORK - 1)).toBe(false);
    expect(isBurst(0.01, 1000)).toBe(false); // a steady light load
  });
});

describe('BurstMeter', () => {
  it('counts the work of a run of busy windows together: 5,000 connections over three windows are a burst', () => {
    const m = new BurstMeter(0);
    expect(m.look(0.2, 2000)).toEqual({ quiet: false, burst: false });
    expect(m.look(0.2, 4000)).toEqual({ quiet: false, burst: false });
    expect(m.look(0.05, RECLAIM_BUSY_WORK)).toEqual({ quiet: true, burst: true }); // the run ends with its last part
    expect(m.look(0.01, RECLAIM_BUSY_WORK)).toEqual({ quiet: true, burst: false }); // and starts again
  });

  it('never calls a steady light load a burst, however long it runs: each quiet window starts the count again', () => {
    const m = new BurstMeter(0);
    let work = 0;
    for (let i = 0; i < 600; i++) {
      work += RECLAIM_BUSY_WORK - 1;
      expect(m.look(RECLAIM_QUIET_UTILIZATION - 0.01, work)).toEqual({ quiet: true, burst: false });
    }
  });
});

describe('reclaimIfDue', () => {
  it("runs the collection on this thread at its first look, quiet or not (the start's garbage), and reports the heap before and after", () => {
    // Grow this worker's heap by more than RECLAIM_GROWTH_BYTES and drop it: the thread's first look
    // collects it even though the thread says it is neither quiet nor after a burst.
    let junk: unknown[] | null = [];
    for (let i = 0; i < 400_000; i++) junk.push({ i, s: `x${i}` });
    junk = null;
    const r = reclaimIfDue(false, false);
    expect(r).not.toBeNull();
    expect(r!.after).toBeLessThan(r!.before);
    expect(reclaimIfDue(true, true)).toBeNull(); // within RECLAIM_MIN_INTERVAL_MS
  });
});
