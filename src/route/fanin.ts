// The cross-shard fan-in: takes for a client the best ready job of a set of queues (beanstalk
// tubes watched by a reserve, workq queues named by a lease) wherever those queues live, the job
// one shard holding them all would give, and waits for one when there is none.
//
// - All the queues on one shard (the common case): one take request, the shard picks.
// - Several shards: ask each for its best candidate (a peek); then the shard with the best one
//   takes its best job at that moment if it still comes before every other shard's candidate
//   (the bound), whichever job that is, so many takers racing for the same top job do not all
//   start over. If it no longer does (taken meanwhile), start over.
// - Nothing ready: the attempt waits on each of its queues until a job becomes ready there
//   (`ready`), its deadline passes, or the client's own early end comes (beanstalk's
//   DEADLINE_SOON before a held job's TTR).
// A wake-up can race with an attempt that is still asking shards: every "queue may have a ready
// job" stamps the queue with a new epoch, and an attempt that found nothing starts over when one
// of its queues was stamped after it began, so no wake-up is lost.
// A wake-up goes to one waiting attempt. If that attempt ends without having taken the job that
// woke it — it took a better one from another of its queues, or its client went — the wake-up
// is passed on to the queue's next waiter (`passOn`): else a connection waiting on that queue
// alone would sleep beside a ready job. (Found by the model test, seed 814921723: A waits on
// {q, r} and B on {q}; a job in q wakes A; a better job arrives in r; A takes it; B slept on.)
//
// The protocol's side is small: how to write a peek and a take for its queues (FanShards), and
// how it is told the outcome (FanClient). Jobs are ordered by a key of three numbers and an id,
// smallest first (beanstalk: pri, 0, 0, id; workq: -priority, schedule time, creation, id); the
// shards order their own jobs the same way. All per-attempt state lives in FanAttempt.

import { delayUntil } from '../shared/timer.ts';
import type { ReplyTarget } from './shards.ts';

/** A queue a fan-in takes from (a beanstalk tube, a workq queue). */
export interface FanQueue {
  readonly shard: number;
  /** Stamp of the last time it may have gained a ready job. */
  readyEpoch: number;
  /** Attempts waiting on it. */
  readonly waiting: WaitList<FanAttempt<FanQueue>>;
}

/** The waiting attempts of one queue; `take` picks the one to wake. */
export interface WaitList<T> {
  readonly len: number;
  append(item: T): void;
  remove(item: T): boolean;
  contains(item: T): boolean;
  take(): T | undefined;
}

/**
 * The wait list of the queues whose attempts wait in the shards instead (FanShards.park: beanstalk
 * tubes): nothing is ever listed in it, so one shared empty list serves them all.
 */
export const NO_WAITERS: WaitList<FanAttempt<FanQueue>> = Object.freeze({
  len: 0,
  append(): void {
    throw new Error('an attempt that parks in the shards waits on no queue here');
  },
  remove: (): boolean => false,
  contains: (): boolean => false,
  take: (): undefined => undefined,
});

/** Oldest first (workq: the connection that has waited longest is woken first). */
export class WaitFifo<T> implements WaitList<T> {
  private items: T[] = [];

  get len(): number {
    return this.items.length;
  }

  append(item: T): void {
    this.items.push(item);
  }

  remove(item: T): boolean {
    const i = this.items.indexOf(item);
    if (i === -1) return false;
    this.items.splice(i, 1);
    return true;
  }

  take(): T | undefined {
    return this.items.shift();
  }

  contains(item: T): boolean {
    return this.items.includes(item);
  }

  /** The waiting items, oldest first (a view: do not change it). */
  get all(): readonly T[] {
    return this.items;
  }
}

/** Why an attempt ended without a job. */
export type FanEnd = 'timeout' | 'soon';

/** The client an attempt takes for (a beanstalk connection's reserve, a workq lease). */
export interface FanClient {
  readonly closed: boolean;
  /** The instant the wait must end early ('soon'), Infinity if never (beanstalk: DEADLINE_SOON). */
  soonMs(): number;
  /** The client cannot wait at all (beanstalk: its peer shut its sending side). */
  readonly cannotWait: boolean;
  /** The attempt ended without a job. */
  onNone(end: FanEnd): void;
}

