// WAL record format: every type round-trips through the encoders and decoder (awkward bodies,
// the longest tube name, 64 KiB bodies), lengths are as documented, and damage is detected.

import { describe, expect, it } from 'vitest';
import { crc32 } from 'node:zlib';
import {
  decodeRecord, DecodedRecord, DELETE, DELETE_BYTES, encodeDelete, encodeFull, encodeUpdate, FULL,
  fullRecordBytes, INVALID, NEED_MORE, RECORD_PREFIX_BYTES_MAX, recordLength, STATE_BURIED, STATE_DELAYED,
  STATE_READY, STATE_RESERVED, UPDATE, UPDATE_BYTES, Writer,
} from '../../workers/wal/record.ts';

const enc = new TextEncoder();

interface FullArgs {
  id: number; tube: string; pri: number; delay: number; ttr: number; state: number; deadline: number;
  created: number; reserves: number; timeouts: number; releases: number; buries: number; kicks: number;
  body: Uint8Array;
}

function putFull(w: Writer, a: FullArgs, pad = 0): number {
  // The body sits inside a larger array to exercise bodyStart/bodyEnd.
  const host = new Uint8Array(a.body.length + 2 * pad).fill(0xee);
  host.set(a.body, pad);
  return encodeFull(w, a.id, a.tube, a.pri, a.delay, a.ttr, a.state, a.deadline, a.created, a.reserves, a.timeouts,
    a.releases, a.buries, a.kicks, host, pad, pad + a.body.length);
}

function expectFull(r: DecodedRecord, a: FullArgs): void {
  expect(r.type).toBe(FULL);
  expect({
    id: r.id, tube: r.tube, pri: r.pri, delay: r.delaySec, ttr: r.ttrSec, state: r.state, deadline: r.deadlineMs,
    created: r.createdMs, reserves: r.reserves, timeouts: r.timeouts, releases: r.releases, buries: r.buries,
    kicks: r.kicks, body: r.bodyCopy(),
  }).toEqual(a);
}

const tube200 = 'abcdefghij'.repeat(20);
const cases: FullArgs[] = [
  { id: 1, tube: 'default', pri: 0, delay: 0, ttr: 1, state: STATE_READY, deadline: 0, created: 1_700_000_000_123, reserves: 0, timeouts: 0, releases: 0, buries: 0, kicks: 0, body: new Uint8Array(0) },
  { id: 2 ** 53 - 1, tube: tube200, pri: 2 ** 32 - 1, delay: 2 ** 32 - 1, ttr: 2 ** 32 - 1, state: STATE_BURIED, deadline: 1.5e12 + 0.25, created: 1.7e12, reserves: 4e9, timeouts: 1, releases: 2, buries: 3, kicks: 4, body: enc.encode('a\r\nb\0c\r\n\r\n\0') },
  { id: 42, tube: 'x', pri: 1024, delay: 30, ttr: 120, state: STATE_DELAYED, deadline: 1_700_000_030_000, created: 1_700_000_000_000, reserves: 7, timeouts: 6, releases: 5, buries: 4, kicks: 3, body: Uint8Array.from({ length: 65536 }, (_, i) => (i * 31 + 7) & 255) },
  { id: 43, tube: '', pri: 1, delay: 0, ttr: 60, state: STATE_RESERVED, deadline: 1_700_000_060_000, created: 1, reserves: 1, timeouts: 0, releases: 0, buries: 0, kicks: 0, body: new Uint8Array([13, 10, 0, 255, 13]) },
];

