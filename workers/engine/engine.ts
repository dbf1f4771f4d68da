// The per-shard queue engine: every job of the tubes hashed to one shard worker, with
// beanstalkd 1.12 semantics. Synchronous, no sockets, no threads; the clock is an argument
// (nowMs) so tests drive time.
//
// Memory layout: a job is a slot number into typed-array columns (no object or Map entry per
// job). Free slots form a list through the `pos` column. Slots are found by id through an
// open-addressing IdTable. Per tube, READY slots sit in a heap by (pri, id), writing their
// position into `pos`, and DELAYED slots in a heap by (deadline, id). One shard-global timer heap
// by (deadline, id) holds every DELAYED job (deadline = ready-at) and every RESERVED job until its
// TTR runs out (deadline = TTR expiry; past it, the job stays RESERVED, its timer place NIL, until
// expire()). A READY job needs nothing but `pos`, so the rest lives in records only the other
// states hold, which `pos` names: a RESERVED job's reservation (timer place, owner, links in the
// connection's list), a DELAYED job's side record (timer and delay heap places) and a BURIED
// job's side record (links in its tube's FIFO). Bodies live in the slab BodyStore.

import { ColumnBlock, growF64, growI32, OFFSET_MAX, OffsetColumn, release, U16Column } from './columns.ts';
import { C_BURIES, C_KICKS, C_RELEASES, C_RESERVES, C_TIMEOUTS, COUNTER_BYTES, COUNTERS, Counters } from './counters.ts';
import { IndexHeap } from './heap.ts';
import { IdTable } from './idtable.ts';
import { BodyStore, DEFAULT_CHUNK_SIZE, SLOT_BYTES } from './bodystore.ts';
import { Tube } from './tube.ts';

export const READY = 1, RESERVED = 2, DELAYED = 3, BURIED = 4; // job states (0 = no such job)
export const URGENT_PRI = 1024; // pri < 1024 counts as "urgent"

export interface TimerSink {
  ready(tube: number): void;
  /** A reserved job's TTR ran out: it stays reserved by `conn`, expired, until expire(id, conn, reserves). */
  timedOut(id: number, conn: number, reserves: number): void;
}

export interface EngineOptions {
  /** Initial job slots (columns grow by COLUMN_GROWTH from here). */
  initialSlots?: number;
  /** Body slab chunk size in bytes (tests use small chunks to exercise compaction). */
  chunkSize?: number;
}

/** Field order of jobStats' output. */
export const JOB_STATS_FIELDS = ['id', 'tube', 'state', 'pri', 'age', 'delay', 'ttr', 'time-left', 'reserves', 'timeouts', 'releases', 'buries', 'kicks'] as const;
/** Field order of tubeStats' output. */
export const TUBE_STATS_FIELDS = ['current-jobs-urgent', 'current-jobs-ready', 'current-jobs-reserved', 'current-jobs-delayed', 'current-jobs-buried', 'total-jobs', 'cmd-delete', 'cmd-pause-tube', 'pause', 'pause-time-left'] as const;
/** Field order of totals' output. */
export const TOTALS_FIELDS = ['current-jobs-urgent', 'current-jobs-ready', 'current-jobs-reserved', 'current-jobs-delayed', 'current-jobs-buried', 'job-timeouts'] as const;

const NIL = -1;
/** Entries an id list kept between calls may hold (lastKicked, lastTicked, lastReleased); a larger one made by a burst is let go. */
const ORDER_BUF_KEEP = 4096;
// Records of the jobs that are not READY, in one Int32Array, each named by its first element's
// index. Both kinds start with the place in the timer heap (NIL: not in it), so the timer heap's
// SetPos needs no job state. A free record's first element chains the free ones of its kind.
//   a reservation (RESERVED): timer place, owner, previous and next slot in the owner's list;
//   a side record: DELAYED, timer place and place in the tube's delay heap; BURIED, previous and
//   next slot in the tube's buried FIFO.
const REC_TIMER = 0, REC_FREE_NEXT = 0;
const RES_FIELDS = 4, RES_CONN = 1, RES_PREV = 2, RES_NEXT = 3;
const SIDE_FIELDS = 2, SIDE_HEAP = 1, SIDE_PREV = 0, SIDE_NEXT = 1;
/** Elements of the record array an engine starts with (and shrinks back to). */
const REC_INITIAL = 64;
const EMPTY = new Uint8Array(0);
const NO_CELLS = new Int32Array(0);
/** A drained engine lays its columns out again at their first size if they grew past this many times it. */
export const SHRINK_SLOTS_FACTOR = 4;
/** Full columns grow by this factor: up to a third of the slots stand empty after a grow, where
 *  doubling left up to half (each grow copies the columns, so 1.5 copies each slot ~2 times on the
 *  way up instead of ~1). */
export const COLUMN_GROWTH = 1.5;

/** Bytes of engine column storage per job slot (see grow()), without a write-ahead log (its
 *  fileSeq column adds 4); the body store's location columns add SLOT_BYTES. In order: id (a
 *  4-byte offset), pri, jobState, tube number, TTR, delay (2 bytes each), deadline, created
 *  (4-byte offsets), counters (16 bits), pos. A job that is not READY also holds a record: a
 *  reservation (RES_FIELDS ints) or a side record (SIDE_FIELDS ints). */
export const COLUMN_BYTES_PER_SLOT = 4 + 4 + 1 + 2 + 2 + 2 + 4 + 4 + COUNTER_BYTES + 4;

/**
 * Whole seconds left, as beanstalkd prints them: it keeps nanoseconds, so by the time anyone
 * asks, a deadline set N s ahead has less than N s left and truncates to N-1. Our clock has
 * milliseconds; taking off one microsecond gives the same answer within the same millisecond.
 * C's integer division truncates toward zero.
 */
export function secondsLeft(ms: number): number {
  return Math.trunc((ms - 0.001) / 1000) + 0; // + 0 turns -0 into 0
}

/** An empty id list, shared (lastTicked when no delay ended: no view per tick; lastKicked before a kick finds jobs). */
const NO_IDS = new Float64Array(0);

export class Engine {
  /** Pri and tube of the job chosen by the last successful peekBest. */
  lastPri = 0;
  lastTube = -1;
  /** Ids the last listJobs chose, in order (view, valid until the next call). */
  lastListed: Float64Array = new Float64Array(0);
  /** Ids the last kick() moved to READY, in order (view, valid until the next kick). */
  lastKicked: Float64Array = NO_IDS;
  private kickedBuf: Float64Array = new Float64Array(16);
  /** Ids the last tick() moved from DELAYED to READY, in the order their delays ended (view, valid until the next tick). */
  lastTicked: Float64Array = NO_IDS;
  private tickedBuf: Float64Array = new Float64Array(0);
  /** Ids the last releaseConn() moved to READY, oldest reservation first (view, valid until the next call). */
  lastReleased: Float64Array = new Float64Array(0);
  private releasedBuf: Float64Array = new Float64Array(0);

