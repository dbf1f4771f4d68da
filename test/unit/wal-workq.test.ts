// WAL records of workq jobs (WQ_FULL, WQ_UPDATE, WQ_DELETE): they round-trip through the encoders
// and the decoder (NaN times, empty and non-empty payloads and results, a 255-byte queue name),
// their lengths are known from a bounded prefix, damage is detected; a Wal writing them keeps
// its space accounting (replaced and deleted WQ_FULL records free their segments, never before
// what supersedes them is durable), recover() folds them into wqJobs beside the beanstalk jobs,
// and a torn tail inside a WQ_FULL is cut. A seeded simulation mixes everything with compaction;
// WAL_SEED=n reruns one seed.

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import {
  decodeRecord, DecodedRecord, encodeDelete, encodeFull, encodeWqDelete, encodeWqFull, encodeWqUpdate, FULL,
  fullRecordBytes, INVALID, NEED_MORE, RECORD_PREFIX_BYTES_MAX, recordLength, STATE_READY, Writer, WQ_DELETE,
  WQ_DELETE_BYTES, WQ_FULL, WQ_UPDATE, WQ_UPDATE_BYTES, wqFullRecordBytes,
} from '../../workers/wal/record.ts';
import { recover, WalCorruptError, type RecoveredWqJob, type WalWarning } from '../../workers/wal/reader.ts';
import type { SyncMode } from '../../workers/wal/segment.ts';
import { Wal } from '../../workers/wal/wal.ts';
import * as walIndex from '../../workers/wal/index.ts';
import { mulberry32 } from '../support/prng.ts';

const enc = new TextEncoder();
const hex = (u: Uint8Array): string => Buffer.from(u).toString('hex');
const uuidOf = (n: number): Uint8Array => {
  const u = new Uint8Array(16);
  for (let i = 0; i < 16; i++) u[i] = (n * 37 + i * 11 + (n >>> 8)) & 255;
  u[6] = 0x40 | (u[6] & 15);
  u[15] = n & 255;
  u[14] = (n >>> 8) & 255;
  return u;
};

/** Encodes a with its uuid placed at `pad` inside a larger array (exercises uuidAt). */
function putWq(w: Writer, a: RecoveredWqJob, pad = 0): number {
  const host = new Uint8Array(16 + 2 * pad).fill(0xee);
  host.set(a.uuid, pad);
  return encodeWqFull(w, host, pad, a.name, a.priority, a.ttrMs, a.ttlMs, a.scheduleMs, a.createdMs, a.maxAttempts,
    a.maxFails, a.attempts, a.state, a.leaseDeadline, a.payload, a.result);
}

function decodedWq(r: DecodedRecord): RecoveredWqJob {
  return {
    uuid: new Uint8Array(r.uuid), name: r.name, priority: r.priority, ttrMs: r.ttrMs, ttlMs: r.ttlMs,
    scheduleMs: r.scheduleMs, createdMs: r.createdMs, maxAttempts: r.maxAttempts, maxFails: r.maxFails,
    attempts: r.attempts, state: r.state, leaseDeadline: r.leaseDeadline, payload: r.payloadCopy(),
    result: r.resultCopy(),
  };
}

const name255 = 'q'.repeat(100) + 'abcdefghij'.repeat(15) + '01234';
const cases: RecoveredWqJob[] = [
  {
    uuid: uuidOf(1), name: 'a', priority: 0, ttrMs: 1, ttlMs: 1000, scheduleMs: NaN, createdMs: 1_700_000_000_123,
    maxAttempts: 0, maxFails: 0, attempts: 0, state: 0, leaseDeadline: NaN, payload: new Uint8Array(0),
    result: new Uint8Array(0),
  },
  {
    uuid: uuidOf(2), name: name255, priority: -2147483648, ttrMs: 2 ** 32 - 1, ttlMs: 86_400_000 * 365,
    scheduleMs: 1_800_000_000_000.5, createdMs: 1.7e12, maxAttempts: 255, maxFails: 255, attempts: 2 ** 32 - 1,
    state: 4, leaseDeadline: 1_700_000_060_000.25, payload: enc.encode('a\r\nb\0c\r\n\r\n\0'),
    result: enc.encode('the result\r\n'),
  },
  {
    uuid: uuidOf(3), name: '', priority: 2147483647, ttrMs: 60000, ttlMs: 60000, scheduleMs: NaN, createdMs: 1,
    maxAttempts: 3, maxFails: 1, attempts: 1, state: 1, leaseDeadline: NaN, payload: new Uint8Array(0),
    result: Uint8Array.from({ length: 70000 }, (_, i) => (i * 31 + 7) & 255),
  },
  {
    uuid: uuidOf(4), name: 'queue-x', priority: -1, ttrMs: 500, ttlMs: 0.5, scheduleMs: -1, createdMs: 0,
    maxAttempts: 1, maxFails: 2, attempts: 7, state: 2, leaseDeadline: NaN,
    payload: Uint8Array.from({ length: 65536 }, (_, i) => (i * 13) & 255), result: new Uint8Array([0]),
  },
  {
    uuid: new Uint8Array(16).fill(255), name: 'z', priority: 5, ttrMs: 0, ttlMs: NaN, scheduleMs: Infinity,
    createdMs: -Infinity, maxAttempts: 9, maxFails: 8, attempts: 3, state: 3, leaseDeadline: 0,
    payload: new Uint8Array([13, 10]), result: new Uint8Array(0),
  },
];

