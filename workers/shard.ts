// A shard thread: owns the queues of the tubes hashed to it (a ShardCore) and serves its ring.
//
// It has no event loop work to do: it drains its request ring, applies each record to the core,
// runs the clock (delays, TTRs, pauses), publishes every reply of the batch with one ring write
// and one doorbell, then sleeps in Atomics.wait until the next request or the next deadline —
// whichever comes first. No per-job timers: the next wake comes from the heap tops. Before it
// sleeps it watches its ring for its busy-poll window (--busy-poll-us; by default only when the
// host has a core for it, src/server.ts's busyPollByDefault): a request that comes
// meanwhile (a one-command-in-flight client's next one) costs no wake-up of this thread, and the
// main thread rings no futex for it, since this thread has not announced a sleep.

import { parentPort, workerData } from 'node:worker_threads';
import { Doorbell } from '../src/shared/doorbell.ts';
import { RECLAIM_BUSY_REQUESTS, reclaimIfDue } from '../src/shared/reclaim.ts';
import { RecordReader } from '../src/shared/records.ts';
import { Ring } from '../src/shared/ring.ts';
import { ShardCore, type ShardConfig } from './core.ts';

interface ShardData extends ShardConfig {
  toShard: SharedArrayBuffer;
  fromShard: SharedArrayBuffer;
  bell: SharedArrayBuffer;
  mainBell: SharedArrayBuffer;
  stop: SharedArrayBuffer;
}

/** Longest sleep without a deadline: a safety net only; every request rings the doorbell. */
const IDLE_WAIT_MS = 1000;

const data = workerData as ShardData;
const inRing = Ring.attach(data.toShard);
const outRing = Ring.attach(data.fromShard);
const bell = Doorbell.attach(data.bell);
const mainBell = Doorbell.attach(data.mainBell);
const stop = new Int32Array(data.stop);
const core = new ShardCore(data);
const busyPollMs = (data.busyPollUs ?? 0) / 1000;
const out = core.out;
const reader = new RecordReader();
// A step waiting for other shards' steps (src/shared/order.ts) gives up when the server stops.
core.whileWaiting = () => Atomics.load(stop, 0) === 0;

/** Copies the batch of replies into the ring; waits for room if the main thread lags behind. */
function publish(): void {
  let off = 0;
  while (off < out.len) {
    const n = outRing.write(out.buf, off, out.len - off);
    off += n;
    if (off < out.len) {
      mainBell.ring();
      // The main thread drains asynchronously; a short sleep is cheaper than a second doorbell.
      Atomics.wait(stop, 0, 0, 1);
    }
  }
  out.reset();
  mainBell.ring();
}

/** Watches the ring until a request is there (true) or `until` (performance.now()) passes, or the pool stops (false). */
function pollRing(until: number): boolean {
  do {
    if (inRing.readable() > 0) return true;
    if (Atomics.load(stop, 0) !== 0) return false;
  } while (performance.now() < until);
  return inRing.readable() > 0;
}

function loop(): void {
  let lastWorkAt = Date.now();
  let requests = 0; // applied since the last look at the heap
  for (;;) {
    if (Atomics.load(stop, 0) !== 0) return;
    let got = false;
    for (;;) {
      reader.prepare(64 * 1024);
      const n = inRing.read(reader.buf, reader.end, reader.buf.length - reader.end);
      if (n === 0) break;
      reader.end += n;
      got = true;
      const now = Date.now();
      lastWorkAt = now;
      let at: number;
      while ((at = reader.next()) !== -1) {
        core.handle(reader.buf, at, now);
        requests++;
      }
      // While the ring keeps coming, a step another shard waits for may be long applied.
      core.progressed();
    }
    const next = core.afterBatch(Date.now());
    if (out.len > 0) publish();
    // Read bytes but nothing to answer yet: a record bigger than the ring is arriving in
    // pieces, and the main thread waits for room to send the rest.
    else if (got) mainBell.ring();
    core.tidyLog(Date.now());
    if (got) continue;
    if (busyPollMs > 0 && pollRing(performance.now() + Math.min(busyPollMs, next - Date.now()))) continue;
    const seq = bell.prepareWait();
    if (inRing.readable() > 0 || Atomics.load(stop, 0) !== 0) {
      bell.cancelWait();
      continue;
    }
    const until = Math.min(next, core.logDueMs(Date.now()));
    const waitMs = until === Infinity ? IDLE_WAIT_MS : Math.max(0, Math.min(IDLE_WAIT_MS, until - Date.now()));
    if (waitMs > 0) bell.wait(seq, waitMs);
    else bell.cancelWait();
    // Quiet for a whole idle wait: give back what a burst left (src/shared/reclaim.ts).
    if (Date.now() - lastWorkAt >= IDLE_WAIT_MS) {
      const r = reclaimIfDue(true, requests >= RECLAIM_BUSY_REQUESTS);
      requests = 0;
      if (r !== null) core.log.debug(r, 'memory given back');
    }
  }
}

parentPort?.postMessage('ready');
loop();
core.close();