  // ---- job columns, indexed by slot ----
  private cap = 0;
  // Ids and times are u32 offsets from a base, with a side map for the rare value outside its
  // window (OffsetColumn).
  private readonly ids = new OffsetColumn((s) => this.jobState[s] !== 0);
  private pri: Uint32Array = new Uint32Array(0);
  private jobState: Uint8Array = new Uint8Array(0);
  // The tube's number in this engine (Tube.idx, an index of tubeList), 2 bytes: from the 65535th
  // tube held at once on, in a side map.
  private readonly tube = new U16Column();
  // Seconds, 2 bytes each: from 65535 s (18 h) on in a side map (U16Column).
  private readonly ttr = new U16Column();
  private readonly delay = new U16Column(); // as last put/released
  // ms: DELAYED = ready-at, RESERVED = TTR expiry; BURIED: the bury stamp, raw in the cell.
  private readonly deadline = new OffsetColumn((s) => this.jobState[s] === DELAYED || this.jobState[s] === RESERVED);
  private readonly created = new OffsetColumn((s) => this.jobState[s] !== 0); // ms
  // ids.cells and deadline.cells, for the heaps' comparisons (one load fewer)
  private idCells: Int32Array = new Int32Array(0);
  private deadlineCells: Int32Array = new Int32Array(0);
  private readonly counts = new Counters(); // reserves, timeouts, releases, buries, kicks
  // One link column serves every state; what a READY job never needs (most of the queue, at
  // rest) is in a record that only the other states hold:
  //   READY     pos: place in the tube's ready heap
  //   DELAYED   pos: its side record (place in the tube's delay heap, place in the timer heap)
  //   RESERVED  pos: its reservation (owner, conn list, place in the timer heap: NIL once expired)
  //   BURIED    pos: its side record (previous and next in the tube's buried FIFO)
  //   free      pos: next free slot
  private pos: Int32Array = new Int32Array(0);
  // Reservations (RES_FIELDS ints) and side records (SIDE_FIELDS ints), as many of each as jobs
  // reserved, or delayed and buried, at once: not one per job. Elements [0, recHwm) are in use or
  // on a free list: one per record size (recFree[fields]; RES_FIELDS and SIDE_FIELDS differ, so
  // each kind reuses its own).
  private rec: Int32Array = new Int32Array(REC_INITIAL);
  private recHwm = 0;
  private readonly recFree = new Int32Array(RES_FIELDS + 1).fill(NIL);
  // Write-ahead log segment holding the job's FULL record (0: none); allocated on the first
  // setFile, so an engine without a log never pays for it.
  private fileSeq: Int32Array = new Int32Array(0);

  private hwm = 0; // slots [0, hwm) have been handed out at least once
  private readonly initialSlots: number;
  private freeHead = NIL;
  private live = 0;

  private readonly index: IdTable;
  private readonly bodies: BodyStore;
  private readonly timers: IndexHeap;
  private readonly tubes = new Map<number, Tube>();
  private readonly tubeList: (Tube | null)[] = []; // by Tube.idx
  private readonly tubeIdxFree: number[] = [];
  private readonly pausedTubes: Tube[] = []; // tubes whose pause end tick() has yet to report
  // conn -> first reserved slot (NIL once it holds none: the entry stays until the connection's
  // close, since a Map that gains and loses the entry with each job rehashes, allocating, each time).
  private readonly connHead = new Map<number, number>();

  private urgentCt = 0;
  private readyCt = 0;
  private reservedCt = 0;
  private delayedCt = 0;
  private buriedCt = 0;
  private jobTimeouts = 0;
  /** reserveJob: the job's state before it, and (DELAYED) the ms its delay had left (a move keeps both). */
  lastTakenState = 0;
  lastTakenDelayMs = 0;
  private expiredCt = 0; // RESERVED jobs past their TTR, waiting for expire() (out of the timer heap)
  private seq = 0; // stamps tubes to report each at most once per tick/releaseConn
  private buryStamp = 0; // the last buried job's stamp (in its deadline column)
  private listBuf: Float64Array = new Float64Array(64);

  // Heap callbacks, created once and shared by every heap so call sites stay monomorphic.
  private readonly readyLess = (a: number, b: number): boolean => {
    const pa = this.pri[a];
    const pb = this.pri[b];
    if (pa !== pb) return pa < pb;
    const ids = this.idCells;
    const ia = ids[a];
    const ib = ids[b];
    return (ia | ib) >= 0 ? ia < ib : this.idLess(a, b); // neither in the side map: same base
  };
  private readonly timeLess = (a: number, b: number): boolean => {
    const cells = this.deadlineCells;
    const ca = cells[a];
    const cb = cells[b];
    if ((ca | cb) >= 0 && ca !== cb) return ca < cb; // neither in the side map: same base
    const da = this.deadline.get(a);
    const db = this.deadline.get(b);
    return da < db || (da === db && this.idLess(a, b));
  };
  private idLess(a: number, b: number): boolean {
    return this.ids.get(a) < this.ids.get(b);
  }
  private readonly setHeapPos = (s: number, p: number): void => {
    this.pos[s] = p;
  };
  private readonly setDelayPos = (s: number, p: number): void => {
    this.rec[this.pos[s] + SIDE_HEAP] = p;
  };
  // The timer heap holds RESERVED and DELAYED slots, whose pos names a record from before the
  // push until after the removal.
  private readonly setTimerPos = (s: number, p: number): void => {
    this.rec[this.pos[s] + REC_TIMER] = p;
  };

  constructor(opts: EngineOptions = {}) {
    const slots = Math.max(16, opts.initialSlots ?? 1024);
    this.initialSlots = slots;
    this.index = new IdTable(slots);
    this.bodies = new BodyStore(opts.chunkSize ?? DEFAULT_CHUNK_SIZE, 0); // slot columns come with grow()
    this.timers = new IndexHeap(this.timeLess, this.setTimerPos);
    this.grow(slots);
  }

  /** Number of jobs held. */
  get size(): number {
    return this.live;
  }

  // ---------------------------------------------------------------- commands

  /** Returns READY or DELAYED. `ttrSec` is already clamped to >= 1. */
  put(tube: number, id: number, pri: number, delaySec: number, ttrSec: number, body: Uint8Array, nowMs: number, start = 0, end = body.length): number {
    const t = this.ensureTube(tube);
    const s = this.allocSlot();
    this.ids.set(s, id); // the id table reads keys from this column
    if (!this.index.insert(id, s)) {
      this.freeSlot(s);
      throw new Error(`duplicate job id ${id}`);
    }
    this.pri[s] = pri;
    this.tube.set(s, t.idx);
    this.ttr.set(s, ttrSec);
    this.delay.set(s, delaySec);
    this.created.set(s, nowMs);
    this.pos[s] = NIL;
    if (s < this.fileSeq.length) this.fileSeq[s] = 0;
    this.bodies.put(s, body, start, end);
    this.live++;
    t.totalJobs++;
    if (delaySec > 0) {
      this.enterDelayed(s, t, nowMs, delaySec);
      return DELAYED;
    }
    this.enterReady(s, t);
    return READY;
  }

  /**
   * reserveBest, but only if that job comes before (boundPri, boundId) — the best candidate of
   * the other shards (boundId 0: no bound). Returns its id, or 0 (nothing ready, or not before).
   */
  reserveBounded(tubes: ArrayLike<number>, count: number, conn: number, boundPri: number, boundId: number, nowMs: number): number {
    const s = this.bestReady(tubes, count, nowMs);
    if (s === NIL) return 0;
    const pri = this.pri[s];
    if (boundId !== 0 && !(pri < boundPri || (pri === boundPri && this.ids.get(s) < boundId))) return 0;
    const t = this.tubeAt(s);
    this.leaveReady(s, t);
    this.enterReserved(s, t, conn, nowMs);
    return this.ids.get(s);
  }

  /** Reserves the best (pri, id) ready job among unpaused tubes[0..count); returns its id or 0. */
  reserveBest(tubes: ArrayLike<number>, count: number, conn: number, nowMs: number): number {
    const s = this.bestReady(tubes, count, nowMs);
    if (s === NIL) return 0;
    const t = this.tubeAt(s);
    this.leaveReady(s, t);
    this.enterReserved(s, t, conn, nowMs);
    return this.ids.get(s);
  }

  /** Same choice as reserveBest without reserving; sets lastPri/lastTube. Returns id or 0. */
  peekBest(tubes: ArrayLike<number>, count: number, nowMs: number): number {
    const s = this.bestReady(tubes, count, nowMs);
    if (s === NIL) return 0;
    this.lastPri = this.pri[s];
    this.lastTube = this.tubeAt(s).id;
    return this.ids.get(s);
  }

  /** Reserves exactly this job if it is still READY and its tube is not paused. */
  reserveIfReady(id: number, conn: number, nowMs: number): boolean {
    const s = this.index.get(id);
    if (s === NIL || this.jobState[s] !== READY) return false;
    const t = this.tubeAt(s);
    if (t.pausedAt(nowMs)) return false;
    this.leaveReady(s, t);
    this.enterReserved(s, t, conn, nowMs);
    return true;
  }

