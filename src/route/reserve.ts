// beanstalk's reserve over watched tubes on several shards, through the fan-in (./fanin.ts):
// hands out the ready job with the smallest (pri, id) among every watched, unpaused tube,
// wherever those tubes live — the job one beanstalkd would choose — or waits for one. (A reserve
// whose tubes all live on one shard goes to that shard and waits there: workers/waits.ts.)
//
// This file is the beanstalk side of the fan-in: the shard requests a reserve sends (a take of
// one shard's best, a peek of each shard's best, a take under a bound) and what their replies mean.

import {
  bestPri, okTube, OP_FAN_WAIT, OP_PEEK_BEST, OP_RESERVE, OP_RESERVE_BOUNDED, peekStamp, R_BEST, R_JOB, replyId, replyKind,
} from '../shared/records.ts';
import type { Claims } from '../shared/claims.ts';
import { FanIn, type FanAttempt, type FanClient, type FanShards } from './fanin.ts';
import { NO_REPLY, type ShardPool } from './shards.ts';
import type { Tube } from './tubes.ts';

// The kinds of a reserve's requests: how Reserves.reply reads the reply to each.
/** A reserve over the tubes of one shard: R_JOB or R_NONE. */
export const K_RESERVE_TAKE = 2;
/** Each shard's best candidate: R_BEST or R_NONE. */
export const K_RESERVE_PEEK = 3;
/** A reserve under the bound of the other shards' best: R_JOB, or R_NONE (lost the race). */
export const K_RESERVE_TAKE_BOUNDED = 4;
/** A waiting reserve parking in a shard's tubes (OP_FAN_WAIT): R_OK, b = 1 if a job was ready there. */
export const K_RESERVE_PARK = 5;

/** A beanstalk connection as a reserve sees it. */
export interface ReserveClient extends FanClient {
  readonly connId: number;
  /** A job was reserved for it: the shard's R_JOB reply (a = tube, b = more, id, f64 deadline, body). */
  onReserved(buf: Buffer, at: number): void;
}

export class Reserves implements FanShards<Tube> {
  readonly fan: FanIn<Tube>;
  private readonly pool: ShardPool;
  /** Claims of the waits parked in several shards (null with one shard: no reserve spans shards). */
  private readonly claims: Claims | null;

  constructor(pool: ShardPool, claims: Claims | null, flushSoon: () => void) {
    this.pool = pool;
    this.claims = claims;
    this.fan = new FanIn<Tube>(this, flushSoon);
  }

  /**
   * Nothing was ready: the reserve waits in each shard of its tubes, in their waiting sets, as
   * one waiter under a new ticket of its connection's claim slot (FanShards.park). Published at
   * once: whoever then sees the server count it as waiting can only ask a shard after that.
   */
  park(a: FanAttempt<Tube>): void {
    const claims = this.claims as Claims;
    if (a.slot === 0) a.slot = claims.slot();
    a.ticket = claims.open(a.slot);
    const conn = (a.client as ReserveClient).connId;
    for (const shard of a.shards) {
      const tubes = a.byShard[shard];
      // After the tubes, where that shard read the reserve's first question: it parks there in
      // that place, ahead of the reserves read after it (workers/waits.ts).
      const stamp = a.readStamps[shard];
      const w = this.pool.request(shard, K_RESERVE_PARK, a, a.ticket);
      w.header(OP_FAN_WAIT, tubes.length * 4 + (stamp === undefined ? 0 : 8), conn, tubes.length, 0, a.slot, a.ticket);
      for (const t of tubes) w.u32(t.id);
      if (stamp !== undefined) w.f64(stamp);
    }
    this.pool.flush();
  }

  unpark(a: FanAttempt<Tube>): boolean {
    return (this.claims as Claims).claim(a.slot, a.ticket);
  }

  /** The connection has gone (after fan.cancel): its claim slot goes back to this thread's free list. */
  forget(a: FanAttempt<Tube>): void {
    if (a.slot === 0) return;
    (this.claims as Claims).release(a.slot);
    a.slot = 0;
  }

  peek(a: FanAttempt<Tube>, shard: number, tubes: readonly Tube[]): void {
    const w = this.pool.request(shard, K_RESERVE_PEEK, a, 0);
    w.header(OP_PEEK_BEST, tubes.length * 4, (a.client as ReserveClient).connId, tubes.length, 0, 0, 0);
    for (const t of tubes) w.u32(t.id);
  }

  take(a: FanAttempt<Tube>, shard: number, tubes: readonly Tube[], bounded: boolean): void {
    const conn = (a.client as ReserveClient).connId;
    const w = this.pool.request(shard, bounded ? K_RESERVE_TAKE_BOUNDED : K_RESERVE_TAKE, a, 0);
    if (bounded) w.header(OP_RESERVE_BOUNDED, tubes.length * 4, conn, tubes.length, a.bound.k1, 0, a.bound.id);
    else w.header(OP_RESERVE, tubes.length * 4, conn, tubes.length, 0, 0, 0); // takes, never waits in the shard
    for (const t of tubes) w.u32(t.id);
  }

  /** A shard's reply to one of the requests above. */
  reply(shard: number, kind: number, a: FanAttempt<Tube>, buf: Buffer, at: number, seq: number): void {
    const rk = replyKind(buf, at);
    if (kind === K_RESERVE_PARK) {
      // A job was ready there when the park arrived: nothing parked there, and that shard ended
      // the wait by its claim (b = 1): start over. (b = 2: another shard claimed it first.)
      if (okTube(buf, at) === 1) this.fan.parkRefused(a, seq);
      return;
    }
    if (kind === K_RESERVE_PEEK) {
      const stamp = peekStamp(buf, at);
      if (rk === R_BEST) this.fan.peeked(a, shard, bestPri(buf, at), 0, 0, replyId(buf, at), stamp);
      else this.fan.peeked(a, shard, 0, 0, 0, 0, stamp);
      return;
    }
    if (!this.fan.took(a, rk === R_JOB)) return;
    const c = a.client as ReserveClient;
    // A job reserved for a connection that has gone is given back by the release request its
    // close queued behind this one.
    if (!c.closed) c.onReserved(buf, at);
  }
}

