// The workq protocol's jobs that live in one shard (github.com/iamduo/workq 0.2 semantics), next
// to the beanstalk Engine and built the same way. Synchronous, no sockets, no threads; the clock
// is an argument (nowMs) so tests drive time.
//
// Memory layout: a job is a slot number into typed-array columns (no object or Map entry per
// job); free slots form a list through `next`; slots are found by internal id through an
// IdTable. Where a job sits (`where`) is separate from the state `inspect` reports (`jobState`),
// because a scheduled job that has not woken yet and a ready one are both NEW:
//   IN_READY      its queue's ready heap                       (NEW or PENDING)
//   IN_SCHEDULED  its queue's scheduled heap and the timer heap (NEW, deadline = schedule time)
//   IN_LEASE      the timer heap                                (LEASED, deadline = TTR end)
//   FINISHED      no heap; the job stays for its result         (COMPLETED or FAILED)
// Both queue heaps write `heapPos` (a job is in at most one), the shard-global timer heap writes
// `timerPos`, and a second global heap by TTL end (`expireAt`) holds every job with a TTL and
// writes `ttlPos`. Payloads and results live in two slab BodyStores keyed by slot.

import { ColumnBlock, growF64, growI32, growU8 } from './columns.ts';
import { IndexHeap } from './heap.ts';
import { IdTable } from './idtable.ts';
import { BodyStore, DEFAULT_CHUNK_SIZE, SLOT_BYTES } from './bodystore.ts';

/** Job states, numbered as `inspect` reports them (the workq server's job.State* constants). */
export const WQ_NEW = 0, WQ_COMPLETED = 1, WQ_FAILED = 2, WQ_PENDING = 3, WQ_LEASED = 4;
/** add()'s return: where the new job went. */
export const WQ_READY = 1, WQ_SCHEDULED = 2;
/** job.MaxHardAttempts: no job is leased more often than this, even with max-attempts 0 ("unlimited"). */
export const WQ_HARD_ATTEMPTS_MAX = 255;
/** What info() writes, in order. */
export const WQ_INFO_LAYOUT = ['queue', 'priority', 'ttrMs', 'ttlMs', 'maxAttempts', 'attempts', 'maxFails', 'fails', 'state', 'createdMs', 'scheduleMs', 'payloadLength'] as const;

export interface WorkqEvents {
  /** A queue gained ready jobs by the clock (schedule time reached, TTR requeue). */
  ready(queue: number): void;
  /** A job got its (empty, failed) result by the clock or by running out of attempts. */
  done(id: number): void;
  /** The job's TTL ended and it was removed; evicted = it was not completed or failed.
   *  uuid[uuidAt..uuidAt+16) holds its UUID (a scratch buffer, valid during the call only). */
  gone(id: number, evicted: boolean, uuid: Uint8Array, uuidAt: number, fileSeq: number, fileBytes: number): void;
  /** A leased job went back to its queue at its TTR end (a change the write-ahead log records). */
  requeued?(id: number): void;
}

export interface WorkqStoreOptions {
  /** Initial job slots (columns double from here). */
  initialSlots?: number;
  /** Slab chunk size in bytes of the payload and result stores (tests use small chunks). */
  chunkSize?: number;
}

const NIL = -1;
const EMPTY = new Uint8Array(0);
const UUID_BYTES = 16;
// A job that was not scheduled sorts before every scheduled one of the same priority: the workq
// server compares the zero time.Time there.
const NOT_SCHEDULED = -Infinity;
// `where` values; 0 marks a free slot.
const FREE = 0, IN_READY = 1, IN_SCHEDULED = 2, IN_LEASE = 3, FINISHED = 4;

/** Bytes of column storage per job slot (see grow()); each body store adds 12 more. */
export const WQ_COLUMN_BYTES_PER_SLOT = 8 + UUID_BYTES + 4 + 4 + 4 + 8 + 8 + 8 + 8 + 5 + 8 + 8 + 4 + 4 + 4 + 4 + 4 + 4;

/** Per-queue state: one small object per queue, never per job. */
class Queue {
  readonly id: number;
  readonly ready: IndexHeap;
  readonly scheduled: IndexHeap; // not yet woken, in the same order as `ready` (the server's skiplist)
  signalSeq = 0; // last tick that reported this queue ready (one report per tick)

  constructor(id: number, ready: IndexHeap, scheduled: IndexHeap) {
    this.id = id;
    this.ready = ready;
    this.scheduled = scheduled;
  }
}

export class WorkqStore {
  /** Set by leaseBest/leaseId: the leased job's queue (-1 if nothing was leased) and whether that
   *  queue still has ready jobs (1) or not (0). */
  lastQueue = -1;
  lastMore = 0;
  /** Set by a successful peekBest: the chosen job's sort key (to compare bests across shards). */
  lastPriority = 0;
  lastScheduleKey = NOT_SCHEDULED;
  lastCreated = 0;

