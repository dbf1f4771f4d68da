// One shard's write-ahead log: records are encoded into a pending batch, written by commit() with
// one writeSync, synced by mode, and the segments are accounted for so that space stays bounded.
//
// Space accounting. The engine keeps, per job, `fullSeq`: the segment holding the job's FULL
// record (what appendFull / migrate returned). Per segment the Wal counts the live FULL records
// and their bytes; appendFull and migrate add, appendDelete and migrate subtract. It also keeps
// per segment `ref`: the oldest segment that a record in it refers back to (an UPDATE or DELETE
// refers to the segment of its job's FULL, a migrated FULL to the segment it was moved from).
//
// Which segments can go (removeDeadSegments): a segment that is not the current one, holds no
// live FULL record, and has no retained segment in [ref, itself): then every job it mentions is
// either dead with no FULL record left before it, or has a newer FULL record after it, so no
// replay of the remaining files can tell it is gone (a DELETE could otherwise be removed while
// the FULL it kills stays, resurrecting the job; an UPDATE while its job's FULL stays, losing
// the update). The record that emptied the segment must also be durable first (a migrated FULL
// must be on disk before its old copy is removed). One ascending pass decides all of this.
//
// When the log is large anyway (compactionCandidate): the segments that would stay total more
// than max(2 x live FULL bytes, 3 segments), the oldest non-current segment still holding live
// FULL records is the candidate. The caller rewrites those jobs' current state into the current
// segment with migrate(); once that is durable the candidate can go, and with it every later
// segment it was holding back (this is what keeps a long-lived buried job from pinning every
// segment after it, beanstalkd issues #599 / #622).
//
// Workq jobs are accounted the same way: a WQ_FULL record counts live like a FULL (the caller
// keeps, per job, the seq appendWqFull returned and lastFullBytes), a WQ_UPDATE or WQ_DELETE
// refers back to its job's WQ_FULL segment, and a WQ_DELETE drops it. A workq job's WQ_FULL is
// also rewritten while it lives (its result stored): appendWqFull with replacesSeq >= 0 drops
// the previous one and refers back to it exactly as migrate() does, and a compaction move of a
// workq job is just that (isMigration counts it in recordsMigrated).

import {
  encodeDelete, encodeFull, encodeUpdate, encodeWqDelete, encodeWqFull, encodeWqUpdate, ID_MARK, Writer,
} from './record.ts';
import { listSegments } from './reader.ts';
import { SegmentWriter, WalWriteError, type SegmentWriterOptions } from './segment.ts';
import { nodeIo, type WalIo } from './io.ts';

/** The write-ahead log each shard keeps (beanstalkd's -b, -f, -F, -s). */
export interface WalConfig {
  dir: string;
  generation: number;
  /** 'always' = fsync before replying (-f 0); everyMs = at most that often (-f MS); 'never' (-F). */
  sync: 'always' | 'never' | { everyMs: number };
  segmentBytesMax: number;
  /** The largest job id any earlier run handed out (carried into the new generation). */
  idFloor: number;
}

export type WalOptions = SegmentWriterOptions;

interface Seg {
  seq: number;
  /** Bytes appended to it (written or pending). */
  bytes: number;
  /** Live FULL records in it, and their bytes. */
  live: number;
  liveBytes: number;
  /** Oldest segment its records refer back to (<= seq). */
  ref: number;
  /** Wal.appended when `live` last reached 0: removable once durable up to there. */
  zeroAt: number;
}

export class Wal {
  readonly shard: number;
  readonly generation: number;

  private readonly writer: SegmentWriter;
  private readonly io: WalIo;
  private readonly w = new Writer();
  private readonly segs: Seg[] = []; // retained segments, ascending seq; the last is current
  private readonly bySeq = new Map<number, Seg>();
  private cur: Seg;
  private appended = 0; // bytes appended since construction (== writer.writtenTotal + pending)
  private totalLiveBytes = 0;
  private totalLive = 0;
  private totalBytes = 0;
  private written = 0;
  private migrated = 0;

  /** Opens the log of one shard in a generation that must have no segments of this shard yet
   *  (a new server start writes a new generation). Creates dir if needed; files are created by
   *  the first commit that has something to write. */
  constructor(opts: WalOptions) {
    this.io = opts.io ?? nodeIo;
    this.shard = opts.shard;
    this.generation = opts.generation;
    for (const s of listSegments(opts.dir, this.io)) {
      if (s.generation === opts.generation && s.shard === opts.shard) {
        throw new Error(`wal: ${s.path} already exists: generation ${opts.generation} of shard ${opts.shard} ` +
          'was written by an earlier start; open a new generation (replay maxGeneration + 1)');
      }
    }
    this.writer = new SegmentWriter(opts);
    this.cur = this.addSeg(this.writer.seq);
  }

