// How long a connection-serving thread polls after a read before it sleeps (src/route/router.ts):
// the short window (--busy-poll-us) by default, the long one (--busy-poll-long-us) while polling
// without a pause costs at most half a core more than the short window does already, and no other
// task keeps wanting the thread's core.
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
//
// "Half a core more" is free only while no other task wants the core. A thread that never sleeps
// keeps a task the kernel places on its core waiting until the kernel preempts it; where the
// thread's clients run on the same small host, that task is a client, and its replies come late.
// On this 2-core VM, unpinned beside the load generator at 10,000 jobs/s, the p99 of put →
// RESERVED was 1.0-3.2 times beanstalkd's with the long window (three runs), 1.16 times pooled
// with the short one where the long one gave 2.21; in 4-7 of 78 periods the thread was preempted
// 74-162 times (pinned to a core of its own: at most 4-7 times in any period once warm). So a
// period in which the thread was preempted more than LONG_WINDOW_PREEMPTIONS times shows its
// core wanted (src/shared/preempted.ts counts), and the short window holds for a while after it:
// LONG_WINDOW_HOLD_MS the first time, twice as long each time the core is wanted again soon after
// a hold ends, up to LONG_WINDOW_HOLD_MAX_MS. The doubling tells the two apart: V8's compiler
// threads preempt the serving thread in one burst while a new load warms the code up (the long
// window is back a second later), clients beside it again and again (bench/RESULTS.md, session 22).

/** How long a period of measure lasts (ms): the window chosen at its end holds for the next. */
export const POLL_PERIOD_MS = 100;
/** The long window is used while the short one would sleep at most this share of a period. */
export const LONG_WINDOW_BUDGET = 0.5;
/** More preemptions than this in a period (of POLL_PERIOD_MS; in proportion for a longer one): other tasks want the thread's core. */
export const LONG_WINDOW_PREEMPTIONS = 20;
/** How long the short window holds after such a period, the first time (ms). */
export const LONG_WINDOW_HOLD_MS = 1_000;
/** The longest hold; a core not wanted for this long after a hold ends starts again at LONG_WINDOW_HOLD_MS. */
export const LONG_WINDOW_HOLD_MAX_MS = 60_000;

export class PollWindow {
  private readonly shortMs: number;
  private readonly longMs: number;
  /** Whether the long window holds now. */
  long = false;
  /** Time the short window would have slept in this period so far (ms). */
  private wouldSleep = 0;
  private periodStart = -Infinity;
  /** How many times the thread has been preempted so far (Preemptions.count); null: not known. */
  private readonly preempted: (() => number) | null;
  private lastPreempted = NaN;
  /** The short window holds until then: other tasks wanted the core. */
  private shortUntil = -Infinity;
  /** More preemptions than this in a period show the core wanted. */
  private readonly preemptionsMax: number;
  /** The hold in use (ms): it doubles when the core is wanted again soon after one ends. */
  private holdMs = LONG_WINDOW_HOLD_MS;
  /** How many periods found the thread's core wanted by other tasks (for tests). */
  wantedPeriods = 0;

  /**
   * Both windows in ms; a long window no longer than the short one is never used. `preempted`
   * counts the thread's preemptions so far (NaN, or no function: not known, never counted as
   * wanted); more than `preemptionsMax` in a period show the core wanted.
   */
  constructor(shortMs: number, longMs: number, preempted: (() => number) | null = null, preemptionsMax = LONG_WINDOW_PREEMPTIONS) {
    this.shortMs = shortMs;
    this.longMs = Math.max(longMs, shortMs);
    this.preempted = preempted;
    this.preemptionsMax = preemptionsMax;
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
    const cheap = this.longMs > this.shortMs && Number.isFinite(period) && this.wouldSleep <= LONG_WINDOW_BUDGET * period;
    if (this.preempted !== null) {
      const count = this.preempted();
      if (count - this.lastPreempted > this.preemptionsMax * (period / POLL_PERIOD_MS)) {
        // Within a hold, the same episode: the hold runs from now. After one: a new episode.
        if (now >= this.shortUntil) {
          this.holdMs = now - this.shortUntil > LONG_WINDOW_HOLD_MAX_MS ? LONG_WINDOW_HOLD_MS : Math.min(2 * this.holdMs, LONG_WINDOW_HOLD_MAX_MS);
        }
        this.shortUntil = now + this.holdMs;
        this.wantedPeriods++;
      }
      this.lastPreempted = count;
    }
    this.long = cheap && now >= this.shortUntil;
    this.wouldSleep = 0;
    this.periodStart = now;
  }
}
