// Reading the log back: listing segments, streaming every record in log order, cutting torn
// tails, and the recovery helper that folds the records into the live job table.
//
// Order: segments sort by (generation, seq, shard). Within one generation a job's records are all
// in one shard's segments (its tube's shard), so only (generation, seq) order matters for it;
// across generations the later one wins (a new generation begins with a FULL rewrite of every
// job). Replay semantics (recover()): FULL sets the whole job (replacing any earlier state),
// UPDATE sets the mutable fields of a known job, DELETE removes a known job; UPDATE and DELETE
// for unknown ids are ignored (their FULL was in a segment already removed). Workq records fold
// the same way into a second table keyed by the job's UUID: WQ_FULL sets, WQ_UPDATE amends a
// known job, WQ_DELETE removes one; they are replayed in the same order as everything else (a
// workq job's records are all in one shard's segments too) and never count toward maxId.
//
// Damage: a crash can tear only the end of the last segment of a (generation, shard) stream (the
// writer syncs a segment before it moves on). So a bad record there with no valid record after it
// is a torn tail: the file is truncated to the last whole record and a warning is reported. A bad
// record anywhere else is corruption: WalCorruptError names the file and byte offset, unless
// skipCorrupt is set, in which case the reader scans forward byte by byte to the next valid
// record (lengths consistent, checksum right), warns, and goes on; the skipped records are lost.

import { join } from 'node:path';
import { nodeIo, type WalIo } from './io.ts';
import {
  decodeRecord, DecodedRecord, DELETE, DELETE_BYTES, FULL, ID_MARK, INVALID, NEED_MORE, RECORD_PREFIX_BYTES_MAX,
  recordLength, UPDATE, WQ_DELETE, WQ_FULL, WQ_UPDATE,
} from './record.ts';
import { parseSegmentName } from './segment.ts';

export interface SegmentInfo {
  /** File name, e.g. g00000002-s0000-0000000007.wal */
  name: string;
  path: string;
  generation: number;
  shard: number;
  seq: number;
}

/** Every segment file in dir (none if dir does not exist), sorted by (generation, seq, shard). */
export function listSegments(dir: string, io: WalIo = nodeIo): SegmentInfo[] {
  const out: SegmentInfo[] = [];
  for (const name of io.readdir(dir)) {
    const p = parseSegmentName(name);
    if (p) out.push({ name, path: join(dir, name), ...p });
  }
  out.sort((a, b) => a.generation - b.generation || a.seq - b.seq || a.shard - b.shard);
  return out;
}

/** A bad record that is not a torn tail. */
export class WalCorruptError extends Error {
  readonly path: string;
  readonly offset: number;
  readonly reason: string;
  constructor(path: string, offset: number, reason: string) {
    super(`wal: corrupt record at byte ${offset} of ${path} (${reason}); ` +
      'replay with skipCorrupt to skip to the next valid record (the skipped records are lost)');
    this.name = 'WalCorruptError';
    this.path = path;
    this.offset = offset;
    this.reason = reason;
  }
}

export interface WalWarning {
  /** 'torn-tail': the end of a shard's last segment was cut (or would be: truncateTornTails
   *  false). 'corrupt-skipped': skipCorrupt skipped bytes. */
  kind: 'torn-tail' | 'corrupt-skipped';
  path: string;
  /** Byte offset of the first bad byte. */
  offset: number;
  /** Bytes cut or skipped. */
  bytes: number;
  message: string;
}

export interface ReplayOptions {
  /** Skip corrupt records (scanning forward to the next valid one) instead of throwing. */
  skipCorrupt?: boolean;
  /** Torn tails and skipped corruption are reported here. */
  onWarning?: (w: WalWarning) => void;
  /** Truncate torn tails (default true). False: report only, leave the files as they are. */
  truncateTornTails?: boolean;
  io?: WalIo;
  /** Initial read buffer (default 1 MiB; grows to fit the largest record). */
  readBufferBytes?: number;
}

export interface ReplayResult {
  /** Largest job id in any beanstalk record (0 if none): new ids continue after it. */
  maxId: number;
  /** Largest generation of any segment (0 if none): the next server start uses maxGeneration + 1. */
  maxGeneration: number;
  /** Records delivered. */
  records: number;
  segments: number;
  /** Bytes of the records delivered. */
  bytes: number;
  tornTails: number;
  corruptSkipped: number;
}

/** Called for every record in log order. `rec` (and its body view) is reused for the next one. */
export type OnRecord = (rec: DecodedRecord, seg: SegmentInfo, offset: number) => void;

const R_TRUNCATED = -1, R_BAD_HEADER = -2, R_BAD_CHECKSUM = -3;
const REASONS: Record<number, string> = {
  [R_TRUNCATED]: 'record runs past the end of the file',
  [R_BAD_HEADER]: 'invalid length or type',
  [R_BAD_CHECKSUM]: 'checksum mismatch',
};

/** Reads one file through a window buffer; records may be any size. */
class Cursor {
  buf: Buffer;
  private start = 0; // file offset of buf[0]
  private end = 0; // file offset where the valid bytes of buf end
  private readonly io: WalIo;
  private readonly fd: number;
  readonly size: number;

