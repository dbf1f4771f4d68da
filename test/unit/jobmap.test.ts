import { describe, expect, it } from 'vitest';
import { JobShardMap, PAGE_IDS, SHARD_MAX } from '../../src/route/jobmap.ts';
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

  it('uses about one byte per live id and frees pages when they empty', () => {
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

    // One straggler keeps its page alive, and only its page.
    const straggler = n / 2 + 17;
    for (let id = n / 2 + 1; id <= n; id++) if (id !== straggler) m.delete(id);
    expect(m.liveIds).toBe(1);
    expect(m.pageCount()).toBe(1);
    expect(m.bytesAllocated()).toBe(2 * PAGE_IDS); // and the spare
    expect(m.get(straggler)).toBe(straggler % 16);
    m.delete(straggler);
    expect(m.liveIds).toBe(0);
    expect(m.bytesAllocated()).toBe(PAGE_IDS); // the spare only
    m.invariants();
  });

  it('a queue holding one job or none at a time reuses one page array (no allocation per job)', () => {
    const m = new JobShardMap();
    for (let id = 1; id <= 3 * PAGE_IDS; id++) {
      m.set(id, 1);
      expect(m.get(id)).toBe(1);
      m.delete(id);
    }
    expect(m.pagesMade).toBe(1);
    expect(m.get(5)).toBe(-1); // the reused page came back empty
    m.set(5, 2);
    m.set(PAGE_IDS + 5, 3); // a second live page needs a second array
    expect(m.pagesMade).toBe(2);
    expect([m.get(5), m.get(PAGE_IDS + 5), m.get(6)]).toEqual([2, 3, -1]);
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

  it('seeded random operations agree with a Map model', () => {
    const seed = Number(process.env.JOBMAP_SEED ?? Date.now() % 2 ** 31);
    const rand = mulberry32(seed);
    const m = new JobShardMap();
    const model = new Map<number, number>();
    let nextId = 1 + (rand() % 3) * 2 ** 32; // sometimes start above 2^32
    const live: number[] = [];
    try {
      for (let step = 0; step < 200_000; step++) {
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
});
