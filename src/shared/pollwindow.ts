// How long a connection-serving thread polls after a read before it sleeps (src/route/router.ts):
// the short window (--busy-poll-us) by default, the long one (--busy-poll-long-us) while polling
// without a pause costs at most half a core more than the short window does already.
//
// Why two. A command that arrives while the thread sleeps waits for a wake-up: tens of
// microseconds on this VM, some hundreds. At a fixed 10,000 jobs/s those wake-ups were most of
// the put → RESERVED p95 and much of its p99 (bench/RESULTS.md, session 20); a 500 µs window
// removes them. But polling that long after every read keeps the core busy for any client that
// sends a command every half millisecond, and at such rates the short window lets the thread sleep
// most of the time. So the thread measures what the short window would cost: the time it would
// have slept between reads under it (each idle time between the end of a turn that read and the
// next read, less the short window), over a period. While that is at most LONG_WINDOW_BUDGET of
// the period (the thread works or polls at least half the time anyway), polling without pause
// costs at most that share of a core more, and the long window is used. The measure does not
// depend on the window in use, so the choice does not feed on itself. (A quarter as the budget,
// with the gaps measured from turn to turn, took the long window at 10,000 jobs/s on this VM in
// only 4 rounds of 20: bench/RESULTS.md, session 21.)

/** How long a period of measure lasts (ms): the window chosen at its end holds for the next. */
export const POLL_PERIOD_MS = 100;
/** The long window is used while the short one would sleep at most this share of a period. */
export const LONG_WINDOW_BUDGET = 0.5;

export class PollWindow {
  private readonly shortMs: number;
  private readonly longMs: number;
  /** Whether the long window holds now. */
  long = false;
  /** Time the short window would have slept in this period so far (ms). */
  private wouldSleep = 0;
  private periodStart = -Infinity;

  /** Both windows in ms; a long window no longer than the short one is never used. */
  constructor(shortMs: number, longMs: number) {
    this.shortMs = shortMs;
    this.longMs = Math.max(longMs, shortMs);
  }

  /** The window that holds now (ms). */
  get ms(): number {
    return this.long ? this.longMs : this.shortMs;
  }

  /** A turn read something at `now`, its first read `gapMs` after the last such turn ended. */
  read(now: number, gapMs: number): void {
    if (gapMs > this.shortMs) this.wouldSleep += gapMs - this.shortMs;
    const period = now - this.periodStart;
    if (period < POLL_PERIOD_MS) return;
    // A first read, or one after a silence longer than a period: the gap is the period's sleep.
    this.long = this.longMs > this.shortMs && Number.isFinite(period) && this.wouldSleep <= LONG_WINDOW_BUDGET * period;
    this.wouldSleep = 0;
    this.periodStart = now;
  }
}
