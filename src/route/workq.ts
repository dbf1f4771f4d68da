// The main thread's side of the workq protocol: job UUIDs -> shards, queue names -> shards, the
// lease fan-in across shards, and the connections blocked in run / result.
//
// Jobs live in the shards (workers/engine/workq.ts), each queue on the shard its name hashes to
// (the same hash as beanstalk tubes). A UUID maps to a small internal id, never reused, so a late
// "gone" from a shard cannot remove a newer job that took the same UUID.
//
// lease: through the fan-in shared with beanstalk's reserve (./lease.ts, ./fanin.ts).
//
// run / result: a connection waiting for a job's result is a waiter on the job's internal id.
// When a complete/fail is confirmed by the shard (or the shard fails a job by the clock), the
// result is fetched once from the shard and sent to every waiter.

import type { ShardPool } from './shards.ts';
import { UuidMap } from './uuidmap.ts';
import { shardOf } from './hash.ts';
import {
  HEADER_BYTES, OP_WQ_DELETE, OP_WQ_LEASE, OP_WQ_PEEK, OP_WQ_QUEUE_NAME, OP_WQ_RESTORE,
  OP_WQ_RESULT, OP_WQ_RUN_END, R_BEST, R_JOB, R_OK, E_WQ_DONE, E_WQ_GONE, E_WQ_READY, REPLY_FLAG_UNLOGGED,
  WQ_RESTORE_FIXED,
} from '../shared/records.ts';
import type { RecoveredWqJob } from '../../workers/wal/reader.ts';
import {
  K_WQ_ACK, K_WQ_ADD, K_WQ_DELETE, K_WQ_DONE, K_WQ_INSPECT, K_WQ_LENS, K_WQ_RESULT, K_WQ_RUN_END, K_WQ_WAKE,
} from '../proto/workq/kinds.ts';
import { REPLY_OK, REPLY_TIMEOUT, REPLY_UNLOGGED, resultReply } from '../proto/workq/replies.ts';
import type { WorkqSession } from '../proto/workq/session.ts';
import { FanAttempt } from './fanin.ts';
import { K_LEASE_PEEK, K_LEASE_TAKE, K_LEASE_TAKE_BOUNDED, Leases, WqQueue } from './lease.ts';

export { WqQueue } from './lease.ts';

/** Engine state numbers (workers/engine/workq.ts). */
export const WQ_LEASED = 4;

/** A connection blocked in run or result on one job. */
interface ResultWaiter {
  readonly s: WorkqSession;
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
  private readonly pool: ShardPool<unknown>;
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
  readonly startedMs = Date.now();
  private readonly flushSoon: () => void;
  /** In memory (no log): add and delete are answered before their shard replies. */
  readonly earlyAck: boolean;