  // ---------------------------------------------------------------- appending

  /** Appends a job's FULL record (a put, or the start-up rewrite of a recovered job) and counts
   *  it live. Returns the seq it went to: keep it as the job's fullSeq. */
  appendFull(
    id: number, tube: string, pri: number, delaySec: number, ttrSec: number, state: number,
    deadlineMs: number, createdMs: number, reserves: number, timeouts: number, releases: number,
    buries: number, kicks: number, body: Uint8Array, bodyStart: number, bodyEnd: number,
  ): number {
    const n = encodeFull(this.w, id, tube, pri, delaySec, ttrSec, state, deadlineMs, createdMs,
      reserves, timeouts, releases, buries, kicks, body, bodyStart, bodyEnd);
    return this.addedFull(n);
  }

  /** Appends an UPDATE with all of the job's mutable state (after release, bury, kick, ...).
   *  fullSeq: the job's FULL segment. Returns the seq it went to. */
  appendUpdate(
    id: number, fullSeq: number, state: number, pri: number, delaySec: number, deadlineMs: number,
    reserves: number, timeouts: number, releases: number, buries: number, kicks: number,
  ): number {
    const n = encodeUpdate(this.w, id, state, pri, delaySec, deadlineMs, reserves, timeouts, releases, buries, kicks);
    const cur = this.cur;
    this.added(n);
    if (fullSeq < cur.ref) cur.ref = fullSeq;
    return cur.seq;
  }

  /** Appends a DELETE and drops the job's FULL record from the live count. fullSeq: its FULL
   *  segment; fullBytes: that record's size, fullRecordBytes(tube name length, body length). */
  appendDelete(id: number, fullSeq: number, fullBytes: number): number {
    const n = encodeDelete(this.w, id);
    const cur = this.cur;
    this.added(n);
    if (fullSeq < cur.ref) cur.ref = fullSeq;
    this.dropFull(fullSeq, fullBytes);
    return cur.seq;
  }

  /**
   * Appends an ID_MARK: it carries the largest id handed out so far into the current segment,
   * so that ids never repeat after a restart even when every segment that named those ids has
   * been removed as dead. Replay counts it toward maxId and changes no job.
   */
  appendIdMark(id: number): number {
    const n = encodeDelete(this.w, id, ID_MARK);
    this.added(n);
    this.written--; // bookkeeping, not a change: binlog-records-written counts changes
    return this.cur.seq;
  }

  /** Compaction: appendFull of a live job whose FULL record is in segment fromSeq (its current
   *  state, counters included), moving its live count to the current segment. Returns the new
   *  fullSeq. */
  migrate(
    fromSeq: number, id: number, tube: string, pri: number, delaySec: number, ttrSec: number,
    state: number, deadlineMs: number, createdMs: number, reserves: number, timeouts: number,
    releases: number, buries: number, kicks: number, body: Uint8Array, bodyStart: number, bodyEnd: number,
  ): number {
    const seq = this.appendFull(id, tube, pri, delaySec, ttrSec, state, deadlineMs, createdMs,
      reserves, timeouts, releases, buries, kicks, body, bodyStart, bodyEnd);
    const cur = this.cur;
    if (fromSeq < cur.ref) cur.ref = fromSeq;
    this.dropFull(fromSeq, this.lastFullBytes);
    this.migrated++;
    return seq;
  }

  /**
   * Appends a workq job's WQ_FULL record (an add, a stored result, a restore, a compaction move)
   * and counts it live in the current segment. The uuid is uuid[uuidAt, uuidAt + 16). If
   * replacesSeq >= 0 the record replaces the job's previous WQ_FULL, in segment replacesSeq and
   * replacesBytes long: that one is dropped from the live count and the current segment refers
   * back to it (as migrate() does). isMigration: a compaction move (counted in recordsMigrated).
   * Returns the seq it went to, and lastFullBytes is the record's size: keep both for the job.
   */
  appendWqFull(
    uuid: Uint8Array, uuidAt: number, name: string, priority: number, ttrMs: number, ttlMs: number,
    scheduleMs: number, createdMs: number, maxAttempts: number, maxFails: number, attempts: number,
    state: number, leaseDeadline: number, payload: Uint8Array, result: Uint8Array,
    replacesSeq: number, replacesBytes: number, isMigration = false,
  ): number {
    const n = encodeWqFull(this.w, uuid, uuidAt, name, priority, ttrMs, ttlMs, scheduleMs, createdMs,
      maxAttempts, maxFails, attempts, state, leaseDeadline, payload, result);
    const seq = this.addedFull(n);
    if (replacesSeq >= 0) {
      const cur = this.cur;
      if (replacesSeq < cur.ref) cur.ref = replacesSeq;
      this.dropFull(replacesSeq, replacesBytes);
    }
    if (isMigration) this.migrated++;
    return seq;
  }