describe('wal record format', () => {
  it('round-trips FULL records of every shape, back to back in one buffer', () => {
    const w = new Writer(256); // small, so it has to grow
    const offsets: number[] = [];
    for (const [i, a] of cases.entries()) {
      offsets.push(w.len);
      const n = putFull(w, a, i * 3);
      expect(n).toBe(fullRecordBytes(a.tube.length, a.body.length));
      expect(w.len - offsets[offsets.length - 1]).toBe(n);
    }
    const r = new DecodedRecord();
    let off = 0;
    for (const a of cases) {
      const n = decodeRecord(w.buf, off, w.len, r);
      expect(n).toBe(fullRecordBytes(a.tube.length, a.body.length));
      expect(r.size).toBe(n);
      expectFull(r, a);
      off += n;
    }
    expect(off).toBe(w.len);
  });

  it('round-trips UPDATE and DELETE records', () => {
    const w = new Writer();
    expect(encodeUpdate(w, 7, STATE_DELAYED, 99, 5, 1_700_000_005_000.5, 1, 2, 3, 4, 5)).toBe(UPDATE_BYTES);
    expect(encodeDelete(w, 2 ** 40 + 3)).toBe(DELETE_BYTES);
    expect(encodeUpdate(w, 8, STATE_BURIED, 2 ** 32 - 1, 0, 0, 4e9, 0, 0, 1, 0)).toBe(UPDATE_BYTES);
    const r = new DecodedRecord();
    let off = decodeRecord(w.buf, 0, w.len, r);
    expect(off).toBe(UPDATE_BYTES);
    expect([r.type, r.id, r.state, r.pri, r.delaySec, r.deadlineMs, r.reserves, r.timeouts, r.releases, r.buries, r.kicks])
      .toEqual([UPDATE, 7, STATE_DELAYED, 99, 5, 1_700_000_005_000.5, 1, 2, 3, 4, 5]);
    off += decodeRecord(w.buf, off, w.len, r);
    expect([r.type, r.id]).toEqual([DELETE, 2 ** 40 + 3]);
    off += decodeRecord(w.buf, off, w.len, r);
    expect([r.type, r.id, r.state, r.pri, r.reserves, r.buries]).toEqual([UPDATE, 8, STATE_BURIED, 2 ** 32 - 1, 4e9, 1]);
    expect(off).toBe(w.len);
  });

  it('lays out the header as documented: length of the rest, CRC-32 of the rest, type', () => {
    const w = new Writer();
    encodeDelete(w, 5);
    expect(w.buf.readUInt32LE(0)).toBe(DELETE_BYTES - 8);
    expect(w.buf.readUInt32LE(4)).toBe(crc32(w.buf.subarray(8, DELETE_BYTES)));
    expect(w.buf[8]).toBe(DELETE);
    expect(w.buf.readDoubleLE(9)).toBe(5);
  });

  it('tells a short buffer (NEED_MORE) from damage (INVALID) at every cut and every flipped byte', () => {
    const w = new Writer();
    putFull(w, cases[1]);
    const full = Buffer.from(w.buf.subarray(0, w.len));
    const r = new DecodedRecord();
    for (let cut = 0; cut < full.length; cut++) expect(decodeRecord(full, 0, cut, r)).toBe(NEED_MORE);
    expect(recordLength(full, 0, Math.min(full.length, RECORD_PREFIX_BYTES_MAX))).toBe(full.length);
    for (let i = 0; i < full.length; i++) {
      const bad = Buffer.from(full);
      bad[i] ^= 0x40;
      const got = decodeRecord(bad, 0, bad.length, r);
      // A flip in a length field may make the record look longer than the buffer: NEED_MORE.
      expect(got === INVALID || got === NEED_MORE, `flip at ${i}`).toBe(true);
    }
  });

  it('rejects tube names over 200 bytes', () => {
    expect(() => encodeFull(new Writer(), 1, 'a'.repeat(201), 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, new Uint8Array(0), 0, 0))
      .toThrow(RangeError);
  });

  it('gives back a grown buffer on reset', () => {
    const w = new Writer(1024);
    putFull(w, { ...cases[0], body: new Uint8Array(8 * 1024 * 1024) });
    expect(w.buf.length).toBeGreaterThan(8 * 1024 * 1024);
    w.reset();
    expect(w.len).toBe(0);
    expect(w.buf.length).toBe(1024);
  });
});
