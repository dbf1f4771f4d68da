// A shard's work, whichever thread runs it: the engine and workq store of the tubes and queues
// hashed to the shard, its write-ahead log, and the request records it applies. Each request
// gets one reply record in `out`; afterBatch() adds the clock's events, writes the batch's log
// records and says when the clock next has work. Whoever owns the core moves `out` to the
// records' readers: workers/shard.ts through a ring to another thread, src/route/shards.ts
// directly when the shard lives on the thread that serves connections. The core knows neither.

import {
  E_TIMED_OUT, fanWaitStamp, HEADER_BYTES, OP_BURY, OP_DELETE, OP_DROP_TUBE, OP_KICK, OP_KICK_JOB,
  OP_PAUSE_TUBE, OP_PEEK, OP_PEEK_BEST, OP_PEEK_BURIED, OP_PEEK_DELAYED, OP_PEEK_READY, OP_PUT, OP_PUT_BURIED,
  OP_EXPIRE, OP_RELEASE, OP_RELEASE_CONN, OP_RESERVE, OP_RESERVE_BOUNDED, OP_RESERVE_JOB, OP_RESTORE,
  OP_STATS_JOB, OP_STATS_TUBE, OP_TOTALS, OP_TOUCH, OP_TUBE_NAME, OP_WAL_SYNC, OP_WQ_ADD, OP_WQ_RESTORE, R_BEST, R_JOB,
  R_NONE, R_NUMS, R_OK, RecordWriter, REPLY_FLAG_UNLOGGED, OP_LIST_JOBS, OP_CLEAR_TUBE, LIST_JOBS_MAX,
  LIST_PREVIEW_BYTES, LIST_FIELDS, CLEAR_JOBS_MAX, R_JOB_LIST, R_IDS, OP_RESERVE_WAIT, OP_CANCEL_WAIT, OP_TAKE_ID, OP_FAN_WAIT, OP_AFTER, R_PARKED, TUBE_FIELDS, TUBE_WAITING,
  R_DEFERRED, R_DROPPED, E_RESERVED, E_WAIT_END, E_DEFERRED, END_DEADLINE_SOON, END_TIMED_OUT, RESERVE_FOREVER,
  DEADLINE_SOON_MS, IdList,
  mayMakeReady,
} from '../src/shared/records.ts';
import type { WalConfig } from './wal/wal.ts';
import { makeLogger, type Logger } from '../src/log.ts';
import { Engine } from './engine/engine.ts';
import { WorkqOps } from './workq-ops.ts';
import { fullRecordBytes, nodeIo, Wal, WalWriteError, type WalIo } from './wal/index.ts';
import { LoggedReplies } from './wal/logged.ts';
import { f64le, i32le, u32le } from '../src/shared/bytes.ts';
import { observe } from '../src/shared/histogram.ts';
import { ShardWaits, type Waiter } from './waits.ts';
import { Claims, type ClaimsShared } from '../src/shared/claims.ts';
import { JobIds, type JobIdsShared } from '../src/shared/jobids.ts';
import { StepOrder } from '../src/shared/order.ts';

/** What a shard is made with. */
export interface ShardConfig {
  index: number;
  wal?: WalConfig;
  logLevel?: string;
  /** Test hook: Int32 word 0 = how many coming log writes fail with ENOSPC (as a full disk). */
  walFaults?: SharedArrayBuffer;
  /** Where the log's fsync durations go (src/shared/histogram.ts; /metrics reads it). */
  fsyncHistogram?: Float64Array;
  /** The server's job id counter (src/shared/jobids.ts): puts kept behind a waiting reserve are numbered when applied. */
  ids?: JobIdsShared;
  /** The claims of reserves over several shards (src/shared/claims.ts); absent with one shard. */
  claims?: ClaimsShared;
  /**
   * How far each shard has applied the request stream of the one thread that sends them all
   * (src/shared/order.ts); absent with one shard, or when several threads send (a mesh).
   */
  order?: SharedArrayBuffer;
  /**
   * A tube's name from the server's shared tube table, for a shard that serves several threads:
   * a put from one thread can arrive before the name the creating thread sent (OP_TUBE_NAME) on
   * its own ring, and the log must name the tube. (A shard on a thread of its own gets every
   * request through one ring, names first.)
   */
  tubeName?: (tube: number) => string | undefined;
  /** For a shard on a thread of its own (workers/shard.ts): microseconds it polls its ring after its last request before it sleeps (--busy-poll-us). */
  busyPollUs?: number;
}

/** Live jobs moved out of the oldest log segment per batch (compaction runs a little at a time). */
const MIGRATIONS_PER_BATCH = 256;
/** How long to wait before retrying a log write that failed (disk full, EIO). */
export const WAL_RETRY_MS = 100;

const EMPTY = Buffer.alloc(0);

function growIds(a: Float64Array): Float64Array {
  const next = new Float64Array(Math.max(1024, a.length * 2));
  next.set(a);
  return next;
}

