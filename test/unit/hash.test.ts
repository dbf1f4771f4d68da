import { describe, expect, it } from 'vitest';
import { fnv1a32, fnv1a32String, shardOf, shardOfBytes } from '../../src/route/hash.ts';

const enc = new TextEncoder();

describe('fnv1a32', () => {
  it('matches the published FNV-1a 32-bit test vectors', () => {
    // From the FNV reference test suite (isthe.com/chongo/tech/comp/fnv).
    expect(fnv1a32(enc.encode(''))).toBe(0x811c9dc5);
    expect(fnv1a32(enc.encode('a'))).toBe(0xe40c292c);
    expect(fnv1a32(enc.encode('foobar'))).toBe(0xbf9cf968);
    expect(fnv1a32String('')).toBe(0x811c9dc5);
    expect(fnv1a32String('a')).toBe(0xe40c292c);
    expect(fnv1a32String('foobar')).toBe(0xbf9cf968);
  });

  it('hashes a slice in place, as the parser does over its read buffer', () => {
    const line = enc.encode('use default\r\n');
    expect(fnv1a32(line, 4, 11)).toBe(fnv1a32String('default'));
    expect(() => fnv1a32(line, 5, 100)).toThrow(RangeError);
    expect(() => fnv1a32(line, 6, 5)).toThrow(RangeError);
  });
});

describe('shardOf', () => {
  it('gives the same shard for a string and its bytes', () => {
    const names = ['default', 'a', 'emails', 'tube-1', 'x'.repeat(200), 'MiXeD_Case.(tube)$+;/', '', 'üñí'];
    for (const name of names) {
      for (const shards of [1, 2, 3, 7, 16, 255]) {
        const bytes = enc.encode(name);
        const s = shardOf(name, shards);
        expect(shardOf(bytes, shards), `${name}/${shards}`).toBe(s);
        expect(shardOfBytes(bytes, 0, bytes.length, shards)).toBe(s);
        expect(s).toBeGreaterThanOrEqual(0);
        expect(s).toBeLessThan(shards);
      }
    }
  });

  it('is stable (values pinned from an independent implementation: a change would move tubes)', () => {
    expect(fnv1a32String('default')).toBe(2470140894);
    expect(['default', 'emails', 'tube-1'].map((n) => shardOf(n, 16))).toEqual([14, 12, 5]);
  });

  it('spreads similar tube names evenly over 16 shards', () => {
    const shards = 16;
    const counts = new Array<number>(shards).fill(0);
    const n = 16_000;
    for (let i = 0; i < n; i++) counts[shardOf(`tube-${i}`, shards)]!++;
    const expected = n / shards;
    for (const c of counts) {
      expect(c).toBeGreaterThan(expected * 0.85);
      expect(c).toBeLessThan(expected * 1.15);
    }
    // Chi-squared with 15 degrees of freedom: p = 0.001 at 37.7.
    const chi2 = counts.reduce((sum, c) => sum + (c - expected) ** 2 / expected, 0);
    expect(chi2).toBeLessThan(37.7);
  });

  it('rejects a bad shard count', () => {
    for (const bad of [0, -1, 1.5, NaN]) expect(() => shardOf('default', bad), String(bad)).toThrow(RangeError);
  });
});