  /** A job just put goes to BURIED (OP_PUT_BURIED: the API's move of a buried job). Returns BURIED. */
  buryNew(id: number): number {
    const s = this.index.get(id);
    const t = this.tubeAt(s);
    this.leave(s, t);
    this.enterBuried(s, t);
    return BURIED;
  }

  /** beanstalkd's reserve-job: READY, DELAYED or BURIED -> RESERVED by conn (pauses ignored). */
  reserveJob(id: number, conn: number, nowMs: number): boolean {
    const s = this.index.get(id);
    if (s === NIL || this.jobState[s] === RESERVED) return false;
    const t = this.tubeAt(s);
    this.lastTakenState = this.jobState[s];
    this.lastTakenDelayMs = this.jobState[s] === DELAYED ? Math.max(0, this.deadline.get(s) - nowMs) : 0;
    this.leave(s, t);
    this.enterReserved(s, t, conn, nowMs);
    return true;
  }

  /** Returns the job's tube, or -1 (NOT_FOUND). A reserved job can only be deleted by its owner. */
  deleteJob(id: number, conn: number): number {
    const s = this.index.get(id);
    if (s === NIL || (this.jobState[s] === RESERVED && this.ownerOf(s) !== conn)) return -1;
    const t = this.tubeAt(s);
    this.leave(s, t);
    t.cmdDelete++;
    this.index.remove(id);
    this.bodies.free(s);
    this.freeSlot(s);
    this.live--;
    if (this.live === 0) this.shrinkWhenEmpty();
    return t.id;
  }

  /** Only if RESERVED by conn. Returns the new state (READY/DELAYED) or -1. */
  release(id: number, conn: number, pri: number, delaySec: number, nowMs: number): number {
    const s = this.reservedBy(id, conn);
    if (s === NIL) return -1;
    const t = this.tubeAt(s);
    this.leaveReserved(s, t);
    this.pri[s] = pri;
    this.delay.set(s, delaySec);
    this.counts.inc(s, C_RELEASES);
    if (delaySec > 0) {
      this.enterDelayed(s, t, nowMs, delaySec);
      return DELAYED;
    }
    this.enterReady(s, t);
    return READY;
  }

  /** Only if RESERVED by conn: appended to the tube's buried FIFO. */
  bury(id: number, conn: number, pri: number): boolean {
    const s = this.reservedBy(id, conn);
    if (s === NIL) return false;
    const t = this.tubeAt(s);
    this.leaveReserved(s, t);
    this.pri[s] = pri;
    this.counts.inc(s, C_BURIES);
    this.enterBuried(s, t);
    return true;
  }

  /** Only if RESERVED by conn and its TTR has not run out: TTR restarts from now. */
  touch(id: number, conn: number, nowMs: number): boolean {
    const s = this.reservedBy(id, conn);
    if (s === NIL) return false;
    const tp = this.timerOfReserved(s);
    if (tp === NIL) return false;
    this.deadline.set(s, nowMs + this.ttr.get(s) * 1000);
    this.timers.update(tp);
    return true;
  }

  /**
   * The reserved job whose TTR ran out (tick reported it with `reserves`, the count that names
   * this reservation) goes back to READY; returns its tube, or -1 if it is no longer that expired
   * reservation (its holder deleted, released or buried it first, or it was released with its
   * connection).
   *
   * Why a job past its TTR waits for this: its holder may already have been told DELETED,
   * RELEASED or BURIED for it (in memory the main thread answers those for a job the connection
   * holds without waiting for the shard), and that request may still be on its way, for any
   * length of time. The main thread sends this request only after it has taken the job from the
   * connection's held jobs, so every request answered early for it comes before this one, and
   * the job cannot go to anybody else first. No timing margin is involved.
   */
  expire(id: number, conn: number, reserves: number): number {
    const s = this.reservedBy(id, conn);
    if (s === NIL || this.timerOfReserved(s) !== NIL || this.counts.get(s, C_RESERVES) !== reserves) return -1;
    const t = this.tubeAt(s);
    this.leaveReserved(s, t);
    this.enterReady(s, t);
    return t.id;
  }

  /** Kicks up to n buried jobs (oldest first), or if none are buried up to n delayed jobs
   *  (soonest first). Returns how many. */
  kick(tube: number, n: number, _nowMs: number): number {
    const t = this.tubes.get(tube);
    if (this.kickedBuf.length > ORDER_BUF_KEEP) this.kickedBuf = new Float64Array(16);
    this.lastKicked = NO_IDS;
    if (!t) return 0;
    // Buried jobs if the tube has any, else delayed ones (beanstalkd's kick_jobs).
    const fromBuried = t.buried > 0;
    let k = 0;
    for (; k < n; k++) {
      const s = fromBuried ? t.buriedHead : t.delay.size > 0 ? t.delay.items[0] : NIL;
      if (s === NIL) break;
      if (k === this.kickedBuf.length) this.kickedBuf = growF64(this.kickedBuf, k * 2);
      this.kickedBuf[k] = this.ids.get(s);
      this.kickSlot(s, t);
    }
    this.lastKicked = this.kickedBuf.subarray(0, k);
    return k;
  }

  /** BURIED or DELAYED -> READY (a delayed job regardless of its deadline). */
  kickJob(id: number, _nowMs: number): boolean {
    const s = this.index.get(id);
    if (s === NIL || (this.jobState[s] !== BURIED && this.jobState[s] !== DELAYED)) return false;
    this.kickSlot(s, this.tubeAt(s));
    return true;
  }

  /** Connections with an entry in the reserved lists (tests: entries go at releaseConn). */
  get connEntries(): number {
    return this.connHead.size;
  }

  /** The soonest TTR end (ms) of the jobs `conn` holds here whose TTR has not run out (Infinity: none). */
  heldDeadline(conn: number): number {
    let soonest = Infinity;
    for (let s = this.connHead.get(conn) ?? NIL; s !== NIL; s = this.resNext(s)) {
      if (this.timerOfReserved(s) !== NIL && this.deadline.get(s) < soonest) soonest = this.deadline.get(s);
    }
    return soonest;
  }

  /** Connection closed: the `oldest` jobs it reserved longest ago (by default every one) go back to
   *  READY, no counters change. Returns how many; `lastReleased` then lists their ids in the
   *  order the connection reserved them (oldest first: the order beanstalkd gives them back in,
   *  each to the next waiter). A close
   *  whose jobs are on several shards gives them back a run at a time (Router.releaseHeld). */
  releaseConn(conn: number, _nowMs: number, oldest = Infinity): number {
    let held = 0;
    const head = this.connHead.get(conn) ?? NIL;
    for (let s = head; s !== NIL; s = this.resNext(s)) held++;
    const n = Math.min(held, oldest);
    if (this.releasedBuf.length > ORDER_BUF_KEEP) this.releasedBuf = new Float64Array(0);
    if (n > this.releasedBuf.length) this.releasedBuf = growF64(this.releasedBuf, Math.max(n, this.releasedBuf.length * 2));
    // The list is newest first: past the newest held - n, the ids go in from the back.
    let s = head;
    for (let i = n; i < held; i++) s = this.resNext(s);
    let k = n;
    while (s !== NIL) {
      const next = this.resNext(s);
      const t = this.tubeAt(s);
      this.releasedBuf[--k] = this.ids.get(s);
      this.leaveReserved(s, t);
      this.enterReady(s, t);
      s = next;
    }
    if (n === held) this.connHead.delete(conn);
    this.lastReleased = this.releasedBuf.subarray(0, n);
    return n;
  }

  /** Pauses reservations from the tube for delaySec. 0 stands for beanstalkd's 1 ns pause, which
   *  is over at any later instant: here the pause ends at nowMs itself. */
  pauseTube(tube: number, delaySec: number, nowMs: number): void {
    const t = this.ensureTube(tube);
    t.paused = true;
    t.pauseSec = delaySec;
    t.unpauseAt = nowMs + delaySec * 1000;
    t.cmdPause++;
    if (!t.inPausedList) {
      t.inPausedList = true;
      this.pausedTubes.push(t);
    }
  }

