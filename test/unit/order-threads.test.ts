// StepOrder (src/shared/order.ts) across real threads: a step waits until another shard has
// applied its stream up to a position, however the counters wrap, and gives up when told to.

import { describe, expect, it } from 'vitest';
import { StepOrder } from '../../src/shared/order.ts';
import { startWorker } from '../support/worker.ts';
import type { OrderWorkerData, OrderWorkerResult } from './order-worker.ts';

const url = new URL('./order-worker.ts', import.meta.url);

describe('StepOrder', () => {
  it('compares positions across the wrap of the counters', () => {
    const o = StepOrder.create(2);
    o.publish(0, 0x7ffffff0);
    expect(o.reached(0, 0x7ffffff0)).toBe(true);
    expect(o.reached(0, 0x7ffffff1)).toBe(false);
    expect(o.reached(0, (0x7ffffff0 + 0x20) | 0)).toBe(false); // past 2^31: a negative int32
    o.publish(0, (0x7ffffff0 + 0x20) | 0);
    expect(o.reached(0, 0x7ffffff0)).toBe(true);
    expect(o.reached(0, (0x7ffffff0 + 0x20) | 0)).toBe(true);
    o.publish(0, 3); // past 2^32
    expect(o.reached(0, -5)).toBe(true);
    expect(o.reached(0, 4)).toBe(false);
    expect(o.reached(1, 1)).toBe(false);
  });

  // Positions free-running int32 counters: across 2^31 (int32 wraps to negative) and across 2^32
  // (-1 to 0). The sender is never 2^31 ahead of a shard (a ring and a backlog are in flight).
  it.each([
    ['2^31', 0x7fffff00],
    ['2^32', -30000],
  ])('a chain of four threads, each waiting for the one before, round after round, across %s', async (_name, first) => {
    const SHARDS = 5;
    const o = StepOrder.create(SHARDS);
    const stop = new SharedArrayBuffer(4);
    const positions: number[] = [];
    for (let i = 0, p = first; i < 3000; i++) positions.push((p = (p + 1 + (i % 7) * 20) | 0));
    // Every shard starts at `first`, before any worker runs, as a server's all start at 0. (Left
    // at 0 while the workers started, shard 0 looked 30,000 bytes ahead of the '2^32' variant's
    // first round: a worker started before this thread's first publish passed its first wait and
    // then saw shard 0 go back to `first`, an "early" round; seen once in a full run on 2 cores.)
    for (let shard = 0; shard < SHARDS; shard++) o.publish(shard, first);
    const runs = [];
    for (let index = 1; index < SHARDS; index++) {
      const data: OrderWorkerData = { order: o.sab, index, positions, stop };
      runs.push(startWorker<OrderWorkerResult>(url, data, `order worker ${index}`));
    }
    // Shard 0 is this thread: it publishes each round's position a step short first.
    for (const pos of positions) {
      o.publish(0, (pos - 1) | 0);
      if (pos % 13 === 0) await new Promise((r) => setImmediate(r));
      o.publish(0, pos);
    }
    const results = await Promise.all(runs.map((r) => r.result));
    for (const r of results) {
      expect(r.early).toBe(0);
      expect(r.seen.length).toBe(positions.length);
      for (let i = 0; i < positions.length; i++) expect(((r.seen[i] - positions[i]) | 0) >= 0).toBe(true);
    }
    expect(o.reached(SHARDS - 1, positions[positions.length - 1])).toBe(true);
  });

  it('a wait gives up when its `meanwhile` says so (the server stops)', async () => {
    const o = StepOrder.create(2);
    const stop = new SharedArrayBuffer(4);
    const { result } = startWorker<OrderWorkerResult>(url, { order: o.sab, index: 1, positions: [10], stop } satisfies OrderWorkerData, 'order worker');
    await new Promise((r) => setTimeout(r, 50));
    Atomics.store(new Int32Array(stop), 0, 1);
    const r = await result;
    expect(r.early).toBe(1);
    expect(r.seen).toEqual([0]);
  });

  it('the waiting thread runs `meanwhile` between looks', () => {
    const o = StepOrder.create(2);
    let calls = 0;
    o.waitFor(1, 5, () => {
      calls++;
      o.publish(1, calls); // as the shard here moves the rings on, and the other shard gets on
      return true;
    }, 0.05);
    expect(calls).toBe(5);
    expect(o.reached(1, 5)).toBe(true);
  });
});