  // ---- job columns, indexed by slot ----
  private cap = 0;
  private ids: Float64Array = new Float64Array(0);
  private uuidCol: Uint8Array = new Uint8Array(0); // 16 bytes per slot
  private queue: Int32Array = new Int32Array(0);
  private pri: Int32Array = new Int32Array(0); // higher first
  private ttrMs: Uint32Array = new Uint32Array(0);
  private ttlMs: Float64Array = new Float64Array(0); // 0: never expires
  private schedKey: Float64Array = new Float64Array(0); // schedule time in ms, NOT_SCHEDULED if none
  private created: Float64Array = new Float64Array(0); // ms
  private seq: Float64Array = new Float64Array(0); // insertion order in this store: the FIFO tie-break
  private maxAttempts: Uint8Array = new Uint8Array(0); // 0: unlimited (up to WQ_HARD_ATTEMPTS_MAX)
  private maxFails: Uint8Array = new Uint8Array(0); // only stored and reported
  private attempts: Uint8Array = new Uint8Array(0);
  private jobState: Uint8Array = new Uint8Array(0); // WQ_NEW..WQ_LEASED
  private where: Uint8Array = new Uint8Array(0); // FREE, IN_READY, ...
  private deadline: Float64Array = new Float64Array(0); // ms: IN_SCHEDULED = schedule time, IN_LEASE = TTR end
  private expireAt: Float64Array = new Float64Array(0); // ms, TTL end (only meaningful with ttlMs > 0)
  private heapPos: Int32Array = new Int32Array(0); // position in the queue's ready or scheduled heap
  private timerPos: Int32Array = new Int32Array(0);
  private ttlPos: Int32Array = new Int32Array(0);
  private next: Int32Array = new Int32Array(0); // free-slot list
  private fileSeq: Int32Array = new Int32Array(0); // write-ahead log segment of the job's WQ_FULL record (0: none)
  private fileBytes: Uint32Array = new Uint32Array(0); // that record's size

  private hwm = 0; // slots [0, hwm) have been handed out at least once
  private freeHead = NIL;
  private live = 0;
  private nextSeq = 1;
  private resultCt = 0; // slots holding a non-empty result

  private readonly index: IdTable;
  private readonly payloads: BodyStore;
  private readonly results: BodyStore; // only non-empty results are stored
  private readonly timers: IndexHeap;
  private readonly ttls: IndexHeap;
  private readonly queues = new Map<number, Queue>();

  // tick() scratch, reused so a tick allocates nothing.
  private tickSeq = 0;
  private readyBuf: Int32Array = new Int32Array(16);
  private doneBuf: Float64Array = new Float64Array(16);
  private goneBuf: Float64Array = new Float64Array(16);
  private evictedBuf: Uint8Array = new Uint8Array(16);
  private goneUuids: Uint8Array = new Uint8Array(16 * UUID_BYTES); // the removed jobs' UUIDs
  private goneFiles: Float64Array = new Float64Array(32); // their log segment and record size

  // Heap callbacks, created once and shared by every heap so call sites stay monomorphic.
  // The workq server's skiplist compare: priority descending, then the schedule time, then the
  // creation time; our insertion sequence makes it a strict total order.
  private readonly queueLess = (a: number, b: number): boolean => {
    const pa = this.pri[a];
    const pb = this.pri[b];
    if (pa !== pb) return pa > pb;
    const ka = this.schedKey[a];
    const kb = this.schedKey[b];
    if (ka !== kb) return ka < kb;
    const ca = this.created[a];
    const cb = this.created[b];
    if (ca !== cb) return ca < cb;
    return this.seq[a] < this.seq[b];
  };
  private readonly timeLess = (a: number, b: number): boolean => {
    const da = this.deadline[a];
    const db = this.deadline[b];
    return da < db || (da === db && this.seq[a] < this.seq[b]);
  };
  private readonly ttlLess = (a: number, b: number): boolean => {
    const ea = this.expireAt[a];
    const eb = this.expireAt[b];
    return ea < eb || (ea === eb && this.seq[a] < this.seq[b]);
  };
  private readonly setHeapPos = (s: number, p: number): void => {
    this.heapPos[s] = p;
  };
  private readonly setTimerPos = (s: number, p: number): void => {
    this.timerPos[s] = p;
  };
  private readonly setTtlPos = (s: number, p: number): void => {
    this.ttlPos[s] = p;
  };

  constructor(opts: WorkqStoreOptions = {}) {
    const slots = Math.max(16, opts.initialSlots ?? 1024);
    const chunkSize = opts.chunkSize ?? DEFAULT_CHUNK_SIZE;
    this.index = new IdTable(slots);
    this.payloads = new BodyStore(chunkSize, 0); // slot columns come with grow()
    this.results = new BodyStore(chunkSize, 0);
    this.timers = new IndexHeap(this.timeLess, this.setTimerPos);
    this.ttls = new IndexHeap(this.ttlLess, this.setTtlPos);
    this.grow(slots);
  }

