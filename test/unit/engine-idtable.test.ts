import { describe, expect, it } from 'vitest';
import { IdTable } from '../../workers/engine/idtable.ts';
import { mulberry32 as rng } from '../support/prng.ts';


describe('IdTable', () => {
  it('inserts, finds and grows (sequential ids)', () => {
    const t = new IdTable();
    const start = t.capacity;
    for (let id = 1; id <= 5000; id++) expect(t.insert(id, id * 2)).toBe(true);
    t.check();
    expect(t.size).toBe(5000);
    expect(t.capacity).toBeGreaterThan(start);
    expect(t.size / t.capacity).toBeLessThanOrEqual(0.6);
    for (let id = 1; id <= 5000; id++) expect(t.get(id)).toBe(id * 2);
    expect(t.get(5001)).toBe(-1);
    expect(t.insert(77, 1)).toBe(false); // duplicate: unchanged
    expect(t.get(77)).toBe(154);
  });

  it('handles ids up to 2^53 - 1 and ids differing only in the high bits', () => {
    const t = new IdTable();
    const ids = [1, 2 ** 32, 2 ** 32 + 1, 2 ** 33, 2 ** 52, 2 ** 53 - 1, 2 ** 53 - 2, 4294967295];
    ids.forEach((id, i) => t.insert(id, i));
    t.check();
    ids.forEach((id, i) => expect(t.get(id)).toBe(i));
    expect(t.get(2 ** 32 + 2)).toBe(-1);
    expect(() => t.insert(0, 1)).toThrow(RangeError);
    // 0 marks empty cells: looking it up must not match one
    expect(t.get(0)).toBe(-1);
    expect(t.remove(0)).toBe(-1);
    expect(t.get(-1)).toBe(-1);
    expect(t.get(NaN)).toBe(-1);
    t.check();
  });

  it('backward-shift deletion keeps every survivor reachable (random churn vs Map)', () => {
    const r = rng(42);
    const t = new IdTable(16);
    const ref = new Map<number, number>();
    let nextId = 1;
    for (let step = 0; step < 20000; step++) {
      if (ref.size === 0 || r() < 0.55) {
        // mix of sequential and scattered ids to make clusters
        const id = r() < 0.5 ? nextId++ : 1 + Math.floor(r() * 2 ** 40);
        const fresh = !ref.has(id);
        expect(t.insert(id, step)).toBe(fresh);
        if (fresh) ref.set(id, step);
      } else {
        const keys = [...ref.keys()];
        const id = keys[Math.floor(r() * keys.length)];
        expect(t.remove(id)).toBe(ref.get(id));
        ref.delete(id);
        expect(t.remove(id)).toBe(-1);
      }
      if (step % 500 === 0) {
        t.check();
        for (const [id, v] of ref) expect(t.get(id)).toBe(v);
      }
    }
    t.check();
    expect(t.size).toBe(ref.size);
    for (const [id, v] of ref) expect(t.get(id)).toBe(v);
    const seen = new Map<number, number>();
    t.forEach((id, v) => seen.set(id, v));
    expect(seen).toEqual(ref);
  });

  it('shrinks after a burst is deleted', () => {
    const t = new IdTable();
    for (let id = 1; id <= 10000; id++) t.insert(id, id);
    const big = t.capacity;
    for (let id = 1; id <= 9990; id++) t.remove(id);
    t.check();
    expect(t.capacity).toBeLessThan(big / 16);
    for (let id = 9991; id <= 10000; id++) expect(t.get(id)).toBe(id);
  });
});
