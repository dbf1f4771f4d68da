// Timers for deadlines that may be far away. Node's setTimeout takes at most 2^31 - 1 ms (24.8
// days): a longer delay is replaced by 1 ms with a TimeoutOverflowWarning, so a reserve-with-
// timeout of 2147483647 s (beanstalkd reads an int), or a job delayed 4294967295 s (a u32), would
// wake its timer every millisecond. Every timer here is armed for min(deadline, the most setTimeout takes)
// and its callback looks at the deadline again, so a far one is re-armed, not missed.

/** The longest delay setTimeout honours (ms). */
export const TIMER_DELAY_MAX_MS = 0x7fffffff;

/** The setTimeout delay for a deadline at `atMs` (wall-clock ms): now if past, at most TIMER_DELAY_MAX_MS. */
export function delayUntil(atMs: number, nowMs = Date.now()): number {
  return Math.min(TIMER_DELAY_MAX_MS, Math.max(0, atMs - nowMs));
}
