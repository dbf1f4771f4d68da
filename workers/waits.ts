// Reserves that wait, parked in the shard that owns every tube they watch, as beanstalkd keeps
// them (prot.c: enqueue_waiting_conn, process_queue, conn_timeout).
//
// A connection whose watched tubes all live on this shard sends its reserve here
// (OP_RESERVE_WAIT). If no job is ready, the reserve parks: it joins each watched tube's waiting
// set (beanstalkd's Ms, so the same connection is picked as beanstalkd would pick it). Whenever a
// request or the clock may have made a job ready in a tube with waiters ("poked"), `serve` hands
// out jobs exactly as process_queue does: the most urgent ready job of all tubes with waiters, to
// the next waiter of that job's tube, until none is left. A parked reserve also ends at its
// timeout or DEADLINE_SOON_MS before the TTR end of a job its connection holds, whichever comes
// first (DEADLINE_SOON first, as conn_timeout checks it first).
//
// While a connection's reserve is parked, the shard keeps the connection's later requests
// (answered R_DEFERRED) and applies them, in order, the moment the reserve is answered; so a
// connection may send on commands for this shard without waiting for the reserve's answer, and
// beanstalkd's one-command-at-a-time order still holds. Nothing here depends on timing: the order
// is the order requests are read, and every answer is decided when it is written.
//
// This file keeps the state; workers/core.ts decides when to call it and writes the records.

import { CLAIM_LOG, LOGGED_OVER, NOT_LOGGED_YET, type Claims } from '../src/shared/claims.ts';
import { Multiset } from '../src/shared/multiset.ts';

/** A connection's reserve parked in this shard, and the requests it sent after it. */
export class Waiter {
  readonly conn: number;
  tubes: Int32Array;
  count = 0;
  /** When it ends TIMED_OUT (Infinity: a plain reserve). */
  timeoutAt = Infinity;
  /** When it ends DEADLINE_SOON (Infinity: it holds no job). */
  soonAt = Infinity;
  /** Whether the reserve waits now (false while its kept requests are being applied). */
  parked = false;
  /**
   * Where in this shard's applied requests its reserve was read (ShardCore.stamp): a reserve over
   * several shards arrives to park one round trip after it was read, and takes its place in each
   * waiting set ahead of the reserves read after it that parked meanwhile.
   */
  stamp = 0;
  /**
   * 0: a reserve over this shard's tubes alone, parked by its own request. Else a reserve over
   * several shards, parked in each (OP_FAN_WAIT): its claim slot and ticket (src/shared/claims.ts),
   * which a shard must win before it gives it a job; its connection's thread keeps its timer.
   */
  slot = 0;
  ticket = 0;
  /** Requests kept behind the parked reserve, in order (copies of the records). */
  readonly kept: Buffer[] = [];
  /** Of which the first `head` have been applied. */
  head = 0;

  constructor(conn: number) {
    this.conn = conn;
    this.tubes = new Int32Array(4);
  }
}

/** Whether `other` was read after `w` (Multiset.appendInOrder's order for waiting sets). */
const readAfter = (other: Waiter, w: Waiter): boolean => other.stamp > w.stamp;

export class ShardWaits {
  /** Each connection's waiter, parked or not, kept until the connection closes (one object per worker, not per reserve). */
  private readonly byConn = new Map<number, Waiter>();
  private parked = 0;
  /** Each tube's waiting reserves (beanstalkd's waiting_conns). A set stays while its tube lives,
   *  even empty: its take cursor decides who is served next, as beanstalkd's does. */
  private readonly byTube = new Map<number, Multiset<Waiter>>();
  /** Tubes with waiters that may have gained a ready job since the last serve. */
  // Tubes poked since the last serve(), each once (pokedMark by tube id): typed arrays, since a
  // poke comes with nearly every request that makes a job ready.
  private poked = new Int32Array(16);
  private pokedN = 0;
  private pokedMark = new Uint8Array(64);
  /** The claims of reserves over several shards, shared by every thread (null: one shard, none). */
  private readonly claims: Claims | null;
  /** The parked reserves over several shards, by claim slot, and the claims epoch up to which claims elsewhere have been looked at. */
  private readonly remote = new Map<number, Waiter>();
  private seenEpoch = 0;
  /** Connections that can no longer wait (OP_CANCEL_WAIT): their reserves never park. */
  private readonly noWait = new Set<number>();
  /** No parked reserve ends before this instant (it may end later: a lower bound). */
  private nextEndMs = Infinity;
  /** Scratch for serve(): the tubes with waiters among the poked ones. */
  private scratch = new Int32Array(16);

