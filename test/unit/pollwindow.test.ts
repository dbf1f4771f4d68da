// Which polling window a connection-serving thread uses (src/shared/pollwindow.ts): the long one
// only while the short one would sleep at most LONG_WINDOW_BUDGET of a period. What it gains is
// measured in bench/ (cycle-c.ts), not here.

import { expect, it } from 'vitest';
import { LONG_WINDOW_BUDGET, POLL_PERIOD_MS, PollWindow } from '../../src/shared/pollwindow.ts';

const SHORT = 0.05;
const LONG = 0.5;

/** Reads every `gapMs` from `from` for `periods` periods; returns the time of the last one. */
function readsEvery(w: PollWindow, gapMs: number, from: number, periods: number): number {
  let now = from;
  const end = from + periods * POLL_PERIOD_MS;
  while (now < end) {
    now += gapMs;
    w.read(now, gapMs);
  }
  return now;
}

it('starts short; a steady stream of reads closer than the short window makes it long', () => {
  const w = new PollWindow(SHORT, LONG);
  expect(w.ms).toBe(SHORT);
  w.read(1_000, 1_000); // the first read, after the start's silence
  expect(w.ms).toBe(SHORT);
  readsEvery(w, 0.03, 1_000, 2);
  expect(w.long).toBe(true);
  expect(w.ms).toBe(LONG);
});

it('stays short while the short window would sleep more than the budget', () => {
  const w = new PollWindow(SHORT, LONG);
  // A read every 0.2 ms: the short window would sleep 0.15 of every 0.2 ms, 75%.
  readsEvery(w, 0.2, 0, 5);
  expect(w.long).toBe(false);
  // Just within the budget: sleeping (gap - SHORT) / gap <= budget.
  const gap = SHORT / (1 - LONG_WINDOW_BUDGET) - 0.001;
  readsEvery(w, gap, 500, 3);
  expect(w.long).toBe(true);
  // Just past it.
  readsEvery(w, SHORT / (1 - LONG_WINDOW_BUDGET) + 0.002, 1_000, 3);
  expect(w.long).toBe(false);
});

it('measures what the short window would sleep, whichever window holds: the load falling makes it short again', () => {
  const w = new PollWindow(SHORT, LONG);
  let now = readsEvery(w, 0.02, 0, 3);
  expect(w.long).toBe(true);
  // Reads 0.4 ms apart: the long window (0.5 ms) never lets the thread sleep, but the short one would, 87%.
  now = readsEvery(w, 0.4, now, 2);
  expect(w.long).toBe(false);
  // A silence longer than a period, then a read: short.
  now = readsEvery(w, 0.02, now, 3);
  expect(w.long).toBe(true);
  w.read(now + 10 * POLL_PERIOD_MS, 10 * POLL_PERIOD_MS);
  expect(w.long).toBe(false);
});

it('a long window no longer than the short one (--busy-poll-long-us 0) is never used', () => {
  for (const long of [0, SHORT]) {
    const w = new PollWindow(SHORT, long);
    readsEvery(w, 0.01, 0, 3);
    expect(w.long).toBe(false);
    expect(w.ms).toBe(SHORT);
  }
});
