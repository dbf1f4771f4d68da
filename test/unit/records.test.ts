// Pieces of src/shared/records.ts that shard code shares: IdList (a record's list of u32 ids, read
// into one array kept for the next record) and RecordWriter.closeEnvelope (a record whose length
// takes in the records written after it, as a shard wraps the replies of a waiting connection's
// kept requests).

import { describe, expect, it } from 'vitest';
import { E_DEFERRED, HEADER_BYTES, IdList, R_OK, RecordWriter } from '../../src/shared/records.ts';

/** `ids` as u32 little-endian words, after `lead` bytes of 0xee. */
function idsAt(lead: number, ids: number[]): Buffer {
  const b = Buffer.alloc(lead + ids.length * 4 + 3, 0xee);
  ids.forEach((v, i) => b.writeUInt32LE(v, lead + i * 4));
  return b;
}

describe('IdList', () => {
  it('reads count ids from the byte asked, at odd offsets too', () => {
    const list = new IdList(4);
    expect([...list.read(idsAt(HEADER_BYTES, [7, 0, 1_000_000, 3]), HEADER_BYTES, 4).subarray(0, 4)]).toEqual([7, 0, 1_000_000, 3]);
    expect([...list.read(idsAt(13, [42, 9]), 13, 2).subarray(0, 2)]).toEqual([42, 9]);
  });

  it('grows past its first size, and keeps one array while the lists fit', () => {
    const list = new IdList(2);
    const many = Array.from({ length: 100 }, (_, i) => i * 3 + 1);
    const a = list.read(idsAt(5, many), 5, 100);
    expect([...a.subarray(0, 100)]).toEqual(many);
    const b = list.read(idsAt(0, [8, 6]), 0, 2);
    expect(b).toBe(a);
    expect([...b.subarray(0, 2)]).toEqual([8, 6]);
  });

  it('reads nothing for an empty list', () => {
    const list = new IdList();
    expect(() => list.read(Buffer.alloc(0), 0, 0)).not.toThrow();
  });
});

describe('RecordWriter.closeEnvelope', () => {
  it('sets the envelope length to the bytes from it to the end, records inside unchanged', () => {
    const w = new RecordWriter(64); // small: the inner records make it grow
    w.header(R_OK, 0, 1, 0, 0, 0, 0);
    const env = w.header(E_DEFERRED, 0, 5, 1, 0, 0, 0);
    const inner = w.header(R_OK, 100, 5, 2, 3, 4, 6);
    w.bytes(Buffer.alloc(100, 0x61), 0, 100);
    w.closeEnvelope(env);
    expect(w.buf.readUInt32LE(env)).toBe(w.len - env);
    expect(w.buf.readUInt32LE(env)).toBe(2 * HEADER_BYTES + 100);
    expect(w.buf.readUInt32LE(inner)).toBe(HEADER_BYTES + 100);
    expect(w.buf.readUInt32LE(env + 8)).toBe(5);
    expect(w.buf.readUInt32LE(env + 12)).toBe(1);
    expect(w.buf.readUInt32LE(0)).toBe(HEADER_BYTES);
  });
});
