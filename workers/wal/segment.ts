// Segment files and the writer that appends one shard's batches to them.
//
// A shard's log is a sequence of segment files DIR/g<generation>-s<shard>-<seq>.wal. The writer
// appends each batch (every record of one shard-loop iteration) with one positional writeSync
// (group commit), and after a write that leaves the file at or past segmentBytesMax it moves on:
// the next batch goes to seq + 1 (a segment thus exceeds the limit by at most one batch, and a
// batch never spans two files). Syncing follows the mode, as beanstalkd's -f / -F:
//   'always'      fdatasync after every batch write, before the caller publishes its replies
//   { everyMs }   fdatasync when a write or syncIfDue() finds everyMs elapsed since the last one;
//                 dueMs() says when the next is owed so the shard's sleep can wake for it
//   'never'       the kernel writes back when it likes
// Before leaving a segment the writer syncs it (unless 'never'), so in a crash only the last
// segment of a shard can have a torn tail. A new file's directory entry is synced with the next
// data sync.
//
// Errors (ENOSPC, EIO, EMFILE...) are thrown as WalWriteError. The writer stays usable: a
// failed write leaves the file as it was (a partial write is truncated away, and in any case
// overwritten: writes are positional), a failed sync is retried by the next write/sync call, a
// failed open by the next write.

import { join } from 'node:path';
import { errnoCode, nodeIo, type WalIo } from './io.ts';

export type SyncMode = 'always' | 'never' | { everyMs: number };

/** beanstalkd's -s default. */
export const SEGMENT_BYTES_DEFAULT = 10 * 1024 * 1024;
/** beanstalkd's -f default. */
export const SYNC_EVERY_MS_DEFAULT = 50;

const GEN_DIGITS = 8, SHARD_DIGITS = 4, SEQ_DIGITS = 10;
const NAME_RE = /^g(\d+)-s(\d+)-(\d+)\.wal$/;

/** File name of a segment: g00000003-s0001-0000000042.wal (zero-padded so names sort). */
export function segmentName(generation: number, shard: number, seq: number): string {
  return `g${String(generation).padStart(GEN_DIGITS, '0')}-s${String(shard).padStart(SHARD_DIGITS, '0')}-${String(seq).padStart(SEQ_DIGITS, '0')}.wal`;
}

/** Inverse of segmentName; null for any other file name. */
export function parseSegmentName(name: string): { generation: number; shard: number; seq: number } | null {
  const m = NAME_RE.exec(name);
  if (!m) return null;
  return { generation: Number(m[1]), shard: Number(m[2]), seq: Number(m[3]) };
}

/** A write, sync, open or truncate of the log failed; `code` is the errno name. */
export class WalWriteError extends Error {
  readonly code: string;
  readonly op: 'open' | 'write' | 'sync' | 'close' | 'unlink';
  readonly path: string;
  constructor(op: WalWriteError['op'], path: string, cause: unknown) {
    const code = errnoCode(cause);
    super(`wal ${op} ${path}: ${code}${cause instanceof Error ? ` (${cause.message})` : ''}`, { cause });
    this.name = 'WalWriteError';
    this.code = code;
    this.op = op;
    this.path = path;
  }
}

export interface SegmentWriterOptions {
  /** Directory of the log (created if missing). */
  dir: string;
  shard: number;
  generation: number;
  /** Seq of the first segment. Default 1. */
  firstSeq?: number;
  /** Move to a new segment once the current one reaches this size. Default 10 MiB. */
  segmentBytesMax?: number;
  /** Default { everyMs: 50 }. */
  sync?: SyncMode;
  io?: WalIo;
}

const ALWAYS = 0, EVERY = 1, NEVER = 2;

export class SegmentWriter {
  readonly dir: string;
  readonly shard: number;
  readonly generation: number;
  readonly segmentBytesMax: number;
  readonly syncEveryMs: number;
  /** Segment the next batch goes to (its file is created by that batch's write). */
  seq: number;
  /** Bytes in the file of `seq` (0 until its first write). */
  fileBytes = 0;
  /** Bytes written since this writer was made, over all its segments. */
  writtenTotal = 0;
  /** Of writtenTotal, the bytes known durable: synced ('never': written). */
  durableTotal = 0;
  /** Number of fdatasync calls made (stats, tests). */
  syncs = 0;