/** `io` with each fdatasync's duration observed into `h` (if given). */
function timedSyncs(io: WalIo, h: Float64Array | undefined): WalIo {
  if (h === undefined) return io;
  return {
    ...io,
    fdatasyncSync(fd) {
      const t = performance.now();
      io.fdatasyncSync(fd);
      observe(h, (performance.now() - t) / 1000);
    },
  };
}

/** The real file system, except that writes fail with ENOSPC while the test says so. */
function faultyIo(ctrl: Int32Array): WalIo {
  return {
    ...nodeIo,
    writeSync(fd, buf, off, len, position) {
      for (let left = Atomics.load(ctrl, 0); left > 0; left = Atomics.load(ctrl, 0)) {
        if (Atomics.compareExchange(ctrl, 0, left, left - 1) === left) {
          throw Object.assign(new Error('ENOSPC: no space left on device, write (injected)'), { code: 'ENOSPC' });
        }
      }
      return nodeIo.writeSync(fd, buf, off, len, position);
    },
  };
}

export class ShardCore {
  readonly index: number;
  readonly engine = new Engine();
  /** Reserves waiting in this shard, and the requests their connections sent after them. */
  readonly waits: ShardWaits;
  private readonly endedWaits: Waiter[] = [];
  private readonly ids: JobIds;
  private readonly lookupTubeName: ((tube: number) => string | undefined) | undefined;
  /** This batch's replies and events, in order. */
  readonly out = new RecordWriter();
  private readonly wal: Wal | null;
  readonly log: Logger;
  /** Tube names by id (log records name their tube). */
  private readonly tubeNames: string[] = [];
  private readonly img = new Float64Array(12);
  /** This batch's replies whose change went to the log. */
  private readonly logged: LoggedReplies;
  private walFailing = false;
  /** Largest job id this shard has logged or inherited; each new segment starts by recording it. */
  private maxIdLogged: number;
  private markedSegment = -1;
  private compactSeq = -1;
  private compactCursor = 0;
  private wqCompactCursor = 0;
  /** The workq protocol's jobs of this shard. */
  private readonly workq: WorkqOps;
  private readonly nums = new Float64Array(16);
  /** Steps of other shards (src/shared/order.ts), null when one thread does not send every request. */
  private readonly order: StepOrder | null;
  /** How far this shard has applied its request stream (bytes, free-running). */
  private applied = 0;
  /**
   * Requests this shard has applied before the one being applied, every sender's, in the one
   * order it applies them (a double: it never wraps). A reserve's place among the waiting ones
   * (workers/waits.ts Waiter.stamp): a reserve over several shards parks with the stamp its first
   * question (OP_PEEK_BEST) got here, so it goes ahead of the reserves read after it that parked
   * while it was asking the other shards.
   */
  private stamp = 0;
  /** The last OP_AFTER: [shard, position] pairs, for the request after it. */
  private after = new Int32Array(8);
  private afterN = 0;
  /**
   * While a step waits for other shards (StepOrder.waitFor): run between looks, false to give up
   * (stopping); and how long to sleep between looks. The shard on the sending thread moves the
   * rings on there, often.
   */
  whileWaiting: () => boolean = () => true;
  waitSliceMs = 1;
  /** OP_CLEAR_TUBE's deleted ids (grows to CLEAR_JOBS_MAX at most). */
  private clearIds: Float64Array = new Float64Array(0);
  private readonly tubeList = new IdList(64);
  // What the clock does: a tube that gained ready jobs (a TTR end, an unpause) gets its waiters
  // served (a delay's end is served in order, from engine.lastTicked).
  private readonly sink = {
    ready: (tube: number): void => {
      this.waits.poke(tube);
    },
    timedOut: (id: number, conn: number, reserves: number): void => {
      this.out.header(E_TIMED_OUT, 0, conn, this.engine.tubeOf(id), reserves, 0, id);
    },
  };

  constructor(config: ShardConfig) {
    this.index = config.index;
    this.ids = config.ids !== undefined ? JobIds.attach(config.ids) : new JobIds();
    this.waits = new ShardWaits(config.claims !== undefined ? Claims.attach(config.claims) : null);
    this.order = config.order !== undefined ? StepOrder.attach(config.order) : null;
    this.lookupTubeName = config.tubeName;
    this.log = makeLogger(config.logLevel ?? 'info').child({ shard: config.index });
    this.wal = config.wal
      ? new Wal({
          dir: config.wal.dir,
          shard: config.index,
          generation: config.wal.generation,
          sync: config.wal.sync,
          segmentBytesMax: config.wal.segmentBytesMax,
          io: timedSyncs(config.walFaults ? faultyIo(new Int32Array(config.walFaults)) : nodeIo, config.fsyncHistogram),
        })
      : null;
    this.logged = new LoggedReplies(this.wal !== null);
    this.maxIdLogged = config.wal?.idFloor ?? 0;
    this.workq = new WorkqOps(this.out, this.wal, this.logged);
  }

  /** Tube `t`'s name (log records name their tube): as OP_TUBE_NAME said, or from the shared table. */
  private tubeName(t: number): string {
    if (t < 0) return ''; // no such job (a delete that finds nothing asks too)
    const name = this.tubeNames[t];
    if (name !== undefined && name !== '') return name;
    const shared = this.lookupTubeName?.(t);
    if (shared === undefined) return '';
    this.tubeNames[t] = shared;
    return shared;
  }

