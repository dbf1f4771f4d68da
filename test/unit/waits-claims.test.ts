// A shard's waiting sets with reserves over several shards in them (workers/waits.ts with
// src/shared/claims.ts): a waiter another thread claimed leaves every set before the set next
// changes or is read, so each tube's set changes as beanstalkd's would (its waiter left when it
// was served), and only the winner of a claim serves it.

import { describe, expect, it } from 'vitest';
import { ShardWaits } from '../../workers/waits.ts';
import { CLAIM_LOG, Claims, LOGGED_OVER, NOT_LOGGED_YET } from '../../src/shared/claims.ts';
import { Multiset } from '../../src/shared/multiset.ts';

const T = 7; // the tube
const tubes = Int32Array.of(T);

/** Each park's place in the shard's applied order (ShardCore's stamp): in the order they are made. */
let nextStamp = 0;

/** Parks conn as a reserve over several shards on T; returns its slot and ticket. */
function parkRemote(w: ShardWaits, claims: Claims, conn: number): { slot: number; ticket: number } {
  const slot = claims.slot();
  const ticket = claims.open(slot);
  w.parkRemote(conn, slot, ticket, tubes, 1, nextStamp++);
  return { slot, ticket };
}

function drain(w: ShardWaits): number[] {
  const order: number[] = [];
  for (let x = w.nextWaiter(T); x !== undefined; x = w.nextWaiter(T)) {
    if (w.claim(x)) order.push(x.conn);
    w.unpark(x);
  }
  return order;
}

describe('waiting sets with reserves parked over several shards', () => {
  it('a waiter claimed elsewhere leaves the set before the next one joins (the order of later takes follows)', () => {
    const claims = Claims.create();
    const w = new ShardWaits(claims);
    // beanstalkd's set: A, X, B join; X is served (elsewhere: leaves); C joins.
    const ref = new Multiset<number>();
    w.park(1, tubes, 1, Infinity, Infinity, nextStamp++);
    ref.append(1);
    const x = parkRemote(w, claims, 2);
    ref.append(2);
    w.park(3, tubes, 1, Infinity, Infinity, nextStamp++);
    ref.append(3);
    expect(claims.claim(x.slot, x.ticket)).toBe(true); // another shard gave X a job
    ref.remove(2);
    w.park(4, tubes, 1, Infinity, Infinity, nextStamp++);
    ref.append(4);
    const want: number[] = [];
    for (let c = ref.take(); c !== undefined; c = ref.take()) want.push(c);
    expect(drain(w)).toEqual(want);
    expect(want).toEqual([1, 3, 4]); // (had X left after C joined: 1, 4, 3)
  });

  it('counts (stats-tube current-waiting) leave out a waiter claimed elsewhere', () => {
    const claims = Claims.create();
    const w = new ShardWaits(claims);
    const x = parkRemote(w, claims, 1);
    parkRemote(w, claims, 2);
    expect(w.waitingOn(T)).toBe(2);
    claims.claim(x.slot, x.ticket);
    expect(w.waitingOn(T)).toBe(1);
    expect(w.hasWaiters(T)).toBe(true);
  });

  it('a shard serves a waiter over several shards only if it wins its claim', () => {
    const claims = Claims.create();
    const w = new ShardWaits(claims);
    const x = parkRemote(w, claims, 1);
    const got = w.nextWaiter(T);
    expect(got?.conn).toBe(1);
    // Its own thread ended it (a timeout) after this shard listed it, before this shard claimed.
    expect(claims.claim(x.slot, x.ticket)).toBe(true);
    expect(w.claim(got!)).toBe(false);
    // A local waiter needs no claim.
    const local = w.park(5, tubes, 1, Infinity, Infinity, nextStamp++);
    expect(w.claim(local)).toBe(true);
  });

  it("a connection's later wait replaces the earlier one still listed", () => {
    const claims = Claims.create();
    const w = new ShardWaits(claims);
    const slot = claims.slot();
    const first = claims.open(slot);
    w.parkRemote(1, slot, first, tubes, 1, nextStamp++);
    claims.claim(slot, first); // ended on its thread (the epoch moved)
    const second = claims.open(slot);
    w.parkRemote(1, slot, second, tubes, 1, nextStamp++);
    expect(w.waitingOn(T)).toBe(1);
    const got = w.nextWaiter(T)!;
    expect(got.ticket).toBe(second);
    expect(w.claim(got)).toBe(true);
  });

  it('a shard a whole claims log behind still drops the waiters claimed elsewhere', () => {
    const claims = Claims.create();
    const w = new ShardWaits(claims);
    const x = parkRemote(w, claims, 1);
    parkRemote(w, claims, 2);
    claims.claim(x.slot, x.ticket);
    // More claims elsewhere than the log keeps, of waits this shard does not list.
    const other = claims.slot();
    for (let i = 0; i < CLAIM_LOG + 10; i++) claims.claim(other, claims.open(other));
    expect(claims.claimedAt(claims.epoch - CLAIM_LOG - 5)).toBe(LOGGED_OVER);
    expect(w.waitingOn(T)).toBe(1);
    expect(w.nextWaiter(T)?.conn).toBe(2);
  });

  it("the claims log: a recent claim's slot; one not made yet; one written over", () => {
    const claims = Claims.create();
    const a = claims.slot();
    const b = claims.slot();
    const e = claims.epoch;
    expect(claims.claimedAt(e)).toBe(NOT_LOGGED_YET);
    claims.claim(a, claims.open(a));
    claims.claim(b, claims.open(b));
    expect([claims.claimedAt(e), claims.claimedAt(e + 1)]).toEqual([a, b]);
    for (let i = 0; i < CLAIM_LOG; i++) claims.claim(b, claims.open(b));
    expect(claims.claimedAt(e)).toBe(LOGGED_OVER);
  });

  it('a claim is won at every epoch, -1 included (the epoch word wraps after 2^32 claims)', () => {
    const claims = Claims.create();
    new Int32Array(claims.shared.words)[0] = -2; // the epoch word, 2^32 - 2 claims on
    const w = new ShardWaits(claims);
    for (const conn of [1, 2, 3]) {
      const x = parkRemote(w, claims, conn);
      const got = w.nextWaiter(T)!;
      expect(got.conn).toBe(conn);
      expect(w.claim(got), `the claim at epoch ${claims.epoch}`).toBe(true);
      w.unpark(got);
      expect(claims.isOpen(x.slot, x.ticket)).toBe(false);
    }
    expect(claims.epoch).toBe(1);
    // The connection's own thread, at epoch -1 too.
    new Int32Array(claims.shared.words)[0] = -1;
    const slot = claims.slot();
    expect(claims.claim(slot, claims.open(slot))).toBe(true);
  });
});