  /** Forgets an empty tube's state (counters, pause). Returns false (no-op) if it holds jobs. */
  dropTube(tube: number): boolean {
    const t = this.tubes.get(tube);
    if (!t) return true;
    if (t.jobs > 0) return false;
    if (t.inPausedList) {
      const i = this.pausedTubes.indexOf(t);
      this.pausedTubes[i] = this.pausedTubes[this.pausedTubes.length - 1];
      this.pausedTubes.pop();
      t.inPausedList = false;
    }
    this.tubes.delete(tube);
    this.tubeList[t.idx] = null;
    this.tubeIdxFree.push(t.idx);
    return true;
  }

  // ---------------------------------------------------------------- admin (paged, never the whole tube at once)

  /**
   * One page of `tube`'s jobs in `state`, in that state's order: READY by (pri, id), DELAYED by
   * (deadline, id), BURIED oldest first (kick order), RESERVED by id. The page starts after the
   * job the cursor names (cursorId 0: at the start), by its place in that order (cursorKey: its
   * listKey when it was listed), so jobs that left meanwhile do not shift the page. Up to `limit`
   * ids go to lastListed; returns whether more jobs follow them.
   *
   * Cost: a ready or delayed page walks the heap best first, O((skipped + limit) log) (the first
   * page: O(limit log limit)); past a budget it scans the heap once with a bounded selection,
   * O(n log limit). Buried: O(skipped + limit) down the FIFO. Reserved: the shard's reserved jobs.
   */
  listJobs(tube: number, state: number, cursorKey: number, cursorId: number, limit: number): boolean {
    const t = this.tubes.get(tube);
    const want = limit + 1;
    const got: number[] = [];
    if (t !== undefined && limit > 0) {
      if (state === READY || state === DELAYED) {
        const pri = this.pri;
        const deadline = this.deadline;
        const ids = this.ids;
        const after = cursorId === 0 ? null
          : state === READY
            ? (x: number): boolean => pri[x] > cursorKey || (pri[x] === cursorKey && ids.get(x) > cursorId)
            : (x: number): boolean => deadline.get(x) > cursorKey || (deadline.get(x) === cursorKey && ids.get(x) > cursorId);
        selectFromHeap(state === READY ? t.ready : t.delay, state === READY ? this.readyLess : this.timeLess, after, want, got);
      } else if (state === BURIED) {
        let s = t.buriedHead;
        if (cursorId !== 0) while (s !== NIL && this.deadline.cells[s] <= cursorKey) s = this.buriedNext(s);
        for (; s !== NIL && got.length < want; s = this.buriedNext(s)) got.push(s);
      } else if (state === RESERVED && t.reserved > 0) {
        const ids = this.ids;
        const byId = (a: number, b: number): boolean => ids.get(a) < ids.get(b);
        const best = new SlotHeap((a, b) => byId(b, a)); // the largest of the best `want` on top
        for (const head of this.connHead.values()) {
          for (let s = head; s !== NIL; s = this.resNext(s)) {
            if (this.tube.get(s) !== t.idx || ids.get(s) <= cursorId) continue;
            if (best.size < want) best.push(s);
            else if (byId(s, best.top())) best.replaceTop(s);
          }
        }
        best.drainSorted(byId, got);
      }
    }
    const n = Math.min(limit, got.length);
    if (this.listBuf.length < n) this.listBuf = new Float64Array(Math.max(n, this.listBuf.length * 2));
    for (let i = 0; i < n; i++) this.listBuf[i] = this.ids.get(got[i]);
    this.lastListed = this.listBuf.subarray(0, n);
    return got.length > limit;
  }

  /** Job `id`'s place in its state's listing order (listJobs' cursorKey): READY its pri, DELAYED its
   *  deadline, BURIED its FIFO stamp, RESERVED 0 (ordered by id alone). */
  listKey(id: number): number {
    const s = this.index.get(id);
    if (s === NIL) return 0;
    const st = this.jobState[s];
    return st === READY ? this.pri[s] : st === DELAYED ? this.deadline.get(s) : st === BURIED ? this.deadline.cells[s] : 0;
  }

  /**
   * The next job a clear of `tube` deletes, among the states in `mask` (READY 1, DELAYED 2,
   * BURIED 4 bits, as CLEAR_* in records.ts; reserved jobs never): the last of a heap (its removal
   * moves nothing) or the oldest buried job. Its id, or 0 when none is left.
   */
  clearCandidate(tube: number, mask: number): number {
    const t = this.tubes.get(tube);
    if (t === undefined) return 0;
    if ((mask & 4) !== 0 && t.buriedHead !== NIL) return this.ids.get(t.buriedHead);
    if ((mask & 2) !== 0 && t.delay.size > 0) return this.ids.get(t.delay.items[t.delay.size - 1]);
    if ((mask & 1) !== 0 && t.ready.size > 0) return this.ids.get(t.ready.items[t.ready.size - 1]);
    return 0;
  }

  // ---------------------------------------------------------------- queries

  /** Job state, 0 if absent. */
  state(id: number): number {
    const s = this.index.get(id);
    return s === NIL ? 0 : this.jobState[s];
  }

  /** Job's tube, -1 if absent. */
  tubeOf(id: number): number {
    const s = this.index.get(id);
    return s === NIL ? -1 : this.tubeAt(s).id;
  }

  /** Ready top by (pri, id), paused or not; id or 0. */
  peekReady(tube: number): number {
    const t = this.tubes.get(tube);
    return t && t.ready.size > 0 ? this.ids.get(t.ready.items[0]) : 0;
  }

  /** Delayed top by (deadline, id); id or 0. */
  peekDelayed(tube: number): number {
    const t = this.tubes.get(tube);
    return t && t.delay.size > 0 ? this.ids.get(t.delay.items[0]) : 0;
  }

  /** Oldest buried job; id or 0. */
  peekBuried(tube: number): number {
    const t = this.tubes.get(tube);
    return t && t.buriedHead !== NIL ? this.ids.get(t.buriedHead) : 0;
  }

  /** View of the body (without \r\n); valid until the next mutating call. Empty if absent. */
  body(id: number): Uint8Array {
    const s = this.index.get(id);
    return s === NIL ? EMPTY : this.bodies.get(s);
  }

  /** Length of the body; 0 if absent. */
  bodyLength(id: number): number {
    const s = this.index.get(id);
    return s === NIL ? 0 : this.bodies.length(s);
  }

  /** Hands the body to `w` as a range of the store's memory (the hot path's copy: no view made). */
  copyBody(id: number, w: { bytes(src: Uint8Array, start: number, end: number): void }): void {
    const s = this.index.get(id);
    if (s !== NIL) this.bodies.copyTo(s, w);
  }

  /** out = [id, tube, state, pri, ageSec, delaySec, ttrSec, timeLeftSec, reserves, timeouts,
   *  releases, buries, kicks]. False if absent. */
  jobStats(id: number, nowMs: number, out: Float64Array): boolean {
    const s = this.index.get(id);
    if (s === NIL) return false;
    const st = this.jobState[s];
    out[0] = this.ids.get(s);
    out[1] = this.tubeAt(s).id;
    out[2] = st;
    out[3] = this.pri[s];
    out[4] = Math.max(0, Math.floor((nowMs - this.created.get(s)) / 1000));
    out[5] = this.delay.get(s);
    out[6] = this.ttr.get(s);
    out[7] = st === RESERVED || st === DELAYED ? secondsLeft(Math.max(0, this.deadline.get(s) - nowMs)) : 0;
    for (let k = 0; k < COUNTERS; k++) out[8 + k] = this.counts.get(s, k);
    out[13] = this.fileAt(s);
    return true;
  }

  // ---------------------------------------------------------------- durability

