// The worker side of order-threads.test.ts: run as a worker, it is "shard" `index` of a chain:
// round after round it waits (StepOrder.waitFor) until shard `index - 1` has applied its stream
// up to the round's position, notes what it saw, then publishes that position for itself.

import { parentPort, workerData } from 'node:worker_threads';
import { StepOrder } from '../../src/shared/order.ts';

export interface OrderWorkerData {
  order: SharedArrayBuffer;
  index: number;
  /** The positions, one per round (free-running: they cross 2^31 and 2^32). */
  positions: number[];
  /** Int32 [0]: set to 1 to make every wait give up. */
  stop: SharedArrayBuffer;
}

export interface OrderWorkerResult {
  /** Per round: how far the shard before had got when the wait returned. */
  seen: number[];
  /** Rounds whose wait returned before the shard before got there. */
  early: number;
}

const data = workerData as OrderWorkerData;
const order = StepOrder.attach(data.order);
const stop = new Int32Array(data.stop);
const seen: number[] = [];
let early = 0;
for (const pos of data.positions) {
  order.waitFor(data.index - 1, pos, () => Atomics.load(stop, 0) === 0, 1);
  const done = order.done(data.index - 1);
  seen.push(done);
  if (!order.reached(data.index - 1, pos)) early++;
  order.publish(data.index, pos);
}
parentPort?.postMessage({ seen, early } satisfies OrderWorkerResult);