  /** Appends a WQ_UPDATE with a workq job's mutable state (a lease, a TTR requeue, a failure by
   *  the clock). fullSeq: the job's WQ_FULL segment. Returns the seq it went to. */
  appendWqUpdate(
    uuid: Uint8Array, uuidAt: number, fullSeq: number, attempts: number, state: number, leaseDeadline: number,
  ): number {
    const n = encodeWqUpdate(this.w, uuid, uuidAt, attempts, state, leaseDeadline);
    const cur = this.cur;
    this.added(n);
    if (fullSeq < cur.ref) cur.ref = fullSeq;
    return cur.seq;
  }

  /** Appends a WQ_DELETE and drops the job's WQ_FULL record from the live count. fullSeq: its
   *  WQ_FULL segment; fullBytes: that record's size (lastFullBytes when it was appended). */
  appendWqDelete(uuid: Uint8Array, uuidAt: number, fullSeq: number, fullBytes: number): number {
    const n = encodeWqDelete(this.w, uuid, uuidAt);
    const cur = this.cur;
    this.added(n);
    if (fullSeq < cur.ref) cur.ref = fullSeq;
    this.dropFull(fullSeq, fullBytes);
    return cur.seq;
  }

  /** Counts one more live FULL record of `bytes` in segment seq. appendFull and migrate do this
   *  themselves; for callers that account by hand only. */
  noteFull(seq: number, bytes: number): void {
    const s = this.bySeq.get(seq);
    if (!s) throw new Error(`wal: noteFull: no segment ${seq}`);
    s.live++;
    s.liveBytes += bytes;
    this.totalLive++;
    this.totalLiveBytes += bytes;
  }

  /** Counts one live FULL record of `bytes` in segment seq as gone. appendDelete and migrate do
   *  this themselves; for callers that account by hand only (e.g. a job dropped without a DELETE). */
  dropFull(seq: number, bytes: number): void {
    const s = this.bySeq.get(seq);
    if (!s || s.live === 0) throw new Error(`wal: dropFull: segment ${seq} has no live FULL record`);
    s.live--;
    s.liveBytes -= bytes;
    this.totalLive--;
    this.totalLiveBytes -= bytes;
    if (s.live === 0) {
      this.totalLiveBytes -= s.liveBytes; // a caller's size mismatch must not linger
      s.liveBytes = 0;
      s.zeroAt = this.appended;
    }
  }

  // ---------------------------------------------------------------- writing

  /**
   * Writes the pending batch with one writeSync, then syncs as the mode says ('always': before
   * returning). Call once per shard-loop iteration, after the engine work and before publishing
   * the replies. Returns the bytes written (0: nothing pending).
   *
   * Throws WalWriteError (ENOSPC, EIO...): the batch is then still pending (nothing is lost or
   * doubled) and the next commit() retries it together with whatever was appended since; in
   * 'always' mode the batch's replies must wait until a commit() succeeds.
   */
  commit(nowMs: number): number {
    const len = this.w.len;
    if (len > 0) {
      this.writer.write(this.w.buf, 0, len);
      this.w.reset();
      if (this.writer.seq !== this.cur.seq) this.cur = this.addSeg(this.writer.seq);
    }
    this.writer.afterBatch(nowMs);
    return len;
  }

  /** Wall-clock ms at which syncIfDue() owes a sync ({ everyMs } mode; may be past), Infinity if
   *  none: the shard's sleep should end by then. */
  dueMs(): number {
    return this.writer.dueMs();
  }

  /** Syncs if a sync is owed by nowMs; returns whether it synced. Throws WalWriteError. */
  syncIfDue(nowMs: number): boolean {
    return this.writer.syncIfDue(nowMs);
  }

  /** Commits anything pending and syncs everything written now, whatever the mode ('never'
   *  too): for the start-up rewrite, before the previous generations are removed. */
  sync(nowMs: number = Date.now()): void {
    this.commit(nowMs);
    this.writer.sync(nowMs);
  }

  /** Commits anything pending, syncs (unless 'never') and closes the file. */
  close(nowMs: number = Date.now()): void {
    this.commit(nowMs);
    this.writer.close();
  }

  // ---------------------------------------------------------------- space

