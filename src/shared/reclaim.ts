// Giving memory back after a burst: one memory-reducing collection when a thread goes quiet.
//
// V8 keeps what a burst made it grow: the young generation grows to its maximum (2 × 64 MiB
// here) while many objects survive (thousands of connections come and go, tens of thousands of
// tubes are made), and a normal full collection moves the freed pages into a pool that stays
// resident. V8's own memory reducer would release them once the isolate allocates slowly, but it
// judges the rate by samples taken at collections, and a quiet server makes none: it reports
// "high allocation rate" for ever (measured: a bare Node net server, 20,000 connections made and
// closed one by one, 46 → 94 MiB and never back; shardstalk 84 → 180 MiB). Asked for one
// memory-reducing collection (the "last resort" flavour: full collections with the pool released)
// the same process returns to within a few MiB of its idle size.
//
// So each thread runs that collection once when it goes quiet after a burst: after its heap grew
// by RECLAIM_GROWTH_BYTES, or after it was busy (what a burst freed, 50,000 tubes deleted say,
// is garbage no collection has looked at yet: the deletes allocate too little to start one). A
// busy thread keeps what it uses; a thread under a steady light load is never busy and never
// pays for a collection; a quiet one gives back what a burst left. A thread with an event loop
// calls this from a timer and judges by its event-loop utilisation; a shard thread, which blocks
// in Atomics.wait instead, by the requests it applied and whether a wait ended with nothing to do.

import v8 from 'node:v8';
import vm from 'node:vm';

/** Heap growth (committed bytes, since the last reclaim or the start) that makes a quiet thread reclaim. */
export const RECLAIM_GROWTH_BYTES = 16 * 1024 * 1024;
/** A thread whose event loop was busy less than this share of the last check's window is quiet. */
export const RECLAIM_QUIET_UTILIZATION = 0.1;
/** A thread whose event loop was busy at least this share of a check's window had a burst. */
export const RECLAIM_BUSY_UTILIZATION = 0.3;
/**
 * So had a thread that did this many units of work (commands read, connections opened) in one
 * check's window: 50,000 pipelined deletes take a tenth of a second, too little for the
 * utilisation to show, and free what a collection has yet to find (measured: 50,000 tubes
 * emptied, +75 MiB kept without this). A steady light load stays below it.
 */
export const RECLAIM_BUSY_WORK = 5000;
/** A shard thread that applied this many requests since the last reclaim had a burst. */
export const RECLAIM_BUSY_REQUESTS = 10_000;
/** How often a thread with an event loop looks (ms). */
export const RECLAIM_CHECK_MS = 1000;
/** At most one reclaim per thread this often (ms): it costs tens of milliseconds of the thread. */
export const RECLAIM_MIN_INTERVAL_MS = 2000;

type GcFunction = (options?: { type?: string; execution?: string; flavor?: string }) => void;

let gcFunction: GcFunction | null | undefined;

/**
 * This isolate's `gc`, without the --expose-gc flag on the command line: the flag set now is seen
 * by a context made after it. null if this Node does not give it.
 */
function gc(): GcFunction | null {
  if (gcFunction !== undefined) return gcFunction;
  const own = (globalThis as { gc?: GcFunction }).gc;
  if (typeof own === 'function') return (gcFunction = own);
  try {
    v8.setFlagsFromString('--expose-gc');
    const f = vm.runInNewContext('gc') as unknown;
    gcFunction = typeof f === 'function' ? (f as GcFunction) : null;
  } catch {
    gcFunction = null;
  }
  return gcFunction;
}

/** What a reclaim did: the thread's committed heap before and after (bytes). */
export interface Reclaimed {
  before: number;
  after: number;
}

/** When to reclaim, from the thread's heap, quiet and bursts (no clock of its own, so tests drive it). */
export class ReclaimPolicy {
  /** The committed heap after the last reclaim (or at the start). */
  baseline: number;
  /** The largest committed heap seen since. */
  peak: number;
  /** Whether the thread was busy since. */
  busy = false;
  private lastAt = -Infinity;

  constructor(heapBytes: number) {
    this.baseline = heapBytes;
    this.peak = heapBytes;
  }

