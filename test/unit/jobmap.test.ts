import { describe, expect, it } from 'vitest';
import { JobShardMap, OneShard, PAGE_IDS, SHARD_MAX } from '../../src/route/jobmap.ts';
import { JobIds } from '../../src/shared/jobids.ts';
import { mulberry32u32 as mulberry32 } from '../support/prng.ts';

describe('JobShardMap', () => {
  it('maps ids to shards; unknown ids give -1', () => {
    const m = new JobShardMap();
    expect(m.get(1)).toBe(-1);
    m.set(1, 0);
    m.set(2, 7);
    m.set(3, SHARD_MAX);
    expect(m.get(1)).toBe(0);
    expect(m.get(2)).toBe(7);
    expect(m.get(3)).toBe(SHARD_MAX);
    expect(m.get(4)).toBe(-1);
    expect(m.liveIds).toBe(3);
    m.invariants();
  });

  it('overwriting an id keeps the live count', () => {
    const m = new JobShardMap();
    m.set(10, 1);
    m.set(10, 2);
    expect(m.get(10)).toBe(2);
    expect(m.liveIds).toBe(1);
    m.invariants();
  });

  it('delete forgets the id; deleting twice or an unknown id is a no-op', () => {
    const m = new JobShardMap();
    m.set(5, 3);
    m.set(6, 3);
    m.delete(5);
    expect(m.get(5)).toBe(-1);
    expect(m.get(6)).toBe(3);
    m.delete(5);
    m.delete(123_456_789);
    expect(m.liveIds).toBe(1);
    m.invariants();
  });

  it('get() of ids that cannot exist is -1, not an exception (they come from client commands)', () => {
    const m = new JobShardMap();
    m.set(1, 1);
    for (const id of [0, -1, 1.5, NaN, Infinity, 2 ** 53, 2 ** 60]) expect(m.get(id), String(id)).toBe(-1);
  });

  it('rejects bad ids and shards on set/delete (our own mistakes)', () => {
    const m = new JobShardMap();
    for (const id of [0, -1, 1.5, NaN, 2 ** 53]) {
      expect(() => m.set(id, 0), String(id)).toThrow(RangeError);
      expect(() => m.delete(id), String(id)).toThrow(RangeError);
    }
    for (const shard of [-1, 255, 1.5, NaN]) expect(() => m.set(1, shard), String(shard)).toThrow(RangeError);
  });

  it('handles ids near 2^53 and across 2^32', () => {
    const m = new JobShardMap();
    const ids = [2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 53 - 1, 2 ** 53 - 2, PAGE_IDS - 1, PAGE_IDS, PAGE_IDS + 1];
    ids.forEach((id, i) => m.set(id, i));
    ids.forEach((id, i) => expect(m.get(id), String(id)).toBe(i));
    expect(m.get(2 ** 32 + 2)).toBe(-1);
    expect(m.get(2 ** 33)).toBe(-1);
    m.invariants();
  });

  it('uses about one byte per live id; emptied pages go back to the pool and are reused', () => {
    const m = new JobShardMap();
    expect(m.bytesAllocated()).toBe(0);
    const n = 10 * PAGE_IDS;
    for (let id = 1; id <= n; id++) m.set(id, id % 16);
    expect(m.liveIds).toBe(n);
    // 10 full pages plus the partial pages at either end of [1, n].
    expect(m.pageCount()).toBe(11);
    expect(m.bytesAllocated()).toBe(11 * PAGE_IDS);
    m.invariants();

    // FIFO deletion, the usual order: pages go away behind the oldest live id.
    for (let id = 1; id <= n / 2; id++) m.delete(id);
    expect(m.liveIds).toBe(n / 2);
    expect(m.pageCount()).toBe(6);
    m.invariants();
    expect(m.get(n / 2)).toBe(-1);
    expect(m.get(n / 2 + 1)).toBe((n / 2 + 1) % 16);

    // One straggler keeps its page alive, and only its page (and the head page, where new ids go,
    // which is kept while empty: page 10, holding id n alone).
    const straggler = n / 2 + 17;
    for (let id = n / 2 + 1; id <= n; id++) if (id !== straggler) m.delete(id);
    expect(m.liveIds).toBe(1);
    expect(m.pageCount()).toBe(2);
    expect(m.get(straggler)).toBe(straggler % 16);
    m.delete(straggler);
    expect(m.liveIds).toBe(0);
    expect(m.pageCount()).toBe(1);
    m.invariants();

    // The pool does not shrink (a SharedArrayBuffer cannot), but its slots are reused: ten more
    // pages of ids need no new slot.
    for (let id = n + 1; id <= 2 * n; id++) m.set(id, id % 16);
    expect(m.pagesMade).toBe(11);
    expect(m.bytesAllocated()).toBe(11 * PAGE_IDS);
    for (let id = n + 1; id <= 2 * n; id++) if (m.get(id) !== id % 16) throw new Error(`get(${id}) = ${m.get(id)}`);
    expect(m.get(n)).toBe(-1);
    m.invariants();
  });

  it('a queue holding one job or none at a time keeps its head page and reuses slots (no page per job)', () => {
    const m = new JobShardMap();
    for (let id = 1; id <= 3 * PAGE_IDS; id++) {
      m.set(id, 1);
      if (m.get(id) !== 1) throw new Error(`get(${id}) = ${m.get(id)}`);
      m.delete(id);
      // The page new ids go to stays while empty: no make and drop per job.
      if (m.pageCount() !== 1) throw new Error(`id ${id}: ${m.pageCount()} pages`);
    }
    // The next head page is made before the old one is dropped: two slots, taking turns.
    expect(m.pagesMade).toBe(2);
    expect(m.liveIds).toBe(0);
    m.invariants();
    expect(m.get(5)).toBe(-1); // the reused slot came back empty
    m.set(5, 2); // page 0 again, in the free slot
    expect(m.pagesMade).toBe(2);
    m.set(PAGE_IDS + 5, 3); // another live page needs another slot
    expect(m.pagesMade).toBe(3);
    expect([m.get(5), m.get(PAGE_IDS + 5), m.get(6), m.get(3 * PAGE_IDS)]).toEqual([2, 3, -1, -1]);
    m.invariants();
    m.delete(5);
    m.delete(PAGE_IDS + 5);
    expect(m.pageCount()).toBe(1); // the head page only
    m.invariants();
  });

  it('memory follows live ids, not ids ever issued (sliding window of 1000 live jobs)', () => {
    const m = new JobShardMap();
    const window = 1000;
    let peakBytes = 0;
    for (let id = 1; id <= 2_000_000; id++) {
      m.set(id, id & 7);
      if (id > window) m.delete(id - window);
      peakBytes = Math.max(peakBytes, m.bytesAllocated());
    }
    expect(m.liveIds).toBe(window);
    expect(peakBytes).toBeLessThanOrEqual(2 * PAGE_IDS);
    m.invariants();
  });

  it('a dropped page is not served from the last-page cache', () => {
    const m = new JobShardMap();
    m.set(5, 4);
    m.delete(5); // page dropped
    expect(m.get(5)).toBe(-1);
    m.set(6, 9); // a fresh page
    expect(m.get(5)).toBe(-1);
    expect(m.get(6)).toBe(9);
    m.invariants();
  });

  it('seeded random operations through three handles on one map agree with a Map model', () => {
    const seed = Number(process.env.JOBMAP_SEED ?? Date.now() % 2 ** 31);
    const rand = mulberry32(seed);
    const first = new JobShardMap();
    // Each handle keeps its own page cache, as each thread does: a page dropped and its slot reused
    // through one handle must not be read through another's stale cache entry.
    const handles = [first, JobShardMap.attach(first.shared), JobShardMap.attach(first.shared)];
    let m = first;
    const model = new Map<number, number>();
    let nextId = 1 + (rand() % 3) * 2 ** 32; // sometimes start above 2^32
    const live: number[] = [];
    try {
      for (let step = 0; step < 200_000; step++) {
        m = handles[rand() % handles.length]!;
        const op = rand() % 10;
        if (op < 5 || live.length === 0) {
          nextId += 1 + (rand() % 4 === 0 ? rand() % 5000 : 0); // ids are increasing, sometimes with gaps
          const shard = rand() % (SHARD_MAX + 1);
          m.set(nextId, shard);
          model.set(nextId, shard);
          live.push(nextId);
        } else if (op < 8) {
          // Mostly old ids (FIFO-ish), sometimes random ones.
          const i = rand() % 2 === 0 ? rand() % Math.min(live.length, 16) : rand() % live.length;
          const id = live[i]!;
          live[i] = live[live.length - 1]!;
          live.pop();
          m.delete(id);
          model.delete(id);
        } else {
          const id = rand() % 2 === 0 && live.length > 0 ? live[rand() % live.length]! : 1 + (rand() % (nextId + 10));
          if (m.get(id) !== (model.get(id) ?? -1)) throw new Error(`step ${step}: get(${id}) = ${m.get(id)}, model ${model.get(id)}`);
        }
        if (m.liveIds !== model.size) throw new Error(`step ${step}: liveIds ${m.liveIds}, model ${model.size}`);
        if (step % 20_000 === 0) m.invariants();
      }
      m.invariants();
      for (const [id, shard] of model) if (m.get(id) !== shard) throw new Error(`final: get(${id}) != ${shard}`);
    } catch (err) {
      throw new Error(`JOBMAP_SEED=${seed}: ${(err as Error).message}`);
    }
  });

  it('another handle on the shared state sees the same ids, and a stale page cache is never used', () => {
    const a = new JobShardMap();
    const b = JobShardMap.attach(a.shared);
    expect(b.shared).toBe(a.shared);
    a.set(5, 4);
    expect(b.get(5)).toBe(4); // b caches page 0
    b.set(6, 7);
    expect(a.get(6)).toBe(7);
    a.delete(5);
    b.delete(6); // page 0 is still the head page: kept, empty
    expect([a.get(5), b.get(6), a.liveIds, b.liveIds]).toEqual([-1, -1, 0, 0]);
    // A higher page becomes the head, and page 0 is dropped; its slot goes to page 2 through a.
    a.set(PAGE_IDS + 1, 1);
    expect(a.pageCount()).toBe(1);
    a.set(2 * PAGE_IDS + 5, 9); // page 2, offset 5: same offset as id 5, in page 0's old slot
    a.set(2 * PAGE_IDS + 6, 8);
    expect(a.pagesMade).toBe(2);
    // b's cache still says page 0 -> that slot; it must notice the slot moved on.
    expect(b.get(5)).toBe(-1);
    expect(b.get(6)).toBe(-1);
    b.delete(6); // a no-op, not a delete of id 2*PAGE_IDS+6
    expect(a.get(2 * PAGE_IDS + 6)).toBe(8);
    b.set(6, 3); // page 0 again, in a fresh slot
    expect([a.get(6), b.get(6), a.get(2 * PAGE_IDS + 6), b.get(2 * PAGE_IDS + 5)]).toEqual([3, 3, 8, 9]);
    expect(a.liveIds).toBe(4);
    a.invariants();
    b.invariants();
  });

  it('attach() rejects buffers that are not a JobShardMap', () => {
    const m = new JobShardMap();
    expect(() => JobShardMap.attach({ control: new SharedArrayBuffer(4096), pool: m.shared.pool })).toThrow(TypeError);
    expect(() => JobShardMap.attach({ control: m.shared.control, pool: new SharedArrayBuffer(0, { maxByteLength: PAGE_IDS }) })).toThrow(TypeError);
    expect(() => JobShardMap.attach({ control: new ArrayBuffer(4096), pool: m.shared.pool } as never)).toThrow(TypeError);
  });

  it('maxPages bounds the pages live at once; slots freed are reused', () => {
    expect(() => new JobShardMap({ maxPages: 6 })).toThrow(RangeError);
    expect(() => new JobShardMap({ maxPages: 2 })).toThrow(RangeError);
    const m = new JobShardMap({ maxPages: 4 });
    for (let p = 0; p < 4; p++) m.set(p * PAGE_IDS + 1, p);
    expect(() => m.set(4 * PAGE_IDS + 1, 4)).toThrow(RangeError);
    m.invariants(); // the failed set left nothing behind (and released the lock)
    m.delete(1); // page 0 is not the head page: dropped
    m.set(4 * PAGE_IDS + 1, 4);
    expect(m.get(4 * PAGE_IDS + 1)).toBe(4);
    expect(m.pagesMade).toBe(4);
    expect(m.bytesAllocated()).toBe(4 * PAGE_IDS);
    m.invariants();
  });
});

