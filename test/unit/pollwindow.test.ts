// Which polling window a connection-serving thread uses (src/shared/pollwindow.ts): the long one
// only while the short one would sleep at most LONG_WINDOW_BUDGET of a period, and not for a while
// after a period in which the thread was preempted more than LONG_WINDOW_PREEMPTIONS times. What
// it gains is measured in bench/ (cycle-c.ts), not here.

import { expect, it } from 'vitest';
import { LONG_WINDOW_BUDGET, LONG_WINDOW_HOLD_MAX_MS, LONG_WINDOW_HOLD_MS, LONG_WINDOW_PREEMPTIONS, POLL_PERIOD_MS, PollWindow } from '../../src/shared/pollwindow.ts';
import { parseInvoluntarySwitches, Preemptions } from '../../src/shared/preempted.ts';

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

/** Reads every 0.02 ms (the long window cheap) for `periods` periods, the thread preempted `perPeriod` times in each. */
function preemptedReads(w: PollWindow, c: { n: number }, perPeriod: number, from: number, periods: number): number {
  let now = from;
  for (let i = 0; i < periods; i++) {
    c.n += perPeriod;
    now = readsEvery(w, 0.02, now, 1);
  }
  return now;
}

it('a period with more than LONG_WINDOW_PREEMPTIONS preemptions holds the short window, LONG_WINDOW_HOLD_MS the first time', () => {
  const c = { n: 0 };
  const w = new PollWindow(SHORT, LONG, () => c.n);
  let now = preemptedReads(w, c, LONG_WINDOW_PREEMPTIONS, 0, 3);
  expect(w.long).toBe(true); // at the limit: not wanted
  expect(w.wantedPeriods).toBe(0);
  now = preemptedReads(w, c, LONG_WINDOW_PREEMPTIONS + 5, now, 1);
  expect(w.long).toBe(false);
  expect(w.wantedPeriods).toBe(1);
  // More such periods in a row are the same episode: the hold runs from the last.
  now = preemptedReads(w, c, LONG_WINDOW_PREEMPTIONS + 5, now, 4);
  const last = now;
  while (now < last + LONG_WINDOW_HOLD_MS - 2 * POLL_PERIOD_MS) {
    now = preemptedReads(w, c, 0, now, 1);
    expect(w.long).toBe(false);
  }
  now = preemptedReads(w, c, 0, now, 3);
  expect(w.long).toBe(true);
});

it('the hold doubles each time the core is wanted again soon after one ends, up to LONG_WINDOW_HOLD_MAX_MS, and starts again after a long calm', () => {
  const c = { n: 0 };
  const w = new PollWindow(SHORT, LONG, () => c.n);
  let now = preemptedReads(w, c, 0, 0, 2);
  /** One wanted period, then reads until the long window is back; returns how long the short one held. */
  const episode = (): number => {
    now = preemptedReads(w, c, 10 * LONG_WINDOW_PREEMPTIONS, now, 1);
    const from = now;
    expect(w.long).toBe(false);
    while (!w.long) now = preemptedReads(w, c, 0, now, 1);
    return now - from;
  };
  const near = (ms: number, want: number) => expect(Math.abs(ms - want)).toBeLessThanOrEqual(2 * POLL_PERIOD_MS);
  near(episode(), LONG_WINDOW_HOLD_MS);
  near(episode(), 2 * LONG_WINDOW_HOLD_MS);
  near(episode(), 4 * LONG_WINDOW_HOLD_MS);
  let hold = 4 * LONG_WINDOW_HOLD_MS;
  while (hold < LONG_WINDOW_HOLD_MAX_MS) {
    hold = Math.min(2 * hold, LONG_WINDOW_HOLD_MAX_MS);
    near(episode(), hold);
  }
  near(episode(), LONG_WINDOW_HOLD_MAX_MS);
  // Calm for longer than the longest hold: the next episode holds LONG_WINDOW_HOLD_MS again.
  now = preemptedReads(w, c, 0, now, LONG_WINDOW_HOLD_MAX_MS / POLL_PERIOD_MS + 10);
  near(episode(), LONG_WINDOW_HOLD_MS);
});

it('preemptions in a longer period count in proportion; the limit can be given; an unknown count (NaN) never holds', () => {
  const c = { n: 0 };
  const w = new PollWindow(SHORT, LONG, () => c.n);
  let now = preemptedReads(w, c, 0, 0, 2);
  // A silence of ten periods, with 5 preemptions per period's worth of it: not wanted.
  c.n += 5 * 10;
  now += 10 * POLL_PERIOD_MS;
  w.read(now, 0.02);
  now = readsEvery(w, 0.02, now, 2);
  expect(w.wantedPeriods).toBe(0);
  expect(w.long).toBe(true);

  // A limit of its own (ServerOptions.busyPollLongPreemptions): Infinity heeds none.
  const d = { n: 0 };
  const heedless = new PollWindow(SHORT, LONG, () => d.n, Infinity);
  preemptedReads(heedless, d, 1_000, 0, 5);
  expect(heedless.long).toBe(true);
  expect(heedless.wantedPeriods).toBe(0);
  const strict = new PollWindow(SHORT, LONG, () => d.n, 2);
  preemptedReads(strict, d, 3, 0, 3);
  expect(strict.wantedPeriods).toBeGreaterThan(0);

  const unknown = new PollWindow(SHORT, LONG, () => NaN);
  readsEvery(unknown, 0.02, 0, 5);
  expect(unknown.long).toBe(true);
  expect(unknown.wantedPeriods).toBe(0);
});

it("Preemptions reads the calling thread's involuntary context switches from the kernel, and is null where it cannot", () => {
  const status = Buffer.from('Name:\tnode\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t4321\n');
  expect(parseInvoluntarySwitches(status, status.length)).toBe(4321);
  const none = Buffer.from('Name:\tnode\nvoluntary_ctxt_switches:\t17\n');
  expect(parseInvoluntarySwitches(none, none.length)).toBeNaN();
  expect(Preemptions.open('/nonexistent/status')).toBeNull();
  if (process.platform !== 'linux') return;
  const p = Preemptions.open();
  expect(p).not.toBeNull();
  const a = (p as Preemptions).count();
  expect(a).toBeGreaterThanOrEqual(0);
  expect((p as Preemptions).count()).toBeGreaterThanOrEqual(a);
  (p as Preemptions).close();
  expect((p as Preemptions).count()).toBeNaN();
});