  /** Number of jobs held (in any state, results waiting included). */
  get size(): number {
    return this.live;
  }

  /** UUID bytes, 16 per slot; uuidAt(id) gives a job's offset. Replaced when the columns grow. */
  get uuids(): Uint8Array {
    return this.uuidCol;
  }

  // ---------------------------------------------------------------- commands

  /**
   * add / schedule / run. `scheduleMs` NaN = not scheduled; `ttlMs` 0 = never expires. The TTL
   * runs from the schedule time if there is one, else from `createdMs`. A scheduled job waits
   * in the scheduled heap even if its time has already come (tick() wakes it: the server fires
   * its timer at once). Returns WQ_READY or WQ_SCHEDULED. Throws on a duplicate id.
   */
  add(queue: number, id: number, uuid: Uint8Array, uuidAt: number, priority: number, ttrMs: number, ttlMs: number,
    scheduleMs: number, createdMs: number, maxAttempts: number, maxFails: number, payload: Uint8Array, _nowMs: number): number {
    if (!(id > 0)) throw new RangeError(`job id must be positive, got ${id}`);
    if (this.index.get(id) !== NIL) throw new Error(`duplicate workq job id ${id}`);
    const q = this.ensureQueue(queue);
    const s = this.allocSlot();
    this.ids[s] = id; // the id table reads keys from this column
    this.index.insert(id, s);
    const u = this.uuidCol;
    const at = s * UUID_BYTES;
    for (let i = 0; i < UUID_BYTES; i++) u[at + i] = uuid[uuidAt + i]; // no subarray view per job
    this.queue[s] = queue;
    this.pri[s] = priority;
    this.ttrMs[s] = ttrMs;
    this.ttlMs[s] = ttlMs;
    const scheduled = !Number.isNaN(scheduleMs);
    this.schedKey[s] = scheduled ? scheduleMs : NOT_SCHEDULED;
    this.created[s] = createdMs;
    this.seq[s] = this.nextSeq++;
    this.maxAttempts[s] = maxAttempts;
    this.maxFails[s] = maxFails;
    this.attempts[s] = 0;
    this.jobState[s] = WQ_NEW; // the server never sets PENDING on add
    this.heapPos[s] = this.timerPos[s] = this.ttlPos[s] = NIL;
    this.fileSeq[s] = 0;
    this.fileBytes[s] = 0;
    this.payloads.put(s, payload);
    this.live++;
    if (ttlMs > 0) {
      this.expireAt[s] = (scheduled ? scheduleMs : createdMs) + ttlMs;
      this.ttls.push(s);
    } else {
      this.expireAt[s] = Infinity;
    }
    if (scheduled) {
      this.where[s] = IN_SCHEDULED;
      this.deadline[s] = scheduleMs;
      q.scheduled.push(s);
      this.timers.push(s);
      return WQ_SCHEDULED;
    }
    this.where[s] = IN_READY;
    q.ready.push(s);
    return WQ_READY;
  }

  /**
   * Leases the best ready job among queues[0..count) and returns its id, or 0 if none could be
   * leased. A job whose attempts are used up fails instead (empty failed result, events.done(id),
   * called with the store consistent so it may call back in) and the search goes on.
   * Sets lastQueue/lastMore (after any events).
   */
  leaseBest(queues: ArrayLike<number>, count: number, nowMs: number, events: WorkqEvents): number {
    // No bound: every job comes before a priority below any int32.
    return this.leaseBounded(queues, count, -Infinity, 0, 0, 0, nowMs, events);
  }

  /**
   * leaseBest, but only while the best job comes before the bound (priority high first, then
   * schedule key, creation time, id): the best candidate of the other shards a lease over
   * several shards' queues must beat. Returns the id, or 0 (nothing, or nothing before it).
   */
  leaseBounded(queues: ArrayLike<number>, count: number, bPriority: number, bSchedKey: number, bCreated: number, bId: number,
    nowMs: number, events: WorkqEvents): number {
    for (;;) {
      const s = this.bestReady(queues, count);
      if (s === NIL || !this.beats(s, bPriority, bSchedKey, bCreated, bId)) break;
      const q = this.queueAt(s);
      q.ready.removeAt(this.heapPos[s]);
      if (this.startAttempt(s, nowMs)) {
        this.lastQueue = q.id;
        this.lastMore = q.ready.size > 0 ? 1 : 0;
        return this.ids[s];
      }
      events.done(this.ids[s]);
    }
    this.lastQueue = -1;
    this.lastMore = 0;
    return 0;
  }

  /** Whether slot `s` comes before the job keyed (priority, schedKey, created, id) of another shard. */
  private beats(s: number, priority: number, schedKey: number, created: number, id: number): boolean {
    if (this.pri[s] !== priority) return this.pri[s] > priority;
    if (this.schedKey[s] !== schedKey) return this.schedKey[s] < schedKey;
    if (this.created[s] !== created) return this.created[s] < created;
    return this.ids[s] < id;
  }

