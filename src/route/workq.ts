// The main thread's side of the workq protocol: job UUIDs -> shards, queue names -> shards, the
// lease fan-in across shards, and the connections blocked in run / result.
//
// Jobs live in the shards (workers/engine/workq-store.ts), each queue on the shard its name hashes to
// (the same hash as beanstalk tubes). A UUID maps to a small internal id, never reused, so a late
// "gone" from a shard cannot remove a newer job that took the same UUID.
//
// lease: through the fan-in shared with beanstalk's reserve (./lease.ts, ./fanin.ts).
//
// run / result: a connection waiting for a job's result is a waiter on the job's internal id.
// When a complete/fail is confirmed by the shard (or the shard fails a job by the clock), the
// result is fetched once from the shard and sent to every waiter.

import { NO_REPLY, type ReplyTarget, type ShardPool } from './shards.ts';
import { UuidMap } from './uuidmap.ts';
import { shardOf } from './hash.ts';
import {
  E_WQ_DONE, E_WQ_GONE, E_WQ_READY, eventEvicted, eventTube, okResult, okTube, OP_WQ_DELETE, OP_WQ_INSPECT_JOB,
  OP_WQ_INSPECT_JOBS, OP_WQ_LENS, OP_WQ_QUEUE_NAME, OP_WQ_RESTORE, OP_WQ_RESULT, OP_WQ_RUN_END, payloadAt, payloadF64,
  R_JOB, R_NUMS, R_OK, R_WQ_JOBS, replyId, replyKind, WQ_INFO_ATTEMPTS, WQ_INFO_BYTES, WQ_INFO_CREATED, WQ_INFO_FAILS,
  WQ_INFO_FIELDS, WQ_INFO_MAX_ATTEMPTS, WQ_INFO_MAX_FAILS, WQ_INFO_PAYLOAD_LEN, WQ_INFO_PRIORITY, WQ_INFO_QUEUE,
  WQ_INFO_SCHEDULE, WQ_INFO_STATE, WQ_INFO_TTL, WQ_INFO_TTR, WQ_RESTORE_FIXED, wqJobsCount,
} from '../shared/records.ts';
import { type InspectedJob, uuidText } from '../proto/workq/replies.ts';
import type { RecoveredWqJob } from '../../workers/wal/reader.ts';
import { type FanAttempt, groupByShard } from './fanin.ts';
import { Leases, WqQueue } from './lease.ts';

export { WqQueue } from './lease.ts';

/** Engine state numbers (workers/engine/workq-store.ts). */
export const WQ_LEASED = 4;

// The kinds of the router's own requests (the session's are in src/proto/workq/kinds.ts).
/** A job got its result: fetch it for the connections waiting on it (seq = the job's id). */
const K_WAKE = 1;
/** A run's wait timeout passed (seq = the job's id). */
const K_RUN_END = 2;

/** A connection blocked in run or result (the workq session). */
export interface ResultClient {
  /**
   * The wait of command `seq` on job `idText` ended: with the job's result (an R_JOB reply to
   * OP_WQ_RESULT / OP_WQ_RUN_END: b = success; payload the result), or `buf` null: timed out.
   */
  onResult(seq: number, idText: string, buf: Buffer | null, at: number): void;
}

/** A connection blocked in run or result on one job. */
interface ResultWaiter {
  readonly s: ResultClient;
  readonly seq: number;
  readonly id: number;
  readonly shard: number;
  readonly idText: string;
  /** run: the job is deleted once the run returns (uuid kept to drop the map entry). */
  readonly runUuid: Uint8Array | null;
  timer: ReturnType<typeof setTimeout> | null;
  done: boolean;
}

export class WorkqRouter {
  private readonly pool: ShardPool;
  private readonly shardCount: number;
  readonly uuids = new UuidMap();
  private nextId = 1;
  private readonly queues = new Map<string, WqQueue>();
  private readonly byId: WqQueue[] = [];
  /** Leases over named queues, across shards (the fan-in). */
  readonly leases: Leases;
  private readonly waiters = new Map<number, ResultWaiter[]>();
  /** Result fetches in flight for waiters, by internal id. */
  private readonly wakes = new Map<number, ResultWaiter[]>();
  /** Runs whose wait timeout passed and whose job's state is being asked, by internal id. */
  private readonly runEnds = new Map<number, ResultWaiter>();
  /** Jobs removed by their TTL before anyone completed or failed them (inspect server). */
  evicted = 0;
  /** Open workq connections (inspect server's active-clients). */
  clients = 0;
  /** The workq port listens (set by the server): the JSON API's workq views answer only then. */
  serving = false;
  readonly startedMs = Date.now();
  private readonly flushSoon: () => void;
  /** In memory (no log): add and delete are answered before their shard replies. */
  readonly earlyAck: boolean;