/** Recomputes the crc of the record at buf[0, size) (so that a field change is judged on its own). */
function fixCrc(buf: Buffer, size: number): void {
  buf.writeUInt32LE(crc32(buf.subarray(8, size)), 4);
}

function oneWq(a: RecoveredWqJob): Buffer {
  const w = new Writer();
  putWq(w, a);
  return Buffer.from(w.buf.subarray(0, w.len));
}

describe('workq record format', () => {
  it('round-trips WQ_FULL records of every shape, back to back and among beanstalk records', () => {
    const w = new Writer(256); // small, so it has to grow
    const sizes: number[] = [];
    for (const [i, a] of cases.entries()) {
      const before = w.len;
      const n = putWq(w, a, i * 5);
      expect(n).toBe(wqFullRecordBytes(a.name.length, a.payload.length, a.result.length));
      expect(n).toBe(81 + a.name.length + a.payload.length + a.result.length);
      expect(w.len - before).toBe(n);
      sizes.push(n);
      // a beanstalk FULL in between: the decoder keeps the two kinds apart
      encodeFull(w, 100 + i, 'tube', 1, 0, 60, STATE_READY, 0, 5, 0, 0, 0, 0, 0, new Uint8Array([i]), 0, 1);
    }
    const r = new DecodedRecord();
    let off = 0;
    for (const [i, a] of cases.entries()) {
      const n = decodeRecord(w.buf, off, w.len, r);
      expect(n).toBe(sizes[i]);
      expect(r.size).toBe(n);
      expect(r.type).toBe(WQ_FULL);
      expect(r.id, 'a workq record leaves id alone').toBe(i === 0 ? 0 : 100 + i - 1);
      expect(decodedWq(r)).toEqual(a);
      expect(r.uuidHex()).toBe(hex(a.uuid));
      off += n;
      off += decodeRecord(w.buf, off, w.len, r);
      expect([r.type, r.id, r.bodyCopy()]).toEqual([FULL, 100 + i, new Uint8Array([i])]);
    }
    expect(off).toBe(w.len);
  });

  it('lays WQ_FULL out as documented: both lengths before the payload', () => {
    const a = cases[1];
    const b = oneWq(a);
    const t = 26 + a.name.length;
    expect(b.readUInt32LE(0)).toBe(b.length - 8);
    expect(b.readUInt32LE(4)).toBe(crc32(b.subarray(8)));
    expect(b[8]).toBe(WQ_FULL);
    expect(new Uint8Array(b.subarray(9, 25))).toEqual(a.uuid);
    expect(b[25]).toBe(a.name.length);
    expect(b.toString('latin1', 26, t)).toBe(a.name);
    expect(b.readInt32LE(t)).toBe(a.priority);
    expect(b.readUInt32LE(t + 4)).toBe(a.ttrMs);
    expect(b.readDoubleLE(t + 8)).toBe(a.ttlMs);
    expect(b.readDoubleLE(t + 16)).toBe(a.scheduleMs);
    expect(b.readDoubleLE(t + 24)).toBe(a.createdMs);
    expect([b[t + 32], b[t + 33]]).toEqual([a.maxAttempts, a.maxFails]);
    expect(b.readUInt32LE(t + 34)).toBe(a.attempts);
    expect(b[t + 38]).toBe(a.state);
    expect(b.readDoubleLE(t + 39)).toBe(a.leaseDeadline);
    expect(b.readUInt32LE(t + 47)).toBe(a.payload.length);
    expect(b.readUInt32LE(t + 51)).toBe(a.result.length);
    expect(b.toString('latin1', t + 55)).toBe(Buffer.from(a.payload).toString('latin1') + Buffer.from(a.result).toString('latin1'));
  });

  it('round-trips WQ_UPDATE and WQ_DELETE records (uuid taken from inside a larger array)', () => {
    const w = new Writer(64);
    const host = new Uint8Array(64);
    host.set(uuidOf(9), 20);
    host.set(uuidOf(10), 40);
    expect(encodeWqUpdate(w, host, 20, 5, 4, 1_700_000_001_000.5)).toBe(WQ_UPDATE_BYTES);
    expect(encodeWqDelete(w, host, 40)).toBe(WQ_DELETE_BYTES);
    expect(encodeWqUpdate(w, host, 40, 2 ** 32 - 1, 0, NaN)).toBe(WQ_UPDATE_BYTES);
    expect([WQ_UPDATE_BYTES, WQ_DELETE_BYTES]).toEqual([38, 25]);
    expect(w.len).toBe(2 * 38 + 25);
    const r = new DecodedRecord();
    let off = decodeRecord(w.buf, 0, w.len, r);
    expect(off).toBe(WQ_UPDATE_BYTES);
    expect([r.type, r.uuidHex(), r.attempts, r.state, r.leaseDeadline])
      .toEqual([WQ_UPDATE, hex(uuidOf(9)), 5, 4, 1_700_000_001_000.5]);
    off += decodeRecord(w.buf, off, w.len, r);
    expect([r.type, r.uuidHex()]).toEqual([WQ_DELETE, hex(uuidOf(10))]);
    off += decodeRecord(w.buf, off, w.len, r);
    expect([r.type, r.uuidHex(), r.attempts, r.state, r.leaseDeadline])
      .toEqual([WQ_UPDATE, hex(uuidOf(10)), 2 ** 32 - 1, 0, NaN]);
    expect(off).toBe(w.len);
    // layout
    expect(w.buf.readUInt32LE(0)).toBe(30);
    expect(w.buf.readUInt32LE(25)).toBe(5);
    expect(w.buf[29]).toBe(4);
    expect(w.buf.readDoubleLE(30)).toBe(1_700_000_001_000.5);
    expect(w.buf.readUInt32LE(38)).toBe(17);
  });

  it('tells the length from a bounded prefix: NEED_MORE until both lengths are visible', () => {
    expect(RECORD_PREFIX_BYTES_MAX).toBeGreaterThanOrEqual(81 + 255);
    for (const a of cases) {
      const b = oneWq(a);
      const visible = 81 + a.name.length; // through resultLen
      for (let k = 0; k <= b.length; k++) {
        expect(recordLength(b, 0, k), `${a.name.length}-byte name, ${k} bytes`).toBe(k < visible ? NEED_MORE : b.length);
      }
      expect(recordLength(b, 0, Math.min(b.length, RECORD_PREFIX_BYTES_MAX))).toBe(b.length);
      // and at an offset inside a larger buffer
      const host = Buffer.concat([Buffer.alloc(7, 0xaa), b]);
      expect(recordLength(host, 7, 7 + visible)).toBe(b.length);
      expect(recordLength(host, 7, 7 + visible - 1)).toBe(NEED_MORE);
      const r = new DecodedRecord();
      for (let k = 0; k < b.length; k += k < 400 ? 1 : 997) expect(decodeRecord(b, 0, k, r)).toBe(NEED_MORE);
    }
    const w = new Writer();
    encodeWqUpdate(w, uuidOf(1), 0, 1, 1, NaN);
    encodeWqDelete(w, uuidOf(1), 0);
    for (const [at, size] of [[0, WQ_UPDATE_BYTES], [WQ_UPDATE_BYTES, WQ_DELETE_BYTES]]) {
      for (let k = 0; k <= size; k++) expect(recordLength(w.buf, at, at + k)).toBe(k < 9 ? NEED_MORE : size);
    }
  });

  it('rejects damage: bad crc, bad state, inconsistent lengths, every flipped byte', () => {
    const r = new DecodedRecord();
    const good = oneWq(cases[1]);
    expect(decodeRecord(good, 0, good.length, r)).toBe(good.length);
    const t = 26 + cases[1].name.length;

    const badCrc = Buffer.from(good);
    badCrc[good.length - 1] ^= 1; // last result byte
    expect(recordLength(badCrc, 0, badCrc.length)).toBe(good.length);
    expect(decodeRecord(badCrc, 0, badCrc.length, r)).toBe(INVALID);

    for (const s of [0, 1, 2, 3, 4]) {
      const b = Buffer.from(good);
      b[t + 38] = s;
      fixCrc(b, b.length);
      expect(decodeRecord(b, 0, b.length, r), `state ${s}`).toBe(b.length);
      expect(r.state).toBe(s);
    }
    for (const s of [5, 6, 200, 255]) {
      const b = Buffer.from(good);
      b[t + 38] = s;
      fixCrc(b, b.length);
      expect(decodeRecord(b, 0, b.length, r), `state ${s}`).toBe(INVALID);
    }

    // payloadLen + 1 alone: the lengths disagree with the length field
    const longer = Buffer.from(good);
    longer.writeUInt32LE(longer.readUInt32LE(t + 47) + 1, t + 47);
    fixCrc(longer, longer.length);
    expect(recordLength(longer, 0, longer.length)).toBe(INVALID);
    expect(decodeRecord(longer, 0, longer.length, r)).toBe(INVALID);
    // resultLen - 1 alone
    const shorter = Buffer.from(good);
    shorter.writeUInt32LE(shorter.readUInt32LE(t + 51) - 1, t + 51);
    fixCrc(shorter, shorter.length);
    expect(recordLength(shorter, 0, shorter.length)).toBe(INVALID);
    // the length field below the fixed part
    const tiny = Buffer.from(good);
    tiny.writeUInt32LE(72, 0);
    expect(recordLength(tiny, 0, 9)).toBe(INVALID);
    // a payload/result split moved without the crc's knowledge: lengths agree, crc does not
    const split = Buffer.from(good);
    split.writeUInt32LE(split.readUInt32LE(t + 47) + 1, t + 47);
    split.writeUInt32LE(split.readUInt32LE(t + 51) - 1, t + 51);
    expect(recordLength(split, 0, split.length)).toBe(good.length);
    expect(decodeRecord(split, 0, split.length, r)).toBe(INVALID);

    // WQ_UPDATE: bad state, bad length, bad crc; WQ_DELETE: bad length; unknown types
    const w = new Writer();
    encodeWqUpdate(w, uuidOf(1), 0, 1, 4, NaN);
    const upd = Buffer.from(w.buf.subarray(0, w.len));
    const u5 = Buffer.from(upd);
    u5[29] = 5;
    fixCrc(u5, u5.length);
    expect(decodeRecord(u5, 0, u5.length, r)).toBe(INVALID);
    const u0 = Buffer.from(upd);
    u0[29] = 0;
    fixCrc(u0, u0.length);
    expect(decodeRecord(u0, 0, u0.length, r), 'workq state 0 is valid').toBe(WQ_UPDATE_BYTES);
    const uLen = Buffer.from(upd);
    uLen.writeUInt32LE(31, 0);
    expect(recordLength(uLen, 0, uLen.length)).toBe(INVALID);
    const uCrc = Buffer.from(upd);
    uCrc[12] ^= 0x10;
    expect(decodeRecord(uCrc, 0, uCrc.length, r)).toBe(INVALID);
    const w2 = new Writer();
    encodeWqDelete(w2, uuidOf(1), 0);
    const del = Buffer.from(w2.buf.subarray(0, w2.len));
    del.writeUInt32LE(9, 0); // a beanstalk DELETE's length
    expect(recordLength(del, 0, del.length)).toBe(INVALID);
    for (const type of [0, 8, 255]) {
      const b = Buffer.from(upd);
      b[8] = type;
      expect(recordLength(b, 0, b.length), `type ${type}`).toBe(INVALID);
    }

    for (const rec of [good, upd]) {
      for (let i = 0; i < Math.min(rec.length, 400); i++) {
        const bad = Buffer.from(rec);
        bad[i] ^= 0x40;
        const got = decodeRecord(bad, 0, bad.length, r);
        expect(got === INVALID || got === NEED_MORE, `flip at ${i}`).toBe(true);
      }
    }
  });

  it('refuses a queue name over 255 bytes and a uuid out of range, writing nothing', () => {
    const a = cases[0];
    const w = new Writer();
    expect(() => encodeWqFull(w, a.uuid, 0, 'n'.repeat(256), 0, 1, 1, NaN, 0, 0, 0, 0, 0, NaN, a.payload, a.result))
      .toThrow(RangeError);
    expect(() => encodeWqUpdate(w, a.uuid, 1, 0, 0, NaN)).toThrow(RangeError);
    expect(() => encodeWqDelete(w, new Uint8Array(15), 0)).toThrow(RangeError);
    expect(w.len).toBe(0);
  });

  it('is exported from the wal index', () => {
    expect(walIndex.wqFullRecordBytes(3, 4, 5)).toBe(93);
    expect([walIndex.WQ_FULL, walIndex.WQ_UPDATE, walIndex.WQ_DELETE]).toEqual([5, 6, 7]);
    expect([walIndex.WQ_UPDATE_BYTES, walIndex.WQ_DELETE_BYTES]).toEqual([38, 25]);
    expect(typeof walIndex.Wal.prototype.appendWqFull).toBe('function');
  });
});

