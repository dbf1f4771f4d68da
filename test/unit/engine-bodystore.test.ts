import { describe, expect, it } from 'vitest';
import { BodyStore, CHUNKS_MAX, DEFAULT_CHUNK_SIZE, MIN_CHUNK_SIZE, SLOT_BYTES } from '../../workers/engine/bodystore.ts';
import { mulberry32 as rng } from '../support/prng.ts';

// Body bytes derived from (slot, generation, len) so moved bodies can be verified exactly.
function bodyFor(slot: number, gen: number, len: number): Uint8Array {
  const b = new Uint8Array(len);
  for (let i = 0; i < len; i++) b[i] = (slot * 31 + gen * 7 + i * 13) & 0xff;
  return b;
}


describe('BodyStore', () => {
  it('locates a body in SLOT_BYTES per slot, its length past 2 bytes in a side map, through compaction', () => {
    expect(SLOT_BYTES).toBeLessThanOrEqual(8); // was 12: a 4-byte chunk number and length
    const s = new BodyStore(1 << 18, 4, 1 << 18);
    expect(s.slotBytes).toBe(4 * SLOT_BYTES);
    s.put(0, bodyFor(0, 0, 65534));
    s.put(1, bodyFor(1, 0, 65535)); // the first length kept in the side map
    s.put(2, bodyFor(2, 0, 100_000));
    s.put(3, bodyFor(3, 0, 7));
    s.check(4);
    expect([0, 1, 2, 3].map((k) => s.length(k))).toEqual([65534, 65535, 100_000, 7]);
    s.free(0); // a short body takes its place
    s.free(3);
    s.put(0, bodyFor(0, 1, 3));
    s.check(3);
    expect(s.get(1)).toEqual(bodyFor(1, 0, 65535));
    expect(s.get(2)).toEqual(bodyFor(2, 0, 100_000));
    s.free(1);
    s.free(2);
    s.check(1);
  });

  it('keeps a body in its own bytes (no header, no padding; an empty body takes 1 byte)', () => {
    const s = new BodyStore(1024, 4);
    s.put(0, bodyFor(0, 0, 100));
    s.put(1, bodyFor(1, 0, 7));
    s.put(2, new Uint8Array(0));
    expect(s.liveBytes).toBe(108);
    s.check(3);
    s.free(1);
    expect(s.liveBytes).toBe(101);
    expect(s.get(0)).toEqual(bodyFor(0, 0, 100));
    expect(s.get(2).length).toBe(0);
  });

  // 65,535 chunks of one body each (under a second: the live bytes are a running total, not a sum
  // over every chunk at each roll-over, which took 14 s here).
  it('refuses a chunk past CHUNKS_MAX (chunk numbers are 2 bytes a slot)', () => {
    expect(CHUNKS_MAX).toBe(0xffff);
    const s = new BodyStore(64, 2, 64);
    s.growSlots(CHUNKS_MAX + 1);
    // 60-byte bodies fill a 64-byte chunk each: chunk k holds slot k.
    for (let k = 0; k < CHUNKS_MAX; k++) s.put(k, bodyFor(k, 0, 60));
    expect(s.chunkCount).toBe(CHUNKS_MAX);
    expect(() => s.put(CHUNKS_MAX, bodyFor(0, 0, 60))).toThrow(/CHUNKS_MAX/);
  });

  it('stores and returns bodies, including empty ones', () => {
    const s = new BodyStore(1024, 4);
    s.growSlots(8);
    s.put(0, bodyFor(0, 0, 5));
    s.put(1, new Uint8Array(0));
    s.put(7, bodyFor(7, 0, 100));
    s.check(3);
    expect(s.get(0)).toEqual(bodyFor(0, 0, 5));
    expect(s.get(1).length).toBe(0);
    expect(s.get(7)).toEqual(bodyFor(7, 0, 100));
    expect(s.length(7)).toBe(100);
    expect(() => s.put(0, new Uint8Array(1))).toThrow(/already/);
    s.free(1);
    expect(() => s.free(1)).toThrow(/no body/);
    s.check(2);
  });

  it('gives a body larger than a chunk its own chunk and drops it when freed', () => {
    const s = new BodyStore(256, 4);
    s.put(0, bodyFor(0, 0, 10));
    s.put(1, bodyFor(1, 0, 1000));
    s.put(2, bodyFor(2, 0, 10));
    s.check(3);
    expect(s.chunkCount).toBe(2);
    expect(s.get(1)).toEqual(bodyFor(1, 0, 1000));
    s.free(1);
    s.check(2);
    expect(s.chunkCount).toBe(1);
    expect(s.get(0)).toEqual(bodyFor(0, 0, 10));
    expect(s.get(2)).toEqual(bodyFor(2, 0, 10));
  });

  it('drops a retired chunk when its last body is freed and rewinds the current one', () => {
    const s = new BodyStore(256, 64);
    for (let i = 0; i < 20; i++) s.put(i, bodyFor(i, 0, 44)); // 44 B records (no header): 5 per chunk
    s.check(20);
    expect(s.chunkCount).toBe(4);
    for (let i = 0; i < 20; i++) {
      s.free(i);
      s.check(19 - i);
    }
    expect(s.chunkCount).toBe(1);
    expect(s.liveBytes).toBe(0);
  });

  it('compacts a mostly-dead chunk, moving live bodies intact', () => {
    const s = new BodyStore(400, 64);
    // 10 records of 40 B fill the first chunk exactly; then more go to later chunks.
    for (let i = 0; i < 30; i++) s.put(i, bodyFor(i, 0, 40));
    s.check(30);
    const before = s.compactions;
    // Free 8 of the 10 bodies of the first chunk: live 2/10 < 1/4 -> compaction.
    for (let i = 0; i < 8; i++) {
      s.free(i);
      s.check(29 - i);
    }
    expect(s.compactions).toBe(before + 1);
    for (let i = 8; i < 30; i++) expect(s.get(i)).toEqual(bodyFor(i, 0, 40));
  });

  it('compacts a chunk that is retired already mostly dead', () => {
    const s = new BodyStore(400, 64);
    for (let i = 0; i < 10; i++) s.put(i, bodyFor(i, 0, 40)); // fills chunk 0
    for (let i = 1; i < 10; i++) s.free(i); // freed while still current: no compaction yet
    expect(s.compactions).toBe(0);
    s.put(10, bodyFor(10, 0, 40)); // roll over: chunk 0 retired with 1/10 live
    s.check(2);
    expect(s.compactions).toBe(1);
    expect(s.chunkCount).toBe(1);
    expect(s.get(0)).toEqual(bodyFor(0, 0, 40));
    expect(s.get(10)).toEqual(bodyFor(10, 0, 40));
  });

  it('random churn keeps bytes intact and memory bounded', () => {
    const r = rng(7);
    const chunk = 2048;
    const slots = 400;
    const s = new BodyStore(chunk, 16);
    s.growSlots(slots);
    const gen = new Int32Array(slots);
    const len = new Int32Array(slots).fill(-1);
    let live = 0;
    for (let step = 0; step < 20000; step++) {
      const slot = Math.floor(r() * slots);
      if (len[slot] < 0) {
        const l = r() < 0.02 ? 3000 : Math.floor(r() * 120); // occasional oversized body
        gen[slot]++;
        s.put(slot, bodyFor(slot, gen[slot], l));
        len[slot] = l;
        live++;
      } else {
        s.free(slot);
        len[slot] = -1;
        live--;
      }
      if (step % 200 === 0) {
        s.check(live);
        for (let i = 0; i < slots; i++) if (len[i] >= 0) expect(s.get(i)).toEqual(bodyFor(i, gen[i], len[i]));
        // <= 4x live in shared chunks, plus the current chunk, the spare, and one chunk of slack
        expect(s.heldBytes).toBeLessThanOrEqual(4 * s.liveBytes + 3 * chunk);
      }
    }
    expect(s.compactions).toBeGreaterThan(0);
  });

  it('random churn with chunk sizes following the live bytes (64 B .. 4 KiB) keeps bytes intact and memory bounded', () => {
    const r = rng(11);
    const max = 4096;
    const slots = 2000;
    const s = new BodyStore(max, 16, 64);
    s.growSlots(slots);
    const gen = new Int32Array(slots);
    const len = new Int32Array(slots).fill(-1);
    let live = 0;
    const sizesSeen = new Set<number>();
    for (let step = 0; step < 60000; step++) {
      // Phases that fill up and drain, so the chunk size climbs and falls again.
      const filling = Math.floor(step / 10000) % 2 === 0;
      const slot = Math.floor(r() * slots);
      if (len[slot] < 0 && (filling ? r() < 0.9 : r() < 0.1)) {
        const l = r() < 0.01 ? 5000 : Math.floor(r() * 60);
        gen[slot]++;
        s.put(slot, bodyFor(slot, gen[slot], l));
        len[slot] = l;
        live++;
      } else if (len[slot] >= 0) {
        s.free(slot);
        len[slot] = -1;
        live--;
      }
      sizesSeen.add(s.nextChunkSize());
      if (step % 500 === 0) {
        s.check(live);
        for (let i = 0; i < slots; i++) if (len[i] >= 0) expect(s.get(i)).toEqual(bodyFor(i, gen[i], len[i]));
        expect(s.heldBytes).toBeLessThanOrEqual(4 * s.liveBytes + 3 * max);
      }
    }
    expect([...sizesSeen].sort((a, b) => a - b)[0]).toBeLessThan(max / 4);
    expect(sizesSeen.has(max)).toBe(true);
    expect(s.compactions).toBeGreaterThan(0);
  });

  it('a busy store holding few bodies keeps small chunks; a large backlog gets the big ones', () => {
    const s = new BodyStore(); // 32 MiB at most, 1 MiB at least
    s.growSlots(200_000);
    const body = new Uint8Array(100).fill(7);
    // 2M puts and frees with at most 1,000 bodies held (104 KB): 200 MB pass through.
    for (let i = 0; i < 2_000_000; i++) {
      const slot = i % 1000;
      if (i >= 1000) s.free(slot);
      s.put(slot, body);
    }
    s.check(1000);
    expect(s.nextChunkSize()).toBe(MIN_CHUNK_SIZE);
    expect(s.heldBytes).toBeLessThanOrEqual(3 * MIN_CHUNK_SIZE); // current + spare (+ one retiring)
    for (let i = 0; i < 1000; i++) s.free(i);
    // A backlog of 200k bodies of 1 KiB (~205 MB): chunks grow to the maximum.
    const kb = new Uint8Array(1024).fill(3);
    for (let slot = 0; slot < 200_000; slot++) s.put(slot, kb);
    expect(s.nextChunkSize()).toBe(DEFAULT_CHUNK_SIZE);
    expect(s.heldBytes).toBeLessThanOrEqual(s.liveBytes + 2 * DEFAULT_CHUNK_SIZE);
    s.check(200_000);
  });
});