  /** The job's deadline in ms (RESERVED: TTR end; DELAYED: when it becomes ready), or 0 if absent. */
  deadlineOf(id: number): number {
    const s = this.index.get(id);
    return s === NIL ? 0 : this.deadline.get(s);
  }

  /** Segment of the write-ahead log holding the job's FULL record (0: none). */
  fileOf(id: number): number {
    const s = this.index.get(id);
    return s === NIL ? 0 : this.fileAt(s);
  }

  setFile(id: number, seq: number): void {
    const s = this.index.get(id);
    if (s === NIL) return;
    if (this.fileSeq.length < this.cap) {
      if (seq === 0) return;
      this.fileSeq = growI32(this.fileSeq, this.cap);
    }
    this.fileSeq[s] = seq;
  }

  /** Everything a log record holds about a job besides id, tube and body:
   *  out = [pri, delaySec, ttrSec, state, deadlineMs, createdMs, reserves, timeouts, releases, buries, kicks]. */
  image(id: number, out: Float64Array): boolean {
    const s = this.index.get(id);
    if (s === NIL) return false;
    out[0] = this.pri[s];
    out[1] = this.delay.get(s);
    out[2] = this.ttr.get(s);
    out[3] = this.jobState[s];
    out[4] = this.deadline.get(s);
    out[5] = this.created.get(s);
    for (let k = 0; k < COUNTERS; k++) out[6 + k] = this.counts.get(s, k);
    return true;
  }

  /**
   * A job recovered from the log: READY, DELAYED (keeping its absolute deadline, which may be
   * past: the next tick makes it ready) or BURIED, with its counters. A job that was RESERVED
   * comes back READY, as in beanstalkd. Does not count toward the tube's total-jobs.
   */
  restore(tube: number, id: number, pri: number, delaySec: number, ttrSec: number, state: number,
    deadlineMs: number, createdMs: number, reserves: number, timeouts: number, releases: number,
    buries: number, kicks: number, body: Uint8Array): void {
    this.put(tube, id, pri, 0, ttrSec, body, createdMs);
    const s = this.index.get(id);
    const t = this.tubeAt(s);
    t.totalJobs--;
    this.delay.set(s, delaySec);
    this.counts.set(s, C_RESERVES, reserves);
    this.counts.set(s, C_TIMEOUTS, timeouts);
    this.counts.set(s, C_RELEASES, releases);
    this.counts.set(s, C_BURIES, buries);
    this.counts.set(s, C_KICKS, kicks);
    if (state === DELAYED) {
      this.leaveReady(s, t);
      this.enterDelayedAt(s, t, deadlineMs);
    } else if (state === BURIED) {
      this.leaveReady(s, t);
      this.enterBuried(s, t);
    }
  }

  /** Calls fn(id) for up to `limit` jobs whose FULL record is in log segment `seq`, scanning
   *  slots from `cursor`; returns where to go on next time (-1 once the scan reached the end). */
  jobsInFile(seq: number, cursor: number, limit: number, fn: (id: number) => void): number {
    let n = 0;
    let s = cursor;
    for (; s < this.hwm && n < limit; s++) {
      if (this.fileAt(s) === seq && this.jobState[s] !== 0) {
        fn(this.ids.get(s));
        n++;
      }
    }
    return s < this.hwm ? s : -1;
  }

  /** out = [urgent, ready, reserved, delayed, buried, totalJobs, cmdDelete, cmdPauseTube,
   *  pauseSec, pauseTimeLeftSec]; all zero for a tube this shard has no state for. */
  tubeStats(tube: number, nowMs: number, out: Float64Array): void {
    const t = this.tubes.get(tube);
    if (!t) {
      out.fill(0, 0, 10);
      return;
    }
    const paused = t.paused && t.unpauseAt > nowMs;
    out[0] = t.urgent;
    out[1] = t.ready.size;
    out[2] = t.reserved;
    out[3] = t.delay.size;
    out[4] = t.buried;
    out[5] = t.totalJobs;
    out[6] = t.cmdDelete;
    out[7] = t.cmdPause;
    out[8] = paused ? t.pauseSec : 0;
    out[9] = paused ? secondsLeft(t.unpauseAt - nowMs) : 0;
  }

  /** out = [urgent, ready, reserved, delayed, buried, jobTimeouts] over this shard. */
  totals(out: Float64Array): void {
    out[0] = this.urgentCt;
    out[1] = this.readyCt;
    out[2] = this.reservedCt;
    out[3] = this.delayedCt;
    out[4] = this.buriedCt;
    out[5] = this.jobTimeouts;
  }

  /** Memory held by this engine's structures, in bytes (for stats and tests). */
  memoryStats(): { jobs: number; slots: number; columnBytes: number; idTableBytes: number; timerHeapBytes: number; recordBytes: number; bodyHeldBytes: number; bodyLiveBytes: number; bodyCompactions: number; orderListBytes: number } {
    return {
      jobs: this.live,
      slots: this.cap,
      columnBytes: this.cap * COLUMN_BYTES_PER_SLOT + this.fileSeq.byteLength + this.bodies.slotBytes,
      idTableBytes: this.index.bytes,
      timerHeapBytes: this.timers.items.byteLength,
      recordBytes: this.rec.byteLength,
      bodyHeldBytes: this.bodies.heldBytes,
      bodyLiveBytes: this.bodies.liveBytes,
      bodyCompactions: this.bodies.compactions,
      orderListBytes: this.kickedBuf.byteLength + this.tickedBuf.byteLength + this.releasedBuf.byteLength,
    };
  }

  /** Whether reservations skip this tube at nowMs. */
  isPaused(tube: number, nowMs: number): boolean {
    const t = this.tubes.get(tube);
    return t !== undefined && t.paused && t.unpauseAt > nowMs;
  }

  // ---------------------------------------------------------------- time

  /** Fires everything due at nowMs: delayed jobs become READY, reserved jobs past their TTR go
   *  back to READY (timeouts++), ended pauses are lifted. All state changes happen first, then
   *  the sink hears every sink.timedOut(id, conn), then sink.ready(tube) once per tube that
   *  gained ready jobs or was unpaused with ready jobs (paused tubes are not reported). The sink
   *  may call back into the engine (but not tick). Returns nextDeadline(). */
  tick(nowMs: number, sink: TimerSink): number {
    const seq = ++this.seq;
    let readyTubes: number[] | null = null;
    let timedOut: number[] | null = null; // id, conn pairs

    const pl = this.pausedTubes;
    for (let i = 0; i < pl.length; ) {
      const t = pl[i];
      if (t.unpauseAt > nowMs) {
        i++;
        continue;
      }
      t.paused = false;
      t.inPausedList = false;
      pl[i] = pl[pl.length - 1];
      pl.pop();
      if (t.ready.size > 0 && t.signalSeq !== seq) {
        t.signalSeq = seq;
        (readyTubes ??= []).push(t.id);
      }
    }

    const timers = this.timers;
    let nTicked = 0;
    // A burst's list (a million delays ending at once) is not kept for ever.
    if (this.tickedBuf.length > ORDER_BUF_KEEP) this.tickedBuf = new Float64Array(0);
    while (timers.size > 0) {
      const s = timers.items[0];
      if (this.deadline.get(s) > nowMs) break;
      const t = this.tubeAt(s);
      if (this.jobState[s] !== DELAYED) {
        // TTR over: out of the timer heap (its timer place NIL marks it expired), still held by its
        // connection until expire(); see expire() for why.
        timers.removeAt(0);
        this.expiredCt++;
        this.counts.inc(s, C_TIMEOUTS);
        this.jobTimeouts++;
        (timedOut ??= []).push(this.ids.get(s), this.ownerOf(s), this.counts.get(s, C_RESERVES));
        continue;
      }
      this.leaveDelayed(s, t);
      this.enterReady(s, t);
      if (nTicked === this.tickedBuf.length) this.tickedBuf = growF64(this.tickedBuf, Math.max(16, nTicked * 2));
      this.tickedBuf[nTicked++] = this.ids.get(s);
      if (t.signalSeq !== seq && !t.pausedAt(nowMs)) {
        t.signalSeq = seq;
        (readyTubes ??= []).push(t.id);
      }
    }

    if (timedOut) for (let i = 0; i < timedOut.length; i += 3) sink.timedOut(timedOut[i], timedOut[i + 1], timedOut[i + 2]);
    if (readyTubes) for (const tube of readyTubes) sink.ready(tube);
    // (Nearly every tick ends nothing: no view made for it, which was an allocation per batch.)
    this.lastTicked = nTicked === 0 ? NO_IDS : this.tickedBuf.subarray(0, nTicked);
    return this.nextDeadline();
  }