// ---------------------------------------------------------------- the Wal

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(join(os.tmpdir(), 'wal-workq-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const files = (): string[] => fs.readdirSync(dir).sort();
const segFile = (seq: number): string => `g00000001-s0000-${String(seq).padStart(10, '0')}.wal`;

/** A workq job as the tests keep it: the log's view plus its WQ_FULL's seq and size. */
interface WqJob {
  job: RecoveredWqJob;
  seq: number;
  bytes: number;
}

function jobOf(n: number, payloadBytes: number, over: Partial<RecoveredWqJob> = {}): RecoveredWqJob {
  return {
    uuid: uuidOf(n), name: `q${n % 3}`, priority: n - 5, ttrMs: 1000 + n, ttlMs: 60000, scheduleMs: NaN,
    createdMs: 1_700_000_000_000 + n, maxAttempts: 3, maxFails: 1, attempts: 0, state: 0, leaseDeadline: NaN,
    payload: Uint8Array.from({ length: payloadBytes }, (_, i) => (n + i) & 255), result: new Uint8Array(0), ...over,
  };
}

/** Logs `job` whole (replacing `prev` if given) the way the shard does. */
function logFull(wal: Wal, job: RecoveredWqJob, prev: WqJob | null, migrating = false): WqJob {
  const host = new Uint8Array(48);
  host.set(job.uuid, 16);
  const seq = wal.appendWqFull(host, 16, job.name, job.priority, job.ttrMs, job.ttlMs, job.scheduleMs, job.createdMs,
    job.maxAttempts, job.maxFails, job.attempts, job.state, job.leaseDeadline, job.payload, job.result,
    prev ? prev.seq : -1, prev ? prev.bytes : 0, migrating);
  const bytes = wal.lastFullBytes;
  expect(bytes).toBe(wqFullRecordBytes(job.name.length, job.payload.length, job.result.length));
  return { job, seq, bytes };
}

function wqMap(jobs: Iterable<WqJob>): Map<string, RecoveredWqJob> {
  const m = new Map<string, RecoveredWqJob>();
  for (const j of jobs) m.set(hex(j.job.uuid), j.job);
  return m;
}

function recoverClean(d = dir) {
  return recover(d, { onWarning: (w) => expect.fail(w.message) });
}

describe('Wal with workq records', () => {
  it('replays add / update / replace / delete sequences into wqJobs, beside beanstalk jobs', () => {
    const wal = new Wal({ dir, shard: 0, generation: 1, sync: 'never' });
    const body = enc.encode('beanstalk body');
    const b1 = wal.appendFull(3, 'default', 1, 0, 60, STATE_READY, 0, 1, 0, 0, 0, 0, 0, body, 0, body.length);
    let a = logFull(wal, jobOf(1, 10), null);
    let b = logFull(wal, jobOf(2, 0), null);
    const c = logFull(wal, jobOf(3, 5, { scheduleMs: 1_800_000_000_000 }), null);
    wal.commit(0);
    // a: leased, then completed with a result (a new WQ_FULL replacing the first)
    wal.appendWqUpdate(a.job.uuid, 0, a.seq, 1, 4, 1_700_000_005_000);
    a = logFull(wal, { ...a.job, attempts: 1, state: 1, leaseDeadline: NaN, result: enc.encode('done\r\n') }, a);
    // b: leased twice (TTR requeue between), still leased
    wal.appendWqUpdate(b.job.uuid, 0, b.seq, 1, 4, 1_700_000_001_000);
    wal.appendWqUpdate(b.job.uuid, 0, b.seq, 1, 0, NaN);
    wal.appendWqUpdate(b.job.uuid, 0, b.seq, 2, 4, 1_700_000_009_000);
    b = { ...b, job: { ...b.job, attempts: 2, state: 4, leaseDeadline: 1_700_000_009_000 } };
    // c: deleted; then an update for it (already gone) changes nothing
    wal.appendWqDelete(c.job.uuid, 0, c.seq, c.bytes);
    wal.appendWqUpdate(c.job.uuid, 0, c.seq, 9, 2, 5);
    // a beanstalk job deleted among them
    wal.appendDelete(3, b1, fullRecordBytes(7, body.length));
    const b2 = wal.appendFull(4, 'other', 2, 0, 60, STATE_READY, 0, 2, 0, 0, 0, 0, 0, body, 0, 3);
    expect(b2).toBe(wal.currentIndex);
    wal.close(0);

    expect(wal.liveRecords).toBe(3);
    expect(wal.liveBytes).toBe(a.bytes + b.bytes + fullRecordBytes(5, 3));
    const r = recoverClean();
    expect(r.wqJobs).toEqual(wqMap([a, b]));
    expect([...r.jobs.keys()]).toEqual([4]);
    expect(r.jobs.get(4)!.body).toEqual(body.subarray(0, 3));
    expect(r.maxId, 'uuids do not count as ids').toBe(4);
    // copies, not views into the reader's buffer
    const got = r.wqJobs.get(hex(a.job.uuid))!;
    expect(got.uuid.buffer).not.toBe(got.payload.buffer);
    expect(got.payload.buffer).not.toBe(got.result.buffer);
    expect(got.uuid.byteLength).toBe(16);
  });

  it('a re-added uuid after a delete, and a later WQ_FULL always wins', () => {
    const wal = new Wal({ dir, shard: 0, generation: 1, sync: 'never' });
    const a = logFull(wal, jobOf(1, 3), null);
    wal.appendWqDelete(a.job.uuid, 0, a.seq, a.bytes);
    const again = logFull(wal, jobOf(1, 4, { name: 'again' }), null);
    wal.appendWqUpdate(again.job.uuid, 0, again.seq, 1, 4, 77);
    const final = logFull(wal, { ...again.job, attempts: 1, state: 2, result: enc.encode('failed') }, again);
    wal.close(0);
    expect(recoverClean().wqJobs).toEqual(wqMap([final]));
    expect(wal.liveRecords).toBe(1);
    expect(wal.liveBytes).toBe(final.bytes);
  });

  it('replays generations and shards in log order', () => {
    const w1 = new Wal({ dir, shard: 0, generation: 1, sync: 'never' });
    const a = logFull(w1, jobOf(1, 3), null);
    logFull(w1, jobOf(2, 3), null);
    w1.close(0);
    const w1b = new Wal({ dir, shard: 1, generation: 1, sync: 'never' });
    const d = logFull(w1b, jobOf(4, 3), null);
    w1b.close(0);
    // generation 2 rewrites job 1 (changed), and job 2 only to delete it
    const w2 = new Wal({ dir, shard: 0, generation: 2, sync: 'never' });
    const a2 = logFull(w2, { ...a.job, attempts: 5, state: 3 }, null);
    const b2 = logFull(w2, jobOf(2, 1), null);
    w2.appendWqDelete(b2.job.uuid, 0, b2.seq, b2.bytes);
    w2.close(0);
    const r = recoverClean();
    expect(r.wqJobs).toEqual(wqMap([a2, d]));
    expect(r.maxGeneration).toBe(2);
  });

  it('frees segments whose WQ_FULL records were replaced or deleted, only once that is durable', () => {
    // Every batch fills a segment: each commit moves to the next seq.
    const wal = new Wal({ dir, shard: 0, generation: 1, sync: { everyMs: 1e9 }, segmentBytesMax: 200 });
    let now = 1000;
    let a = logFull(wal, jobOf(1, 250), null);
    wal.commit(now++);
    expect(a.seq).toBe(1);
    const b = logFull(wal, jobOf(2, 250), null);
    wal.commit(now++);
    expect(b.seq).toBe(2);
    expect(wal.liveRecords).toBe(2);
    expect(wal.liveBytes).toBe(a.bytes + b.bytes);
    expect(wal.removeDeadSegments()).toBe(0);

    // a gets its result: a new WQ_FULL in segment 3 replaces the one in segment 1
    a = logFull(wal, { ...a.job, state: 1, result: enc.encode('r'.repeat(40)) }, a);
    expect(a.seq).toBe(3);
    wal.commit(now++);
    expect(wal.liveRecords).toBe(2);
    expect(wal.liveBytes).toBe(a.bytes + b.bytes);
    // segment 3 is written but not synced yet (everyMs far away): segment 1 must stay
    expect(wal.removeDeadSegments()).toBe(0);
    expect(files()).toContain(segFile(1));
    wal.sync(now++);
    expect(wal.removeDeadSegments()).toBe(1);
    expect(files()).toEqual([segFile(2), segFile(3)]);
    expect(wal.oldestIndex).toBe(2);

    // b leased (WQ_UPDATE in segment 4, referring back to 2), then deleted
    wal.appendWqUpdate(b.job.uuid, 0, b.seq, 1, 4, 5000);
    wal.commit(now++);
    wal.sync(now++);
    expect(wal.removeDeadSegments()).toBe(0);
    wal.appendWqDelete(b.job.uuid, 0, b.seq, b.bytes);
    wal.commit(now++);
    expect(wal.liveRecords).toBe(1);
    expect(wal.liveBytes).toBe(a.bytes);
    wal.sync(now++);
    expect(wal.removeDeadSegments()).toBe(1); // segment 2; 4 is current
    expect(files()).toEqual([segFile(3), segFile(4)]);
    expect(recoverClean().wqJobs).toEqual(wqMap([a]));

    // delete a too: everything but the current segment can go
    wal.appendWqDelete(a.job.uuid, 0, a.seq, a.bytes);
    wal.commit(now++);
    wal.sync(now++);
    expect(wal.liveRecords).toBe(0);
    expect(wal.liveBytes).toBe(0);
    expect(wal.removeDeadSegments()).toBe(1);
    expect(wal.segmentCount).toBe(1);
    expect(files()).toEqual([segFile(4)]);
    expect(recoverClean().wqJobs.size).toBe(0);
    wal.close(now);
  });

  it('keeps a segment whose WQ_UPDATE still matters, and frees it with the job', () => {
    // Every record fills a segment: each commit moves to the next seq.
    const wal = new Wal({ dir, shard: 0, generation: 1, sync: 'always', segmentBytesMax: 20 });
    const a = logFull(wal, jobOf(1, 30), null); // seg 1
    wal.commit(1);
    const filler = logFull(wal, jobOf(2, 30), null); // seg 2
    wal.commit(2);
    wal.appendWqUpdate(a.job.uuid, 0, a.seq, 1, 4, 9); // seg 3: refers back to 1
    wal.commit(3);
    wal.appendWqDelete(filler.job.uuid, 0, filler.seq, filler.bytes); // seg 4: refers back to 2
    wal.commit(4);
    expect(wal.currentIndex).toBe(5);
    // seg 2 goes; seg 3 has no live record but a's lease is in it while a's WQ_FULL (seg 1) stays
    expect(wal.removeDeadSegments()).toBe(1);
    expect(files()).toEqual([segFile(1), segFile(3), segFile(4)]);
    const aNow: WqJob = { ...a, job: { ...a.job, attempts: 1, state: 4, leaseDeadline: 9 } };
    expect(recoverClean().wqJobs).toEqual(wqMap([aNow]));
    expect([wal.liveRecords, wal.liveBytes]).toEqual([1, a.bytes]);
    wal.appendWqDelete(a.job.uuid, 0, a.seq, a.bytes); // seg 5, which fills too: 6 is current
    wal.commit(5);
    expect(wal.currentIndex).toBe(6);
    expect(wal.removeDeadSegments()).toBe(4); // nothing is live: no file is needed
    expect(files()).toEqual([]);
    expect([wal.liveRecords, wal.liveBytes]).toEqual([0, 0]);
    expect(recoverClean().wqJobs.size).toBe(0);
    wal.close(6);
  });

  it('a job replaced or deleted does not come back while an older segment stays pinned by another job', () => {
    // seg 1 holds a (and pinned p); seg 2 a's replacement; seg 3 a's delete; seg 4 c; seg 5 c's
    // delete. Seg 1 stays (p), so seg 2 and seg 3 must too: without them replay would bring back
    // a from seg 1 (and c's delete refers to seg 4 only: seg 4 and 5 can go).
    const wal = new Wal({ dir, shard: 0, generation: 1, sync: 'always', segmentBytesMax: 20 });
    const p = logFull(wal, jobOf(1, 10), null);
    let a = logFull(wal, jobOf(2, 10), null);
    wal.commit(1);
    a = logFull(wal, { ...a.job, state: 1, result: enc.encode('ok') }, a);
    wal.commit(2);
    expect(a.seq).toBe(2);
    wal.appendWqDelete(a.job.uuid, 0, a.seq, a.bytes);
    wal.commit(3);
    const c = logFull(wal, jobOf(3, 10), null);
    wal.commit(4);
    wal.appendWqDelete(c.job.uuid, 0, c.seq, c.bytes);
    wal.commit(5);
    expect(wal.currentIndex).toBe(6);
    expect(wal.removeDeadSegments()).toBe(2);
    expect(files()).toEqual([segFile(1), segFile(2), segFile(3)]);
    expect(recoverClean().wqJobs).toEqual(wqMap([p]));
    expect([wal.liveRecords, wal.liveBytes]).toEqual([1, p.bytes]);
    wal.close(6);
  });

  it('compaction moves workq jobs (appendWqFull replacing the old segment, counted as migrated)', () => {
    const SEGMENT = 1024;
    const wal = new Wal({ dir, shard: 0, generation: 1, sync: 'always', segmentBytesMax: SEGMENT });
    let now = 1;
    // Per segment: one small long-lived job and a big one that dies in the next batch.
    const pinned: WqJob[] = [];
    let big: WqJob | null = null;
    for (let i = 0; i < 8; i++) {
      if (big) wal.appendWqDelete(big.job.uuid, 0, big.seq, big.bytes);
      pinned.push(logFull(wal, jobOf(1 + i, 100), null));
      big = logFull(wal, jobOf(100 + i, 1000), null);
      wal.commit(now++);
      expect(wal.removeDeadSegments()).toBe(0);
    }
    expect(pinned.map((j) => j.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(wal.compactionCandidate()).toBe(1);
    let moves = 0;
    for (let round = 0; round < 20; round++) {
      const cand = wal.compactionCandidate();
      if (cand < 0) break;
      for (const [i, j] of pinned.entries()) {
        if (j.seq !== cand) continue;
        pinned[i] = logFull(wal, j.job, j, true);
        expect(pinned[i].seq).toBe(wal.currentIndex);
        moves++;
      }
      wal.commit(now++);
      expect(wal.removeDeadSegments(), `round ${round}`).toBeGreaterThan(0);
      expect(files()).not.toContain(segFile(cand));
    }
    expect(wal.compactionCandidate()).toBe(-1);
    expect(moves).toBeGreaterThan(0);
    expect(wal.recordsMigrated).toBe(moves);
    const live = pinned.reduce((n, j) => n + j.bytes, big!.bytes);
    expect(wal.liveBytes).toBe(live);
    expect(wal.liveRecords).toBe(pinned.length + 1);
    expect(wal.bytes).toBeLessThanOrEqual(Math.max(2 * live, 3 * SEGMENT));
    let disk = 0;
    for (const f of files()) disk += fs.statSync(join(dir, f)).size;
    expect(disk).toBe(wal.bytes);
    expect(recoverClean().wqJobs).toEqual(wqMap([...pinned, big!]));
    wal.close(now);
  });

  it('cuts a torn tail inside a WQ_FULL at any point, keeping the records before it', () => {
    const ref = fs.mkdtempSync(join(os.tmpdir(), 'wal-workq-ref-'));
    try {
      const wal = new Wal({ dir: ref, shard: 0, generation: 1, sync: 'never' });
      const a = logFull(wal, jobOf(1, 20), null);
      wal.appendWqUpdate(a.job.uuid, 0, a.seq, 1, 4, 42);
      const b = logFull(wal, jobOf(2, 600, { name: name255, result: enc.encode('result!') }), null);
      wal.close(0);
      const whole = fs.readFileSync(join(ref, segFile(1)));
      const bStart = whole.length - b.bytes;
      expect(bStart).toBe(a.bytes + WQ_UPDATE_BYTES);
      expect(recover(ref).wqJobs.size).toBe(2);
      const aNow = { ...a.job, attempts: 1, state: 4, leaseDeadline: 42 };
      // cuts: in the header, in the uuid, in the name, right before the lengths, in the payload,
      // in the result, one byte short
      for (const cut of [3, 9, 20, 40, 26 + 255 + 47, 81 + 255 + 1, 81 + 255 + 300, b.bytes - 3, b.bytes - 1]) {
        fs.rmSync(dir, { recursive: true, force: true });
        fs.mkdirSync(dir);
        fs.writeFileSync(join(dir, segFile(1)), whole.subarray(0, bStart + cut));
        const warnings: WalWarning[] = [];
        const r = recover(dir, { onWarning: (w) => warnings.push(w) });
        expect(warnings.map((w) => [w.kind, w.offset, w.bytes]), `cut at ${cut}`).toEqual([['torn-tail', bStart, cut]]);
        expect(r.tornTails).toBe(1);
        expect(r.wqJobs).toEqual(new Map([[hex(a.job.uuid), aNow]]));
        expect(fs.statSync(join(dir, segFile(1))).size).toBe(bStart);
      }
    } finally {
      fs.rmSync(ref, { recursive: true, force: true });
    }
  });

  it('reports corruption inside a WQ_FULL of a segment that is not the last, and skips it on request', () => {
    const wal = new Wal({ dir, shard: 0, generation: 1, sync: 'always', segmentBytesMax: 100 });
    const a = logFull(wal, jobOf(1, 150), null);
    wal.commit(1);
    const b = logFull(wal, jobOf(2, 150), null);
    wal.commit(2);
    wal.close(3);
    const p = join(dir, segFile(1));
    const bytes = fs.readFileSync(p);
    bytes[100] ^= 1; // in a's payload
    fs.writeFileSync(p, bytes);
    expect(() => recover(dir)).toThrow(WalCorruptError);
    const warnings: WalWarning[] = [];
    const r = recover(dir, { skipCorrupt: true, onWarning: (w) => warnings.push(w) });
    expect(warnings.map((w) => w.kind)).toEqual(['corrupt-skipped']);
    expect(r.wqJobs).toEqual(wqMap([b]));
    expect(a.seq).toBe(1);
  });
});

// ---------------------------------------------------------------- simulation

describe('Wal with workq records: seeded simulation', () => {
  const envSeed = process.env.WAL_SEED;
  const seeds = envSeed ? [Number(envSeed)] : [1, 2, 3];
  for (const [mode, sync] of [['never', 'never'], ['always', 'always']] as Array<[string, SyncMode]>) {
    for (const seed of seeds) {
      it(`add / lease / requeue / result / delete / compaction, ${mode}, seed ${seed}`, () => {
        try {
          simulate(sync, seed);
        } catch (e) {
          console.error(`wal-workq simulation failed: WAL_SEED=${seed} (${mode})`);
          throw e;
        }
      });
    }
  }
});

function simulate(sync: SyncMode, seed: number): void {
  const SEGMENT = 4096;
  const rng = mulberry32(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(rng() * (hi - lo + 1));
  const wal = new Wal({ dir, shard: 0, generation: 1, sync, segmentBytesMax: SEGMENT });
  const table = new Map<string, WqJob>();
  const bs = new Map<number, { seq: number; bytes: number; body: Uint8Array }>();
  const pinned = new Set<string>(); // long-lived jobs (they force compaction)
  let nextN = 1;
  let nextId = 1;
  let now = 1_700_000_000_000;
  let migratedByUs = 0;
  const pick = (): WqJob | undefined => {
    if (table.size === 0) return undefined;
    let k = int(0, table.size - 1);
    for (const j of table.values()) if (k-- === 0) return j;
    return undefined;
  };

  const check = (what: string) => {
    let live = 0;
    for (const j of table.values()) live += j.bytes;
    for (const j of bs.values()) live += j.bytes;
    expect(wal.liveBytes, `${what}: live bytes`).toBe(live);
    expect(wal.liveRecords, `${what}: live records`).toBe(table.size + bs.size);
    let disk = 0;
    for (const f of fs.readdirSync(dir)) disk += fs.statSync(join(dir, f)).size;
    expect(disk, `${what}: ${disk} bytes on disk for ${live} live`).toBeLessThanOrEqual(4 * live + 4 * SEGMENT);
  };
  const replayCheck = (what: string) => {
    const r = recoverClean();
    expect(r.wqJobs, `${what}: wqJobs`).toEqual(wqMap(table.values()));
    expect(new Set(r.jobs.keys()), `${what}: beanstalk jobs`).toEqual(new Set(bs.keys()));
  };

  for (let batch = 1; batch <= 400; batch++) {
    now += 10;
    const ops = int(0, 6);
    for (let o = 0; o < ops; o++) {
      const r = rng();
      if (r < 0.3 || table.size === 0) {
        const n = nextN++;
        const j = logFull(wal, jobOf(n, int(0, 400), {
          name: `queue-${int(0, 4)}`, scheduleMs: rng() < 0.2 ? now + 5000 : NaN,
        }), null);
        table.set(hex(j.job.uuid), j);
        if (rng() < 0.03) pinned.add(hex(j.job.uuid));
      } else if (r < 0.5) {
        const j = pick()!; // lease or TTR requeue
        const leased = j.job.state !== 4;
        const job = { ...j.job, attempts: j.job.attempts + (leased ? 1 : 0), state: leased ? 4 : 0,
          leaseDeadline: leased ? now + j.job.ttrMs : NaN };
        wal.appendWqUpdate(job.uuid, 0, j.seq, job.attempts, job.state, job.leaseDeadline);
        table.set(hex(job.uuid), { ...j, job });
      } else if (r < 0.65) {
        const j = pick()!; // a stored result: the job rewritten whole
        const job = { ...j.job, state: int(1, 2), leaseDeadline: NaN, result: Uint8Array.from({ length: int(0, 200) }, () => int(0, 255)) };
        table.set(hex(job.uuid), logFull(wal, job, j));
      } else if (r < 0.85) {
        const j = pick()!;
        const k = hex(j.job.uuid);
        if (pinned.has(k)) continue;
        wal.appendWqDelete(j.job.uuid, 0, j.seq, j.bytes);
        table.delete(k);
      } else if (r < 0.93) {
        const id = nextId++;
        const body = new Uint8Array(int(0, 300)).fill(id & 255);
        const seq = wal.appendFull(id, 't', 0, 0, 60, STATE_READY, 0, now, 0, 0, 0, 0, 0, body, 0, body.length);
        bs.set(id, { seq, bytes: fullRecordBytes(1, body.length), body });
      } else if (bs.size > 0) {
        const [id, j] = bs.entries().next().value!;
        wal.appendDelete(id, j.seq, j.bytes);
        bs.delete(id);
      }
    }
    // Compaction, as the shard does it: every live job of the candidate segment moved.
    const cand = wal.compactionCandidate();
    if (cand >= 0) {
      for (const [k, j] of table) {
        if (j.seq === cand) {
          table.set(k, logFull(wal, j.job, j, true));
          migratedByUs++;
        }
      }
      for (const [id, j] of bs) {
        if (j.seq === cand) {
          const seq = wal.migrate(cand, id, 't', 0, 0, 60, STATE_READY, 0, now, 0, 0, 0, 0, 0, j.body, 0, j.body.length);
          bs.set(id, { ...j, seq });
          migratedByUs++;
        }
      }
    }
    wal.commit(now);
    wal.removeDeadSegments();
    check(`batch ${batch}`);
    if (batch % 50 === 0) replayCheck(`batch ${batch}`);
  }
  expect(wal.recordsMigrated).toBe(migratedByUs);
  expect(migratedByUs, 'the pinned jobs forced compaction').toBeGreaterThan(0);
  wal.close(now);
  replayCheck('end');
}