  constructor(claims: Claims | null = null) {
    this.claims = claims;
    if (claims !== null) this.seenEpoch = claims.epoch;
  }

  /** Parked reserves now (those over several shards that another thread has claimed are gone). */
  get parkedCount(): number {
    this.purge();
    return this.parked;
  }

  /** The parked reserve of `conn`, if it has one. */
  of(conn: number): Waiter | undefined {
    return this.byConn.get(conn);
  }

  /** Connection `conn` can no longer wait (its peer shut its sending side). */
  refuseWaits(conn: number): void {
    this.noWait.add(conn);
  }

  canWait(conn: number): boolean {
    return !this.noWait.has(conn);
  }

  /**
   * Parks `conn`'s reserve on `tubes[0..count)` until one of them gives it a job or an end passes.
   * `stamp`: where the reserve was read among this shard's requests (ShardCore.stamp); it joins
   * each waiting set ahead of the waiters read after it, as beanstalkd's append in read order would.
   */
  park(conn: number, tubes: ArrayLike<number>, count: number, timeoutAt: number, soonAt: number, stamp: number): Waiter {
    this.purge();
    let w = this.byConn.get(conn);
    if (w === undefined) {
      w = new Waiter(conn);
      this.byConn.set(conn, w);
    }
    if (w.tubes.length < count) w.tubes = new Int32Array(count);
    w.stamp = stamp;
    for (let i = 0; i < count; i++) {
      const t = tubes[i];
      w.tubes[i] = t;
      this.setOf(t).appendInOrder(w, readAfter);
    }
    w.count = count;
    w.timeoutAt = timeoutAt;
    w.soonAt = soonAt;
    w.parked = true;
    this.parked++;
    const end = Math.min(timeoutAt, soonAt);
    if (end < this.nextEndMs) this.nextEndMs = end;
    return w;
  }

  /**
   * Parks a reserve over several shards on this shard's `tubes[0..count)`, as one waiting with
   * claim `slot` / `ticket`; its ends are its own thread's (it never ends here by the clock).
   */
  parkRemote(conn: number, slot: number, ticket: number, tubes: ArrayLike<number>, count: number, stamp: number): void {
    // An earlier wait of this connection still listed here has ended (a connection waits once at a time).
    const old = this.byConn.get(conn);
    if (old !== undefined && old.parked && old.slot !== 0) this.unpark(old);
    const w = this.park(conn, tubes, count, Infinity, Infinity, stamp);
    w.slot = slot;
    w.ticket = ticket;
    this.remote.set(slot, w);
  }

  /**
   * Whether this shard may give `w` a job: always for a reserve over this shard alone; for one
   * over several, only if this shard wins its claim (then no other thread will).
   */
  claim(w: Waiter): boolean {
    return w.slot === 0 || this.claimTicket(w.slot, w.ticket);
  }

  /** Claims the wait of claim slot `slot`, ticket `ticket` (listed here or not): whether this shard won it. */
  claimTicket(slot: number, ticket: number): boolean {
    const from = (this.claims as Claims).claimAt(slot, ticket);
    if (from === null) return false;
    // Had nobody else claimed anything since the last purge, this claim (whose waiter the caller
    // unparks here, or which never parked here) leaves nothing to purge: no need to look through
    // every waiter again.
    if (from === this.seenEpoch) this.seenEpoch = (from + 1) | 0;
    return true;
  }