  constructor(pool: ShardPool, shards: number, flushSoon: () => void, earlyAck: boolean) {
    this.pool = pool;
    this.shardCount = shards;
    this.flushSoon = flushSoon;
    this.earlyAck = earlyAck;
    this.leases = new Leases(pool, this.byId, flushSoon);
  }

  newId(): number {
    return this.nextId++;
  }

  queue(name: string): WqQueue | undefined {
    return this.queues.get(name);
  }

  queueById(id: number): WqQueue | undefined {
    return this.byId[id];
  }

  /** The real server makes a queue on first use by add, schedule, run or lease, and never drops it. */
  findOrMakeQueue(name: string): WqQueue {
    let q = this.queues.get(name);
    if (q === undefined) {
      q = new WqQueue(this.byId.length, name, shardOf(name, this.shardCount));
      this.queues.set(name, q);
      this.byId.push(q);
      const bytes = Buffer.from(name, 'latin1');
      const w = this.pool.request(q.shard, 0, NO_REPLY, 0);
      w.header(OP_WQ_QUEUE_NAME, bytes.length, 0, q.id, 0, 0, 0);
      w.bytes(bytes, 0, bytes.length);
    }
    return q;
  }

  /** Queue names in the server's order (Go's sort.Strings: bytewise; names are ASCII). */
  sortedNames(): string[] {
    return [...this.queues.keys()].sort();
  }

  request(shard: number, kind: number, target: ReplyTarget, seq: number) {
    return this.pool.request(shard, kind, target, seq);
  }

  // ---- inspect (the workq session's inspect commands and the JSON API's workq views) ----

  /**
   * Asks the shards for the ready and scheduled lengths of `names` (queues that exist), one
   * OP_WQ_LENS per shard. Returns, by shard, the indexes into `names` its reply answers in order
   * (for readLens); one reply per shard that has an entry.
   */
  requestLens(names: readonly string[], target: ReplyTarget, kind: number, seq: number): Map<number, number[]> {
    const byShard = new Map<number, number[]>();
    names.forEach((name, i) => {
      const shard = (this.queues.get(name) as WqQueue).shard;
      let list = byShard.get(shard);
      if (list === undefined) byShard.set(shard, (list = []));
      list.push(i);
    });
    for (const [shard, list] of byShard) {
      const w = this.pool.request(shard, kind, target, seq);
      w.header(OP_WQ_LENS, list.length * 4, 0, list.length, 0, 0, 0);
      for (const i of list) w.u32((this.queues.get(names[i]) as WqQueue).id);
    }
    return byShard;
  }

  /** One shard's reply to requestLens: lens[i * 2] ready, lens[i * 2 + 1] scheduled for each index i of `list`. */
  static readLens(buf: Buffer, at: number, list: readonly number[], lens: Float64Array): void {
    if (replyKind(buf, at) !== R_NUMS) return;
    for (let k = 0; k < list.length; k++) {
      lens[list[k] * 2] = payloadF64(buf, at, 2 * k);
      lens[list[k] * 2 + 1] = payloadF64(buf, at, 2 * k + 1);
    }
  }

  /** `inspect jobs` / `inspect scheduled-jobs`: a page of `q`'s ready or scheduled jobs (offset, limit). */
  requestJobs(q: WqQueue, scheduled: boolean, offset: number, limit: number, target: ReplyTarget, kind: number, seq: number): void {
    this.pool.request(q.shard, kind, target, seq).header(OP_WQ_INSPECT_JOBS, 0, scheduled ? 1 : 0, q.id, offset, limit, 0);
  }

  /** `inspect job`: the job at slot `i` of the UUID map (uuids.lookup). */
  requestJob(i: number, target: ReplyTarget, kind: number, seq: number): void {
    this.pool.request(this.uuids.shardAt(i), kind, target, seq).header(OP_WQ_INSPECT_JOB, 0, 0, 0, 0, 0, this.uuids.idAt(i));
  }

