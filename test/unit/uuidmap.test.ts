import { describe, expect, it } from 'vitest';
import { UuidMap } from '../../src/route/uuidmap.ts';
import { mulberry32 } from '../support/prng.ts';

function uuidOf(rand: () => number): Uint8Array {
  const u = new Uint8Array(16);
  for (let i = 0; i < 16; i++) u[i] = Math.floor(rand() * 256);
  return u;
}

const key = (u: Uint8Array): string => Buffer.from(u).toString('hex');

describe('UuidMap', () => {
  it('inserts, finds, refuses duplicates and removes', () => {
    const m = new UuidMap();
    const a = new Uint8Array(16).fill(1);
    const b = new Uint8Array(16).fill(2);
    expect(m.lookup(a)).toBe(-1);
    expect(m.insert(a, 0, 7, 3)).toBe(true);
    expect(m.insert(a, 0, 8, 1)).toBe(false);
    const i = m.lookup(a);
    expect(m.idAt(i)).toBe(7);
    expect(m.shardAt(i)).toBe(3);
    expect(m.lookup(b)).toBe(-1);
    expect(m.remove(a, 0, 99)).toBe(false); // another id: left alone
    expect(m.remove(a)).toBe(true);
    expect(m.lookup(a)).toBe(-1);
    expect(m.size).toBe(0);
  });

  it('reads keys at an offset inside a larger buffer', () => {
    const m = new UuidMap();
    const buf = new Uint8Array(40);
    buf.fill(9, 10, 26);
    m.insert(buf, 10, 5, 0);
    expect(m.idAt(m.lookup(new Uint8Array(16).fill(9)))).toBe(5);
  });

  it('agrees with a Map through growth and random removals (seeded)', () => {
    const seed = 1234;
    const rand = mulberry32(seed);
    const m = new UuidMap(16);
    const ref = new Map<string, [Uint8Array, number, number]>();
    const live: Uint8Array[] = [];
    let nextId = 1;
    for (let step = 0; step < 40000; step++) {
      const r = rand();
      if (r < 0.6 || live.length === 0) {
        // Few distinct high bytes so probe runs collide and wrap.
        const u = uuidOf(rand);
        const id = nextId++;
        const shard = step % 7;
        const fresh = !ref.has(key(u));
        expect(m.insert(u, 0, id, shard)).toBe(fresh);
        if (fresh) {
          ref.set(key(u), [u, id, shard]);
          live.push(u);
        }
      } else {
        const k = Math.floor(rand() * live.length);
        const u = live[k];
        live[k] = live[live.length - 1];
        live.pop();
        expect(m.remove(u)).toBe(true);
        ref.delete(key(u));
      }
      if (step % 997 === 0) {
        expect(m.size).toBe(ref.size);
        for (const [u, id, shard] of ref.values()) {
          const i = m.lookup(u);
          expect(i, `seed ${seed} step ${step}`).not.toBe(-1);
          expect(m.idAt(i)).toBe(id);
          expect(m.shardAt(i)).toBe(shard);
        }
      }
    }
  });
});
