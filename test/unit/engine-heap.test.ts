import { describe, expect, it } from 'vitest';
import { IndexHeap } from '../../workers/engine/heap.ts';
import { mulberry32 as rng } from '../support/prng.ts';

// A heap over slots 0..n-1 keyed by an external key column, like the engine uses it.
function makeHeap(n: number, capacity?: number) {
  const key = new Float64Array(n);
  const pos = new Int32Array(n).fill(-1);
  const less = (a: number, b: number) => key[a] < key[b] || (key[a] === key[b] && a < b);
  const heap = new IndexHeap(less, (s, p) => {
    pos[s] = p;
  }, capacity);
  const check = () => heap.check((s) => pos[s]);
  return { key, pos, heap, check };
}


describe('IndexHeap', () => {
  it('pops in (key, slot) order and grows past its initial capacity', () => {
    const n = 1000;
    const { key, pos, heap, check } = makeHeap(n, 8);
    const r = rng(1);
    for (let s = 0; s < n; s++) {
      key[s] = Math.floor(r() * 50); // many ties, broken by slot
      heap.push(s);
      check();
    }
    expect(heap.size).toBe(n);
    expect(heap.items.length).toBeGreaterThanOrEqual(n);
    const out: number[] = [];
    while (heap.size > 0) {
      out.push(heap.pop());
      if (heap.size % 50 === 0) check();
    }
    const want = [...Array(n).keys()].sort((a, b) => key[a] - key[b] || a - b);
    expect(out).toEqual(want);
    expect(heap.pop()).toBe(-1);
    expect(heap.peek()).toBe(-1);
    expect(pos.every((p) => p === -1)).toBe(true);
    expect(heap.items.length).toBeLessThan(n); // shrank back after draining
  });

  it('removes from the middle using the position column', () => {
    const n = 500;
    const { key, pos, heap, check } = makeHeap(n);
    const r = rng(2);
    for (let s = 0; s < n; s++) {
      key[s] = Math.floor(r() * 1000);
      heap.push(s);
    }
    const removed = new Set<number>();
    for (let i = 0; i < 300; i++) {
      const s = Math.floor(r() * n);
      if (removed.has(s)) continue;
      heap.removeAt(pos[s]);
      removed.add(s);
      expect(pos[s]).toBe(-1);
      check();
    }
    const out: number[] = [];
    while (heap.size > 0) out.push(heap.pop());
    const want = [...Array(n).keys()].filter((s) => !removed.has(s)).sort((a, b) => key[a] - key[b] || a - b);
    expect(out).toEqual(want);
  });

  it('update() restores order after a key moves either way', () => {
    const n = 200;
    const { key, pos, heap, check } = makeHeap(n);
    const r = rng(3);
    for (let s = 0; s < n; s++) {
      key[s] = Math.floor(r() * 1000);
      heap.push(s);
    }
    for (let i = 0; i < 500; i++) {
      const s = Math.floor(r() * n);
      key[s] = Math.floor(r() * 1000);
      heap.update(pos[s]);
      check();
    }
    let last = -1;
    let lastKey = -Infinity;
    while (heap.size > 0) {
      const s = heap.pop();
      expect(key[s] > lastKey || (key[s] === lastKey && s > last)).toBe(true);
      last = s;
      lastKey = key[s];
    }
  });

  it('check() catches a broken position column and broken order', () => {
    const { key, pos, heap, check } = makeHeap(10);
    for (let s = 0; s < 10; s++) {
      key[s] = s;
      heap.push(s);
    }
    pos[3] = 7;
    expect(check).toThrow(/position/);
    pos[3] = 3;
    key[5] = -1; // changed without update()
    expect(check).toThrow(/order/);
  });

  it('rejects an out-of-range removal', () => {
    const { heap } = makeHeap(4);
    heap.push(0);
    expect(() => heap.removeAt(1)).toThrow(RangeError);
  });
});

describe('IndexHeap memory', () => {
  it('a heap that never held anything has no items array of its own, and works once used', () => {
    const keys = [5, 3, 9];
    const pos = new Int32Array(3).fill(-1);
    const a = new IndexHeap((x, y) => keys[x] < keys[y], (s, p) => (pos[s] = p));
    const b = new IndexHeap((x, y) => keys[x] < keys[y], (s, p) => (pos[s] = p));
    expect(a.items.byteLength).toBe(0);
    expect(a.items).toBe(b.items); // one shared empty array
    for (const s of [0, 1, 2]) a.push(s);
    expect([a.pop(), a.pop(), a.pop(), a.pop()]).toEqual([1, 0, 2, -1]);
    expect(b.items.byteLength).toBe(0); // b is untouched
  });
});