  /**
   * Unparks every reserve over several shards that another thread has claimed (given a job,
   * or ended) since the last look: called before the waiting sets change or are read, so a
   * claimed waiter leaves them before anyone joins, as it would have left beanstalkd's at once.
   */
  purge(): void {
    if (this.remote.size === 0) return;
    const claims = this.claims as Claims;
    const epoch = claims.epoch;
    let e = this.seenEpoch;
    if (epoch === e) return;
    // The slots claimed since, from the claims' log; a whole log behind, every waiter.
    const behind = (epoch - e) | 0;
    if (behind > 0 && behind <= CLAIM_LOG) {
      let lost = false;
      for (; e !== epoch; e = (e + 1) | 0) {
        const slot = claims.claimedAt(e);
        if (slot === NOT_LOGGED_YET) break; // that claim is still writing it: the next look reads it
        if (slot === LOGGED_OVER) {
          lost = true;
          break;
        }
        const w = this.remote.get(slot);
        if (w !== undefined && !claims.isOpen(w.slot, w.ticket)) this.unpark(w);
      }
      if (!lost) {
        this.seenEpoch = e;
        return;
      }
    }
    this.seenEpoch = epoch;
    for (const w of this.remote.values()) if (!claims.isOpen(w.slot, w.ticket)) this.unpark(w);
  }

  /** The reserve no longer waits: out of every tube's waiting set (beanstalkd's remove_waiting_conn). */
  unpark(w: Waiter): void {
    if (!w.parked) return;
    w.parked = false;
    this.parked--;
    if (w.slot !== 0) {
      if (this.remote.get(w.slot) === w) this.remote.delete(w.slot);
      w.slot = 0;
    }
    for (let i = 0; i < w.count; i++) {
      const set = this.byTube.get(w.tubes[i]);
      if (set === undefined) continue;
      set.remove(w);
    }
  }

  /** The waiter has nothing parked and nothing kept: empty its queue (it stays for the connection's next reserve). */
  forgetIfIdle(w: Waiter): void {
    if (w.parked || w.head < w.kept.length) return;
    // (Setting an array's length is a call into V8's runtime even when it is 0 already: most
    // requests come here with nothing kept.)
    if (w.kept.length !== 0) w.kept.length = 0;
    w.head = 0;
  }

  /** Connection `conn` has gone: forget it entirely. Returns its waiter (its kept requests are dropped by the caller). */
  closeConn(conn: number): Waiter | undefined {
    this.noWait.delete(conn);
    const w = this.byConn.get(conn);
    if (w === undefined) return undefined;
    this.unpark(w);
    this.byConn.delete(conn);
    return w;
  }

  /** Keeps a copy of a request `conn` sent while its reserve is parked. */
  keep(w: Waiter, buf: Buffer, at: number, len: number): void {
    w.kept.push(Buffer.from(buf.subarray(at, at + len)));
  }

  /** The shard dropped tube `tube` (nobody uses or watches it, so nobody waits on it). */
  dropTube(tube: number): void {
    this.byTube.delete(tube);
  }

  /** Tube `tube` may have gained a ready job: serve() looks at it if anyone waits on it. */
  poke(tube: number): void {
    if (!this.hasWaiters(tube)) return;
    if (tube >= this.pokedMark.length) {
      const mark = new Uint8Array(Math.max(tube + 1, this.pokedMark.length * 2));
      mark.set(this.pokedMark);
      this.pokedMark = mark;
    }
    if (this.pokedMark[tube] !== 0) return;
    this.pokedMark[tube] = 1;
    if (this.pokedN === this.poked.length) {
      const poked = new Int32Array(this.pokedN * 2);
      poked.set(this.poked);
      this.poked = poked;
    }
    this.poked[this.pokedN++] = tube;
  }

  /** Whether a reserve waiting over several shards is parked here (or was, and another thread's claim has not been looked at yet). */
  get anyRemote(): boolean {
    return this.remote.size > 0;
  }