  private readonly io: WalIo;
  private readonly mode: number;
  private fd = -1;
  private fdPath = '';
  private rotateDue = false; // the open fd is the previous segment's; seq was bumped
  private unsynced = false; // fd has written bytes not yet synced (tracked in every mode)
  private readonly leftUnsynced: string[] = []; // 'never': segments left without a sync
  private dirDirty = false; // a segment was created since the directory was last synced
  private partialAt = -1; // file offset to truncate back to after a partial write
  private lastSyncMs = -Infinity;

  constructor(opts: SegmentWriterOptions) {
    this.dir = opts.dir;
    this.shard = opts.shard;
    this.generation = opts.generation;
    this.seq = opts.firstSeq ?? 1;
    this.segmentBytesMax = opts.segmentBytesMax ?? SEGMENT_BYTES_DEFAULT;
    this.io = opts.io ?? nodeIo;
    const sync = opts.sync ?? { everyMs: SYNC_EVERY_MS_DEFAULT };
    this.mode = sync === 'always' ? ALWAYS : sync === 'never' ? NEVER : EVERY;
    this.syncEveryMs = typeof sync === 'object' ? Math.max(0, sync.everyMs) : 0;
    if (!(this.segmentBytesMax > 0)) throw new RangeError('segmentBytesMax must be > 0');
    this.io.mkdirp(this.dir);
  }

  /** Path of segment `seq` of this writer. */
  pathOf(seq: number): string {
    return join(this.dir, segmentName(this.generation, this.shard, seq));
  }

  /** True when written bytes are not yet synced (always false in 'never' mode). */
  get owesSync(): boolean {
    return this.mode !== NEVER && (this.unsynced || this.dirDirty);
  }

  /**
   * Appends buf[off, off + len) to segment `seq` with one writeSync (more only if the kernel
   * writes short), without syncing: call afterBatch(nowMs) next. Throws WalWriteError; then
   * nothing of this batch counts as written and the same bytes can be passed again.
   */
  write(buf: Uint8Array, off: number, len: number): void {
    if (len === 0) return;
    if (this.rotateDue) this.leaveSegment();
    if (this.fd < 0) this.openSegment();
    else if (this.partialAt >= 0) this.cutPartial();
    const io = this.io;
    const at = this.fileBytes;
    let done = 0;
    try {
      while (done < len) {
        const n = io.writeSync(this.fd, buf, off + done, len - done, at + done);
        if (n <= 0) throw Object.assign(new Error('write returned 0'), { code: 'EIO' });
        done += n;
      }
    } catch (e) {
      // Cut whatever reached the file (short writes before the error); harmless if nothing did.
      this.partialAt = at;
      this.cutPartial();
      throw new WalWriteError('write', this.fdPath, e);
    }
    this.fileBytes += len;
    this.writtenTotal += len;
    this.unsynced = true;
    if (this.mode === NEVER) this.durableTotal = this.writtenTotal;
    if (this.fileBytes >= this.segmentBytesMax) {
      this.rotateDue = true;
      this.seq++;
      this.fileBytes = 0;
    }
  }

  /** The sync a batch owes by mode: 'always' syncs whatever is unsynced, { everyMs } syncs if
   *  due, 'never' nothing. Throws WalWriteError (retried by the next call). */
  afterBatch(nowMs: number): void {
    if (this.mode === ALWAYS) {
      if (this.unsynced || this.dirDirty) this.syncNow(nowMs);
    } else if (this.mode === EVERY) {
      this.syncIfDue(nowMs);
    }
  }

  /** Wall-clock ms when a sync is owed (may be past), Infinity if none. 'always' owes one only
   *  after a failed sync; 'never' never. */
  dueMs(): number {
    if (!this.owesSync) return Infinity;
    return this.mode === ALWAYS ? this.lastSyncMs : this.lastSyncMs + this.syncEveryMs;
  }