describe('JobIds', () => {
  it('hands out 1, 2, 3, ...; peek does not take one', () => {
    const ids = new JobIds();
    expect(ids.peek()).toBe(1);
    expect([ids.next(), ids.next(), ids.next()]).toEqual([1, 2, 3]);
    expect(ids.peek()).toBe(4);
    expect(ids.peek()).toBe(4);
    expect(ids.next()).toBe(4);
  });

  it('raiseTo(id) makes the next id at least id + 1 and never lowers it', () => {
    const ids = new JobIds();
    ids.raiseTo(41);
    expect(ids.peek()).toBe(42);
    ids.raiseTo(10);
    expect(ids.next()).toBe(42);
    ids.raiseTo(42); // the id just taken: next stays 43
    expect(ids.next()).toBe(43);
    ids.raiseTo(2 ** 40);
    expect(ids.next()).toBe(2 ** 40 + 1);
    expect(() => ids.raiseTo(0)).toThrow(RangeError);
    expect(() => ids.raiseTo(1.5)).toThrow(RangeError);
    expect(() => ids.raiseTo(2 ** 53)).toThrow(RangeError);
  });

  it('counts past 2^32 and stops at 2^53 - 1', () => {
    const ids = new JobIds(2 ** 32 - 1);
    expect([ids.next(), ids.next(), ids.next()]).toEqual([2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1]);
    ids.raiseTo(Number.MAX_SAFE_INTEGER - 2);
    expect(ids.next()).toBe(Number.MAX_SAFE_INTEGER - 1);
    expect(ids.next()).toBe(Number.MAX_SAFE_INTEGER);
    expect(() => ids.next()).toThrow(RangeError);
  });

  it('handles attached to the shared counter take from one sequence', () => {
    const a = new JobIds();
    const b = JobIds.attach(a.shared);
    expect([a.next(), b.next(), a.next(), b.next()]).toEqual([1, 2, 3, 4]);
    b.raiseTo(99);
    expect(a.next()).toBe(100);
    expect(() => JobIds.attach({ counter: new SharedArrayBuffer(8) })).toThrow(TypeError);
    expect(() => new JobIds(0)).toThrow(RangeError);
  });
});

describe('OneShard (the router with one shard)', () => {
  it('sends every valid id to shard 0 and refuses what is not an id, keeping nothing', () => {
    const m = new OneShard();
    m.set(7, 0);
    expect([m.get(7), m.get(1), m.get(2 ** 53 - 1)]).toEqual([0, 0, 0]);
    m.delete(7);
    expect(m.get(7)).toBe(0); // shard 0 answers NOT_FOUND for it
    expect([m.get(0), m.get(-1), m.get(1.5), m.get(2 ** 53), m.get(NaN)]).toEqual([-1, -1, -1, -1, -1]);
    expect(m.shared).toBeNull();
  });
});
