// A shard's work, whichever thread runs it: the engine and workq store of the tubes and queues
// hashed to the shard, its write-ahead log, and the request records it applies. Each request
// gets one reply record in `out`; afterBatch() adds the clock's events, writes the batch's log
// records and says when the clock next has work. Whoever owns the core moves `out` to the
// records' readers: workers/shard.ts through a ring to another thread, src/route/shards.ts
// directly when the shard lives on the thread that serves connections. The core knows neither.

import {
  E_READY, E_TIMED_OUT, HEADER_BYTES, OP_BURY, OP_DELETE, OP_DROP_TUBE, OP_KICK, OP_KICK_JOB,
  OP_PAUSE_TUBE, OP_PEEK, OP_PEEK_BEST, OP_PEEK_BURIED, OP_PEEK_DELAYED, OP_PEEK_READY, OP_PUT, OP_PUT_BURIED,
  OP_EXPIRE, OP_RELEASE, OP_RELEASE_CONN, OP_RESERVE, OP_RESERVE_BOUNDED, OP_RESERVE_JOB, OP_RESTORE,
  OP_STATS_JOB, OP_STATS_TUBE, OP_TOTALS, OP_TOUCH, OP_TUBE_NAME, OP_WAL_SYNC, OP_WQ_ADD, OP_WQ_RESTORE, R_BEST, R_JOB,
  R_NONE, R_NUMS, R_OK, R_TUBES, RecordWriter, REPLY_FLAG_UNLOGGED, OP_LIST_JOBS, OP_CLEAR_TUBE, LIST_JOBS_MAX,
  LIST_PREVIEW_BYTES, LIST_FIELDS, CLEAR_JOBS_MAX, R_JOB_LIST, R_IDS,
} from '../src/shared/records.ts';
import type { WalConfig } from './wal/wal.ts';
import { makeLogger, type Logger } from '../src/log.ts';
import { Engine } from './engine/engine.ts';
import { WorkqOps } from './workq-ops.ts';
import { fullRecordBytes, nodeIo, Wal, WalWriteError, type WalIo } from './wal/index.ts';
import { LoggedReplies } from './wal/logged.ts';
import { observe } from '../src/shared/histogram.ts';

/** What a shard is made with. */
export interface ShardConfig {
  index: number;
  wal?: WalConfig;
  logLevel?: string;
  /** Test hook: Int32 word 0 = how many coming log writes fail with ENOSPC (as a full disk). */
  walFaults?: SharedArrayBuffer;
  /** Where the log's fsync durations go (src/shared/histogram.ts; /metrics reads it). */
  fsyncHistogram?: Float64Array;
}

