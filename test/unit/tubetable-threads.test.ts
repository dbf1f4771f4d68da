// TubeTable from several threads at once: 4 workers (tubetable-worker.ts) hammer acquire /
// retain / release / dropped on a few names they all use and on names of their own, while the
// main thread reads list(), names and invariants() under the same lock. Then: each live tube's
// counts are the sum of what the threads hold, no name twice, list() is exactly the live tubes,
// and no tube was freed twice or came back after its free (a reused slot got a new generation).
// Meanwhile 2 more threads read names of random slots without the lock, while slots and name
// blocks are reused under other names and the name heap is compacted: every name they read for
// (slot, generation) must be the name that tube was made with.

import { describe, expect, it } from 'vitest';
import type { Worker } from 'node:worker_threads';
import { TubeTable } from '../../src/route/tubetable.ts';
import { mulberry32u32 } from '../support/prng.ts';
import { startWorker } from '../support/worker.ts';
import {
  sharedName,
  type HeldTube,
  type TubeTableReaderData,
  type TubeTableReaderResult,
  type TubeTableWorkerData,
  type TubeTableWorkerResult,
} from './tubetable-worker.ts';

const THREADS = 4;
const READERS = 2;

async function hammer(seed: number, ops: number, sharedNames: number, ownNames: number) {
  const table = TubeTable.create({ shards: 3, initialTubes: 4 }); // grows while the threads run
  const defaultId = table.acquire('default', 'pinned');
  const made = new Map<string, string>([[`${defaultId}:${table.gen(defaultId)}`, 'default']]); // `${id}:${gen}` -> name
  const go = new SharedArrayBuffer(8);
  const workers: Worker[] = [];
  const results: Promise<TubeTableWorkerResult>[] = [];
  for (let index = 0; index < THREADS; index++) {
    const data: TubeTableWorkerData = {
      kind: 'tubetable-worker',
      shared: table.shared,
      go,
      threads: THREADS + READERS,
      index,
      seed: seed * 1000 + index,
      ops,
      sharedNames,
      ownNames,
    };
    const { worker, result } = startWorker<TubeTableWorkerResult>(new URL('./tubetable-worker.ts', import.meta.url), data, 'tubetable worker');
    workers.push(worker);
    results.push(result);
  }
  const readers: Promise<TubeTableReaderResult>[] = [];
  for (let index = 0; index < READERS; index++) {
    const data: TubeTableReaderData = { kind: 'tubetable-reader', shared: table.shared, go, threads: THREADS + READERS, seed: seed * 1000 + 500 + index };
    const { worker, result } = startWorker<TubeTableReaderResult>(new URL('./tubetable-worker.ts', import.meta.url), data, 'tubetable reader');
    workers.push(worker);
    readers.push(result);
  }
  try {
    // Meanwhile the main thread (which spins for the lock, never sleeps) takes and drops
    // references to the shared names too, in bursts between event-loop turns, and reads the list.
    let done = false;
    const all = Promise.all(results).finally(() => (done = true));
    all.catch(() => {});
    const rand = mulberry32u32(seed);
    const mainHeld: HeldTube[] = [];
    let mainChecks = 0;
    let mainOps = 0;
    while (!done) {
      for (let k = 0; k < 200; k++, mainOps++) {
        if (mainHeld.length < 3 || (mainHeld.length < 8 && rand() % 2 === 0)) {
          const name = sharedName(rand() % sharedNames);
          const id = table.acquire(name, 'watching');
          if (table.created) made.set(`${id}:${table.gen(id)}`, name);
          mainHeld.push({ name, id, gen: table.gen(id), using: 0, watching: 1, jobs: 0, pinned: 0 });
        } else {
          const [h] = mainHeld.splice(rand() % mainHeld.length, 1);
          if (table.release(h!.id, 'watching')) table.dropped(h!.id);
        }
      }
      // The names move while the readers read: a compaction here whenever the heap has holes
      // (left to the heap alone, one came only when a new name needed room and half the heap was
      // holes, which an interleaving may never reach: seen once in CI).
      table.compactNames();
      table.invariants(false);
      const names = table.listNames();
      expect(new Set(names).size).toBe(names.length);
      expect(names).toContain('default');
      mainChecks++;
      await new Promise((resolve) => setImmediate(resolve));
    }
    const results_ = await all;
    Atomics.store(new Int32Array(go), 1, 1); // readers: stop
    for (const r of results_) for (const [key, name] of r.made) made.set(key, name);
    return { table, defaultId, results: results_, mainHeld, mainChecks, mainOps, reads: await Promise.all(readers), made };
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

describe('TubeTable across threads', () => {
  for (const seed of [1, 2]) {
    it(`seed ${seed}: ${THREADS} threads acquire and release shared and own tubes; counts, list and generations hold`, async () => {
      const { table, defaultId, results, mainHeld, mainChecks, mainOps, reads, made } = await hammer(seed, 60_000, 8, 40);
      expect(mainChecks).toBeGreaterThan(0);
      expect(mainOps).toBeGreaterThan(0);
      expect(results.reduce((a, r) => a + r.staleReads, 0)).toBeGreaterThan(0);
      table.invariants(true);

      // Each live tube's counts are the sum of the references the threads still hold.
      const sums = new Map<string, HeldTube>();
      for (const held of [...results.map((r) => r.held), mainHeld]) {
        for (const h of held) {
          const s = sums.get(h.name);
          if (s === undefined) {
            sums.set(h.name, { ...h });
          } else {
            expect({ id: h.id, gen: h.gen }, `${h.name}: every holder has the same tube`).toEqual({ id: s.id, gen: s.gen });
            s.using += h.using;
            s.watching += h.watching;
            s.jobs += h.jobs;
            s.pinned += h.pinned;
          }
        }
      }
      const ids = table.list();
      const names = ids.map((id) => table.name(id)!);
      expect(new Set(names).size).toBe(names.length);
      expect(new Set(ids).size).toBe(ids.length);
      expect(new Set(names)).toEqual(new Set([...sums.keys(), 'default']));
      expect(table.count).toBe(sums.size + 1);
      for (const s of sums.values()) {
        expect(table.find(s.name)).toBe(s.id);
        expect(table.gen(s.id)).toBe(s.gen);
        expect(table.counts(s.id), s.name).toEqual({ using: s.using, watching: s.watching, jobs: s.jobs, pinned: s.pinned });
      }
      expect(table.counts(defaultId)).toEqual({ using: 0, watching: 0, jobs: 0, pinned: 1 });

      // No tube freed twice; none of the live ones was ever freed; ids were reused with new generations.
      const freed = results.flatMap((r) => r.freed);
      expect(new Set(freed).size).toBe(freed.length);
      for (const s of sums.values()) expect(freed).not.toContain(`${s.id}:${s.gen}`);
      expect(table.dropping).toBe(0);
      // The races happened: shared tubes were freed and made again by several threads.
      const sharedCreated = results.map((r) => r.sharedCreated);
      expect(sharedCreated.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
      expect(results.reduce((a, r) => a + r.sharedFreed, 0)).toBeGreaterThan(100);
      expect(results.reduce((a, r) => a + r.reuses, 0)).toBeGreaterThan(100);
      expect(table.capacity).toBeGreaterThan(4);

      // Every name read without the lock is the one its tube (slot, generation) was made with.
      let named = 0;
      for (const r of reads) {
        expect(r.reads).toBeGreaterThan(1000);
        for (const [key, name] of r.named) {
          if (made.get(key) !== name) expect.fail(`reader read tube ${key} as ${name}; it was made as ${made.get(key)}`);
          named++;
        }
        for (const [id, before, after, name] of r.spanned) {
          const gens = Array.from({ length: after - before + 1 }, (_, k) => before + k);
          if (!gens.some((g) => made.get(`${id}:${g}`) === name)) {
            expect.fail(`reader read slot ${id} (generations ${before}..${after}) as ${name}, none of its tubes`);
          }
        }
      }
      expect(named).toBeGreaterThan(1000);
      // The names were moved, and blocks reused under other names, while they read.
      expect(table.nameHeap.compactions).toBeGreaterThan(0);
      expect(table.nameHeap.moved).toBeGreaterThan(0);

      // Everything the threads hold, released here, frees every tube but the pinned default.
      for (const s of sums.values()) {
        let freedIt = false;
        for (const field of ['using', 'watching', 'jobs', 'pinned'] as const) {
          for (let k = 0; k < s[field]; k++) freedIt = table.release(s.id, field);
        }
        expect(freedIt, s.name).toBe(true);
      }
      expect(table.listNames()).toEqual(['default']);
      table.invariants(true);
    }, 60_000);
  }
});