  constructor(io: WalIo, fd: number, size: number, buf: Buffer) {
    this.io = io;
    this.fd = fd;
    this.size = size;
    this.buf = buf;
  }

  /** Makes file bytes [pos, pos + n) resident (n <= size - pos); returns the index of pos in buf. */
  ensure(pos: number, n: number): number {
    if (pos >= this.start && pos + n <= this.end) return pos - this.start;
    if (n > this.buf.length) this.buf = Buffer.allocUnsafe(Math.max(n, this.buf.length * 2));
    const want = Math.min(this.buf.length, this.size - pos);
    let got = 0;
    while (got < want) {
      const r = this.io.readSync(this.fd, this.buf, got, want - got, pos + got);
      if (r <= 0) break;
      got += r;
    }
    this.start = pos;
    this.end = pos + got;
    if (got < n) throw new Error(`wal: short read at ${pos} (file changed while reading?)`);
    return 0;
  }

  /** Decodes the record at pos into rec: its size, or R_TRUNCATED / R_BAD_HEADER / R_BAD_CHECKSUM. */
  recordAt(pos: number, rec: DecodedRecord): number {
    const avail = this.size - pos;
    const head = Math.min(avail, RECORD_PREFIX_BYTES_MAX);
    let i = this.ensure(pos, head);
    const n = recordLength(this.buf, i, i + head);
    if (n === NEED_MORE) return R_TRUNCATED; // head bytes always suffice unless the file ends
    if (n === INVALID) return R_BAD_HEADER;
    if (n > avail) return R_TRUNCATED;
    i = this.ensure(pos, n);
    const d = decodeRecord(this.buf, i, i + n, rec);
    return d === INVALID ? R_BAD_CHECKSUM : d;
  }

  /** File offset of the first valid record at or after pos, or -1. */
  scan(pos: number, rec: DecodedRecord): number {
    for (let q = pos; q + DELETE_BYTES <= this.size; q++) {
      if (this.recordAt(q, rec) > 0) return q;
    }
    return -1;
  }
}

/** Streams every record of every segment in dir in log order; see the file comment for damage. */
export function replay(dir: string, onRecord: OnRecord, opts: ReplayOptions = {}): ReplayResult {
  const io = opts.io ?? nodeIo;
  const segs = listSegments(dir, io);
  const lastOfStream = new Map<string, number>(); // "gen/shard" -> last seq
  for (const s of segs) {
    const k = `${s.generation}/${s.shard}`;
    lastOfStream.set(k, Math.max(lastOfStream.get(k) ?? -1, s.seq));
  }
  const result: ReplayResult = {
    maxId: 0, maxGeneration: 0, records: 0, segments: segs.length, bytes: 0, tornTails: 0, corruptSkipped: 0,
  };
  const rec = new DecodedRecord();
  let buf: Buffer = Buffer.allocUnsafe(Math.max(RECORD_PREFIX_BYTES_MAX, opts.readBufferBytes ?? 1024 * 1024));
  for (const seg of segs) {
    if (seg.generation > result.maxGeneration) result.maxGeneration = seg.generation;
    const isLast = lastOfStream.get(`${seg.generation}/${seg.shard}`) === seg.seq;
    const fd = io.openSync(seg.path, 'r');
    let cutAt = -1;
    try {
      const cur = new Cursor(io, fd, io.fileSize(fd), buf);
      let pos = 0;
      while (pos < cur.size) {
        const n = cur.recordAt(pos, rec);
        if (n > 0) {
          if (rec.type <= ID_MARK && rec.id > result.maxId) result.maxId = rec.id;
          result.records++;
          result.bytes += n;
          onRecord(rec, seg, pos);
          pos += n;
          continue;
        }
        // A record whose (plausible) length runs past the end of the last segment is the write
        // a crash cut short, whatever its body holds: its bytes may look like records.
        const next = isLast && n === R_TRUNCATED ? -1 : cur.scan(pos + 1, rec);
        if (next < 0 && isLast) {
          cutAt = pos;
          result.tornTails++;
          const bytes = cur.size - pos;
          const truncate = opts.truncateTornTails !== false;
          opts.onWarning?.({
            kind: 'torn-tail', path: seg.path, offset: pos, bytes,
            message: `wal: torn tail in ${seg.path}: ${truncate ? 'cut' : 'found'} ${bytes} bytes at byte ${pos} ` +
              `(${REASONS[n]}; an incomplete write at a crash)`,
          });
          if (!truncate) cutAt = -1;
          break;
        }
        if (!opts.skipCorrupt) throw new WalCorruptError(seg.path, pos, REASONS[n]);
        const to = next < 0 ? cur.size : next;
        result.corruptSkipped++;
        opts.onWarning?.({
          kind: 'corrupt-skipped', path: seg.path, offset: pos, bytes: to - pos,
          message: `wal: corrupt record at byte ${pos} of ${seg.path} (${REASONS[n]}): skipped ${to - pos} bytes`,
        });
        if (next < 0) break;
        pos = next;
      }
      buf = cur.buf;
    } finally {
      io.closeSync(fd);
    }
    if (cutAt >= 0) {
      const wfd = io.openSync(seg.path, 'r+');
      try {
        io.ftruncateSync(wfd, cutAt);
        io.fdatasyncSync(wfd);
      } finally {
        io.closeSync(wfd);
      }
    }
  }
  return result;
}