  /** The job leaseBest would try first, without changing anything; id or 0. On success sets
   *  lastPriority, lastScheduleKey (-Infinity: not scheduled), lastCreated and lastQueue. */
  peekBest(queues: ArrayLike<number>, count: number): number {
    const s = this.bestReady(queues, count);
    if (s === NIL) return 0;
    this.lastPriority = this.pri[s];
    this.lastScheduleKey = this.schedKey[s];
    this.lastCreated = this.created[s];
    this.lastQueue = this.queue[s];
    return this.ids[s];
  }

  /**
   * Leases exactly this job if it sits in a ready heap (same attempt rules as leaseBest).
   * False if absent, not ready, or its attempts were used up (then it failed and events.done(id)
   * was called). Sets lastQueue (-1 if it was not ready) and lastMore.
   */
  leaseId(id: number, nowMs: number, events: WorkqEvents): boolean {
    const s = this.index.get(id);
    if (s === NIL || this.where[s] !== IN_READY) {
      this.lastQueue = -1;
      this.lastMore = 0;
      return false;
    }
    const q = this.queueAt(s);
    q.ready.removeAt(this.heapPos[s]);
    const leased = this.startAttempt(s, nowMs);
    if (!leased) events.done(id);
    this.lastQueue = q.id;
    this.lastMore = this.hasReady(q.id) ? 1 : 0;
    return leased;
  }

  /** 0 ok, 1 not found, 2 duplicate (already completed or failed). The job leaves its heaps but
   *  stays, with its result, until its TTL ends or it is deleted. */
  complete(id: number, result: Uint8Array, _nowMs: number): number {
    return this.finishWith(id, WQ_COMPLETED, result);
  }

  /** Like complete, but FAILED. The server neither requeues on fail nor looks at max-fails. */
  fail(id: number, result: Uint8Array, _nowMs: number): number {
    return this.finishWith(id, WQ_FAILED, result);
  }

  /** Removes the job whatever its state. False if absent. */
  delete(id: number): boolean {
    const s = this.index.get(id);
    if (s === NIL) return false;
    this.removeSlot(s);
    return true;
  }

  /** Forgets an idle queue's state (its heaps). False (no-op) if it holds ready or scheduled
   *  jobs; leased jobs that come back later recreate it. */
  dropQueue(queue: number): boolean {
    const q = this.queues.get(queue);
    if (!q) return true;
    if (q.ready.size > 0 || q.scheduled.size > 0) return false;
    this.queues.delete(queue);
    return true;
  }

  /**
   * A job read back from the write-ahead log, in the state it was logged in: new or pending jobs
   * wait in their ready heap (or their scheduled heap until the schedule time), a leased job keeps
   * its lease until `leaseDeadline`, a completed or failed one keeps its result until its TTL.
   */
  restore(queue: number, id: number, uuid: Uint8Array, uuidAt: number, priority: number, ttrMs: number, ttlMs: number,
    scheduleMs: number, createdMs: number, maxAttempts: number, maxFails: number, attempts: number, state: number,
    leaseDeadline: number, payload: Uint8Array, result: Uint8Array, nowMs: number): void {
    this.add(queue, id, uuid, uuidAt, priority, ttrMs, ttlMs, scheduleMs, createdMs, maxAttempts, maxFails, payload, nowMs);
    const s = this.index.get(id);
    this.attempts[s] = Math.min(attempts, 255);
    if (state === WQ_NEW || state === WQ_PENDING) {
      this.jobState[s] = state;
      return;
    }
    this.leave(s);
    this.jobState[s] = state;
    if (state === WQ_LEASED) {
      this.where[s] = IN_LEASE;
      this.deadline[s] = leaseDeadline;
      this.timers.push(s);
      return;
    }
    this.where[s] = FINISHED;
    if (result.length > 0) {
      this.results.put(s, result);
      this.resultCt++;
    }
  }

  // ---------------------------------------------------------------- the write-ahead log's bookkeeping

  /** Segment of the job's WQ_FULL record (0: none: never logged, as a run's job) and its size. */
  fileOf(id: number): number {
    const s = this.index.get(id);
    return s === NIL ? 0 : this.fileSeq[s];
  }

  fileBytesOf(id: number): number {
    const s = this.index.get(id);
    return s === NIL ? 0 : this.fileBytes[s];
  }

  setFile(id: number, seq: number, bytes: number): void {
    const s = this.index.get(id);
    if (s === NIL) return;
    this.fileSeq[s] = seq;
    this.fileBytes[s] = bytes;
  }

  /** Calls fn(id) for up to `limit` jobs whose WQ_FULL is in segment `seq`, scanning slots from
   *  `cursor`; returns where to go on, or -1 once every slot was looked at (compaction). */
  jobsInFile(seq: number, cursor: number, limit: number, fn: (id: number) => void): number {
    let n = 0;
    let s = cursor;
    for (; s < this.hwm && n < limit; s++) {
      if (this.fileSeq[s] === seq && this.where[s] !== FREE) {
        fn(this.ids[s]);
        n++;
      }
    }
    return s < this.hwm ? s : -1;
  }