/** How one protocol asks its shards. Replies come back through FanIn.peeked / FanIn.took. */
export interface FanShards<Q extends FanQueue> {
  /** Ask `shard` for the key of its best ready job among `queues` (all on that shard). */
  peek(a: FanAttempt<Q>, shard: number, queues: readonly Q[]): void;
  /** Ask `shard` to take its best ready job among `queues` for `a`: under the bound `a.bound`
   *  when `bounded` (it must come before it), else whatever is best. */
  take(a: FanAttempt<Q>, shard: number, queues: readonly Q[], bounded: boolean): void;
  /** A shard's reply to one of those requests (sent with the attempt as its reply target, and `seq`). */
  reply(shard: number, kind: number, a: FanAttempt<Q>, buf: Buffer, at: number, seq: number): void;
  /**
   * Wait in the shards instead of here (beanstalk): `a` parks in each of its shards, in the
   * waiting sets of its queues there, as one waiter with a claim (src/shared/claims.ts); the first
   * shard to have a job for it and win the claim reserves the job and says so to the client. A
   * shard that has a ready job when the park reaches it parks nothing and says so (parkRefused):
   * the attempt starts over. Without it, attempts wait here, on each queue's wait list.
   */
  park?(a: FanAttempt<Q>): void;
  /** Ends `a`'s parked wait from its own thread: true if it did, false if a shard claimed it first (its job is on the way). */
  unpark?(a: FanAttempt<Q>): boolean;
}

/** A job's place in the order: smaller keys first, then the smaller id. */
export class FanKey {
  k1 = 0;
  k2 = 0;
  k3 = 0;
  id = 0; // 0: no key

  set(k1: number, k2: number, k3: number, id: number): void {
    this.k1 = k1;
    this.k2 = k2;
    this.k3 = k3;
    this.id = id;
  }

  copy(o: FanKey): void {
    this.set(o.k1, o.k2, o.k3, o.id);
  }

  /** Whether (k1, k2, k3, id) comes before this key. */
  beaten(k1: number, k2: number, k3: number, id: number): boolean {
    if (k1 !== this.k1) return k1 < this.k1;
    if (k2 !== this.k2) return k2 < this.k2;
    if (k3 !== this.k3) return k3 < this.k3;
    return id < this.id;
  }
}

/** Queues grouped by the shard they live on. */
export interface ShardGroups<Q> {
  readonly queues: readonly Q[];
  /** The shards, in the order their queues first appear. */
  readonly shards: readonly number[];
  /** byShard[shard]: that shard's queues. */
  readonly byShard: readonly (readonly Q[])[];
}

/** Groups `queues` by shard (new arrays: an attempt using an older grouping keeps it). */
export function groupByShard<Q extends FanQueue>(queues: readonly Q[]): ShardGroups<Q> {
  const byShard: Q[][] = [];
  const shards: number[] = [];
  for (const q of queues) {
    if (byShard[q.shard] === undefined) {
      byShard[q.shard] = [];
      shards.push(q.shard);
    }
    byShard[q.shard].push(q);
  }
  return { queues: queues.slice(), shards, byShard };
}

/** One client's attempt to take a job; reused for the client's next one. */
export class FanAttempt<Q extends FanQueue = FanQueue> implements ReplyTarget {
  readonly client: FanClient;
  /** The protocol's shard side, which reads the replies to this attempt's requests. */
  port: FanShards<Q> | null = null;
  /** The queues, grouped by shard: `shards` lists the shards, `byShard[shard]` their queues. */
  queues: readonly Q[] = [];
  shards: readonly number[] = [];
  byShard: readonly (readonly Q[])[] = [];
  /** Ends with 'timeout' from this instant (Infinity: never). */
  deadlineMs = Infinity;