/** A job as the log last described it. */
export interface RecoveredJob {
  id: number;
  tube: string;
  pri: number;
  delaySec: number;
  ttrSec: number;
  /** As logged: a RESERVED job's reserver is gone; beanstalkd brings such jobs back READY. */
  state: number;
  /** DELAYED: when it becomes ready; RESERVED: its TTR expiry (both wall-clock ms). */
  deadlineMs: number;
  createdMs: number;
  reserves: number;
  timeouts: number;
  releases: number;
  buries: number;
  kicks: number;
  body: Uint8Array;
}

/** A workq job as the log last described it (every array a copy). */
export interface RecoveredWqJob {
  /** 16 bytes. */
  uuid: Uint8Array;
  /** Queue name. */
  name: string;
  priority: number;
  ttrMs: number;
  ttlMs: number;
  /** NaN: not scheduled. */
  scheduleMs: number;
  createdMs: number;
  maxAttempts: number;
  maxFails: number;
  attempts: number;
  /** As logged (0..4). */
  state: number;
  /** NaN unless leased (the lease holder is gone after a restart). */
  leaseDeadline: number;
  payload: Uint8Array;
  result: Uint8Array;
}

export interface RecoverResult extends ReplayResult {
  /** The live jobs, by id. */
  jobs: Map<number, RecoveredJob>;
  /** The live workq jobs, by UUID as 32 lowercase hex digits. */
  wqJobs: Map<string, RecoveredWqJob>;
}

/** Replays dir and folds the records into the live job table (FULL sets, UPDATE amends a known
 *  job, DELETE removes one) and the workq job table (WQ_FULL, WQ_UPDATE, WQ_DELETE likewise).
 *  Same options and errors as replay(). */
export function recover(dir: string, opts: ReplayOptions = {}): RecoverResult {
  const jobs = new Map<number, RecoveredJob>();
  const wqJobs = new Map<string, RecoveredWqJob>();
  const r = replay(dir, (rec) => {
    if (rec.type >= WQ_FULL) {
      recoverWq(rec, wqJobs);
      return;
    }
    if (rec.type === FULL) {
      jobs.set(rec.id, {
        id: rec.id, tube: rec.tube, pri: rec.pri, delaySec: rec.delaySec, ttrSec: rec.ttrSec, state: rec.state,
        deadlineMs: rec.deadlineMs, createdMs: rec.createdMs, reserves: rec.reserves, timeouts: rec.timeouts,
        releases: rec.releases, buries: rec.buries, kicks: rec.kicks, body: rec.bodyCopy(),
      });
    } else if (rec.type === UPDATE) {
      const j = jobs.get(rec.id);
      if (!j) return;
      j.state = rec.state;
      j.pri = rec.pri;
      j.delaySec = rec.delaySec;
      j.deadlineMs = rec.deadlineMs;
      j.reserves = rec.reserves;
      j.timeouts = rec.timeouts;
      j.releases = rec.releases;
      j.buries = rec.buries;
      j.kicks = rec.kicks;
    } else if (rec.type === DELETE) {
      jobs.delete(rec.id);
    }
  }, opts);
  return { ...r, jobs, wqJobs };
}

function recoverWq(rec: DecodedRecord, wqJobs: Map<string, RecoveredWqJob>): void {
  const key = rec.uuidHex();
  if (rec.type === WQ_FULL) {
    wqJobs.set(key, {
      uuid: new Uint8Array(rec.uuid), name: rec.name, priority: rec.priority, ttrMs: rec.ttrMs, ttlMs: rec.ttlMs,
      scheduleMs: rec.scheduleMs, createdMs: rec.createdMs, maxAttempts: rec.maxAttempts, maxFails: rec.maxFails,
      attempts: rec.attempts, state: rec.state, leaseDeadline: rec.leaseDeadline, payload: rec.payloadCopy(),
      result: rec.resultCopy(),
    });
  } else if (rec.type === WQ_UPDATE) {
    const j = wqJobs.get(key);
    if (!j) return;
    j.attempts = rec.attempts;
    j.state = rec.state;
    j.leaseDeadline = rec.leaseDeadline;
  } else if (rec.type === WQ_DELETE) {
    wqJobs.delete(key);
  }
}

/** Deletes every segment of a generation older than `generation` (after the new generation's
 *  rewrite is synced on every shard). Returns how many files went. */
export function removeGenerationsBefore(dir: string, generation: number, io: WalIo = nodeIo): number {
  let n = 0;
  for (const s of listSegments(dir, io)) {
    if (s.generation >= generation) continue;
    try {
      io.unlinkSync(s.path);
      n++;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
  return n;
}