  constructor(pool: ShardPool<unknown>, shards: number, flushSoon: () => void, earlyAck: boolean) {
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
      const w = this.pool.request(q.shard, K_WQ_ACK, null, 0);
      w.header(OP_WQ_QUEUE_NAME, bytes.length, 0, q.id, 0, 0, 0);
      w.bytes(bytes, 0, bytes.length);
    }
    return q;
  }

  /** Queue names in the server's order (Go's sort.Strings: bytewise; names are ASCII). */
  sortedNames(): string[] {
    return [...this.queues.keys()].sort();
  }

  request(shard: number, kind: number, s: WorkqSession | null, seq: number) {
    return this.pool.request(shard, kind, s, seq);
  }

  // ---- lease ----

  /** `a` (its client's attempt) leases from `queues` for up to `timeoutMs` (0: only what is ready). */
  lease(a: FanAttempt<WqQueue>, queues: WqQueue[], timeoutMs: number): void {
    const byShard: WqQueue[][] = [];
    const shards: number[] = [];
    for (const q of queues) {
      if (byShard[q.shard] === undefined) {
        byShard[q.shard] = [];
        shards.push(q.shard);
      }
      byShard[q.shard].push(q);
    }
    a.queues = queues;
    a.shards = shards;
    a.byShard = byShard;
    this.leases.fan.begin(a, timeoutMs);
  }

  /** Queue `q` may have gained ready jobs: wake the lease that has waited longest on it. */
  queueReady(q: WqQueue): void {
    this.leases.fan.ready(q);
  }

  // ---- run and result ----

  /** `s` waits (command `seq`) for the result of job `id` until `timeoutMs`. */
  waitResult(s: WorkqSession, seq: number, id: number, shard: number, idText: string, timeoutMs: number, runUuid: Uint8Array | null): void {
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
      this.finish(w, REPLY_TIMEOUT);
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

  private finish(w: ResultWaiter, reply: Buffer): void {
    if (w.done) return;
    w.done = true;
    this.dropWaiter(w);
    if (w.timer !== null) {
      clearTimeout(w.timer);
      w.timer = null;
    }
    if (w.runUuid !== null) this.deleteJob(w.runUuid, w.id, w.shard);
    w.s.answered(w.seq, reply);
  }

  /**
   * Removes a job from its shard and from the UUID map (if the UUID still names it). A client's
   * delete passes its session and reply slot, answered when the shard has logged it.
   */
  deleteJob(uuid: Uint8Array, id: number, shard: number, s: WorkqSession | null = null, seq = 0): void {
    this.uuids.remove(uuid, 0, id);
    this.pool.request(shard, s === null ? K_WQ_ACK : K_WQ_DELETE, s, seq).header(OP_WQ_DELETE, 0, 0, 0, 0, 0, id);
  }

  /** A job read back from the write-ahead log: to the shard its queue hashes to now, under a new internal id. */
  restoreJob(j: RecoveredWqJob): void {
    const q = this.findOrMakeQueue(j.name);
    const id = this.newId();
    if (!this.uuids.insert(j.uuid, 0, id, q.shard)) return;
    const w = this.pool.request(q.shard, K_WQ_ACK, null, 0);
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
    this.pool.request(w.shard, K_WQ_RUN_END, null, w.id).header(OP_WQ_RUN_END, 0, 0, 0, 0, 0, w.id);
    this.flushSoon();
  }

  /** Job `id` on `shard` has its result now: send it to whoever waits. */
  processed(id: number, shard: number): void {
    const list = this.waiters.get(id);
    if (list === undefined) return;
    this.waiters.delete(id);
    this.wakes.set(id, list);
    this.pool.request(shard, K_WQ_WAKE, null, id).header(OP_WQ_RESULT, 0, 0, 0, 0, 0, id);
  }

  /** The result record of an R_JOB reply to OP_WQ_RESULT / OP_WQ_RUN_END. */
  static resultOf(idText: string, buf: Buffer, at: number): Buffer {
    const len = buf.readUInt32LE(at);
    return resultReply(idText, buf.readUInt32LE(at + 16) !== 0, buf, at + HEADER_BYTES, at + len);
  }

  // ---- shard replies and events ----

  onReply(shard: number, kind: number, s: WorkqSession | null, seq: number, buf: Buffer, at: number): void {
    const rk = buf[at + 4];
    switch (kind) {
      case K_WQ_ADD:
        // With a log, add waits for this reply; a change the log could not take is an error.
        if (s !== null) s.complete(seq, buf[at + REPLY_FLAG_UNLOGGED] !== 0 ? REPLY_UNLOGGED : REPLY_OK);
        if (rk === R_OK && buf.readUInt32LE(at + 12) === 1) {
          const q = this.byId[buf.readUInt32LE(at + 16)];
          if (q !== undefined) this.queueReady(q);
        }
        return;
      case K_LEASE_TAKE:
      case K_LEASE_PEEK:
      case K_LEASE_TAKE_BOUNDED:
        this.leases.reply(shard, kind, s as unknown as FanAttempt<WqQueue>, buf, at);
        return;
      case K_WQ_DELETE:
        if (s !== null) s.complete(seq, buf[at + REPLY_FLAG_UNLOGGED] !== 0 ? REPLY_UNLOGGED : REPLY_OK);
        return;
      case K_WQ_ACK:
        return;
      case K_WQ_WAKE: {
        const list = this.wakes.get(seq);
        this.wakes.delete(seq);
        if (list === undefined) return;
        if (rk !== R_JOB) {
          // Gone meanwhile (deleted, TTL): the waiters wait on until their timeouts.
          for (const w of list) if (!w.done) this.requeueWaiter(w);
          return;
        }
        for (const w of list) if (!w.done) this.finish(w, WorkqRouter.resultOf(w.idText, buf, at));
        return;
      }
      case K_WQ_RUN_END: {
        const w = this.runEnds.get(seq);
        this.runEnds.delete(seq);
        if (w === undefined || w.done) return;
        if (rk === R_JOB) {
          this.finish(w, WorkqRouter.resultOf(w.idText, buf, at));
        } else if (rk === R_OK && buf.readUInt32LE(at + 12) === WQ_LEASED) {
          // Being worked on: wait for its result until the lease's TTR end.
          const deadline = buf.readDoubleLE(at + 24);
          w.timer = setTimeout(() => {
            w.timer = null;
            this.finish(w, REPLY_TIMEOUT);
            this.flushSoon();
          }, Math.max(0, deadline - Date.now()));
        } else {
          // The shard deleted it (or it was gone already).
          this.uuids.remove(w.runUuid as Uint8Array, 0, w.id);
          this.finishGone(w);
        }
        return;
      }
      case K_WQ_DONE:
      case K_WQ_RESULT:
      case K_WQ_LENS:
      case K_WQ_INSPECT:
        (s as WorkqSession).onShardReply(kind, seq, rk, buf, at, shard);
        return;
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
    w.s.answered(w.seq, REPLY_TIMEOUT);
  }

  onEvent(buf: Buffer, at: number, shard: number): void {
    const kind = buf[at + 4];
    if (kind === E_WQ_READY) {
      const q = this.byId[buf.readUInt32LE(at + 12)];
      if (q !== undefined) this.queueReady(q);
    } else if (kind === E_WQ_DONE) {
      this.processed(buf.readDoubleLE(at + 24), shard);
    } else if (kind === E_WQ_GONE) {
      const id = buf.readDoubleLE(at + 24);
      if (buf.readUInt32LE(at + 12) !== 0) this.evicted++;
      this.uuids.remove(buf, at + HEADER_BYTES, id);
    }
  }

  /** A closing connection stops waiting; run and result waiters stay until their timers (their replies go nowhere). */
  sessionClosed(s: WorkqSession): void {
    this.clients--;
    if (s.leaseAttempt !== null) this.leases.fan.cancel(s.leaseAttempt);
  }
}
