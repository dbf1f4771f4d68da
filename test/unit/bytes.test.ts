// copyBytes (src/shared/bytes.ts): the hot path's copy of a range, by a loop up to COPY_LOOP_MAX
// bytes and by `set` past it, between Buffers, plain Uint8Arrays and views of a
// SharedArrayBuffer (the call sites mix them; a shard thread's records are in its rings). Both
// paths copy exactly the range, to the offset asked, and nothing else.
// u32le / i32le / f64le: a record's fields, read as Buffer's readers read them, at any offset.

import { describe, expect, it } from 'vitest';
import { COPY_LOOP_MAX, copyBytes, f64le, i32le, u32le } from '../../src/shared/bytes.ts';

describe('copyBytes', () => {
  const kinds = {
    Uint8Array: (n: number) => new Uint8Array(n),
    Buffer: (n: number) => Buffer.alloc(n),
    'a Buffer slice': (n: number) => Buffer.alloc(n + 11).subarray(11),
    'ring (a Buffer over a SharedArrayBuffer)': (n: number) => Buffer.from(new SharedArrayBuffer(n + 8), 8, n),
  };
  for (const [srcKind, makeSrc] of Object.entries(kinds)) {
    for (const [dstKind, makeDst] of Object.entries(kinds)) {
      for (const n of [0, 1, 7, COPY_LOOP_MAX, COPY_LOOP_MAX + 1, 100, 3000]) {
        it(`copies ${n} bytes from the middle of a ${srcKind} to the middle of a ${dstKind}`, () => {
          const src = makeSrc(n + 20);
          for (let i = 0; i < src.length; i++) src[i] = (i * 7 + 3) & 0xff;
          const dst = makeDst(n + 40).fill(0xee);
          copyBytes(dst, 13, src, 5, 5 + n);
          expect([...dst.subarray(0, 13)]).toEqual(new Array(13).fill(0xee));
          expect([...dst.subarray(13, 13 + n)]).toEqual([...src.subarray(5, 5 + n)]);
          expect([...dst.subarray(13 + n)]).toEqual(new Array(dst.length - 13 - n).fill(0xee));
        });
      }
    }
  }
});

describe('u32le, i32le, f64le', () => {
  const ints = [0, 1, 255, 256, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff, 123456789];
  const doubles = [0, -0, 1, -1, 0.5, 2 ** 53 - 1, 2 ** 53, -(2 ** 31), 1e300, -1e-300, Infinity, -Infinity, NaN, Number.MIN_VALUE, 1764201600123.25];

  it('read what Buffer wrote, at every offset within a word', () => {
    const buf = Buffer.alloc(64);
    for (let off = 0; off < 8; off++) {
      for (const v of ints) {
        buf.writeUInt32LE(v, off);
        expect(u32le(buf, off)).toBe(v);
        expect(i32le(buf, off)).toBe(buf.readInt32LE(off));
      }
      for (const v of doubles) {
        buf.writeDoubleLE(v, off + 8);
        expect(Object.is(f64le(buf, off + 8), v)).toBe(true);
      }
    }
  });

  it('agree with Buffer on random bytes (every u32 and i32; every f64 that is not a NaN payload)', () => {
    const buf = Buffer.alloc(4096);
    let x = 0x9e3779b9;
    for (let i = 0; i < buf.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      buf[i] = x & 0xff;
    }
    for (let at = 0; at + 8 <= buf.length; at += 3) {
      expect(u32le(buf, at)).toBe(buf.readUInt32LE(at));
      expect(i32le(buf, at)).toBe(buf.readInt32LE(at));
      const d = buf.readDoubleLE(at);
      expect(Object.is(f64le(buf, at), d)).toBe(true);
    }
  });

  it('read from a Buffer that is a slice of a larger one (its own offset into the memory)', () => {
    const big = Buffer.alloc(100);
    const slice = big.subarray(37, 77);
    slice.writeUInt32LE(0xdeadbeef, 5);
    slice.writeDoubleLE(-42.125, 9);
    expect(u32le(slice, 5)).toBe(0xdeadbeef);
    expect(f64le(slice, 9)).toBe(-42.125);
  });
});