describe('BodyStore gives memory back when a burst drains', () => {
  it('dropped chunks are freed at once (detached), and the drained store keeps a small current chunk', () => {
    const big = 64 * 1024;
    const min = 1024;
    const s = new BodyStore(big, 0, min);
    const n = 2000;
    s.growSlots(n);
    const body = new Uint8Array(200).fill(7);
    for (let slot = 0; slot < n; slot++) s.put(slot, body);
    expect(s.heldBytes).toBeGreaterThan(4 * big); // the burst made big chunks
    // A view into each chunk, to see its memory go.
    const views = new Map<ArrayBufferLike, number>();
    for (let slot = 0; slot < n; slot++) views.set(s.get(slot).buffer, slot);
    expect(views.size).toBeGreaterThan(4);
    for (let slot = 0; slot < n; slot++) s.free(slot);
    s.check(0);
    // Everything but the current chunk and at most a spare is detached: no collection needed.
    const kept = [...views.keys()].filter((b) => b.byteLength > 0);
    expect(kept.length).toBeLessThanOrEqual(1);
    expect(s.heldBytes).toBeLessThanOrEqual(2 * min);
    // And it still works.
    s.put(5, body);
    expect(Array.from(s.get(5))).toEqual(Array.from(body));
    s.check(1);
  });
});