  /** The job's name-independent logged fields: out = [priority, ttrMs, ttlMs, scheduleMs (NaN if
   *  none), createdMs, maxAttempts, maxFails, attempts, state, leaseDeadline (NaN unless leased)]. */
  image(id: number, out: Float64Array): boolean {
    const s = this.index.get(id);
    if (s === NIL) return false;
    out[0] = this.pri[s];
    out[1] = this.ttrMs[s];
    out[2] = this.ttlMs[s];
    out[3] = this.schedKey[s] === NOT_SCHEDULED ? NaN : this.schedKey[s];
    out[4] = this.created[s];
    out[5] = this.maxAttempts[s];
    out[6] = this.maxFails[s];
    out[7] = this.attempts[s];
    out[8] = this.jobState[s];
    out[9] = this.where[s] === IN_LEASE ? this.deadline[s] : NaN;
    return true;
  }

  // ---------------------------------------------------------------- queries

  /** WQ_NEW..WQ_LEASED, or -1 if no such job. */
  state(id: number): number {
    const s = this.index.get(id);
    return s === NIL ? -1 : this.jobState[s];
  }

  /** True only for a completed job (a failed one, or any other, has no successful result). */
  success(id: number): boolean {
    const s = this.index.get(id);
    return s !== NIL && this.jobState[s] === WQ_COMPLETED;
  }

  /** View of the payload; valid until the next change to the store. Empty if absent. */
  payload(id: number): Uint8Array {
    const s = this.index.get(id);
    return s === NIL ? EMPTY : this.payloads.get(s);
  }

  /** View of the result; valid until the next change. Empty if absent or none yet. */
  result(id: number): Uint8Array {
    const s = this.index.get(id);
    return s === NIL ? EMPTY : this.results.get(s);
  }

  /** Offset of the job's 16 UUID bytes in `uuids`, or -1 if absent. */
  uuidAt(id: number): number {
    const s = this.index.get(id);
    return s === NIL ? -1 : s * UUID_BYTES;
  }

  /** The job's queue, or -1 if absent. */
  queueOf(id: number): number {
    const s = this.index.get(id);
    return s === NIL ? -1 : this.queue[s];
  }

  /** The job's TTR in ms as given at add, or -1 if absent. */
  ttrOf(id: number): number {
    const s = this.index.get(id);
    return s === NIL ? -1 : this.ttrMs[s];
  }

  /** When the job's current lease ends (ms); NaN if absent or not leased. */
  leaseDeadline(id: number): number {
    const s = this.index.get(id);
    return s !== NIL && this.where[s] === IN_LEASE ? this.deadline[s] : NaN;
  }

  /** out[0..12) = WQ_INFO_LAYOUT. False if absent. */
  info(id: number, out: Float64Array): boolean {
    const s = this.index.get(id);
    if (s === NIL) return false;
    out[0] = this.queue[s];
    out[1] = this.pri[s];
    out[2] = this.ttrMs[s];
    out[3] = this.ttlMs[s];
    out[4] = this.maxAttempts[s];
    out[5] = this.attempts[s];
    out[6] = this.maxFails[s];
    out[7] = 0; // fails: the workq server never increments it
    out[8] = this.jobState[s];
    out[9] = this.created[s];
    out[10] = this.schedKey[s] === NOT_SCHEDULED ? NaN : this.schedKey[s];
    out[11] = this.payloads.length(s);
    return true;
  }

  /** Ids of the queue's ready (or not yet woken scheduled) jobs in lease order, skipping
   *  `offset`, at most `limit` (inspect jobs / scheduled-jobs). Sorts a copy: off the hot path. */
  jobsOf(queue: number, scheduled: boolean, offset: number, limit: number): number[] {
    const q = this.queues.get(queue);
    if (!q) return [];
    const h = scheduled ? q.scheduled : q.ready;
    const start = Math.max(0, offset);
    const end = Math.min(h.size, start + Math.max(0, limit));
    if (start >= end) return [];
    const slots = Array.from(h.items.subarray(0, h.size));
    slots.sort((a, b) => (a === b ? 0 : this.queueLess(a, b) ? -1 : 1));
    const out: number[] = [];
    for (let i = start; i < end; i++) out.push(this.ids[slots[i]]);
    return out;
  }

  readyLen(queue: number): number {
    const q = this.queues.get(queue);
    return q ? q.ready.size : 0;
  }

  scheduledLen(queue: number): number {
    const q = this.queues.get(queue);
    return q ? q.scheduled.size : 0;
  }

  hasReady(queue: number): boolean {
    const q = this.queues.get(queue);
    return q !== undefined && q.ready.size > 0;
  }

  // ---------------------------------------------------------------- time

