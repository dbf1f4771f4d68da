// A shard thread: owns the queues of the tubes hashed to it.
//
// It has no event loop work to do: it drains its request ring, applies each record to the
// engine, runs the clock (delays, TTRs, pauses), publishes every reply of the batch with one ring
// write and one doorbell, then sleeps in Atomics.wait until the next request or the next
// deadline — whichever comes first. No per-job timers: the next wake comes from the heap tops.

import { parentPort, workerData } from 'node:worker_threads';
import { Doorbell } from '../src/shared/doorbell.ts';
import {
  E_READY, E_TIMED_OUT, HEADER_BYTES, OP_BURY, OP_DELETE, OP_DROP_TUBE, OP_KICK, OP_KICK_JOB,
  OP_PAUSE_TUBE, OP_PEEK, OP_PEEK_BEST, OP_PEEK_BURIED, OP_PEEK_DELAYED, OP_PEEK_READY, OP_PUT,
  OP_EXPIRE, OP_RELEASE, OP_RELEASE_CONN, OP_RESERVE, OP_RESERVE_BOUNDED, OP_RESERVE_JOB, OP_RESTORE,
  OP_STATS_JOB, OP_STATS_TUBE, OP_TOTALS, OP_TOUCH, OP_TUBE_NAME, OP_WAL_SYNC, OP_WQ_ADD, OP_WQ_RESTORE, R_BEST, R_JOB,
  R_NONE, R_NUMS, R_OK, R_TUBES, RecordReader, RecordWriter, REPLY_FLAG_UNLOGGED,
} from '../src/shared/records.ts';
import { Ring } from '../src/shared/ring.ts';
import type { WalConfig } from './wal/wal.ts';
import { makeLogger } from '../src/log.ts';
import { Engine } from './engine/engine.ts';
import { WorkqOps } from './workq-ops.ts';
import { fullRecordBytes, nodeIo, Wal, WalWriteError, type WalIo } from './wal/index.ts';
import { LoggedReplies } from './wal/logged.ts';

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

interface ShardData {
  index: number;
  toShard: SharedArrayBuffer;
  fromShard: SharedArrayBuffer;
  bell: SharedArrayBuffer;
  mainBell: SharedArrayBuffer;
  stop: SharedArrayBuffer;
  wal?: WalConfig;
  logLevel?: string;
  /** Test hook: Int32 word 0 = how many coming log writes fail with ENOSPC (as a full disk). */
  walFaults?: SharedArrayBuffer;
}

/** Live jobs moved out of the oldest log segment per batch (compaction runs a little at a time). */
const MIGRATIONS_PER_BATCH = 256;
/** How long to wait before retrying a log write that failed (disk full, EIO). */
const WAL_RETRY_MS = 100;

/** Longest sleep without a deadline: a safety net only; every request rings the doorbell. */
const IDLE_WAIT_MS = 1000;

const data = workerData as ShardData;
const inRing = Ring.attach(data.toShard);
const outRing = Ring.attach(data.fromShard);
const bell = Doorbell.attach(data.bell);
const mainBell = Doorbell.attach(data.mainBell);
const stop = new Int32Array(data.stop);

const log = makeLogger(data.logLevel ?? 'info').child({ shard: data.index });
const engine = new Engine();
const wal = data.wal
  ? new Wal({
      dir: data.wal.dir,
      shard: data.index,
      generation: data.wal.generation,
      sync: data.wal.sync,
      segmentBytesMax: data.wal.segmentBytesMax,
      io: data.walFaults ? faultyIo(new Int32Array(data.walFaults)) : nodeIo,
    })
  : null;
/** Tube names by id (log records name their tube). */
const tubeNames: string[] = [];
const img = new Float64Array(12);
/** This batch's replies whose change went to the log. */
const logged = new LoggedReplies(wal !== null);
let walFailing = false;
/** Largest job id this shard has logged or inherited; each new segment starts by recording it. */
let maxIdLogged = data.wal?.idFloor ?? 0;
let markedSegment = -1;
let compactSeq = -1;
let compactCursor = 0;
let wqCompactCursor = 0;
const reader = new RecordReader();
const out = new RecordWriter();
/** The workq protocol's jobs of this shard. */
const workq = new WorkqOps(out, wal, logged);
const nums = new Float64Array(16);
let tubeScratch = new Int32Array(64);