  /** Earliest ms at which tick() has work: the timer heap top or a pause end; Infinity if none.
   *  Callers re-arm their timer with this after any put/reserve/release/touch/pause. */
  nextDeadline(): number {
    let next = this.timers.size > 0 ? this.deadline.get(this.timers.items[0]) : Infinity;
    for (const t of this.pausedTubes) if (t.unpauseAt < next) next = t.unpauseAt;
    return next;
  }

  // ---------------------------------------------------------------- invariants

  /** Throws on any broken heap order, position column, counter, list link, idtable entry or
   *  body-store accounting. O(n): for tests. */
  invariants(): void {
    const fail: (msg: string) => never = (msg) => {
      throw new Error(`engine invariant: ${msg}`);
    };
    const per = new Map<number, number[]>(); // tube -> [urgent, ready, reserved, delayed, buried]
    let live = 0;
    const counts = [0, 0, 0, 0, 0, 0];
    let urgent = 0;
    const recOf = new Int32Array(this.recHwm).fill(NIL); // record element -> slot holding it (or -2: free)
    const held = (r: number, fields: number, s: number): void => {
      for (let i = r; i < r + fields; i++) {
        if (recOf[i] !== NIL) fail(`record element ${i} held by ${s === -2 ? 'the free list' : `slot ${s}`} and ${recOf[i] === -2 ? 'the free list' : `slot ${recOf[i]}`}`);
        recOf[i] = s;
      }
    };
    for (let s = 0; s < this.hwm; s++) {
      const st = this.jobState[s];
      if (st === 0) continue;
      live++;
      if (st > BURIED) fail(`slot ${s} bad state ${st}`);
      const id = this.ids.get(s);
      if (this.index.get(id) !== s) fail(`id ${id} maps to ${this.index.get(id)}, not slot ${s}`);
      const t = this.tubeList[this.tube.get(s)];
      if (!t) fail(`slot ${s} in unknown tube number ${this.tube.get(s)}`);
      const tube = t as Tube;
      let c = per.get(tube.id);
      if (!c) per.set(tube.id, (c = [0, 0, 0, 0, 0]));
      counts[st]++;
      c[st]++;
      const p = this.pos[s];
      if (st === READY) {
        if (tube.ready.items[p] !== s || p >= tube.ready.size) fail(`ready slot ${s} pos ${p}`);
        if (this.pri[s] < URGENT_PRI) {
          c[0]++;
          urgent++;
        }
      } else if (st === DELAYED || st === BURIED) {
        if (p < 0 || p + SIDE_FIELDS > this.recHwm) fail(`${st === DELAYED ? 'delayed' : 'buried'} slot ${s} side record ${p}`);
        held(p, SIDE_FIELDS, s);
        if (st === DELAYED) {
          const hp = this.rec[p + SIDE_HEAP];
          const tp = this.rec[p + REC_TIMER];
          if (tube.delay.items[hp] !== s || hp < 0 || hp >= tube.delay.size) fail(`delayed slot ${s} delay heap place ${hp}`);
          if (this.timers.items[tp] !== s || tp < 0 || tp >= this.timers.size) fail(`delayed slot ${s} timer place ${tp}`);
        }
      } else if (st === RESERVED) {
        if (p < 0 || p + RES_FIELDS > this.recHwm || this.rec[p + RES_CONN] <= 0) fail(`reserved slot ${s} has no owner (${p})`);
        held(p, RES_FIELDS, s);
        const tp = this.rec[p + REC_TIMER];
        if (tp === NIL) counts[5]++; // expired, waiting for expire()
        else if (this.timers.items[tp] !== s || tp < 0 || tp >= this.timers.size) fail(`reserved slot ${s} timer place ${tp}`);
      }
    }
    let free = 0;
    for (let s = this.freeHead; s !== NIL; s = this.pos[s]) {
      if (this.jobState[s] !== 0) fail(`free slot ${s} has state ${this.jobState[s]}`);
      if (++free > this.hwm) fail('free list cycle');
    }
    if (live + free !== this.hwm) fail(`${live} live + ${free} free != ${this.hwm} slots`);
    if (live !== this.live) fail(`live ${this.live} but ${live} slots used`);
    if (this.index.size !== live) fail(`idtable size ${this.index.size} != ${live}`);
    this.index.check();

    const cmp: [string, number, number][] = [
      ['urgent', this.urgentCt, urgent],
      ['ready', this.readyCt, counts[READY]],
      ['reserved', this.reservedCt, counts[RESERVED]],
      ['delayed', this.delayedCt, counts[DELAYED]],
      ['buried', this.buriedCt, counts[BURIED]],
      ['expired', this.expiredCt, counts[5]],
      ['timer heap', this.timers.size, counts[DELAYED] + counts[RESERVED] - counts[5]],
    ];
    for (const [name, have, want] of cmp) if (have !== want) fail(`${name} count ${have}, found ${want}`);
    this.timers.check((s) => this.rec[this.pos[s] + REC_TIMER], 'timer heap');

    for (const t of this.tubes.values()) {
      const c = per.get(t.id) ?? [0, 0, 0, 0, 0];
      const tc: [string, number, number][] = [
        ['urgent', t.urgent, c[0]],
        ['ready', t.ready.size, c[READY]],
        ['reserved', t.reserved, c[RESERVED]],
        ['delayed', t.delay.size, c[DELAYED]],
        ['buried', t.buried, c[BURIED]],
      ];
      for (const [name, have, want] of tc) if (have !== want) fail(`tube ${t.id} ${name} ${have}, found ${want}`);
      t.ready.check((s) => this.pos[s], `tube ${t.id} ready heap`);
      t.delay.check((s) => this.rec[this.pos[s] + SIDE_HEAP], `tube ${t.id} delay heap`);
      let n = 0;
      let last = NIL;
      for (let s = t.buriedHead; s !== NIL; s = this.buriedNext(s)) {
        if (this.jobState[s] !== BURIED || this.tube.get(s) !== t.idx) fail(`tube ${t.id} buried list holds slot ${s}`);
        if (this.rec[this.pos[s] + SIDE_PREV] !== last) fail(`tube ${t.id} buried list prev link at ${s}`);
        if (++n > t.buried) fail(`tube ${t.id} buried list longer than ${t.buried}`);
        last = s;
      }
      if (n !== t.buried || t.buriedTail !== last) fail(`tube ${t.id} buried list length ${n} / tail`);
      if (t.inPausedList !== this.pausedTubes.includes(t)) fail(`tube ${t.id} paused-list flag`);
    }
    for (const t of this.pausedTubes) if (this.tubes.get(t.id) !== t) fail(`paused list holds dropped tube ${t.id}`);
    for (const t of this.tubes.values()) if (this.tubeList[t.idx] !== t) fail(`tube ${t.id} not at its number ${t.idx}`);
    let numbered = 0;
    for (const t of this.tubeList) if (t !== null) numbered++;
    if (numbered !== this.tubes.size || numbered + this.tubeIdxFree.length !== this.tubeList.length) fail('tube numbers');

    let reserved = 0;
    for (const [conn, head] of this.connHead) {
      let last = NIL;
      for (let s = head; s !== NIL; s = this.resNext(s)) {
        if (this.jobState[s] !== RESERVED || this.ownerOf(s) !== conn) fail(`conn ${conn} list holds slot ${s}`);
        if (this.rec[this.pos[s] + RES_PREV] !== last) fail(`conn ${conn} list prev link at ${s}`);
        if (++reserved > this.reservedCt) fail('conn lists longer than reserved count');
        last = s;
      }
    }
    if (reserved !== this.reservedCt) fail(`conn lists hold ${reserved}, reserved ${this.reservedCt}`);
    for (const fields of [RES_FIELDS, SIDE_FIELDS]) {
      for (let r = this.recFree[fields]; r !== NIL; r = this.rec[r + REC_FREE_NEXT]) {
        if (r < 0 || r + fields > this.recHwm) fail(`free record ${r} out of range`);
        held(r, fields, -2); // fails on a cycle too
      }
    }
    for (let i = 0; i < this.recHwm; i++) if (recOf[i] === NIL) fail(`record element ${i} neither held nor free`);
    this.bodies.check(live);
  }