  /**
   * Fires everything due at nowMs, in three steps:
   *  1. the timer heap: scheduled jobs whose time came move to their ready heap (state unchanged);
   *     leased jobs past their TTR fail if max-attempts is used up (server timeoutAttempt), else
   *     go back to their ready heap as PENDING, keeping their place (the order keys never change);
   *     then events.done(id) for each job that failed, while its result is still readable;
   *  2. jobs whose TTL ended are removed, then events.gone(id, evicted, uuid, uuidAt) for each;
   *  3. events.ready(queue) once per queue that gained ready jobs in step 1 and still has some.
   * Callbacks may call back into the store (but not tick). Returns nextDeadline().
   */
  tick(nowMs: number, events: WorkqEvents): number {
    const seq = ++this.tickSeq;
    let nReady = 0;
    let nDone = 0;

    const timers = this.timers;
    while (timers.size > 0) {
      const s = timers.items[0];
      if (this.deadline[s] > nowMs) break;
      timers.removeAt(0);
      const q = this.queueAt(s);
      if (this.where[s] === IN_SCHEDULED) {
        q.scheduled.removeAt(this.heapPos[s]);
      } else {
        const max = this.maxAttempts[s];
        if (max > 0 && this.attempts[s] >= max) {
          this.jobState[s] = WQ_FAILED; // empty failed result
          this.where[s] = FINISHED;
          if (nDone === this.doneBuf.length) this.doneBuf = growF64(this.doneBuf, nDone * 2);
          this.doneBuf[nDone++] = this.ids[s];
          continue;
        }
        this.jobState[s] = WQ_PENDING;
        if (events.requeued !== undefined) events.requeued(this.ids[s]);
      }
      this.where[s] = IN_READY;
      q.ready.push(s);
      if (q.signalSeq !== seq) {
        q.signalSeq = seq;
        if (nReady === this.readyBuf.length) this.readyBuf = growI32(this.readyBuf, nReady * 2);
        this.readyBuf[nReady++] = q.id;
      }
    }
    for (let i = 0; i < nDone; i++) events.done(this.doneBuf[i]);

    let nGone = 0;
    const ttls = this.ttls;
    while (ttls.size > 0) {
      const s = ttls.items[0];
      if (this.expireAt[s] > nowMs) break;
      const st = this.jobState[s];
      if (nGone === this.goneBuf.length) {
        this.goneBuf = growF64(this.goneBuf, nGone * 2);
        this.evictedBuf = growU8(this.evictedBuf, nGone * 2);
        this.goneUuids = growU8(this.goneUuids, nGone * 2 * UUID_BYTES);
        this.goneFiles = growF64(this.goneFiles, nGone * 4);
      }
      this.goneFiles[nGone * 2] = this.fileSeq[s];
      this.goneFiles[nGone * 2 + 1] = this.fileBytes[s];
      // The UUID outlives the slot: the main thread maps UUIDs to ids and must forget this one.
      const u = this.uuidCol;
      const g = this.goneUuids;
      const from = s * UUID_BYTES;
      const to = nGone * UUID_BYTES;
      for (let i = 0; i < UUID_BYTES; i++) g[to + i] = u[from + i];
      this.goneBuf[nGone] = this.ids[s];
      this.evictedBuf[nGone++] = st !== WQ_COMPLETED && st !== WQ_FAILED ? 1 : 0;
      this.removeSlot(s);
    }
    for (let i = 0; i < nGone; i++) {
      events.gone(this.goneBuf[i], this.evictedBuf[i] === 1, this.goneUuids, i * UUID_BYTES, this.goneFiles[i * 2], this.goneFiles[i * 2 + 1]);
    }

    for (let i = 0; i < nReady; i++) {
      const queue = this.readyBuf[i];
      if (this.hasReady(queue)) events.ready(queue);
    }
    return this.nextDeadline();
  }

  /** Earliest ms at which tick() has work (a schedule time, a TTR end or a TTL end); Infinity if
   *  none. Callers re-arm their timer with this after add/lease. */
  nextDeadline(): number {
    const d = this.timers.size > 0 ? this.deadline[this.timers.items[0]] : Infinity;
    const e = this.ttls.size > 0 ? this.expireAt[this.ttls.items[0]] : Infinity;
    return d < e ? d : e;
  }

  // ---------------------------------------------------------------- invariants