// Clock events of one batch, deduplicated per tube.
let readyMark = new Uint8Array(64);
const readyList: number[] = [];
const sink = {
  ready(tube: number): void {
    if (tube >= readyMark.length) {
      const next = new Uint8Array(Math.max(tube + 1, readyMark.length * 2));
      next.set(readyMark);
      readyMark = next;
    }
    if (readyMark[tube] === 0) {
      readyMark[tube] = 1;
      readyList.push(tube);
    }
  },
  timedOut(id: number, conn: number, reserves: number): void {
    out.header(E_TIMED_OUT, 0, conn, engine.tubeOf(id), reserves, 0, id);
  },
};

function readTubes(buf: Buffer, at: number, count: number): Int32Array {
  if (count > tubeScratch.length) tubeScratch = new Int32Array(count * 2);
  for (let i = 0; i < count; i++) tubeScratch[i] = buf.readUInt32LE(at + HEADER_BYTES + i * 4);
  return tubeScratch;
}

/** R_JOB: a = tube, b = more, id, payload f64 deadline + body. */
function replyJob(id: number, more: number, deadlineMs: number): void {
  const body = engine.body(id);
  out.header(R_JOB, 8 + body.length, 0, engine.tubeOf(id), more, 0, id);
  out.f64(deadlineMs);
  out.bytes(body, 0, body.length);
}

// ---- the write-ahead log: one record per change that must survive a restart ----

function logFull(id: number, body: Uint8Array, start: number, end: number): void {
  if (wal === null) return;
  if (id > maxIdLogged) maxIdLogged = id;
  engine.image(id, img);
  const seq = wal.appendFull(id, tubeNames[engine.tubeOf(id)] ?? '', img[0], img[1], img[2], img[3], img[4],
    img[5], img[6], img[7], img[8], img[9], img[10], body, start, end);
  engine.setFile(id, seq);
}

function logUpdate(id: number): void {
  if (wal === null) return;
  engine.image(id, img);
  wal.appendUpdate(id, engine.fileOf(id), img[3], img[0], img[1], img[4], img[6], img[7], img[8], img[9], img[10]);
}

/** Moves a few live jobs out of the oldest segment so it can be deleted (bounded disk use). */
function compact(): void {
  if (wal === null) return;
  const c = wal.compactionCandidate();
  if (c < 0) return;
  if (c !== compactSeq) {
    compactSeq = c;
    compactCursor = 0;
    wqCompactCursor = 0;
  }
  const name = (id: number): string => tubeNames[engine.tubeOf(id)] ?? '';
  compactCursor = engine.jobsInFile(c, compactCursor, MIGRATIONS_PER_BATCH, (id) => {
    engine.image(id, img);
    const body = engine.body(id);
    const seq = wal.migrate(c, id, name(id), img[0], img[1], img[2], img[3], img[4], img[5], img[6], img[7],
      img[8], img[9], img[10], body, 0, body.length);
    engine.setFile(id, seq);
  });
  if (compactCursor < 0) compactCursor = 0;
  wqCompactCursor = workq.migrate(c, wqCompactCursor, MIGRATIONS_PER_BATCH);
  if (wqCompactCursor < 0) wqCompactCursor = 0;
}

/** Writes the batch's log records (and syncs as the mode says) before its replies go out. */
function commitLog(now: number): void {
  if (wal === null) return;
  compact();
  try {
    if (wal.currentIndex !== markedSegment) {
      // A new segment (or the first of this generation): record the largest id first, so it
      // outlives the removal of the segments that named it.
      markedSegment = wal.currentIndex;
      if (maxIdLogged > 0) wal.appendIdMark(maxIdLogged);
    }
    wal.commit(now);
    if (wal.currentIndex !== markedSegment) {
      markedSegment = wal.currentIndex;
      wal.appendIdMark(maxIdLogged);
      wal.commit(now);
    }
    if (walFailing) log.warn('write-ahead log writable again');
    walFailing = false;
  } catch (err) {
    if (!(err instanceof WalWriteError)) throw err;
    if (!walFailing) log.error({ err: err.message, code: err.code }, 'write-ahead log write failed; changes are refused until it recovers');
    walFailing = true;
    // Never a success for a change that is not on disk: these replies become errors. The
    // records stay queued and are written by a later commit.
    logged.flagAll(out.buf, REPLY_FLAG_UNLOGGED);
  }
  logged.clear();
}