  // Asking shards.
  attempting = false;
  /** The epoch when this round began: a queue stamped later may hold a job it missed. */
  epoch = 0;
  /** Peeks not answered yet. */
  gatherLeft = 0;
  readonly best = new FanKey();
  bestShard = -1;
  /** The best candidate of the shards other than bestShard: the take must beat it. */
  readonly bound = new FanKey();
  /** The take in flight is bounded (a lost race means: start over). */
  bounded = false;
  /** The queue whose wake-up started this round, until the attempt ends (see passOn). */
  wokenBy: Q | null = null;
  /**
   * readStamps[shard]: where that shard read this attempt's first question (its stamp, in the
   * order it applies requests; undefined if it gave none), so that a park there later takes the
   * place of a reserve read at that moment (FanShards.park). Set by the first round of peeks only.
   */
  readonly readStamps: number[] = [];
  /** The first round of peeks is under way: their answers set readStamps. */
  firstRound = false;

  // Waiting.
  waiting = false;
  timer: ReturnType<typeof setTimeout> | null = null;
  /** Parked in the shards (FanShards.park): the client's claim slot (0: none yet) and this wait's ticket. */
  slot = 0;
  ticket = 0;

  constructor(client: FanClient) {
    this.client = client;
  }

  /** Takes from these queues (set before FanIn.begin). */
  over(groups: ShardGroups<Q>): void {
    this.queues = groups.queues;
    this.shards = groups.shards;
    this.byShard = groups.byShard;
  }

  onShardReply(shard: number, kind: number, seq: number, buf: Buffer, at: number): void {
    (this.port as FanShards<Q>).reply(shard, kind, this, buf, at, seq);
  }

  /** Whether it is asking shards or waiting. */
  get live(): boolean {
    return this.attempting || this.waiting;
  }
}

export class FanIn<Q extends FanQueue> {
  private readonly shards: FanShards<Q>;
  private readonly flushSoon: () => void;
  private epoch = 0;
  /** Attempts waiting (beanstalk's current-waiting). */
  waitingCount = 0;

  constructor(shards: FanShards<Q>, flushSoon: () => void) {
    this.shards = shards;
    this.flushSoon = flushSoon;
  }

  /**
   * Starts `a` over its queues (set by the caller, grouped by shard); it ends with 'timeout'
   * after `timeoutMs` (-1: never; 0: at once if nothing is ready).
   */
  begin(a: FanAttempt<Q>, timeoutMs: number): void {
    a.deadlineMs = timeoutMs < 0 ? Infinity : Date.now() + timeoutMs;
    a.port = this.shards;
    a.readStamps.length = 0;
    a.firstRound = true;
    this.attempt(a);
  }

  private attempt(a: FanAttempt<Q>): void {
    a.attempting = true;
    a.epoch = this.epoch;
    const shards = a.shards;
    if (shards.length === 1) {
      this.take(a, shards[0], false);
      return;
    }
    a.gatherLeft = shards.length;
    a.best.id = 0;
    a.bestShard = -1;
    a.bound.id = 0;
    for (const shard of shards) this.shards.peek(a, shard, a.byShard[shard]);
  }

  private take(a: FanAttempt<Q>, shard: number, bounded: boolean): void {
    const queues = a.byShard[shard];
    a.bounded = bounded;
    this.shards.take(a, shard, queues, bounded);
  }

  /**
   * A shard's answer to a peek: the key of its best job, or id 0 for none; `stamp`, where that
   * shard read the peek (FanAttempt.readStamps), if it says.
   */
  peeked(a: FanAttempt<Q>, shard: number, k1: number, k2: number, k3: number, id: number, stamp?: number): void {
    if (a.firstRound && stamp !== undefined) a.readStamps[shard] = stamp;
    if (id !== 0) {
      if (a.best.id === 0 || a.best.beaten(k1, k2, k3, id)) {
        // The old best becomes the bound the new one must beat.
        if (a.best.id !== 0) a.bound.copy(a.best);
        a.best.set(k1, k2, k3, id);
        a.bestShard = shard;
      } else if (a.bound.id === 0 || a.bound.beaten(k1, k2, k3, id)) {
        a.bound.set(k1, k2, k3, id);
      }
    }
    if (--a.gatherLeft > 0) return;
    a.firstRound = false;
    if (a.client.closed) {
      this.passOn(a);
      this.finish(a);
      return;
    }
    if (a.best.id === 0) {
      this.nothingReady(a);
      return;
    }
    this.take(a, a.bestShard, a.bound.id !== 0);
  }