  /** Throws on any broken heap order, position column, state/location pairing, count, free list,
   *  idtable entry or body-store accounting. O(n): for tests. */
  invariants(): void {
    const fail: (msg: string) => never = (msg) => {
      throw new Error(`workq invariant: ${msg}`);
    };
    const perQueue = new Map<number, [number, number]>(); // queue -> [ready, scheduled]
    let live = 0;
    let timed = 0;
    let withTtl = 0;
    let withResult = 0;
    for (let s = 0; s < this.hwm; s++) {
      const w = this.where[s];
      if (w === FREE) continue;
      live++;
      if (w > FINISHED) fail(`slot ${s} bad location ${w}`);
      const id = this.ids[s];
      if (this.index.get(id) !== s) fail(`id ${id} maps to ${this.index.get(id)}, not slot ${s}`);
      const st = this.jobState[s];
      const hp = this.heapPos[s];
      const tp = this.timerPos[s];
      const inTimers = tp >= 0 && tp < this.timers.size && this.timers.items[tp] === s;
      if (w === IN_READY || w === IN_SCHEDULED) {
        const q = this.queues.get(this.queue[s]);
        if (!q) fail(`slot ${s} in unknown queue ${this.queue[s]}`);
        const h = w === IN_READY ? q.ready : q.scheduled;
        if (hp < 0 || hp >= h.size || h.items[hp] !== s) fail(`slot ${s} (location ${w}) heapPos ${hp}`);
        let c = perQueue.get(q.id);
        if (!c) perQueue.set(q.id, (c = [0, 0]));
        c[w === IN_READY ? 0 : 1]++;
      } else if (hp !== NIL) {
        fail(`slot ${s} (location ${w}) has heapPos ${hp}`);
      }
      if (w === IN_READY && st !== WQ_NEW && st !== WQ_PENDING) fail(`ready slot ${s} state ${st}`);
      if (w === IN_SCHEDULED) {
        if (st !== WQ_NEW) fail(`scheduled slot ${s} state ${st}`);
        if (this.schedKey[s] === NOT_SCHEDULED || this.deadline[s] !== this.schedKey[s]) fail(`scheduled slot ${s} deadline`);
      }
      if (w === IN_LEASE && st !== WQ_LEASED) fail(`leased slot ${s} state ${st}`);
      if (w === FINISHED && st !== WQ_COMPLETED && st !== WQ_FAILED) fail(`finished slot ${s} state ${st}`);
      if (w === IN_SCHEDULED || w === IN_LEASE) {
        if (!inTimers) fail(`slot ${s} (location ${w}) timerPos ${tp}`);
        timed++;
      } else if (tp !== NIL) {
        fail(`slot ${s} (location ${w}) has timerPos ${tp}`);
      }
      const lp = this.ttlPos[s];
      if (this.ttlMs[s] > 0) {
        if (lp < 0 || lp >= this.ttls.size || this.ttls.items[lp] !== s) fail(`slot ${s} ttlPos ${lp}`);
        withTtl++;
      } else if (lp !== NIL) {
        fail(`slot ${s} without TTL has ttlPos ${lp}`);
      }
      const a = this.attempts[s];
      const max = this.maxAttempts[s];
      if (a > WQ_HARD_ATTEMPTS_MAX || (max > 0 && a > max)) fail(`slot ${s} attempts ${a} over max ${max}`);
      if (st === WQ_LEASED && a === 0) fail(`leased slot ${s} with no attempts`);
      if (this.results.length(s) > 0) {
        if (w !== FINISHED) fail(`unfinished slot ${s} has a result`);
        withResult++;
      }
    }
    let free = 0;
    for (let s = this.freeHead; s !== NIL; s = this.next[s]) {
      if (this.where[s] !== FREE) fail(`free slot ${s} has location ${this.where[s]}`);
      if (++free > this.hwm) fail('free list cycle');
    }
    if (live + free !== this.hwm) fail(`${live} live + ${free} free != ${this.hwm} slots`);
    if (live !== this.live) fail(`live ${this.live} but ${live} slots used`);
    if (this.index.size !== live) fail(`idtable size ${this.index.size} != ${live}`);
    this.index.check();
    if (this.timers.size !== timed) fail(`timer heap holds ${this.timers.size}, found ${timed}`);
    if (this.ttls.size !== withTtl) fail(`ttl heap holds ${this.ttls.size}, found ${withTtl}`);
    if (this.resultCt !== withResult) fail(`result count ${this.resultCt}, found ${withResult}`);
    this.timers.check((s) => this.timerPos[s], 'timer heap');
    this.ttls.check((s) => this.ttlPos[s], 'ttl heap');
    for (const q of this.queues.values()) {
      const c = perQueue.get(q.id) ?? [0, 0];
      if (q.ready.size !== c[0]) fail(`queue ${q.id} ready heap holds ${q.ready.size}, found ${c[0]}`);
      if (q.scheduled.size !== c[1]) fail(`queue ${q.id} scheduled heap holds ${q.scheduled.size}, found ${c[1]}`);
      q.ready.check((s) => this.heapPos[s], `queue ${q.id} ready heap`);
      q.scheduled.check((s) => this.heapPos[s], `queue ${q.id} scheduled heap`);
    }
    this.payloads.check(live);
    this.results.check(withResult);
  }

  // ---------------------------------------------------------------- internals

  private ensureQueue(id: number): Queue {
    let q = this.queues.get(id);
    if (!q) {
      q = new Queue(id, new IndexHeap(this.queueLess, this.setHeapPos), new IndexHeap(this.queueLess, this.setHeapPos));
      this.queues.set(id, q);
    }
    return q;
  }