  /** Notes the heap's size and the thread's state now; returns whether to reclaim (then call `done`). */
  check(heapBytes: number, quiet: boolean, busy: boolean, nowMs: number): boolean {
    if (heapBytes > this.peak) this.peak = heapBytes;
    if (busy) this.busy = true;
    if (!quiet || nowMs - this.lastAt < RECLAIM_MIN_INTERVAL_MS) return false;
    return this.busy || this.peak - this.baseline >= RECLAIM_GROWTH_BYTES;
  }

  /** A reclaim ran at `nowMs` and left `heapBytes` committed. */
  done(heapBytes: number, nowMs: number): void {
    this.baseline = heapBytes;
    this.peak = heapBytes;
    this.busy = false;
    this.lastAt = nowMs;
  }
}

function heapBytes(): number {
  return v8.getHeapStatistics().total_heap_size;
}

let policy: ReclaimPolicy | null = null;

/**
 * Looks at this thread's heap and reclaims if the policy says so; `quiet`: the thread has nothing
 * to do now, `busy`: it had a burst since the last look. Returns what it reclaimed, or null.
 */
export function reclaimIfDue(quiet: boolean, busy: boolean): Reclaimed | null {
  const now = performance.now();
  if (policy === null) {
    // The start was this thread's first burst: loading and compiling its modules grew the young
    // generation (to 4 MiB for 0.6 MiB live, measured on the main thread) and left garbage. The
    // first look gives that back (the idle server: 60 -> 56.5 MiB), quiet or not: it ends the
    // start, which must not wait on the quiet a loaded machine may not show for a while.
    const heap = heapBytes();
    policy = new ReclaimPolicy(heap);
    policy.check(heap, quiet, busy, now);
  } else if (!policy.check(heapBytes(), quiet, busy, now)) {
    return null;
  }
  const collect = gc();
  if (collect === null) {
    policy.done(heapBytes(), now); // nothing to do it with: do not look again until the next growth
    return null;
  }
  const before = policy.peak;
  collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  const after = heapBytes();
  policy.done(after, performance.now());
  return { before, after };
}

/** Whether one check's window (its event-loop utilisation, the work counted for it) was a burst. */
export function isBurst(utilization: number, work: number): boolean {
  return utilization >= RECLAIM_BUSY_UTILIZATION || work >= RECLAIM_BUSY_WORK;
}

/**
 * Judges each check's window of a thread with an event loop: quiet, and a burst. The work is
 * counted over the run of windows since the last quiet one, not per window: 5,000 connections
 * opened one after another over two seconds are a burst as much as 5,000 opened within one
 * (measured: split over two windows, neither reached RECLAIM_BUSY_WORK, and whether the thread
 * gave their garbage back depended on where a window happened to start). A steady light load
 * keeps every window quiet, so its count starts again at each.
 */
export class BurstMeter {
  private lastWork: number;
  /** Work done since the last quiet window. */
  private run = 0;

  constructor(work: number) {
    this.lastWork = work;
  }

  /** One window ended with the loop busy for `utilization` of it and `work` done so far (a running count). */
  look(utilization: number, work: number): { quiet: boolean; burst: boolean } {
    this.run += work - this.lastWork;
    this.lastWork = work;
    const quiet = utilization < RECLAIM_QUIET_UTILIZATION;
    const burst = isBurst(utilization, this.run);
    if (quiet) this.run = 0;
    return { quiet, burst };
  }
}

/**
 * For a thread with an event loop: looks every RECLAIM_CHECK_MS (the timer does not keep the
 * process alive) and reclaims when the loop was quiet since the last look. `work` counts what the
 * thread did (commands read, connections opened and closed), for bursts too light on the loop to show;
 * `onReclaimed` hears of each reclaim (for the log), `onLook` of each look after it. Returns a
 * function that stops it.
 */
export function startReclaimTimer(onReclaimed?: (r: Reclaimed) => void, work?: () => number, onLook?: () => void): () => void {
  let last = performance.eventLoopUtilization();
  const meter = new BurstMeter(work?.() ?? 0);
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const window = performance.eventLoopUtilization(now, last);
    last = now;
    const { quiet, burst } = meter.look(window.utilization, work?.() ?? 0);
    const r = reclaimIfDue(quiet, burst);
    if (r !== null) onReclaimed?.(r);
    onLook?.();
  }, RECLAIM_CHECK_MS);
  timer.unref();
  return () => clearInterval(timer);
}