  /**
   * The seq of the segment whose live jobs should be migrated now, or -1. Non-negative only when
   * the segments that are not already on their way out total more than
   * max(2 x live FULL bytes, 3 x segmentBytesMax); then it is the oldest non-current segment with
   * live FULL records. The caller migrates those jobs (all of them, or some per iteration: the
   * candidate stays the same until it is empty), commits, and removeDeadSegments() reclaims it.
   */
  compactionCandidate(): number {
    let total = 0;
    let prevKept = -1;
    let candidate = -1;
    const cur = this.cur;
    for (const s of this.segs) {
      if (s !== cur && s.live === 0 && prevKept < s.ref) continue; // goes once durable
      total += s.bytes;
      prevKept = s.seq;
      if (candidate < 0 && s !== cur && s.live > 0) candidate = s.seq;
    }
    if (total <= Math.max(2 * this.totalLiveBytes, 3 * this.writer.segmentBytesMax)) return -1;
    return candidate;
  }

  /**
   * Deletes every segment that no replay needs any more (see the file comment): not current, no
   * live FULL record, nothing older that it refers to still kept, and emptied by records that are
   * durable. Call after commit() (with { everyMs }, what a later sync made durable goes then).
   * Returns how many files it deleted. Throws WalWriteError if an unlink fails (the segment is
   * kept and retried next time).
   */
  removeDeadSegments(): number {
    const durable = this.writer.durableTotal;
    const cur = this.cur;
    const segs = this.segs;
    let prevKept = -1;
    let kept = 0;
    let removed = 0;
    let failure: WalWriteError | null = null;
    for (let i = 0; i < segs.length; i++) {
      const s = segs[i];
      if (failure === null && s !== cur && s.live === 0 && s.zeroAt <= durable && prevKept < s.ref) {
        const path = this.writer.pathOf(s.seq);
        try {
          this.io.unlinkSync(path);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT') failure = new WalWriteError('unlink', path, e);
        }
        if (failure === null) {
          this.bySeq.delete(s.seq);
          this.totalBytes -= s.bytes;
          removed++;
          continue;
        }
      }
      prevKept = s.seq;
      segs[kept++] = s;
    }
    segs.length = kept;
    if (failure !== null) throw failure;
    return removed;
  }

  // ---------------------------------------------------------------- stats

  /** Seq of the oldest segment kept (beanstalkd's binlog-oldest-index). */
  get oldestIndex(): number {
    return this.segs[0].seq;
  }
  /** Seq the next batch goes to (binlog-current-index). */
  get currentIndex(): number {
    return this.cur.seq;
  }
  /** Records appended (binlog-records-written). */
  get recordsWritten(): number {
    return this.written;
  }
  /** FULL records rewritten by compaction (binlog-records-migrated). */
  get recordsMigrated(): number {
    return this.migrated;
  }
  /** binlog-max-size. */
  get segmentBytesMax(): number {
    return this.writer.segmentBytesMax;
  }
  /** Bytes of all segments kept, pending batch included. */
  get bytes(): number {
    return this.totalBytes;
  }
  /** Bytes of the live FULL records. */
  get liveBytes(): number {
    return this.totalLiveBytes;
  }
  /** Live FULL records (= live jobs when every job has one). */
  get liveRecords(): number {
    return this.totalLive;
  }
  /** Segments kept (current included). */
  get segmentCount(): number {
    return this.segs.length;
  }
  /** Bytes appended but not yet written by commit(). */
  get pendingBytes(): number {
    return this.w.len;
  }
  /** fdatasync calls made. */
  get syncCount(): number {
    return this.writer.syncs;
  }
  /** Path of segment seq. */
  pathOf(seq: number): string {
    return this.writer.pathOf(seq);
  }
  /** Size of the last FULL or WQ_FULL record appended (appendFull, migrate, appendWqFull): the
   *  `fullBytes` to keep for the job. */
  get lastFullBytes(): number {
    return this.lastFull;
  }

  // ---------------------------------------------------------------- internals

  private lastFull = 0;

  private added(n: number): void {
    this.cur.bytes += n;
    this.totalBytes += n;
    this.appended += n;
    this.written++;
  }

  /** added() for a FULL or WQ_FULL record, counted live in the current segment; returns its seq. */
  private addedFull(n: number): number {
    const cur = this.cur;
    this.added(n);
    this.lastFull = n;
    cur.live++;
    cur.liveBytes += n;
    this.totalLive++;
    this.totalLiveBytes += n;
    return cur.seq;
  }

  private addSeg(seq: number): Seg {
    const s: Seg = { seq, bytes: 0, live: 0, liveBytes: 0, ref: seq, zeroAt: 0 };
    this.segs.push(s);
    this.bySeq.set(seq, s);
    return s;
  }
}
