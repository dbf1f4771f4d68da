// The wait between idle turns of a polling thread (src/shared/spin.ts, src/route/router.ts's
// idleWaitMs). What it saves (garbage, collections) is measured in bench/, not here.

import { expect, it } from 'vitest';
import { BUSY_POLL_SPIN_SHARE, BUSY_POLL_SPIN_US_FLOOR, idleWaitMs } from '../../src/route/router.ts';
import { nextRate, SPIN_RATE_MAX, SPIN_RATE_MIN, Spinner } from '../../src/shared/spin.ts';

/** --busy-poll-spin-us 10, as measured in bench/RESULTS.md (sessions 20, 21). */
const MAX = 10 / 1000;

it('a polling thread waits a share of its idle time: at least the floor, at most --busy-poll-spin-us and the window', () => {
  // Just after a read: the floor.
  expect(idleWaitMs(0, 1, MAX)).toBe(BUSY_POLL_SPIN_US_FLOOR / 1000);
  // Growing with the idle time...
  expect(idleWaitMs(0.01, 1, MAX)).toBeCloseTo(0.01 * BUSY_POLL_SPIN_SHARE, 9);
  expect(idleWaitMs(0.012, 1, MAX)).toBeGreaterThan(idleWaitMs(0.01, 1, MAX));
  // ...up to the most it may wait,
  expect(idleWaitMs(1, 1, MAX)).toBe(MAX);
  // and never past the polling window's end.
  expect(idleWaitMs(1, 0.003, MAX)).toBe(0.003);
  // A wait too short to be worth a clock read is none; --busy-poll-spin-us 0 never waits.
  expect(idleWaitMs(1, 0.0005, MAX)).toBe(0);
  expect(idleWaitMs(1, 1, 0)).toBe(0);
  expect(idleWaitMs(0, 1, 0.0015)).toBe(0.0015);
});

it('the calibration moves half way to the measured rate, within its bounds', () => {
  expect(nextRate(1000_000, 10_000, 0.01)).toBe(1000_000); // measured 1,000,000 per ms: unchanged
  expect(nextRate(1000_000, 10_000, 0.02)).toBe(750_000);
  // A wait the thread spent descheduled halves the next one at most...
  expect(nextRate(1000_000, 10_000, 1000)).toBeGreaterThanOrEqual(500_000);
  // ...and the rate stays within its bounds, whatever the clock says.
  expect(nextRate(SPIN_RATE_MIN, 1, 1e9)).toBe(SPIN_RATE_MIN);
  expect(nextRate(SPIN_RATE_MAX, 1e12, 1e-9)).toBe(SPIN_RATE_MAX);
  expect(nextRate(SPIN_RATE_MAX, 1000, 0)).toBe(SPIN_RATE_MAX);
});

it('a spinner learns its rate from its own waits', () => {
  const s = new Spinner();
  const first = s.rate;
  for (let i = 0; i < 20; i++) s.spin(0.01, performance.now());
  expect(s.rate).not.toBe(first);
  expect(s.rate).toBeGreaterThanOrEqual(SPIN_RATE_MIN);
  expect(s.rate).toBeLessThanOrEqual(SPIN_RATE_MAX);
});
