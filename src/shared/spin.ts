// A wait on the CPU of a given length (a few microseconds), for a thread that has nothing to do but
// must not sleep: a busy-polling thread between two turns of its loop (src/route/router.ts).
//
// It reads no clock while it waits. performance.now() returns a double, and where V8 leaves the
// call un-inlined, every call allocates one (measured: a 10 µs wait that read the clock in its
// loop allocated 558 MB in 5 s at 10,000 jobs/s, in some runs and not in others, by how the code
// was compiled). So the wait counts iterations of an empty loop, and one clock read after each
// wait calibrates how many iterations the next one needs.

/** The fewest iterations per millisecond the calibration assumes (a thread descheduled mid-wait measures a low rate). */
export const SPIN_RATE_MIN = 1_000;
/** The most iterations per millisecond it assumes (a hundred times what an optimized empty loop runs, ~1 per ns). */
export const SPIN_RATE_MAX = 100_000_000;

/** Where the loop's result goes, so that the compiler cannot drop the loop. */
let sink = 0;

export class Spinner {
  /** Iterations per millisecond, as last measured (a first guess until then). */
  rate = 100_000;

  /**
   * Waits about `ms` on the CPU. `startMs` is performance.now() read just before; the one clock read
   * after the wait updates the rate (the mean of the old rate and the one just measured, so one
   * preempted wait halves the next one at most).
   */
  spin(ms: number, startMs: number): void {
    const n = Math.ceil(ms * this.rate);
    let x = sink;
    for (let i = 0; i < n; i++) x = (x + i) | 0;
    sink = x;
    this.rate = nextRate(this.rate, n, performance.now() - startMs);
  }
}

/** The rate after `n` iterations took `tookMs`: the mean of `rate` and the measured one, within [SPIN_RATE_MIN, SPIN_RATE_MAX]. */
export function nextRate(rate: number, n: number, tookMs: number): number {
  const measured = tookMs > 0 ? n / tookMs : SPIN_RATE_MAX;
  return Math.min(SPIN_RATE_MAX, Math.max(SPIN_RATE_MIN, (rate + measured) / 2));
}