function handle(buf: Buffer, at: number, now: number): void {
  const op = buf[at + 4];
  const conn = buf.readUInt32LE(at + 8);
  const a = buf.readUInt32LE(at + 12);
  const b = buf.readUInt32LE(at + 16);
  const c = buf.readUInt32LE(at + 20);
  const id = buf.readDoubleLE(at + 24);
  switch (op) {
    case OP_PUT: {
      const len = buf.readUInt32LE(at);
      const ttr = buf.readUInt32LE(at + HEADER_BYTES);
      const bodyStart = at + HEADER_BYTES + 4;
      const state = engine.put(a, id, b, c, ttr, buf.subarray(bodyStart, at + len), now);
      logFull(id, buf, bodyStart, at + len);
      logged.mark(out.len);
      out.header(R_OK, 0, 0, state, a, 0, id);
      return;
    }
    case OP_RESERVE: {
      // id: the instant a reserve sent as certain left the main thread (0 otherwise): pauses are
      // judged as the main thread judged them (a clock stepping back cannot make it miss).
      // b, c: its timeout and whether it has none, echoed if it finds nothing.
      const tubes = readTubes(buf, at, a);
      const asOf = id > now ? id : now;
      const got = engine.reserveBest(tubes, a, conn, asOf);
      if (got === 0) {
        out.header(R_NONE, 0, 0, b, c, 0, 0);
        return;
      }
      replyJob(got, engine.peekBest(tubes, a, asOf) !== 0 ? 1 : 0, engine.deadlineOf(got));
      return;
    }
    case OP_RESERVE_BOUNDED: {
      // The best of several shards' candidates: reserve this shard's best now if it still beats
      // every other shard's (the bound), whichever job that is.
      const tubes = readTubes(buf, at, a);
      const got = engine.reserveBounded(tubes, a, conn, b, id, now);
      if (got === 0) {
        out.header(R_NONE, 0, 0, 0, 0, 0, 0);
        return;
      }
      replyJob(got, engine.peekBest(tubes, a, now) !== 0 ? 1 : 0, engine.deadlineOf(got));
      return;
    }
    case OP_EXPIRE: {
      const tube = engine.expire(id, conn, b);
      if (tube >= 0 && !engine.isPaused(tube, now)) sink.ready(tube);
      out.header(R_OK, 0, 0, 0, 0, 0, 0);
      return;
    }
    case OP_PEEK_BEST: {
      const tubes = readTubes(buf, at, a);
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
      replyJob(id, engine.peekReady(engine.tubeOf(id)) !== 0 ? 1 : 0, engine.deadlineOf(id));
      return;
    }
    // Replies about one job echo its id, so the main thread can update what the connection holds.
    case OP_DELETE: {
      const fullSeq = engine.fileOf(id);
      const fullBytes = fullRecordBytes((tubeNames[engine.tubeOf(id)] ?? '').length, engine.body(id).length);
      const tube = engine.deleteJob(id, conn);
      if (tube < 0) {
        out.header(R_NONE, 0, 0, 0, 0, 0, id);
        return;
      }
      if (wal !== null) {
        wal.appendDelete(id, fullSeq, fullBytes);
        logged.mark(out.len);
      }
      out.header(R_OK, 0, 0, 0, tube, 0, id);
      return;
    }
    case OP_RELEASE: {
      const tube = engine.tubeOf(id);
      const state = engine.release(id, conn, b, c, now);
      if (state < 0) {
        out.header(R_NONE, 0, 0, 0, 0, 0, id);
        return;
      }
      logUpdate(id);
      logged.mark(out.len);
      out.header(R_OK, 0, 0, state, tube, 0, id);
      return;
    }
    case OP_BURY:
      if (!engine.bury(id, conn, b)) {
        out.header(R_NONE, 0, 0, 0, 0, 0, id);
        return;
      }
      logUpdate(id);
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
      for (let i = 0; i < kicked.length; i++) logUpdate(kicked[i]);
      if (n > 0) logged.mark(out.len);
      out.header(R_OK, 0, 0, n, a, 0, 0);
      return;
    }
    case OP_KICK_JOB:
      if (!engine.kickJob(id, now)) {
        out.header(R_NONE, 0, 0, 0, 0, 0, id);
        return;
      }
      logUpdate(id);
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
      else replyJob(got, 0, 0);
      return;
    }
    case OP_STATS_JOB:
      if (!engine.jobStats(id, now, nums)) {
        out.header(R_NONE, 0, 0, 0, 0, 0, 0);
        return;
      }
      replyNums(14);
      return;
    case OP_STATS_TUBE:
      engine.tubeStats(a, now, nums);
      replyNums(10);
      return;
    case OP_TOTALS:
      engine.totals(nums);
      nums[6] = wal === null || wal.bytes === 0 ? 0 : wal.oldestIndex; // no file yet: no index
      nums[7] = wal === null ? 0 : wal.currentIndex;
      nums[8] = wal === null ? 0 : wal.recordsWritten;
      nums[9] = wal === null ? 0 : wal.recordsMigrated;
      replyNums(10);
      return;
    case OP_PAUSE_TUBE:
      // The pause counts from the instant the main thread sent it (id), where reserves sent as
      // certain are judged by the same clock reading (ReadyCounts).
      engine.pauseTube(a, b, id);
      out.header(R_OK, 0, 0, 0, 0, 0, 0);
      return;
    case OP_DROP_TUBE:
      engine.dropTube(a);
      out.header(R_OK, 0, 0, 0, 0, 0, 0);
      return;
    case OP_TUBE_NAME:
      tubeNames[a] = buf.toString('latin1', at + HEADER_BYTES, at + buf.readUInt32LE(at));
      out.header(R_OK, 0, 0, 0, 0, 0, 0);
      return;
    case OP_RESTORE: {
      const len = buf.readUInt32LE(at);
      const p = at + HEADER_BYTES;
      const bodyStart = p + 48; // ttr, state, deadline, created, 5 counters, pad
      engine.restore(a, id, b, c, buf.readUInt32LE(p), buf.readUInt32LE(p + 4), buf.readDoubleLE(p + 8),
        buf.readDoubleLE(p + 16), buf.readUInt32LE(p + 24), buf.readUInt32LE(p + 28), buf.readUInt32LE(p + 32),
        buf.readUInt32LE(p + 36), buf.readUInt32LE(p + 40), buf.subarray(bodyStart, at + len));
      logFull(id, buf, bodyStart, at + len);
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
          log.error({ err: err.message, code: err.code }, 'write-ahead log cannot be made durable');
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
        workq.handle(op, buf, at, now);
        return;
      }
      throw new Error(`shard ${data.index}: unknown op ${op}`);
  }
}