  /**
   * A shard's answer to a take. Returns true if it took a job: the attempt is over and the
   * caller hands the job to the client (or, if the client has gone, leaves it to its close).
   */
  took(a: FanAttempt<Q>, got: boolean): boolean {
    if (got || a.client.closed) {
      // A job from one queue of several may not be the one that woke it.
      if (!got || a.queues.length > 1) this.passOn(a);
      this.finish(a);
      return got;
    }
    // A bounded take lost the race (that shard's best no longer beats the others): start over.
    if (a.bounded) this.attempt(a);
    else this.nothingReady(a);
    return false;
  }

  /**
   * `a` ends without having taken the job whose wake-up started it (as far as it knows): wake
   * the queue's next waiter. A wake-up that finds nothing costs one round; one lost is a
   * connection asleep beside a ready job.
   */
  private passOn(a: FanAttempt<Q>): void {
    const q = a.wokenBy;
    if (q === null) return;
    a.wokenBy = null;
    this.ready(q);
  }

  /** Nothing ready for `a` right now. */
  private nothingReady(a: FanAttempt<Q>): void {
    a.attempting = false;
    // Its queues held nothing it could take: whatever woke it is gone.
    a.wokenBy = null;
    for (const q of a.queues) {
      if (q.readyEpoch > a.epoch) {
        // A job became ready in one of its queues while we were asking: it may be ours.
        this.attempt(a);
        return;
      }
    }
    if (this.due(a)) return;
    a.waiting = true;
    this.waitingCount++;
    if (this.shards.park !== undefined) this.shards.park(a);
    else for (const q of a.queues) q.waiting.append(a);
    this.arm(a);
  }

  /**
   * A shard had a ready job for `a` when its park (`ticket`) reached it, and ended the wait by
   * winning its claim (so no other shard gives it a job made ready later): the attempt starts
   * over, and finds that job. (If this thread's timeout lost the claim to it, the wait was left
   * to this answer: the attempt then ends as its time says.)
   */
  parkRefused(a: FanAttempt<Q>, ticket: number): void {
    if (!a.waiting || a.ticket !== ticket) return;
    this.unwait(a);
    if (a.client.closed) {
      this.finish(a);
      return;
    }
    this.attempt(a);
  }

  /** A shard claimed `a`'s parked wait and reserved it a job (the client hands it over). */
  claimed(a: FanAttempt<Q>): void {
    this.finish(a);
  }

  /**
   * Whether this thread may end `a`'s wait: a wait parked in the shards ends only by its claim,
   * which a shard may have won first (then its job is on the way, and the wait is not ours to end).
   */
  private stop(a: FanAttempt<Q>): boolean {
    return !a.waiting || this.shards.unpark === undefined || this.shards.unpark(a);
  }

  /** Ends `a` if its client cannot wait or its time is up; returns whether it did. */
  private due(a: FanAttempt<Q>): boolean {
    const now = Date.now();
    const end: FanEnd | null =
      now >= a.client.soonMs() ? 'soon'
      : now >= a.deadlineMs || a.client.cannotWait ? 'timeout'
      : null;
    if (end === null) return false;
    if (!this.stop(a)) return true; // a shard has claimed it: its job is on the way
    this.finish(a);
    a.client.onNone(end);
    return true;
  }

  private unwait(a: FanAttempt<Q>): void {
    if (!a.waiting) return;
    a.waiting = false;
    if (this.shards.park === undefined) for (const q of a.queues) q.waiting.remove(a);
    this.waitingCount--;
  }