  /** The jobs of a reply to requestJobs / requestJob (null: not found). Payloads are views into `buf`. */
  readJobs(buf: Buffer, at: number): InspectedJob[] | null {
    if (replyKind(buf, at) !== R_WQ_JOBS) return null;
    const count = wqJobsCount(buf, at);
    const jobs: InspectedJob[] = [];
    let p = payloadAt(at);
    for (let k = 0; k < count; k++) {
      const f = (field: number): number => buf.readDoubleLE(p + field * 8);
      const payloadLen = f(WQ_INFO_PAYLOAD_LEN);
      const uuidAt = p + WQ_INFO_FIELDS * 8;
      const schedule = f(WQ_INFO_SCHEDULE);
      jobs.push({
        idText: uuidText(buf, uuidAt),
        name: this.byId[f(WQ_INFO_QUEUE)]?.name ?? '',
        ttrMs: f(WQ_INFO_TTR),
        ttlMs: f(WQ_INFO_TTL),
        payload: buf.subarray(uuidAt + 16, uuidAt + 16 + payloadLen),
        maxAttempts: f(WQ_INFO_MAX_ATTEMPTS),
        attempts: f(WQ_INFO_ATTEMPTS),
        maxFails: f(WQ_INFO_MAX_FAILS),
        fails: f(WQ_INFO_FAILS),
        priority: f(WQ_INFO_PRIORITY),
        state: f(WQ_INFO_STATE),
        createdMs: f(WQ_INFO_CREATED),
        scheduleMs: Number.isNaN(schedule) ? null : schedule,
      });
      p += WQ_INFO_BYTES + payloadLen;
    }
    return jobs;
  }

  // ---- lease ----

  /** `a` (its client's attempt) leases from `queues` for up to `timeoutMs` (0: only what is ready). */
  lease(a: FanAttempt<WqQueue>, queues: WqQueue[], timeoutMs: number): void {
    a.over(groupByShard(queues));
    this.leases.fan.begin(a, timeoutMs);
  }

  /** Queue `q` may have gained ready jobs: wake the lease that has waited longest on it. */
  queueReady(q: WqQueue): void {
    this.leases.fan.ready(q);
  }

  // ---- run and result ----

  /** `s` waits (command `seq`) for the result of job `id` until `timeoutMs`. */
  waitResult(s: ResultClient, seq: number, id: number, shard: number, idText: string, timeoutMs: number, runUuid: Uint8Array | null): void {
    const w: ResultWaiter = { s, seq, id, shard, idText, runUuid, timer: null, done: false };
    let list = this.waiters.get(id);
    if (list === undefined) this.waiters.set(id, (list = []));
    list.push(w);
    w.timer = setTimeout(() => {
      w.timer = null;
      if (w.done) return;
      if (runUuid !== null) {
        this.runEnd(w);
        return;
      }
      this.finish(w, null, 0);
      this.flushSoon();
    }, timeoutMs);
  }

  private dropWaiter(w: ResultWaiter): void {
    const list = this.waiters.get(w.id);
    if (list === undefined) return;
    const i = list.indexOf(w);
    if (i !== -1) list.splice(i, 1);
    if (list.length === 0) this.waiters.delete(w.id);
  }

  /** The wait ends with the result in `buf` at `at`, or (null) timed out. */
  private finish(w: ResultWaiter, buf: Buffer | null, at: number): void {
    if (w.done) return;
    w.done = true;
    this.dropWaiter(w);
    if (w.timer !== null) {
      clearTimeout(w.timer);
      w.timer = null;
    }
    if (w.runUuid !== null) this.deleteJob(w.runUuid, w.id, w.shard);
    w.s.onResult(w.seq, w.idText, buf, at);
  }

  /**
   * Removes a job from its shard and from the UUID map (if the UUID still names it). A client's
   * delete passes itself, the kind and its reply slot, answered when the shard has logged it.
   */
  deleteJob(uuid: Uint8Array, id: number, shard: number, target: ReplyTarget = NO_REPLY, kind = 0, seq = 0): void {
    this.uuids.remove(uuid, 0, id);
    this.pool.request(shard, kind, target, seq).header(OP_WQ_DELETE, 0, 0, 0, 0, 0, id);
  }

  /** A job read back from the write-ahead log: to the shard its queue hashes to now, under a new internal id. */
  restoreJob(j: RecoveredWqJob): void {
    const q = this.findOrMakeQueue(j.name);
    const id = this.newId();
    if (!this.uuids.insert(j.uuid, 0, id, q.shard)) return;
    const w = this.pool.request(q.shard, 0, NO_REPLY, 0);
    w.header(OP_WQ_RESTORE, WQ_RESTORE_FIXED + j.payload.length + j.result.length, 0, q.id, j.priority, j.ttrMs, id);
    w.f64(j.ttlMs);
    w.f64(j.scheduleMs);
    w.f64(j.createdMs);
    w.u32(j.maxAttempts | (j.maxFails << 8));
    w.u32(j.attempts);
    w.f64(j.leaseDeadline);
    w.u32(j.state);
    w.u32(j.payload.length);
    w.bytes(j.uuid, 0, 16);
    w.bytes(j.payload, 0, j.payload.length);
    w.bytes(j.result, 0, j.result.length);
  }

