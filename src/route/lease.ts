// workq's lease over named queues, through the fan-in (./fanin.ts): hands out the ready job that
// comes first among all the named queues (priority high first, then schedule time, creation
// time, and across shards the order of adds), wherever those queues live, or waits for one. The
// workq server itself picks among the names at random; one order for all is what one shard
// holding every queue would do.
//
// This file is the workq side of the fan-in: the shard requests a lease sends (a lease over one
// shard's queues, a peek of each shard's best, a lease under a bound) and what their replies mean.

import {
  jobMore, OP_WQ_LEASE, OP_WQ_LEASE_BOUNDED, OP_WQ_PEEK, R_BEST, R_JOB, replyId, replyKind, wqBestCreated, wqBestPriority,
  wqBestScheduleKey, wqJobQueue,
} from '../shared/records.ts';
import { type FanAttempt, type FanClient, FanIn, type FanQueue, type FanShards, WaitFifo } from './fanin.ts';
import type { ShardPool } from './shards.ts';

// The kinds of a lease's requests: how Leases.reply reads the reply to each.
/** A lease over the queues of one shard: R_JOB or R_NONE. */
export const K_LEASE_TAKE = 41;
/** Each shard's best candidate: R_BEST or R_NONE. */
export const K_LEASE_PEEK = 42;
/** A lease under the bound of the other shards' best: R_JOB, or R_NONE (lost the race). */
export const K_LEASE_TAKE_BOUNDED = 43;

/** A workq queue: made on first use, never dropped (as the server). */
export class WqQueue implements FanQueue {
  readonly id: number;
  readonly name: string;
  readonly shard: number;
  /** Leases waiting on it, oldest first. */
  readonly waiting = new WaitFifo<FanAttempt<FanQueue>>();
  readyEpoch = 0;

  constructor(id: number, name: string, shard: number) {
    this.id = id;
    this.name = name;
    this.shard = shard;
  }
}

/** A workq connection as a lease sees it. */
export interface LeaseClient extends FanClient {
  /** A job was leased for it: the shard's R_JOB reply (a = queue, b = more, c = TTR ms, id;
   *  payload 16 bytes UUID + body), and that queue. */
  onLeased(buf: Buffer, at: number, queue: WqQueue): void;
}

export class Leases implements FanShards<WqQueue> {
  readonly fan: FanIn<WqQueue>;
  private readonly pool: ShardPool;
  private readonly queues: readonly WqQueue[];

  constructor(pool: ShardPool, queues: readonly WqQueue[], flushSoon: () => void) {
    this.pool = pool;
    this.queues = queues;
    this.fan = new FanIn<WqQueue>(this, flushSoon);
  }

  peek(a: FanAttempt<WqQueue>, shard: number, queues: readonly WqQueue[]): void {
    const w = this.pool.request(shard, K_LEASE_PEEK, a, 0);
    w.header(OP_WQ_PEEK, queues.length * 4, 0, queues.length, 0, 0, 0);
    for (const q of queues) w.u32(q.id);
  }

  take(a: FanAttempt<WqQueue>, shard: number, queues: readonly WqQueue[], bounded: boolean): void {
    if (!bounded) {
      const w = this.pool.request(shard, K_LEASE_TAKE, a, 0);
      w.header(OP_WQ_LEASE, queues.length * 4, 0, queues.length, 0, 0, 0);
      for (const q of queues) w.u32(q.id);
      return;
    }
    // The key is (-priority, schedule key, created, id): see peeked below.
    const b = a.bound;
    const w = this.pool.request(shard, K_LEASE_TAKE_BOUNDED, a, 0);
    w.header(OP_WQ_LEASE_BOUNDED, 16 + queues.length * 4, 0, queues.length, -b.k1 >>> 0, 0, b.id);
    w.f64(b.k2);
    w.f64(b.k3);
    for (const q of queues) w.u32(q.id);
  }

  /** A shard's reply to one of the requests above. */
  reply(shard: number, kind: number, a: FanAttempt<WqQueue>, buf: Buffer, at: number): void {
    const rk = replyKind(buf, at);
    if (kind === K_LEASE_PEEK) {
      if (rk === R_BEST) {
        // Priority high first: its negation orders smallest first, as the fan-in's keys do.
        this.fan.peeked(a, shard, -wqBestPriority(buf, at), wqBestScheduleKey(buf, at), wqBestCreated(buf, at), replyId(buf, at));
      } else {
        this.fan.peeked(a, shard, 0, 0, 0, 0);
      }
      return;
    }
    if (!this.fan.took(a, rk === R_JOB)) return;
    const q = this.queues[wqJobQueue(buf, at)];
    // A lease is not bound to its connection: a job leased for one that has gone runs out its
    // TTR and is requeued, as on the real server.
    if (!a.client.closed) (a.client as LeaseClient).onLeased(buf, at, q);
    if (jobMore(buf, at)) this.fan.ready(q);
  }
}
