// The shard that runs on the connections' thread (ShardPool's HereShard) behaves as one on a
// thread of its own: a reply comes in a later callback than its request, replies in request
// order, the clock runs on a timer with no requests, holdRequests stalls requests but not the
// clock; and a pool may mix both kinds.

import { afterEach, describe, expect, it } from 'vitest';
import { ShardPool, type ReplyTarget } from '../../src/route/shards.ts';
import {
  E_RESERVED, E_TIMED_OUT, OP_PUT, OP_RESERVE, OP_RESERVE_WAIT, R_JOB, R_NONE, R_OK, R_PARKED, RESERVE_FOREVER, replyId, replyKind,
} from '../../src/shared/records.ts';
import { waitUntil } from '../support/harness.ts';

const pools: ShardPool[] = [];
afterEach(async () => {
  for (const p of pools.splice(0)) await p.close();
});

interface Seen {
  kind: number;
  seq: number;
  reply: number;
  id: number;
  shard: number;
}

function makePool(shards: number, here: number | null) {
  const replies: Seen[] = [];
  const events: Seen[] = [];
  let batches = 0;
  const pool = new ShardPool(
    { shards, here },
    {
      event: (shard, buf, at) => events.push({ kind: 0, seq: 0, reply: replyKind(buf, at), id: replyId(buf, at), shard }),
      batchDone: () => batches++,
      fatal: (shard, err) => {
        throw new Error(`shard ${shard}: ${err.message}`);
      },
    },
  );
  pools.push(pool);
  const target: ReplyTarget = {
    onShardReply: (shard, kind, seq, buf, at) => replies.push({ kind, seq, reply: replyKind(buf, at), id: replyId(buf, at), shard }),
  };
  const put = (shard: number, tube: number, id: number, delaySec = 0, ttrSec = 60): void => {
    const w = pool.request(shard, 1, target, id);
    w.header(OP_PUT, 4 + 1, 7, tube, 0, delaySec, id);
    w.u32(ttrSec);
    w.bytes(Buffer.from('x'), 0, 1);
  };
  const reserve = (shard: number, tube: number, seq: number): void => {
    const w = pool.request(shard, 2, target, seq);
    w.header(OP_RESERVE, 4, 7, 1, 0, 0, 0);
    w.u32(tube);
  };
  /** A reserve of connection 8 that waits in the shard (for ever) when nothing is ready. */
  const reserveWait = (shard: number, tube: number, seq: number): void => {
    const w = pool.request(shard, 2, target, seq);
    w.header(OP_RESERVE_WAIT, 4, 8, 1, 0, RESERVE_FOREVER, Infinity);
    w.u32(tube);
  };
  return { pool, replies, events, put, reserve, reserveWait, batches: () => batches };
}

describe('ShardPool with the shard here', () => {
  it('starts no thread for it, answers in a later callback, in request order', async () => {
    const { pool, replies, put, reserve } = makePool(1, 0);
    await pool.ready();
    expect(pool.threadCount).toBe(0);
    put(0, 1, 1);
    put(0, 1, 2);
    reserve(0, 1, 10);
    reserve(0, 1, 11);
    reserve(0, 1, 12);
    expect(replies).toEqual([]); // never within the request
    await waitUntil('the replies', () => replies.length === 5);
    expect(replies.map((r) => [r.kind, r.seq, r.reply, r.id])).toEqual([
      [1, 1, R_OK, 1],
      [1, 2, R_OK, 2],
      [2, 10, R_JOB, 1],
      [2, 11, R_JOB, 2],
      [2, 12, R_NONE, 0],
    ]);
  });

  it('runs the clock with no requests: a delay ends, a TTR ends', async () => {
    const { pool, events, put, reserve, reserveWait, replies } = makePool(1, 0);
    reserveWait(0, 3, 5);
    await waitUntil('parked', () => replies.some((r) => r.reply === R_PARKED));
    put(0, 3, 1, 1); // delayed 1 s: its end gives it to the waiting reserve, with no request
    await waitUntil('the delay ends', () => events.some((e) => e.reply === E_RESERVED && e.id === 1), undefined, 5000);
    // TTR 60 s of job 1: no timeout soon. A job with TTR 1 s times out by the clock alone.
    put(0, 4, 2, 0, 1);
    reserve(0, 4, 6);
    await waitUntil('its TTR ends', () => events.some((e) => e.reply === E_TIMED_OUT && e.id === 2), undefined, 5000);
    expect(pool.threadCount).toBe(0);
  });

  it('holdRequests stalls the requests but not the clock', async () => {
    const { pool, events, put, reserve, replies } = makePool(1, 0);
    put(0, 5, 1, 0, 1);
    reserve(0, 5, 1);
    await waitUntil('reserved', () => replies.length === 2);
    pool.holdRequests(0, true);
    put(0, 5, 2);
    await waitUntil('the TTR ends while held', () => events.some((e) => e.reply === E_TIMED_OUT), undefined, 5000);
    expect(replies.length).toBe(2); // the put waits
    pool.holdRequests(0, false);
    await waitUntil('the put is applied', () => replies.length === 3);
  });

  it('mixes a shard here with shards on threads', async () => {
    const { pool, replies, put, reserve } = makePool(3, 0);
    await pool.ready();
    expect(pool.threadCount).toBe(2);
    for (let shard = 0; shard < 3; shard++) {
      put(shard, 10 + shard, 100 + shard);
      reserve(shard, 10 + shard, shard);
    }
    await waitUntil('the replies', () => replies.length === 6);
    for (let shard = 0; shard < 3; shard++) {
      const mine = replies.filter((r) => r.shard === shard).map((r) => [r.reply, r.id]);
      expect(mine).toEqual([[R_OK, 100 + shard], [R_JOB, 100 + shard]]);
    }
  });

  it('every shard on a thread when none is here', async () => {
    const { pool } = makePool(2, null);
    await pool.ready();
    expect(pool.threadCount).toBe(2);
  });
});