  /** Syncs if dueMs() <= nowMs; returns whether it synced. */
  syncIfDue(nowMs: number): boolean {
    if (!this.owesSync || nowMs < this.dueMs()) return false;
    this.syncNow(nowMs);
    return true;
  }

  /** Syncs now everything written, whatever the mode — in 'never' mode too, including the last
   *  few segments it left unsynced (for the start-up rewrite, before the old generation goes). */
  sync(nowMs: number = Date.now()): void {
    while (this.leftUnsynced.length > 0) {
      const path = this.leftUnsynced[0];
      let fd = -1;
      try {
        fd = this.io.openSync(path, 'r');
        this.io.fdatasyncSync(fd);
        this.syncs++;
      } catch (e) {
        if (errnoCode(e) !== 'ENOENT') {
          if (fd >= 0) this.io.closeSync(fd);
          throw new WalWriteError('sync', path, e);
        }
      }
      if (fd >= 0) this.io.closeSync(fd);
      this.leftUnsynced.shift();
    }
    if (this.unsynced || this.dirDirty) this.syncNow(nowMs);
  }

  /** Syncs (unless 'never') and closes the current file. */
  close(): void {
    if (this.partialAt >= 0 && this.fd >= 0) this.cutPartial();
    if (this.owesSync) this.syncNow(Date.now());
    if (this.fd >= 0) {
      const fd = this.fd;
      this.fd = -1;
      try {
        this.io.closeSync(fd);
      } catch (e) {
        throw new WalWriteError('close', this.fdPath, e);
      }
    }
    this.rotateDue = false;
  }

  // ---------------------------------------------------------------- internals

  private syncNow(nowMs: number): void {
    this.syncData();
    this.lastSyncMs = nowMs;
  }

  /** fdatasync of the open file if it has unsynced bytes, then the directory if a segment was
   *  created since its last sync; everything written is durable after. */
  private syncData(): void {
    if (this.unsynced && this.fd >= 0) {
      try {
        this.io.fdatasyncSync(this.fd);
      } catch (e) {
        throw new WalWriteError('sync', this.fdPath, e);
      }
      this.syncs++;
      this.unsynced = false;
    }
    if (this.dirDirty) this.syncDir();
    this.durableTotal = this.writtenTotal;
  }

  private syncDir(): void {
    const io = this.io;
    let fd = -1;
    try {
      fd = io.openSync(this.dir, 'r');
      io.fsyncSync(fd);
    } catch (e) {
      const code = errnoCode(e);
      // Some platforms cannot open or fsync a directory; nothing more can be done there.
      if (code !== 'EISDIR' && code !== 'EINVAL' && code !== 'EBADF' && code !== 'EPERM') {
        if (fd >= 0) io.closeSync(fd);
        throw new WalWriteError('sync', this.dir, e);
      }
    }
    if (fd >= 0) io.closeSync(fd);
    this.dirDirty = false;
  }

  /** Syncs (unless 'never') and closes the previous segment after a rotation. */
  private leaveSegment(): void {
    if (this.fd >= 0) {
      if (this.mode !== NEVER) {
        this.syncData();
      } else if (this.unsynced) {
        // Remembered for an explicit sync(); the kernel writes back long before 64 segments pass.
        if (this.leftUnsynced.push(this.fdPath) > 64) this.leftUnsynced.shift();
        this.unsynced = false;
      }
      const fd = this.fd;
      this.fd = -1;
      try {
        this.io.closeSync(fd);
      } catch {
        // the data is synced; a failing close of a finished segment changes nothing
      }
    }
    this.rotateDue = false;
  }

  private openSegment(): void {
    const path = this.pathOf(this.seq);
    try {
      this.fd = this.io.openSync(path, 'wx', 0o600);
    } catch (e) {
      throw new WalWriteError('open', path, e);
    }
    this.fdPath = path;
    this.fileBytes = 0;
    this.dirDirty = true;
  }

  /** Best effort: cut what a failed write left past the last good offset. */
  private cutPartial(): void {
    try {
      this.io.ftruncateSync(this.fd, this.partialAt);
      this.partialAt = -1;
    } catch {
      // Left for the next write (which overwrites those bytes anyway) or close.
    }
  }
}