  // ---------------------------------------------------------------- internals

  private ensureTube(id: number): Tube {
    let t = this.tubes.get(id);
    if (!t) {
      t = new Tube(id, new IndexHeap(this.readyLess, this.setHeapPos), new IndexHeap(this.timeLess, this.setDelayPos));
      this.tubes.set(id, t);
      t.idx = this.tubeIdxFree.length > 0 ? (this.tubeIdxFree.pop() as number) : this.tubeList.length;
      this.tubeList[t.idx] = t;
    }
    return t;
  }

  private tubeAt(s: number): Tube {
    return this.tubeList[this.tube.get(s)] as Tube;
  }

  private bestReady(tubes: ArrayLike<number>, count: number, nowMs: number): number {
    let best = NIL;
    for (let i = 0; i < count; i++) {
      const t = this.tubes.get(tubes[i]);
      if (!t || t.ready.size === 0 || t.pausedAt(nowMs)) continue;
      const s = t.ready.items[0];
      if (best === NIL || this.readyLess(s, best)) best = s;
    }
    return best;
  }

  private fileAt(s: number): number {
    return s < this.fileSeq.length ? this.fileSeq[s] : 0;
  }

  private reservedBy(id: number, conn: number): number {
    const s = this.index.get(id);
    return s !== NIL && this.jobState[s] === RESERVED && this.ownerOf(s) === conn ? s : NIL;
  }

  /** The connection holding RESERVED slot `s`. */
  private ownerOf(s: number): number {
    return this.rec[this.pos[s] + RES_CONN];
  }

  /** The next slot in the reserved list of RESERVED slot `s`'s owner. */
  private resNext(s: number): number {
    return this.rec[this.pos[s] + RES_NEXT];
  }

  /** RESERVED slot `s`'s place in the timer heap; NIL once its TTR ran out. */
  private timerOfReserved(s: number): number {
    return this.rec[this.pos[s] + REC_TIMER];
  }

  /** The next slot in BURIED slot `s`'s tube FIFO. */
  private buriedNext(s: number): number {
    return this.rec[this.pos[s] + SIDE_NEXT];
  }

  /** A record of `fields` elements (RES_FIELDS or SIDE_FIELDS): from that size's free list, else new. */
  private allocRecord(fields: number): number {
    const r = this.recFree[fields];
    if (r === NIL) return this.newRecord(fields);
    this.recFree[fields] = this.rec[r + REC_FREE_NEXT];
    return r;
  }

  /** Gives record `r` of `fields` elements back to that size's free list. */
  private freeRecord(r: number, fields: number): void {
    this.rec[r + REC_FREE_NEXT] = this.recFree[fields];
    this.recFree[fields] = r;
  }

  /** A record of `fields` elements past the last one handed out. */
  private newRecord(fields: number): number {
    const r = this.recHwm;
    this.recHwm += fields;
    if (this.recHwm > this.rec.length) this.rec = growI32(this.rec, this.rec.length * 2);
    return r;
  }

  private kickSlot(s: number, t: Tube): void {
    this.leave(s, t);
    this.counts.inc(s, C_KICKS);
    this.enterReady(s, t);
  }

  // Each state has an enter/leave pair that keeps its structure and counters in step.

  private enterReady(s: number, t: Tube): void {
    this.jobState[s] = READY;
    t.ready.push(s);
    this.readyCt++;
    if (this.pri[s] < URGENT_PRI) {
      t.urgent++;
      this.urgentCt++;
    }
  }

  private leaveReady(s: number, t: Tube): void {
    t.ready.removeAt(this.pos[s]);
    this.readyCt--;
    if (this.pri[s] < URGENT_PRI) {
      t.urgent--;
      this.urgentCt--;
    }
  }

  private enterDelayed(s: number, t: Tube, nowMs: number, delaySec: number): void {
    this.enterDelayedAt(s, t, nowMs + delaySec * 1000);
  }

  private enterDelayedAt(s: number, t: Tube, deadlineMs: number): void {
    this.jobState[s] = DELAYED;
    this.deadline.set(s, deadlineMs);
    this.pos[s] = this.allocRecord(SIDE_FIELDS); // before the pushes: they write their places into it
    t.delay.push(s);
    this.timers.push(s);
    this.delayedCt++;
  }

  private leaveDelayed(s: number, t: Tube): void {
    const r = this.pos[s];
    t.delay.removeAt(this.rec[r + SIDE_HEAP]);
    this.timers.removeAt(this.rec[r + REC_TIMER]);
    this.freeRecord(r, SIDE_FIELDS);
    this.pos[s] = NIL;
    this.delayedCt--;
  }

  private enterReserved(s: number, t: Tube, conn: number, nowMs: number): void {
    this.jobState[s] = RESERVED;
    this.deadline.set(s, nowMs + this.ttr.get(s) * 1000);
    this.counts.inc(s, C_RESERVES);
    // A reservation, pushed on the front of the connection's list.
    const r = this.allocRecord(RES_FIELDS);
    const rec = this.rec;
    const head = this.connHead.get(conn) ?? NIL;
    rec[r + RES_CONN] = conn;
    rec[r + RES_PREV] = NIL;
    rec[r + RES_NEXT] = head;
    if (head !== NIL) rec[this.pos[head] + RES_PREV] = s;
    this.pos[s] = r;
    this.timers.push(s); // after pos names the reservation: the push writes its place there
    this.connHead.set(conn, s);
    t.reserved++;
    this.reservedCt++;
  }

  private leaveReserved(s: number, t: Tube): void {
    const r = this.pos[s];
    const tp = this.rec[r + REC_TIMER];
    if (tp !== NIL) this.timers.removeAt(tp);
    else this.expiredCt--;
    const rec = this.rec;
    const p = rec[r + RES_PREV];
    const n = rec[r + RES_NEXT];
    if (p !== NIL) rec[this.pos[p] + RES_NEXT] = n;
    else this.connHead.set(rec[r + RES_CONN], n);
    if (n !== NIL) rec[this.pos[n] + RES_PREV] = p;
    this.freeRecord(r, RES_FIELDS);
    this.pos[s] = NIL;
    t.reserved--;
    this.reservedCt--;
  }

  private enterBuried(s: number, t: Tube): void {
    this.jobState[s] = BURIED;
    // A buried job has no deadline: the column holds its place in the buried FIFOs instead (the
    // list is in stamp order, so listJobs' cursor can find its place after the job it names left).
    if (this.buryStamp === OFFSET_MAX) this.renumberBuried();
    this.deadline.setRaw(s, ++this.buryStamp);
    const r = this.allocRecord(SIDE_FIELDS);
    this.rec[r + SIDE_PREV] = t.buriedTail;
    this.rec[r + SIDE_NEXT] = NIL;
    this.pos[s] = r;
    if (t.buriedTail !== NIL) this.rec[this.pos[t.buriedTail] + SIDE_NEXT] = s;
    else t.buriedHead = s;
    t.buriedTail = s;
    t.buried++;
    this.buriedCt++;
  }