  private readTubes(buf: Buffer, at: number, count: number): Int32Array {
    return this.tubeList.read(buf, at + HEADER_BYTES, count);
  }

  /** R_JOB: a = tube, b = more, id, payload f64 deadline + body (E_RESERVED: the same, conn@8). */
  private replyJob(id: number, deadlineMs: number, fromState = 0, delayLeftSec = 0, kind = R_JOB): void {
    const engine = this.engine;
    this.out.header(kind, 8 + engine.bodyLength(id), fromState, engine.tubeOf(id), 0, delayLeftSec, id);
    this.out.f64(deadlineMs);
    engine.copyBody(id, this.out);
  }

  /** Deletes job `id` as `delete` does (a reserved job only for its holder `conn`) and logs it; its tube, or -1. */
  private deleteLogged(id: number, conn: number): number {
    const engine = this.engine;
    const fullSeq = engine.fileOf(id);
    const fullBytes = fullRecordBytes(this.tubeName(engine.tubeOf(id)).length, engine.bodyLength(id));
    const tube = engine.deleteJob(id, conn);
    if (tube >= 0) this.wal?.appendDelete(id, fullSeq, fullBytes);
    return tube;
  }

  /** R_JOB_LIST: one page of a tube's jobs in one state (Engine.listJobs), each with stats-job's figures and a preview. */
  private listJobs(tube: number, state: number, limit: number, cursorKey: number, cursorId: number, now: number): void {
    const engine = this.engine;
    const out = this.out;
    const more = engine.listJobs(tube, state, cursorKey, cursorId, limit);
    const ids = engine.lastListed;
    const nums = this.nums;
    let bytes = 0;
    for (let i = 0; i < ids.length; i++) bytes += LIST_FIELDS * 8 + Math.min(LIST_PREVIEW_BYTES, engine.body(ids[i]).length);
    out.header(R_JOB_LIST, bytes, 0, ids.length, more ? 1 : 0, 0, 0);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      engine.jobStats(id, now, nums); // id, tube, state, pri, age, delay, ttr, time-left, 5 counters, file
      const body = engine.body(id);
      const preview = Math.min(LIST_PREVIEW_BYTES, body.length);
      out.f64(id);
      out.f64(nums[3]);
      out.f64(nums[2]);
      for (let k = 4; k <= 12; k++) out.f64(nums[k]); // age, delay, ttr, time-left, the counters
      out.f64(body.length);
      out.f64(engine.listKey(id));
      out.f64(preview);
      out.bytes(body, 0, preview);
    }
  }

  private replyNums(count: number): void {
    this.out.header(R_NUMS, count * 8, 0, count, 0, 0, 0);
    for (let i = 0; i < count; i++) this.out.f64(this.nums[i]);
  }

  // ---- the write-ahead log: one record per change that must survive a restart ----

  private logFull(id: number, body: Uint8Array, start: number, end: number): void {
    const wal = this.wal;
    if (wal === null) return;
    if (id > this.maxIdLogged) this.maxIdLogged = id;
    const img = this.img;
    this.engine.image(id, img);
    const seq = wal.appendFull(id, this.tubeName(this.engine.tubeOf(id)), img[0], img[1], img[2], img[3], img[4],
      img[5], img[6], img[7], img[8], img[9], img[10], body, start, end);
    this.engine.setFile(id, seq);
  }

  private logUpdate(id: number): void {
    const wal = this.wal;
    if (wal === null) return;
    const img = this.img;
    this.engine.image(id, img);
    wal.appendUpdate(id, this.engine.fileOf(id), img[3], img[0], img[1], img[4], img[6], img[7], img[8], img[9], img[10]);
  }

  /** Moves a few live jobs out of the oldest segment so it can be deleted (bounded disk use). */
  private compact(): void {
    const wal = this.wal;
    if (wal === null) return;
    const c = wal.compactionCandidate();
    if (c < 0) return;
    if (c !== this.compactSeq) {
      this.compactSeq = c;
      this.compactCursor = 0;
      this.wqCompactCursor = 0;
    }
    const engine = this.engine;
    const img = this.img;
    const name = (id: number): string => this.tubeName(engine.tubeOf(id));
    this.compactCursor = engine.jobsInFile(c, this.compactCursor, MIGRATIONS_PER_BATCH, (id) => {
      engine.image(id, img);
      const body = engine.body(id);
      const seq = wal.migrate(c, id, name(id), img[0], img[1], img[2], img[3], img[4], img[5], img[6], img[7],
        img[8], img[9], img[10], body, 0, body.length);
      engine.setFile(id, seq);
    });
    if (this.compactCursor < 0) this.compactCursor = 0;
    this.wqCompactCursor = this.workq.migrate(c, this.wqCompactCursor, MIGRATIONS_PER_BATCH);
    if (this.wqCompactCursor < 0) this.wqCompactCursor = 0;
  }

  /** Writes the batch's log records (and syncs as the mode says) before its replies go out. */
  private commitLog(now: number): void {
    const wal = this.wal;
    if (wal === null) return;
    this.compact();
    try {
      if (wal.currentIndex !== this.markedSegment) {
        // A new segment (or the first of this generation): record the largest id first, so it
        // outlives the removal of the segments that named it.
        this.markedSegment = wal.currentIndex;
        if (this.maxIdLogged > 0) wal.appendIdMark(this.maxIdLogged);
      }
      wal.commit(now);
      if (wal.currentIndex !== this.markedSegment) {
        this.markedSegment = wal.currentIndex;
        wal.appendIdMark(this.maxIdLogged);
        wal.commit(now);
      }
      if (this.walFailing) this.log.warn('write-ahead log writable again');
      this.walFailing = false;
    } catch (err) {
      if (!(err instanceof WalWriteError)) throw err;
      if (!this.walFailing) this.log.error({ err: err.message, code: err.code }, 'write-ahead log write failed; changes are refused until it recovers');
      this.walFailing = true;
      // Never a success for a change that is not on disk: these replies become errors. The
      // records stay queued and are written by a later commit.
      this.logged.flagAll(this.out.buf, REPLY_FLAG_UNLOGGED);
    }
    this.logged.clear();
  }

  /** Tells the other shards how far this one has applied its requests (a shard thread calls it after each chunk it reads). */
  progressed(): void {
    if (this.order !== null) this.order.publish(this.index, this.applied);
  }

  /**
   * Ends a batch of requests (or a wake-up of the clock with none): runs the clock (delays, TTRs,
   * pauses, workq schedules), writes its events, then the batch's log records, so `out` may go.
   * Returns the wall-clock ms at which the clock next has work (Infinity: none).
   */
  afterBatch(now: number): number {
    this.progressed();
    const clock = this.engine.tick(now, this.sink);
    // beanstalkd runs process_queue after each delay that ends: those jobs go to the waiting
    // reserves in the order their delays ended, before any reserve's own end is looked at.
    if (this.engine.lastTicked.length !== 0) this.serveInOrder(this.engine.lastTicked, now);
    const next = Math.min(clock, this.workq.tick(now), this.endWaits(now));
    this.commitLog(now);
    return next;
  }

  /** Owed syncs, retries after a failed write, and deleting segments nothing live needs. */
  tidyLog(now: number): void {
    const wal = this.wal;
    if (wal === null) return;
    try {
      if (this.walFailing) this.commitLog(now);
      else wal.syncIfDue(now);
      wal.removeDeadSegments();
    } catch (err) {
      if (!(err instanceof WalWriteError)) throw err;
      if (!this.walFailing) this.log.error({ err: err.message, code: err.code }, 'write-ahead log sync failed');
      this.walFailing = true;
    }
  }

  /** When the log next wants tidyLog(): an owed sync, or a retry of a failed write (Infinity: never). */
  logDueMs(now: number): number {
    if (this.wal === null) return Infinity;
    return this.walFailing ? now + WAL_RETRY_MS : this.wal.dueMs();
  }

  close(): void {
    this.wal?.close();
  }

  /**
   * Applies one request record and writes its one reply to `out` (and, after it, any events it
   * caused). A request of a connection whose reserve is parked here is kept for later instead.
   */
  handle(buf: Buffer, at: number, now: number): void {
    if (this.order === null) {
      // One shard, or several sending threads: no byte position to publish.
      this.handleRecord(buf, at, now);
    } else {
      if (buf[at + 4] === OP_AFTER) this.readAfter(buf, at);
      else {
        if (this.afterN !== 0) this.awaitSteps();
        this.handleRecord(buf, at, now);
      }
      this.applied = (this.applied + u32le(buf, at)) | 0;
    }
    this.stamp++;
  }

  private handleRecord(buf: Buffer, at: number, now: number): void {
    const conn = u32le(buf, at + 8);
    if (conn !== 0) {
      const w = this.waits.of(conn);
      const op = buf[at + 4];
      // (A reserve over several shards keeps nothing here: its connection sends nothing behind it
      // but what ends or restarts it.)
      if (w !== undefined && w.parked && w.slot === 0 && op !== OP_RELEASE_CONN && op !== OP_CANCEL_WAIT) {
        this.waits.keep(w, buf, at, u32le(buf, at));
        this.out.header(R_DEFERRED, 0, 0, 0, 0, 0, f64le(buf, at + 24));
        return;
      }
    }
    this.apply(buf, at, now);
    if (this.waits.anyPoked) this.serve(now);
  }

  /**
   * A mesh (src/shared/sequence.ts): whether the request at `at` must wait until every other
   * shard has applied everything numbered before its segment. A step that may make a job ready
   * (as ShardPool.readyStep marks them: a put or release without delay, a kick, a kick-job, a
   * pause-tube, a closed connection's jobs going back) does while a reserve waiting over several
   * shards is parked here; nothing else does.
   */
  stepWaits(buf: Buffer, at: number): boolean {
    if (!this.waits.anyRemote) return false;
    const op = buf[at + 4];
    if (op === OP_RELEASE_CONN) return u32le(buf, at + 12) > 0 || u32le(buf, at + 16) === 1;
    return mayMakeReady(op, u32le(buf, at + 20));
  }

  // ---- steps on several shards, in the sending thread's order (src/shared/order.ts) ----

  /** OP_AFTER: the steps of other shards the next request comes after. */
  private readAfter(buf: Buffer, at: number): void {
    const n = u32le(buf, at + 12);
    if (this.after.length < n * 2) this.after = new Int32Array(n * 2);
    for (let i = 0; i < n * 2; i++) this.after[i] = i32le(buf, at + HEADER_BYTES + i * 4);
    this.afterN = n;
  }

  /**
   * Before a step that may make a job ready: if a reserve waiting over several shards is parked
   * here, the steps OP_AFTER named are applied first on their shards, so any claim they make on
   * it comes first. Without such a reserve, what other shards do cannot change what this step does.
   */
  private awaitSteps(): void {
    const n = this.afterN;
    this.afterN = 0;
    if (!this.waits.anyRemote) return;
    const order = this.order as StepOrder;
    order.publish(this.index, this.applied); // before waiting: whoever waits on this shard goes on
    for (let i = 0; i < n; i++) order.waitFor(this.after[i * 2], this.after[i * 2 + 1], this.whileWaiting, this.waitSliceMs);
  }

  // ---- reserves waiting here (./waits.ts) ----

  /**
   * beanstalkd's process_queue: while a tube with waiters has a ready job, the most urgent such
   * job goes to the next waiter of its tube. Then that connection's kept requests are applied.
   */
  private serve(now: number): void {
    const engine = this.engine;
    const waits = this.waits;
    while (waits.anyPoked) {
      let n = waits.takePoked();
      const tubes = waits.pokedTubes;
      for (;;) {
        let k = 0;
        for (let i = 0; i < n; i++) if (waits.hasWaiters(tubes[i])) tubes[k++] = tubes[i];
        n = k;
        if (n === 0) break;
        const id = engine.peekBest(tubes, n, now);
        if (id === 0) break;
        // (None served if its waiters were all claimed elsewhere since hasWaiters: the loop looks again.)
        const w = this.giveToNext(engine.lastTube, id, now);
        if (w === undefined) continue;
        this.applyKept(w, now);
      }
    }
  }

  /**
   * Jobs one request made ready, in the order beanstalkd makes them ready (kick: the order it
   * kicks them; a closed connection's: the order it reserved them). beanstalkd runs process_queue
   * after each: so each goes to the next waiter of its tube, if it has one and is not paused, in
   * that order. (Equivalent, since a tube with waiters held no ready job before, and no waiter
   * joins meanwhile: at each step the job just made ready is the only one a waiter could take.)
   */
  private serveInOrder(ids: Float64Array, now: number): void {
    const engine = this.engine;
    const waits = this.waits;
    const served = this.servedWaiters;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      const tube = engine.tubeOf(id);
      // Poked whatever happens next: serve() then passes on what it left (below).
      waits.poke(tube);
      if (!waits.hasWaiters(tube) || engine.isPaused(tube, now)) continue;
      const w = this.giveToNext(tube, id, now);
      if (w !== undefined) served.push(w);
    }
    // What the served connections sent behind their reserves runs once every job is handed out
    // (beanstalkd reads it after the command that made them ready). Tubes left with waiters
    // gained nothing they could take; the others keep their jobs.
    if (served.length === 0) return;
    const list = served.slice(); // a kept request may kick again and come back here
    served.length = 0;
    for (const w of list) this.applyKept(w, now);
  }

  private readonly servedWaiters: Waiter[] = [];

  /**
   * A reserve took ready job `id` at once: its reply. In beanstalkd such a reserve passed through
   * the job's tube's waiting set all the same (ShardWaits.passedThrough).
   */
  private reservedAtOnce(id: number): void {
    const engine = this.engine;
    this.waits.passedThrough(engine.tubeOf(id));
    this.replyJob(id, engine.deadlineOf(id));
  }

  /**
   * Ready job `id` goes to waiter `w` (just taken from its tube's set): it waits no more, and is
   * told (E_RESERVED). A reserve over several shards may have been given a job by another shard,
   * or ended by its own thread, since it was listed here: only the winner of its claim serves it,
   * so this returns false (and `w` leaves the sets) when another thread won it.
   */
  private give(w: Waiter, id: number, now: number): boolean {
    const engine = this.engine;
    const won = this.waits.claim(w);
    this.waits.unpark(w);
    if (!won) return false;
    engine.reserveIfReady(id, w.conn, now);
    this.replyJob(id, engine.deadlineOf(id), w.conn, 0, E_RESERVED);
    return true;
  }

  /**
   * Ready job `id` of `tube` goes to the first of the tube's waiters this shard may serve (give:
   * one over several shards may have been claimed elsewhere). Returns it, or undefined if none was.
   */
  private giveToNext(tube: number, id: number, now: number): Waiter | undefined {
    for (;;) {
      const w = this.waits.nextWaiter(tube);
      if (w === undefined || this.give(w, id, now)) return w;
    }
  }

  /** Whether tube `t` has a ready job a reserve could take now (not paused). */
  private offersJob(t: number, now: number): boolean {
    return this.engine.peekReady(t) !== 0 && !this.engine.isPaused(t, now);
  }

  /** Ends the parked reserves whose timeout or DEADLINE_SOON has come; returns when the next may. */
  private endWaits(now: number): number {
    const ended = this.endedWaits;
    this.waits.ended(now, ended);
    for (const w of ended) {
      if (!w.parked) continue;
      this.endWait(w, w.soonAt <= now ? END_DEADLINE_SOON : END_TIMED_OUT, now);
    }
    if (ended.length !== 0) ended.length = 0;
    if (this.waits.anyPoked) this.serve(now);
    return this.waits.nextEnd;
  }

  private endWait(w: Waiter, end: number, now: number): void {
    this.waits.unpark(w);
    this.out.header(E_WAIT_END, 0, w.conn, end, 0, 0, 0);
    this.applyKept(w, now);
  }

  /**
   * Applies, in order, the requests `w`'s connection sent behind its reserve, each reply inside
   * an E_DEFERRED event; stops if one of them parks again. OP_EXPIRE comes from the main thread,
   * not the connection: its E_DEFERRED says so (a = 1) and is not read.
   */
  private applyKept(w: Waiter, now: number): void {
    const out = this.out;
    while (!w.parked && w.head < w.kept.length) {
      const rec = w.kept[w.head];
      w.kept[w.head++] = EMPTY;
      const at = out.header(E_DEFERRED, 0, w.conn, rec[4] === OP_EXPIRE ? 1 : 0, 0, 0, 0);
      this.apply(rec, 0, now);
      out.closeEnvelope(at);
    }
    this.waits.forgetIfIdle(w);
  }

  /** Applies one request record and writes its one reply to `out`. */
  private apply(buf: Buffer, at: number, now: number): void {
    const engine = this.engine;
    const out = this.out;
    const wal = this.wal;
    const logged = this.logged;
    const nums = this.nums;
    const op = buf[at + 4];
    const conn = u32le(buf, at + 8);
    const a = u32le(buf, at + 12);
    const b = u32le(buf, at + 16);
    const c = u32le(buf, at + 20);
    let id = f64le(buf, at + 24);
    switch (op) {
      case OP_PUT:
      case OP_PUT_BURIED: {
        // id 0: a put its connection sent behind a reserve that might wait; beanstalkd numbers a
        // put when it reads it, which is after that reserve's answer: now.
        if (id === 0) id = this.ids.next();
        const len = u32le(buf, at);
        const ttr = u32le(buf, at + HEADER_BYTES);
        const bodyStart = at + HEADER_BYTES + 4;
        let state = engine.put(a, id, b, c, ttr, buf, now, bodyStart, at + len);
        if (op === OP_PUT_BURIED) state = engine.buryNew(id);
        else this.waits.poke(a);
        this.logFull(id, buf, bodyStart, at + len);
        logged.mark(out.len);
        out.header(R_OK, 0, 0, state, a, 0, id);
        return;
      }
      case OP_RESERVE: {
        const tubes = this.readTubes(buf, at, a);
        const got = engine.reserveBest(tubes, a, conn, now);
        if (got === 0) {
          out.header(R_NONE, 0, 0, 0, 0, 0, 0);
          return;
        }
        this.reservedAtOnce(got);
        return;
      }
      case OP_RESERVE_WAIT: {
        // beanstalkd's reserve: a job if one is ready; else DEADLINE_SOON if a job the connection
        // holds (here, or on another shard: id) is within the margin of its TTR end; else
        // TIMED_OUT if it cannot wait; else it parks (./waits.ts).
        const tubes = this.readTubes(buf, at, a);
        const got = engine.reserveBest(tubes, a, conn, now);
        if (got !== 0) {
          this.reservedAtOnce(got);
          return;
        }
        const soonAt = Math.min(id, engine.heldDeadline(conn)) - DEADLINE_SOON_MS;
        if (now >= soonAt) {
          out.header(R_NONE, 0, 0, END_DEADLINE_SOON, 0, 0, 0);
          return;
        }
        const timeoutAt = c === RESERVE_FOREVER ? Infinity : now + b * 1000;
        if (timeoutAt <= now || !this.waits.canWait(conn)) {
          out.header(R_NONE, 0, 0, END_TIMED_OUT, 0, 0, 0);
          return;
        }
        this.waits.park(conn, tubes, a, timeoutAt, soonAt, this.stamp);
        out.header(R_PARKED, 0, 0, 0, 0, 0, 0);
        return;
      }
      case OP_TAKE_ID:
        // A put that failed (EXPECTED_CRLF, DRAINING) behind a reserve that might wait: it uses up
        // an id when beanstalkd would have read it.
        out.header(R_OK, 0, 0, 0, 0, 0, this.ids.next());
        return;
      case OP_FAN_WAIT: {
        // A reserve over several shards waits on this shard's tubes, claim slot c, ticket `id`;
        // unless one of them offers a job now (c = that tube): then it does not park here, and
        // this shard ends its wait by winning its claim (b = 1), so no other shard can give it a
        // job made ready after this one while its thread starts over (it finds this job then);
        // b = 2: another thread had claimed it first (its answer is on the way).
        const tubes = this.readTubes(buf, at, a);
        for (let i = 0; i < a; i++) {
          if (this.offersJob(tubes[i], now)) {
            out.header(R_OK, 0, 0, 0, this.waits.claimTicket(c, id) ? 1 : 2, tubes[i], 0);
            return;
          }
        }
        // Its stamp: the one its first question got here, if its thread sent it; else now.
        this.waits.parkRemote(conn, c, id, tubes, a, fanWaitStamp(buf, at, a) ?? this.stamp);
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      }
      case OP_CANCEL_WAIT: {
        this.waits.refuseWaits(conn);
        const w = this.waits.of(conn);
        if (w !== undefined && w.parked) this.endWait(w, END_TIMED_OUT, now);
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      }
      case OP_RESERVE_BOUNDED: {
        // The best of several shards' candidates: reserve this shard's best now if it still beats
        // every other shard's (the bound), whichever job that is.
        const tubes = this.readTubes(buf, at, a);
        const got = engine.reserveBounded(tubes, a, conn, b, id, now);
        if (got === 0) {
          out.header(R_NONE, 0, 0, 0, 0, 0, 0);
          return;
        }
        this.reservedAtOnce(got);
        return;
      }
      case OP_EXPIRE: {
        const tube = engine.expire(id, conn, b);
        if (tube >= 0) this.waits.poke(tube);
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      }
      case OP_PEEK_BEST: {
        const tubes = this.readTubes(buf, at, a);
        // Payload: this shard's stamp of the question (a reserve over several shards parks with it).
        const got = engine.peekBest(tubes, a, now);
        if (got === 0) out.header(R_NONE, 8, 0, 0, 0, 0, 0);
        else out.header(R_BEST, 8, 0, engine.tubeOf(got), engine.lastPri, 0, got);
        out.f64(this.stamp);
        return;
      }
      case OP_RESERVE_JOB: {
        const ok = engine.reserveJob(id, conn, now);
        if (!ok) {
          out.header(R_NONE, 0, 0, 0, 0, 0, 0);
          return;
        }
        // conn@8: the state it was taken from; c: a delayed job's delay left, in seconds rounded
        // up (the API's move keeps them, src/ops/admin.ts).
        this.replyJob(id, engine.deadlineOf(id), engine.lastTakenState, Math.ceil(engine.lastTakenDelayMs / 1000));
        return;
      }
      // Replies about one job echo its id, so the main thread can update what the connection holds.
      case OP_DELETE: {
        const tube = this.deleteLogged(id, conn);
        if (tube < 0) {
          out.header(R_NONE, 0, 0, 0, 0, 0, id);
          return;
        }
        if (wal !== null) logged.mark(out.len);
        out.header(R_OK, 0, 0, 0, tube, 0, id);
        return;
      }
      case OP_LIST_JOBS:
        this.listJobs(a, b, Math.min(c, LIST_JOBS_MAX), f64le(buf, at + HEADER_BYTES), id, now);
        return;
      case OP_CLEAR_TUBE: {
        // Up to c jobs deleted exactly as `delete` deletes them (each logged), their ids in the
        // reply so the main thread forgets them; the caller asks again while some remain.
        const max = Math.min(c, CLEAR_JOBS_MAX);
        let n = 0;
        for (let got = engine.clearCandidate(a, b); got !== 0 && n < max; got = engine.clearCandidate(a, b)) {
          this.deleteLogged(got, 0);
          if (n === this.clearIds.length) this.clearIds = growIds(this.clearIds);
          this.clearIds[n++] = got;
        }
        if (n > 0 && wal !== null) logged.mark(out.len);
        out.header(R_IDS, n * 8, 0, n, engine.clearCandidate(a, b) !== 0 ? 1 : 0, a, 0);
        for (let i = 0; i < n; i++) out.f64(this.clearIds[i]);
        return;
      }
      case OP_RELEASE: {
        const tube = engine.tubeOf(id);
        const state = engine.release(id, conn, b, c, now);
        if (state < 0) {
          out.header(R_NONE, 0, 0, 0, 0, 0, id);
          return;
        }
        this.logUpdate(id);
        logged.mark(out.len);
        out.header(R_OK, 0, 0, state, tube, 0, id);
        this.waits.poke(tube);
        return;
      }
      case OP_BURY:
        if (!engine.bury(id, conn, b)) {
          out.header(R_NONE, 0, 0, 0, 0, 0, id);
          return;
        }
        this.logUpdate(id);
        logged.mark(out.len);
        out.header(R_OK, 0, 0, 0, 0, 0, id);
        return;
      case OP_TOUCH:
        if (engine.touch(id, conn, now)) {
          out.header(R_OK, 8, 0, 0, 0, 0, id);
          out.f64(engine.deadlineOf(id));
        } else {
          out.header(R_NONE, 0, 0, 0, 0, 0, id);
        }
        return;
      case OP_KICK: {
        const n = engine.kick(a, b, now);
        const kicked = engine.lastKicked;
        for (let i = 0; i < kicked.length; i++) this.logUpdate(kicked[i]);
        if (n > 0) logged.mark(out.len);
        out.header(R_OK, 0, 0, n, a, 0, 0);
        if (n > 0) this.serveInOrder(engine.lastKicked, now);
        return;
      }
      case OP_KICK_JOB:
        if (!engine.kickJob(id, now)) {
          out.header(R_NONE, 0, 0, 0, 0, 0, id);
          return;
        }
        this.logUpdate(id);
        logged.mark(out.len);
        out.header(R_OK, 0, 0, 0, engine.tubeOf(id), 0, id);
        this.waits.poke(engine.tubeOf(id));
        return;
      case OP_PEEK:
      case OP_PEEK_READY:
      case OP_PEEK_DELAYED:
      case OP_PEEK_BURIED: {
        const got =
          op === OP_PEEK ? (engine.state(id) !== 0 ? id : 0)
          : op === OP_PEEK_READY ? engine.peekReady(a)
          : op === OP_PEEK_DELAYED ? engine.peekDelayed(a)
          : engine.peekBuried(a);
        if (got === 0) out.header(R_NONE, 0, 0, 0, 0, 0, 0);
        else this.replyJob(got, 0);
        return;
      }
      case OP_STATS_JOB:
        if (!engine.jobStats(id, now, nums)) {
          out.header(R_NONE, 0, 0, 0, 0, 0, 0);
          return;
        }
        this.replyNums(14);
        return;
      case OP_STATS_TUBE:
        engine.tubeStats(a, now, nums);
        nums[TUBE_WAITING] = this.waits.waitingOn(a);
        this.replyNums(TUBE_FIELDS);
        return;
      case OP_TOTALS:
        engine.totals(nums);
        nums[6] = wal === null || wal.bytes === 0 ? 0 : wal.oldestIndex; // no file yet: no index
        nums[7] = wal === null ? 0 : wal.currentIndex;
        nums[8] = wal === null ? 0 : wal.recordsWritten;
        nums[9] = wal === null ? 0 : wal.recordsMigrated;
        this.replyNums(10);
        return;
      case OP_PAUSE_TUBE:
        // The pause counts from the instant the main thread sent it (id), where reserves sent as
        // certain are judged by the same clock reading (ReadyCounts).
        engine.pauseTube(a, b, id);
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      case OP_DROP_TUBE:
        engine.dropTube(a);
        this.waits.dropTube(a);
        this.tubeNames[a] = ''; // a dropped tube holds no job, so no log record names it again
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      case OP_TUBE_NAME:
        this.tubeNames[a] = buf.toString('latin1', at + HEADER_BYTES, at + u32le(buf, at));
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      case OP_RESTORE: {
        const len = u32le(buf, at);
        const p = at + HEADER_BYTES;
        const bodyStart = p + 48; // ttr, state, deadline, created, 5 counters, pad
        engine.restore(a, id, b, c, u32le(buf, p), u32le(buf, p + 4), f64le(buf, p + 8),
          f64le(buf, p + 16), u32le(buf, p + 24), u32le(buf, p + 28), u32le(buf, p + 32),
          u32le(buf, p + 36), u32le(buf, p + 40), buf.subarray(bodyStart, at + len));
        this.logFull(id, buf, bodyStart, at + len);
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      }
      case OP_WAL_SYNC:
        if (wal !== null) {
          try {
            wal.commit(now);
            wal.sync(now);
          } catch (err) {
            if (!(err instanceof WalWriteError)) throw err;
            this.log.error({ err: err.message, code: err.code }, 'write-ahead log cannot be made durable');
            out.header(R_NONE, 0, 0, 0, 0, 0, 0);
            return;
          }
        }
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      case OP_RELEASE_CONN: {
        // The connection has gone: a reserve parked here ends unanswered, and what it sent after
        // it is dropped unapplied, as beanstalkd never reads past a waiting reserve (each still
        // gets its reply: R_DROPPED, so the main thread can undo what it counted).
        const w = this.waits.closeConn(conn);
        if (w !== undefined) {
          for (let i = w.head; i < w.kept.length; i++) {
            const rec = w.kept[i];
            if (rec[4] === OP_EXPIRE) continue;
            out.header(E_DEFERRED, HEADER_BYTES, conn, 0, 0, 0, 0);
            out.header(R_DROPPED, 0, conn, u32le(rec, 12), rec[4], 0, f64le(rec, 24));
          }
        }
        const n = engine.releaseConn(conn, now, b === 1 ? Infinity : a);
        out.header(R_OK, 0, 0, n, 0, 0, 0);
        this.serveInOrder(engine.lastReleased, now);
        return;
      }
      default:
        if (op >= OP_WQ_ADD && op <= OP_WQ_RESTORE) {
          this.workq.handle(op, buf, at, now);
          return;
        }
        throw new Error(`shard ${this.index}: unknown op ${op}`);
    }
  }
}
