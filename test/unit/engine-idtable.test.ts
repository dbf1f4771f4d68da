import { describe, expect, it } from 'vitest';
import type { OffsetColumn } from '../../workers/engine/columns.ts';
import { IDTABLE_GROWTH, IDTABLE_SLOTS_MAX, IdTable } from '../../workers/engine/idtable.ts';
import { mulberry32 as rng } from '../support/prng.ts';


// The table stores slots only and reads each slot's id from the owner's column, as the engines
// do: `ins` writes keys[slot] first, as the contract asks.
function table(capacity?: number) {
  const keys = new Float64Array(1 << 16);
  const t = new IdTable(capacity);
  t.bind(keys);
  const ins = (id: number, slot: number): boolean => {
    const before = keys[slot];
    keys[slot] = id;
    const ok = t.insert(id, slot);
    if (!ok) keys[slot] = before;
    return ok;
  };
  return { t, keys, ins };
}

describe('IdTable', () => {
  it('inserts, finds and grows (sequential ids)', () => {
    const { t, ins } = table();
    const start = t.capacity;
    for (let id = 1; id <= 5000; id++) expect(ins(id, id * 2)).toBe(true);
    t.check();
    expect(t.size).toBe(5000);
    expect(t.capacity).toBeGreaterThan(start);
    expect(t.size / t.capacity).toBeLessThanOrEqual(0.75);
    expect(t.bytes).toBe(t.capacity * 4); // a cell is the slot alone
    for (let id = 1; id <= 5000; id++) expect(t.get(id)).toBe(id * 2);
    expect(t.get(5001)).toBe(-1);
    expect(ins(77, 1)).toBe(false); // duplicate: unchanged
    expect(t.get(77)).toBe(154);
  });

  it('handles ids up to 2^53 - 1 and ids differing only in the high bits', () => {
    const { t, ins } = table();
    const ids = [1, 2 ** 32, 2 ** 32 + 1, 2 ** 33, 2 ** 52, 2 ** 53 - 1, 2 ** 53 - 2, 4294967295];
    ids.forEach((id, i) => ins(id, i));
    t.check();
    ids.forEach((id, i) => expect(t.get(id)).toBe(i));
    expect(t.get(2 ** 32 + 2)).toBe(-1);
    expect(() => ins(0, 100)).toThrow(RangeError);
    // 0 marks empty cells: looking it up must not match one
    expect(t.get(0)).toBe(-1);
    expect(t.remove(0)).toBe(-1);
    expect(t.get(-1)).toBe(-1);
    expect(t.get(NaN)).toBe(-1);
    t.check();
  });

  it('backward-shift deletion keeps every survivor reachable (random churn vs Map)', () => {
    const r = rng(42);
    const { t, ins } = table(16);
    const ref = new Map<number, number>();
    let nextId = 1;
    for (let step = 0; step < 20000; step++) {
      if (ref.size === 0 || r() < 0.55) {
        // mix of sequential and scattered ids to make clusters
        const id = r() < 0.5 ? nextId++ : 1 + Math.floor(r() * 2 ** 40);
        const fresh = !ref.has(id);
        expect(ins(id, step)).toBe(fresh);
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

  it('grows by IDTABLE_GROWTH, not to the next power of two: at most 1.33 x 1.5 cells per entry', () => {
    expect(IDTABLE_GROWTH).toBe(1.5);
    const { t, ins } = table();
    const n = 60_000; // a doubling table would have 131072 cells here (2.18 per entry)
    for (let id = 1; id <= n; id++) ins(id, id);
    t.check();
    expect(t.size / t.capacity).toBeLessThanOrEqual(0.75);
    expect(t.capacity).toBeLessThanOrEqual((n / 0.75) * IDTABLE_GROWTH);
    for (let id = 1; id <= n; id += 7) expect(t.get(id)).toBe(id);
    expect(t.get(n + 1)).toBe(-1);
  });

  it('refuses a slot it cannot name (IDTABLE_SLOTS_MAX: 27 bits of a cell, 5 are the hash tag)', () => {
    expect(IDTABLE_SLOTS_MAX).toBe(2 ** 27 - 1);
    // An id column of 2^27 slots, read through get() like the engine's OffsetColumn, without the memory.
    const keys = new Map([[IDTABLE_SLOTS_MAX - 1, 5], [IDTABLE_SLOTS_MAX, 6]]);
    const t = new IdTable();
    t.bind({ get: (slot: number) => keys.get(slot) ?? 0 } as unknown as OffsetColumn);
    expect(t.insert(5, IDTABLE_SLOTS_MAX - 1)).toBe(true); // the last slot it names
    expect(t.get(5)).toBe(IDTABLE_SLOTS_MAX - 1);
    expect(() => t.insert(6, IDTABLE_SLOTS_MAX)).toThrow(/IDTABLE_SLOTS_MAX/);
    expect(t.get(6)).toBe(-1);
    t.check();
  });

  it('shrinks after a burst is deleted', () => {
    const { t, ins } = table();
    for (let id = 1; id <= 10000; id++) ins(id, id);
    const big = t.capacity;
    for (let id = 1; id <= 9990; id++) t.remove(id);
    t.check();
    expect(t.capacity).toBeLessThan(big / 16);
    for (let id = 9991; id <= 10000; id++) expect(t.get(id)).toBe(id);
  });

  it('moves into cells its owner lays out (adopt), keeps them while entries go, and refuses too few', () => {
    const { t, ins } = table();
    for (let id = 1; id <= 3000; id++) ins(id, id);
    expect(() => t.adopt(new Int32Array(IdTable.cellsFor(3000)))).toThrow(RangeError); // no room for one more
    const cells = new Int32Array(IdTable.cellsFor(6000));
    t.adopt(cells);
    expect(t.capacity).toBe(cells.length);
    expect(IdTable.cellsFor(6000)).toBe(8000); // load 0.75 at 6000 entries
    t.check();
    for (let id = 1; id <= 3000; id++) expect(t.get(id)).toBe(id);
    for (let id = 3001; id <= 6000; id++) expect(ins(id, id)).toBe(true); // fills them without growing
    expect(t.capacity).toBe(cells.length);
    for (let id = 1; id <= 5990; id++) expect(t.remove(id)).toBe(id);
    t.check();
    expect(t.capacity).toBe(cells.length); // the owner shrinks it (it lays its columns out again)
    expect(t.bytes).toBe(cells.byteLength);
    ins(7, 7);
    t.adopt(new Int32Array(IdTable.cellsFor(11)));
    t.check();
    expect(t.capacity).toBe(16);
    for (const id of [7, 5991, 6000]) expect(t.get(id)).toBe(id);
  });

  it('refuses a slot whose key column does not hold the id', () => {
    const { t, keys } = table();
    keys[5] = 41;
    expect(() => t.insert(42, 5)).toThrow(/keys\[5\]/);
    expect(t.size).toBe(0);
  });

  it('follows the owner to a new key column after bind (the engines rebind when they grow)', () => {
    const { t, keys, ins } = table();
    for (let id = 1; id <= 100; id++) ins(id * 7, id);
    const grown = new Float64Array(keys.length * 2);
    grown.set(keys);
    keys.fill(0); // the old column must no longer be read
    t.bind(grown);
    for (let id = 1; id <= 100; id++) expect(t.get(id * 7)).toBe(id);
    grown[101] = 7000;
    expect(t.insert(7000, 101)).toBe(true);
    expect(t.remove(7)).toBe(1);
    t.check();
    expect(t.size).toBe(100);
  });
});