  private leaveBuried(s: number, t: Tube): void {
    const rec = this.rec;
    const r = this.pos[s];
    const p = rec[r + SIDE_PREV];
    const n = rec[r + SIDE_NEXT];
    if (p !== NIL) rec[this.pos[p] + SIDE_NEXT] = n;
    else t.buriedHead = n;
    if (n !== NIL) rec[this.pos[n] + SIDE_PREV] = p;
    else t.buriedTail = p;
    this.freeRecord(r, SIDE_FIELDS);
    this.pos[s] = NIL;
    t.buried--;
    this.buriedCt--;
  }

  // The bury stamps reached OFFSET_MAX (2 billion buries): number the buried jobs again from 1, in
  // the order of their stamps (each tube's FIFO is in stamp order). A listing cursor taken before
  // this may skip or repeat buried jobs on its next page.
  private renumberBuried(): void {
    const cells = this.deadline.cells;
    const all: number[] = [];
    for (const t of this.tubes.values()) for (let s = t.buriedHead; s !== NIL; s = this.buriedNext(s)) all.push(s);
    all.sort((a, b) => cells[a] - cells[b]);
    for (let i = 0; i < all.length; i++) cells[all[i]] = i + 1;
    this.buryStamp = all.length;
  }

  private leave(s: number, t: Tube): void {
    switch (this.jobState[s]) {
      case READY:
        return this.leaveReady(s, t);
      case DELAYED:
        return this.leaveDelayed(s, t);
      case RESERVED:
        return this.leaveReserved(s, t);
      case BURIED:
        return this.leaveBuried(s, t);
    }
  }

  private allocSlot(): number {
    const s = this.freeHead;
    if (s !== NIL) {
      this.freeHead = this.pos[s];
      return s;
    }
    if (this.hwm === this.cap) this.grow(Math.ceil(this.cap * COLUMN_GROWTH));
    return this.hwm++;
  }

  private freeSlot(s: number): void {
    this.jobState[s] = 0;
    this.ids.clear(s);
    this.created.clear(s);
    this.deadline.clear(s);
    this.tube.clear(s);
    this.ttr.clear(s);
    this.delay.clear(s);
    this.counts.clear(s); // a reused slot starts from zero, and big counts leave the side map
    this.pos[s] = this.freeHead;
    this.freeHead = s;
  }

  /**
   * The last job has gone: if the columns grew past SHRINK_SLOTS_FACTOR times their first size (a
   * burst), lay them out again at that size, so a drained burst gives its memory back. Nothing
   * points at a slot now (heaps, lists, the id table and the bodies are empty).
   */
  private shrinkWhenEmpty(): void {
    if (this.cap <= this.initialSlots * SHRINK_SLOTS_FACTOR) return;
    const old = this.ids.cells.buffer as ArrayBuffer;
    for (const c of [this.ids, this.deadline, this.created]) {
      c.adopt(new Int32Array(0));
      c.reset();
    }
    this.pri = new Uint32Array(0);
    for (const c of [this.ttr, this.delay, this.tube]) {
      c.adopt(new Uint16Array(0));
      c.reset();
    }
    this.pos = new Int32Array(0);
    this.rec = new Int32Array(REC_INITIAL); // no job is reserved, delayed or buried
    this.recHwm = 0;
    this.recFree.fill(NIL);
    this.jobState = new Uint8Array(0);
    this.counts.adopt(new Uint16Array(0));
    this.bodies.dropSlots();
    if (this.fileSeq.length > 0) this.fileSeq = new Int32Array(0); // setFile makes it again
    this.hwm = 0;
    this.freeHead = NIL;
    this.cap = 0;
    this.grow(this.initialSlots);
    release(old);
  }

  // Columns grow by COLUMN_GROWTH: one new block holds every column (4-byte ones first, for
  // alignment) and the id table's cells, sized for the slots (IdTable.cellsFor);
  // COLUMN_BYTES_PER_SLOT sums the columns. The old block's memory is given back at once.
  private grow(cap: number): void {
    const old = this.cap > 0 ? (this.ids.cells.buffer as ArrayBuffer) : null;
    const cells = IdTable.cellsFor(cap);
    const b = new ColumnBlock(cap * (COLUMN_BYTES_PER_SLOT + SLOT_BYTES) + cells * 4);
    this.ids.adopt(b.i32(this.ids.cells, cap));
    this.deadline.adopt(b.i32(this.deadline.cells, cap));
    this.created.adopt(b.i32(this.created.cells, cap));
    this.idCells = this.ids.cells;
    this.deadlineCells = this.deadline.cells;
    this.pri = b.u32(this.pri, cap);
    this.pos = b.i32(this.pos, cap);
    this.index.bind(this.ids); // the table rehashes by the ids in the new block
    this.index.adopt(b.i32(NO_CELLS, cells));
    this.bodies.growSlots(cap, b); // 4-byte columns, so before the 2- and 1-byte ones
    this.tube.adopt(b.u16(this.tube.cells, cap));
    this.ttr.adopt(b.u16(this.ttr.cells, cap));
    this.delay.adopt(b.u16(this.delay.cells, cap));
    this.counts.adopt(b.u16(this.counts.column, cap));
    this.jobState = b.u8(this.jobState, cap);
    if (this.fileSeq.length > 0) this.fileSeq = growI32(this.fileSeq, cap);
    this.cap = cap;
    if (old !== null) release(old);
  }
}

/** A binary heap of slots on a plain array (listJobs' page selection; never on the hot path). */
class SlotHeap {
  readonly items: number[] = [];
  private readonly less: (a: number, b: number) => boolean;

  constructor(less: (a: number, b: number) => boolean) {
    this.less = less;
  }

  get size(): number {
    return this.items.length;
  }

  top(): number {
    return this.items[0];
  }

  push(x: number): void {
    const a = this.items;
    let i = a.length;
    a.push(x);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(x, a[p])) break;
      a[i] = a[p];
      i = p;
    }
    a[i] = x;
  }

  pop(): number {
    const a = this.items;
    const top = a[0];
    const last = a.pop() as number;
    if (a.length > 0) this.down(last);
    return top;
  }

  replaceTop(x: number): void {
    this.down(x);
  }

  /** Appends the items to `out` in `order`, emptying the heap. */
  drainSorted(order: (a: number, b: number) => boolean, out: number[]): void {
    const all = this.items.splice(0);
    all.sort((a, b) => (order(a, b) ? -1 : order(b, a) ? 1 : 0));
    for (const x of all) out.push(x);
  }

  private down(x: number): void {
    const a = this.items;
    const n = a.length;
    let i = 0;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && this.less(a[c + 1], a[c])) c++;
      if (!this.less(a[c], x)) break;
      a[i] = a[c];
      i = c;
    }
    a[i] = x;
  }
}

/**
 * The first `want` slots of heap `h` in `less` order that come after the cursor (`after` null:
 * from the start), appended to `out` in order. Walks the heap best first (a frontier of
 * positions), so a page near the front costs O((skipped + want) log); once the walk has visited
 * more than a budget it scans the whole heap instead with a bounded selection, O(n log want).
 */
function selectFromHeap(h: IndexHeap, less: (a: number, b: number) => boolean, after: ((s: number) => boolean) | null,
  want: number, out: number[]): void {
  const items = h.items;
  const size = h.size;
  if (size === 0) return;
  const budget = Math.max(4 * want, size >> 3);
  const frontier = new SlotHeap((p, q) => less(items[p], items[q]));
  frontier.push(0);
  let visited = 0;
  while (frontier.size > 0 && out.length < want) {
    const p = frontier.pop();
    const s = items[p];
    if (after === null || after(s)) out.push(s);
    else if (++visited > budget) {
      // Deep in the heap: one scan is cheaper than walking to the cursor.
      out.length = 0;
      const best = new SlotHeap((a, b) => less(b, a)); // the last of the best `want` on top
      for (let i = 0; i < size; i++) {
        const x = items[i];
        if (!after(x)) continue;
        if (best.size < want) best.push(x);
        else if (less(x, best.top())) best.replaceTop(x);
      }
      best.drainSorted(less, out);
      return;
    }
    const c = 2 * p + 1;
    if (c < size) frontier.push(c);
    if (c + 1 < size) frontier.push(c + 1);
  }
}