  get anyPoked(): boolean {
    return this.pokedN > 0;
  }

  /**
   * The poked tubes that still have waiters: puts them in `pokedTubes` and returns
   * how many (valid until the next call). Only these can hold a ready job beside a waiter: a
   * reserve parks only when none of its tubes offers a job, and every event that makes a job
   * ready pokes its tube.
   */
  takePoked(): number {
    let n = 0;
    for (let i = 0; i < this.pokedN; i++) {
      const t = this.poked[i];
      this.pokedMark[t] = 0;
      if (!this.hasWaiters(t)) continue;
      if (n === this.scratch.length) {
        const next = new Int32Array(n * 2);
        next.set(this.scratch);
        this.scratch = next;
      }
      this.scratch[n++] = t;
    }
    this.pokedN = 0;
    return n;
  }

  /** What takePoked() found (its first `n` entries; serve() may reorder them). */
  get pokedTubes(): Int32Array {
    return this.scratch;
  }

  /**
   * A reserve on `tube` was answered at once with one of its ready jobs. In beanstalkd it passed
   * through the tube's waiting set all the same (appended, then taken by process_queue), which
   * moves the set's take cursor: that decides who of the next waiters is served first. (The set
   * was empty: a tube with a ready job has no waiters.)
   */
  passedThrough(tube: number): void {
    this.setOf(tube).passedThrough();
  }

  /** Tube `tube`'s waiting set, made on first use (it stays while the tube lives: dropTube). */
  private setOf(tube: number): Multiset<Waiter> {
    let set = this.byTube.get(tube);
    if (set === undefined) {
      set = new Multiset<Waiter>();
      this.byTube.set(tube, set);
    }
    return set;
  }

  /** The next waiter of `tube` (beanstalkd's ms_take), or undefined. */
  nextWaiter(tube: number): Waiter | undefined {
    this.purge();
    return this.byTube.get(tube)?.take();
  }

  /** Whether anyone waits on `tube`. */
  hasWaiters(tube: number): boolean {
    this.purge();
    return (this.byTube.get(tube)?.len ?? 0) > 0;
  }

  /** Waiters on `tube` (stats), here alone or over several shards. */
  waitingOn(tube: number): number {
    this.purge();
    return this.byTube.get(tube)?.len ?? 0;
  }

  /** When the soonest parked reserve may end (Infinity: none). */
  get nextEnd(): number {
    return this.parked === 0 ? Infinity : this.nextEndMs;
  }

  /**
   * The parked reserves whose end has come at `nowMs`, each with how it ends (DEADLINE_SOON
   * before TIMED_OUT, as conn_timeout decides). Recomputes the next end.
   */
  ended(nowMs: number, out: Waiter[]): void {
    if (nowMs < this.nextEndMs) return;
    let next = Infinity;
    for (const w of this.byConn.values()) {
      if (!w.parked) continue;
      const end = Math.min(w.timeoutAt, w.soonAt);
      if (end <= nowMs) out.push(w);
      else if (end < next) next = end;
    }
    this.nextEndMs = next;
  }

  /** Checks the sets against the waiters (tests). */
  invariants(): void {
    const fail = (msg: string): never => {
      throw new Error(`ShardWaits: ${msg}`);
    };
    let memberships = 0;
    for (const [tube, set] of this.byTube) {
      for (const w of set.items) {
        if (!w.parked) fail(`conn ${w.conn} waits on tube ${tube} but is not parked`);
        if (this.byConn.get(w.conn) !== w) fail(`conn ${w.conn} waits on tube ${tube} but is not known`);
      }
      memberships += set.len;
    }
    let expected = 0;
    let parked = 0;
    for (const w of this.byConn.values()) {
      if (!w.parked) continue;
      expected += w.count;
      parked++;
    }
    if (memberships !== expected) fail(`${memberships} memberships, expected ${expected}`);
    if (parked !== this.parked) fail(`${this.parked} counted parked, found ${parked}`);
  }
}