  /** A run's wait timeout passed: a job being worked on gets until its TTR end, else TIMEOUT. */
  private runEnd(w: ResultWaiter): void {
    this.runEnds.set(w.id, w);
    this.pool.request(w.shard, K_RUN_END, this.own, w.id).header(OP_WQ_RUN_END, 0, 0, 0, 0, 0, w.id);
    this.flushSoon();
  }

  /** Job `id` on `shard` has its result now: send it to whoever waits. */
  processed(id: number, shard: number): void {
    const list = this.waiters.get(id);
    if (list === undefined) return;
    this.waiters.delete(id);
    this.wakes.set(id, list);
    this.pool.request(shard, K_WAKE, this.own, id).header(OP_WQ_RESULT, 0, 0, 0, 0, 0, id);
  }

  // ---- shard replies and events ----

  /**
   * The reply to an add (OP_WQ_ADD: R_OK a = 1 ready / 2 scheduled, b = queue): a job ready now
   * wakes a lease waiting on its queue. The session that sent it calls this, or, for an add
   * answered before the shard has it, the router's own target.
   */
  added(buf: Buffer, at: number): void {
    if (replyKind(buf, at) !== R_OK || okResult(buf, at) !== 1) return;
    const q = this.byId[okTube(buf, at)];
    if (q !== undefined) this.queueReady(q);
  }

  /** The target of an add nobody waits for. */
  readonly addedEarly: ReplyTarget = {
    onShardReply: (_shard, _kind, _seq, buf, at) => this.added(buf, at),
  };

  /** Replies to the router's own requests (result fetches, run ends). */
  private readonly own: ReplyTarget = {
    onShardReply: (_shard, kind, seq, buf, at) => this.ownReply(kind, seq, buf, at),
  };

  private ownReply(kind: number, seq: number, buf: Buffer, at: number): void {
    const rk = replyKind(buf, at);
    if (kind === K_WAKE) {
      const list = this.wakes.get(seq);
      this.wakes.delete(seq);
      if (list === undefined) return;
      if (rk !== R_JOB) {
        // Gone meanwhile (deleted, TTL): the waiters wait on until their timeouts.
        for (const w of list) if (!w.done) this.requeueWaiter(w);
        return;
      }
      for (const w of list) if (!w.done) this.finish(w, buf, at);
      return;
    }
    // K_RUN_END
    const w = this.runEnds.get(seq);
    this.runEnds.delete(seq);
    if (w === undefined || w.done) return;
    if (rk === R_JOB) {
      this.finish(w, buf, at);
    } else if (rk === R_OK && okResult(buf, at) === WQ_LEASED) {
      // Being worked on: wait for its result until the lease's TTR end.
      const deadline = replyId(buf, at);
      w.timer = setTimeout(() => {
        w.timer = null;
        this.finish(w, null, 0);
        this.flushSoon();
      }, Math.max(0, deadline - Date.now()));
    } else {
      // The shard deleted it (or it was gone already).
      this.uuids.remove(w.runUuid as Uint8Array, 0, w.id);
      this.finishGone(w);
    }
  }

  private requeueWaiter(w: ResultWaiter): void {
    let list = this.waiters.get(w.id);
    if (list === undefined) this.waiters.set(w.id, (list = []));
    list.push(w);
  }

  /** A run whose job the shard already removed: TIMEOUT, nothing left to delete. */
  private finishGone(w: ResultWaiter): void {
    if (w.done) return;
    w.done = true;
    this.dropWaiter(w);
    w.s.onResult(w.seq, w.idText, null, 0);
  }

  onEvent(buf: Buffer, at: number, shard: number): void {
    const kind = replyKind(buf, at);
    if (kind === E_WQ_READY) {
      const q = this.byId[eventTube(buf, at)];
      if (q !== undefined) this.queueReady(q);
    } else if (kind === E_WQ_DONE) {
      this.processed(replyId(buf, at), shard);
    } else if (kind === E_WQ_GONE) {
      const id = replyId(buf, at);
      if (eventEvicted(buf, at)) this.evicted++;
      this.uuids.remove(buf, payloadAt(at), id);
    }
  }

  /** A closing connection stops waiting; run and result waiters stay until their timers (their replies go nowhere). */
  closed(lease: FanAttempt<WqQueue> | null): void {
    this.clients--;
    if (lease !== null) this.leases.fan.cancel(lease);
  }
}