  // A job in a queue heap keeps its queue alive (dropQueue refuses); a leased one may not.
  private queueAt(s: number): Queue {
    return this.ensureQueue(this.queue[s]);
  }

  private bestReady(queues: ArrayLike<number>, count: number): number {
    let best = NIL;
    for (let i = 0; i < count; i++) {
      const q = this.queues.get(queues[i]);
      if (!q || q.ready.size === 0) continue;
      const s = q.ready.items[0];
      if (best === NIL || this.queueLess(s, best)) best = s;
    }
    return best;
  }

  // The server's StartAttempt, for a job already taken out of its ready heap: fails it when its
  // attempts are used up (false), else leases it until nowMs + TTR.
  private startAttempt(s: number, nowMs: number): boolean {
    const a = this.attempts[s];
    const max = this.maxAttempts[s];
    if ((max !== 0 && a >= max) || a >= WQ_HARD_ATTEMPTS_MAX) {
      this.jobState[s] = WQ_FAILED; // empty failed result
      this.where[s] = FINISHED;
      return false;
    }
    this.attempts[s] = a + 1;
    this.jobState[s] = WQ_LEASED;
    this.where[s] = IN_LEASE;
    this.deadline[s] = nowMs + this.ttrMs[s];
    this.timers.push(s);
    return true;
  }

  private finishWith(id: number, state: number, result: Uint8Array): number {
    const s = this.index.get(id);
    if (s === NIL) return 1;
    if (this.where[s] === FINISHED) return 2;
    this.leave(s);
    this.jobState[s] = state;
    this.where[s] = FINISHED;
    if (result.length > 0) {
      this.results.put(s, result);
      this.resultCt++;
    }
    return 0;
  }

  // Takes the job out of its queue heap and/or the timer heap (not the TTL heap).
  private leave(s: number): void {
    switch (this.where[s]) {
      case IN_READY:
        this.queueAt(s).ready.removeAt(this.heapPos[s]);
        return;
      case IN_SCHEDULED:
        this.queueAt(s).scheduled.removeAt(this.heapPos[s]);
        this.timers.removeAt(this.timerPos[s]);
        return;
      case IN_LEASE:
        this.timers.removeAt(this.timerPos[s]);
        return;
    }
  }

  private removeSlot(s: number): void {
    this.leave(s);
    if (this.ttlPos[s] !== NIL) this.ttls.removeAt(this.ttlPos[s]);
    this.payloads.free(s);
    if (this.results.length(s) > 0) {
      this.results.free(s);
      this.resultCt--;
    }
    this.index.remove(this.ids[s]);
    this.freeSlot(s);
    this.live--;
  }

  private allocSlot(): number {
    const s = this.freeHead;
    if (s !== NIL) {
      this.freeHead = this.next[s];
      return s;
    }
    if (this.hwm === this.cap) this.grow(this.cap * 2);
    return this.hwm++;
  }

  private freeSlot(s: number): void {
    this.where[s] = FREE;
    this.ids[s] = 0;
    this.next[s] = this.freeHead;
    this.freeHead = s;
  }

  // Columns grow by doubling: one new block holds every column (8-byte ones first, for
  // alignment; see ColumnBlock); WQ_COLUMN_BYTES_PER_SLOT sums them.
  private grow(cap: number): void {
    const b = new ColumnBlock(cap * (WQ_COLUMN_BYTES_PER_SLOT + 2 * SLOT_BYTES));
    this.ids = b.f64(this.ids, cap);
    this.index.bind(this.ids);
    this.ttlMs = b.f64(this.ttlMs, cap);
    this.schedKey = b.f64(this.schedKey, cap);
    this.created = b.f64(this.created, cap);
    this.seq = b.f64(this.seq, cap);
    this.deadline = b.f64(this.deadline, cap);
    this.expireAt = b.f64(this.expireAt, cap);
    this.queue = b.i32(this.queue, cap);
    this.pri = b.i32(this.pri, cap);
    this.ttrMs = b.u32(this.ttrMs, cap);
    this.heapPos = b.i32(this.heapPos, cap);
    this.timerPos = b.i32(this.timerPos, cap);
    this.ttlPos = b.i32(this.ttlPos, cap);
    this.next = b.i32(this.next, cap);
    this.fileSeq = b.i32(this.fileSeq, cap);
    this.fileBytes = b.u32(this.fileBytes, cap);
    this.payloads.growSlots(cap, b);
    this.results.growSlots(cap, b);
    this.uuidCol = b.u8(this.uuidCol, cap * UUID_BYTES);
    this.maxAttempts = b.u8(this.maxAttempts, cap);
    this.maxFails = b.u8(this.maxFails, cap);
    this.attempts = b.u8(this.attempts, cap);
    this.jobState = b.u8(this.jobState, cap);
    this.where = b.u8(this.where, cap);
    this.cap = cap;
  }
}