  /** The attempt is over: no longer waiting, no timer. */
  private finish(a: FanAttempt<Q>): void {
    a.attempting = false;
    a.wokenBy = null;
    this.unwait(a);
    if (a.timer !== null) {
      clearTimeout(a.timer);
      a.timer = null;
    }
  }

  /** The wait ends at the deadline or the client's early end, whichever comes first. */
  private arm(a: FanAttempt<Q>): void {
    if (a.timer !== null) clearTimeout(a.timer);
    a.timer = null;
    const at = Math.min(a.deadlineMs, a.client.soonMs());
    if (at === Infinity) return;
    a.timer = setTimeout(() => {
      a.timer = null;
      // While asking shards, nothingReady() decides when the answer comes back empty.
      if (!a.waiting || a.client.closed) return;
      if (!this.due(a)) this.arm(a);
      this.flushSoon();
    }, delayUntil(at));
  }

  /** The client's early end may have moved (a held job was released by its TTR): re-arm a wait. */
  rearm(a: FanAttempt<Q>): void {
    if (a.waiting) this.arm(a);
  }

  /**
   * The client wants the attempt over now (beanstalk: the peer shut its sending side while the
   * reserve waits): a waiting attempt ends with 'timeout'; one asking shards ends so when its
   * answers come back empty (`cannotWait`).
   */
  endWait(a: FanAttempt<Q>): void {
    if (!a.waiting || !this.stop(a)) return;
    this.finish(a);
    a.client.onNone('timeout');
  }

  /**
   * The client has gone: stop waiting. An attempt asking shards ends when they answer; a wait a
   * shard claimed first ends with the job given to the gone client (its close gives it back).
   */
  cancel(a: FanAttempt<Q>): void {
    if (a.attempting) return;
    this.stop(a);
    this.finish(a);
  }

  /**
   * Queue `q` may have gained ready jobs: wake one attempt waiting on it. The epoch moves even
   * when nobody waits: an attempt still asking shards must learn it may have missed this job.
   */
  ready(q: Q): void {
    q.readyEpoch = ++this.epoch;
    const a = q.waiting.take() as FanAttempt<Q> | undefined;
    if (a === undefined) return;
    // take() removed it from this queue; unwait removes it from the others.
    a.waiting = false;
    for (const other of a.queues) if (other !== q) other.waiting.remove(a);
    this.waitingCount--;
    a.wokenBy = q;
    this.attempt(a);
  }

  /** Throws if the fan-in's state is inconsistent (tests). */
  /** `attempts`: every attempt this fan-in has begun (the caller's clients'). */
  invariants(attempts: Iterable<FanAttempt<Q>>): void {
    const fail = (msg: string): never => {
      throw new Error(`fan-in invariant: ${msg}`);
    };
    let waiting = 0;
    for (const a of attempts) {
      if (a.attempting && a.waiting) fail('an attempt both asks and waits');
      const listed = a.waiting && this.shards.park === undefined; // parked waits are listed in the shards
      for (const q of a.queues) if (q.waiting.contains(a) !== listed) fail(`an attempt ${listed ? 'waiting' : 'not waiting'} here is ${listed ? 'missing from' : 'in'} a queue's wait list`);
      if (a.waiting) {
        waiting++;
        if (a.timer === null && Math.min(a.deadlineMs, a.client.soonMs()) !== Infinity) fail('a waiting attempt with an end has no timer');
      }
      if (!a.live && a.timer !== null) fail('an attempt that is over keeps a timer');
      if (a.gatherLeft < 0) fail('more peek answers than peeks');
      const seen = new Set<number>();
      for (const s of a.shards) {
        if (seen.has(s)) fail(`shard ${s} listed twice`);
        seen.add(s);
        for (const q of a.byShard[s]) if (q.shard !== s || !a.queues.includes(q)) fail(`queue grouped under shard ${s} wrongly`);
      }
      let grouped = 0;
      for (const s of a.shards) grouped += a.byShard[s].length;
      if (grouped !== a.queues.length) fail('queues and their grouping differ');
    }
    if (waiting !== this.waitingCount) fail(`waitingCount ${this.waitingCount}, found ${waiting}`);
  }
}