function replyNums(count: number): void {
  out.header(R_NUMS, count * 8, 0, count, 0, 0, 0);
  for (let i = 0; i < count; i++) out.f64(nums[i]);
}

/** Copies the batch of replies into the ring; waits for room if the main thread lags behind. */
function publish(): void {
  let off = 0;
  while (off < out.len) {
    const n = outRing.write(out.buf, off, out.len - off);
    off += n;
    if (off < out.len) {
      mainBell.ring();
      // The main thread drains asynchronously; a short sleep is cheaper than a second doorbell.
      Atomics.wait(stop, 0, 0, 1);
    }
  }
  out.reset();
  mainBell.ring();
}

/** Owed syncs, retries after a failed write, and deleting segments nothing live needs. */
function tidyLog(now: number): void {
  if (wal === null) return;
  try {
    if (walFailing) commitLog(now);
    else wal.syncIfDue(now);
    wal.removeDeadSegments();
  } catch (err) {
    if (!(err instanceof WalWriteError)) throw err;
    if (!walFailing) log.error({ err: err.message, code: err.code }, 'write-ahead log sync failed');
    walFailing = true;
  }
}

function loop(): void {
  for (;;) {
    if (Atomics.load(stop, 0) !== 0) return;
    let got = false;
    for (;;) {
      reader.prepare(64 * 1024);
      const n = inRing.read(reader.buf, reader.end, reader.buf.length - reader.end);
      if (n === 0) break;
      reader.end += n;
      got = true;
      const now = Date.now();
      let at: number;
      while ((at = reader.next()) !== -1) handle(reader.buf, at, now);
    }
    const now = Date.now();
    const next = Math.min(engine.tick(now, sink), workq.tick(now));
    for (const tube of readyList) {
      readyMark[tube] = 0;
      out.header(E_READY, 0, 0, tube, 0, 0, 0);
    }
    readyList.length = 0;
    commitLog(now);
    if (out.len > 0) publish();
    // Read bytes but nothing to answer yet: a record bigger than the ring is arriving in
    // pieces, and the main thread waits for room to send the rest.
    else if (got) mainBell.ring();
    if (wal !== null) tidyLog(now);
    if (got) continue;
    const seq = bell.prepareWait();
    if (inRing.readable() > 0 || Atomics.load(stop, 0) !== 0) {
      bell.cancelWait();
      continue;
    }
    let until = next;
    if (wal !== null) until = Math.min(until, walFailing ? Date.now() + WAL_RETRY_MS : wal.dueMs());
    const waitMs = until === Infinity ? IDLE_WAIT_MS : Math.max(0, Math.min(IDLE_WAIT_MS, until - Date.now()));
    if (waitMs > 0) bell.wait(seq, waitMs);
    else bell.cancelWait();
  }
}

parentPort?.postMessage('ready');
loop();
if (wal !== null) wal.close();