/** Live jobs moved out of the oldest log segment per batch (compaction runs a little at a time). */
const MIGRATIONS_PER_BATCH = 256;
/** How long to wait before retrying a log write that failed (disk full, EIO). */
export const WAL_RETRY_MS = 100;

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
  /** This batch's replies and events, in order. */
  readonly out = new RecordWriter();
  private readonly wal: Wal | null;
  private readonly log: Logger;
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
  /** OP_CLEAR_TUBE's deleted ids (grows to CLEAR_JOBS_MAX at most). */
  private clearIds: Float64Array = new Float64Array(0);
  private tubeScratch = new Int32Array(64);
  // Clock events of one batch, deduplicated per tube.
  private readyMark = new Uint8Array(64);
  private readonly readyList: number[] = [];
  private readonly sink = {
    ready: (tube: number): void => {
      if (tube >= this.readyMark.length) {
        const next = new Uint8Array(Math.max(tube + 1, this.readyMark.length * 2));
        next.set(this.readyMark);
        this.readyMark = next;
      }
      if (this.readyMark[tube] === 0) {
        this.readyMark[tube] = 1;
        this.readyList.push(tube);
      }
    },
    timedOut: (id: number, conn: number, reserves: number): void => {
      this.out.header(E_TIMED_OUT, 0, conn, this.engine.tubeOf(id), reserves, 0, id);
    },
  };

  constructor(config: ShardConfig) {
    this.index = config.index;
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

  private readTubes(buf: Buffer, at: number, count: number): Int32Array {
    if (count > this.tubeScratch.length) this.tubeScratch = new Int32Array(count * 2);
    const tubes = this.tubeScratch;
    for (let i = 0; i < count; i++) tubes[i] = buf.readUInt32LE(at + HEADER_BYTES + i * 4);
    return tubes;
  }

  /** R_JOB: a = tube, b = more, id, payload f64 deadline + body. */
  private replyJob(id: number, more: number, deadlineMs: number, fromState = 0, delayLeftSec = 0): void {
    const body = this.engine.body(id);
    this.out.header(R_JOB, 8 + body.length, fromState, this.engine.tubeOf(id), more, delayLeftSec, id);
    this.out.f64(deadlineMs);
    this.out.bytes(body, 0, body.length);
  }

  /** Deletes job `id` as `delete` does (a reserved job only for its holder `conn`) and logs it; its tube, or -1. */
  private deleteLogged(id: number, conn: number): number {
    const engine = this.engine;
    const fullSeq = engine.fileOf(id);
    const fullBytes = fullRecordBytes((this.tubeNames[engine.tubeOf(id)] ?? '').length, engine.body(id).length);
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
    const seq = wal.appendFull(id, this.tubeNames[this.engine.tubeOf(id)] ?? '', img[0], img[1], img[2], img[3], img[4],
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
    const name = (id: number): string => this.tubeNames[engine.tubeOf(id)] ?? '';
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

  /**
   * Ends a batch of requests (or a wake-up of the clock with none): runs the clock (delays, TTRs,
   * pauses, workq schedules), writes its events, then the batch's log records, so `out` may go.
   * Returns the wall-clock ms at which the clock next has work (Infinity: none).
   */
  afterBatch(now: number): number {
    const next = Math.min(this.engine.tick(now, this.sink), this.workq.tick(now));
    for (const tube of this.readyList) {
      this.readyMark[tube] = 0;
      this.out.header(E_READY, 0, 0, tube, 0, 0, 0);
    }
    this.readyList.length = 0;
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

  /** Applies one request record and writes its one reply to `out`. */
  handle(buf: Buffer, at: number, now: number): void {
    const engine = this.engine;
    const out = this.out;
    const wal = this.wal;
    const logged = this.logged;
    const nums = this.nums;
    const op = buf[at + 4];
    const conn = buf.readUInt32LE(at + 8);
    const a = buf.readUInt32LE(at + 12);
    const b = buf.readUInt32LE(at + 16);
    const c = buf.readUInt32LE(at + 20);
    const id = buf.readDoubleLE(at + 24);
    switch (op) {
      case OP_PUT:
      case OP_PUT_BURIED: {
        const len = buf.readUInt32LE(at);
        const ttr = buf.readUInt32LE(at + HEADER_BYTES);
        const bodyStart = at + HEADER_BYTES + 4;
        let state = engine.put(a, id, b, c, ttr, buf.subarray(bodyStart, at + len), now);
        if (op === OP_PUT_BURIED) state = engine.buryNew(id);
        this.logFull(id, buf, bodyStart, at + len);
        logged.mark(out.len);
        out.header(R_OK, 0, 0, state, a, 0, id);
        return;
      }
      case OP_RESERVE: {
        // id: the instant a reserve sent as certain left the main thread (0 otherwise): pauses are
        // judged as the main thread judged them (a clock stepping back cannot make it miss).
        // b, c: its timeout and whether it has none, echoed if it finds nothing.
        const tubes = this.readTubes(buf, at, a);
        const asOf = id > now ? id : now;
        const got = engine.reserveBest(tubes, a, conn, asOf);
        if (got === 0) {
          out.header(R_NONE, 0, 0, b, c, 0, 0);
          return;
        }
        this.replyJob(got, engine.peekBest(tubes, a, asOf) !== 0 ? 1 : 0, engine.deadlineOf(got));
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
        this.replyJob(got, engine.peekBest(tubes, a, now) !== 0 ? 1 : 0, engine.deadlineOf(got));
        return;
      }
      case OP_EXPIRE: {
        const tube = engine.expire(id, conn, b);
        if (tube >= 0 && !engine.isPaused(tube, now)) this.sink.ready(tube);
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      }
      case OP_PEEK_BEST: {
        const tubes = this.readTubes(buf, at, a);
        const got = engine.peekBest(tubes, a, now);
        if (got === 0) out.header(R_NONE, 0, 0, 0, 0, 0, 0);
        else out.header(R_BEST, 0, 0, engine.tubeOf(got), engine.lastPri, 0, got);
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
        this.replyJob(id, engine.peekReady(engine.tubeOf(id)) !== 0 ? 1 : 0, engine.deadlineOf(id),
          engine.lastTakenState, Math.ceil(engine.lastTakenDelayMs / 1000));
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
        this.listJobs(a, b, Math.min(c, LIST_JOBS_MAX), buf.readDoubleLE(at + HEADER_BYTES), id, now);
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
        else this.replyJob(got, 0, 0);
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
        this.replyNums(10);
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
        this.tubeNames[a] = ''; // a dropped tube holds no job, so no log record names it again
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      case OP_TUBE_NAME:
        this.tubeNames[a] = buf.toString('latin1', at + HEADER_BYTES, at + buf.readUInt32LE(at));
        out.header(R_OK, 0, 0, 0, 0, 0, 0);
        return;
      case OP_RESTORE: {
        const len = buf.readUInt32LE(at);
        const p = at + HEADER_BYTES;
        const bodyStart = p + 48; // ttr, state, deadline, created, 5 counters, pad
        engine.restore(a, id, b, c, buf.readUInt32LE(p), buf.readUInt32LE(p + 4), buf.readDoubleLE(p + 8),
          buf.readDoubleLE(p + 16), buf.readUInt32LE(p + 24), buf.readUInt32LE(p + 28), buf.readUInt32LE(p + 32),
          buf.readUInt32LE(p + 36), buf.readUInt32LE(p + 40), buf.subarray(bodyStart, at + len));
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
        const n = engine.releaseConn(conn, now);
        const tubes = engine.lastTubes;
        out.header(R_TUBES, tubes.length * 4, 0, n, tubes.length, 0, 0);
        for (let i = 0; i < tubes.length; i++) out.u32(tubes[i]);
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
