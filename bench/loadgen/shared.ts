// The control block shared by the main thread and the load threads of one run.
//
// One SharedArrayBuffer, two views: Int32 slots (flags and counters, read with Atomics) and a few
// Float64 slots (epoch times). The hot path never touches it: a load thread keeps its counters in
// plain numbers and publishes them here from a 20 ms timer, the main thread samples them every
// 250 ms for the progress bar and the throughput-over-time chart. Cross-thread traffic is
// therefore a handful of stores per 20 ms, not one per command (MEASURED.md: a per-record
// notify costs 4–7x a batched publish).
//
// Layout (Int32 slot indices):
//   [0..15]                 control slots (kGo, kStop, ...)
//   [16 + t*16 .. +15]      counters of load thread t (kThreadJobs, ...)
// Float64 slots live in the same SAB after the Int32 area (kGoEpochMs, ...).

export const kGo = 0; //               0 until the main thread starts the measured run, then 1
export const kStop = 1; //             1: finish gracefully now (Ctrl-C, or another thread failed)
export const kReadyThreads = 2; //     load threads whose connections are all open and set up
export const kSeqNext = 3; //          next unallocated job sequence number (blocks of SEQ_BLOCK)
export const kInsertedTotal = 4; //    INSERTED replies over all threads (published, may lag 20 ms)
export const kDeletedTotal = 5; //     DELETED replies over all threads (published, may lag 20 ms)
export const kProducersDone = 6; //    producer connections that will put no more jobs
export const kFailedThreads = 7; //    threads that gave up (connection refused, protocol error)
export const kExtraMs = 8; //          ms the main thread added to the measured window (see run.ts)
const CONTROL_SLOTS = 16;

export const kThreadJobs = 0; //       jobs completed (put: INSERTED; otherwise DELETED)
export const kThreadCommands = 1; //   replies received, setup commands excluded
export const kThreadPuts = 2; //       INSERTED
export const kThreadReserves = 3; //   RESERVED
export const kThreadDeletes = 4; //    DELETED
export const kThreadErrors = 5; //     unexpected replies and connection errors
export const kThreadConnsOpen = 6; //  connections set up
export const kThreadConnsDone = 7; //  connections finished
export const THREAD_SLOTS = 16;

/** Float64 slots. */
export const kGoEpochMs = 0; //        wall-clock time (ms since epoch) of the start signal
const FLOAT_SLOTS = 8;

/**
 * Jobs sequence numbers are handed to threads in blocks so that one Atomics.add serves 1024 puts.
 * Why 1024: small enough that a -n run ends with at most one partial block per thread, large
 * enough that the shared counter is touched ~200 times a second at 200k puts/s.
 */
export const SEQ_BLOCK = 1024;

export interface ControlBlock {
  sab: SharedArrayBuffer;
  i32: Int32Array;
  f64: Float64Array;
  threads: number;
}

export function createControlBlock(threads: number): ControlBlock {
  const intBytes = (CONTROL_SLOTS + threads * THREAD_SLOTS) * 4;
  const floatOffset = Math.ceil(intBytes / 8) * 8;
  const sab = new SharedArrayBuffer(floatOffset + FLOAT_SLOTS * 8);
  return attachControlBlock(sab, threads);
}

export function attachControlBlock(sab: SharedArrayBuffer, threads: number): ControlBlock {
  const intSlots = CONTROL_SLOTS + threads * THREAD_SLOTS;
  const floatOffset = Math.ceil((intSlots * 4) / 8) * 8;
  return {
    sab,
    i32: new Int32Array(sab, 0, intSlots),
    f64: new Float64Array(sab, floatOffset, FLOAT_SLOTS),
    threads,
  };
}

/** Int32 slot index of counter `field` of thread `thread`. */
export function threadSlot(thread: number, field: number): number {
  return CONTROL_SLOTS + thread * THREAD_SLOTS + field;
}

/** Sum of one per-thread counter over all threads. */
export function sumThreadCounter(cb: ControlBlock, field: number): number {
  let total = 0;
  for (let t = 0; t < cb.threads; t++) total += Atomics.load(cb.i32, threadSlot(t, field));
  return total;
}

/** Wall-clock milliseconds with sub-millisecond precision, comparable across threads. */
export function epochNowMs(): number {
  return performance.timeOrigin + performance.now();
}
