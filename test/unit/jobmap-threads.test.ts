// JobShardMap and JobIds used by several real threads at once (test/unit/jobmap-worker.ts).

import { describe, expect, it } from 'vitest';
import type { Worker } from 'node:worker_threads';
import { JobShardMap, PAGE_IDS } from '../../src/route/jobmap.ts';
import { JobIds } from '../../src/shared/jobids.ts';
import { startWorker } from '../support/worker.ts';
import type { JobMapWorkerData, JobMapWorkerResult } from './jobmap-worker.ts';

const THREADS = 4;

type Job = Omit<JobMapWorkerData, 'kind' | 'start' | 'thread' | 'threads' | 'seed'>;

/** Starts THREADS workers, lets them go at once, and collects what they report. */
async function runWorkers(job: Job, seed: number): Promise<JobMapWorkerResult[]> {
  const start = new SharedArrayBuffer(4 * (2 + THREADS));
  const flags = new Int32Array(start);
  const workers: Worker[] = [];
  const results: Promise<JobMapWorkerResult>[] = [];
  for (let thread = 0; thread < THREADS; thread++) {
    const data: JobMapWorkerData = { kind: 'jobmap-worker', start, thread, threads: THREADS, seed: seed + thread, ...job };
    const { worker, result } = startWorker<JobMapWorkerResult>(new URL('./jobmap-worker.ts', import.meta.url), data, `jobmap worker ${thread}`);
    workers.push(worker);
    results.push(result);
  }
  try {
    const deadline = Date.now() + 20_000;
    while (Atomics.load(flags, 1) < THREADS) {
      if (Date.now() > deadline) throw new Error('jobmap workers did not start');
      await new Promise((r) => setTimeout(r, 5));
    }
    Atomics.store(flags, 0, 1);
    Atomics.notify(flags, 0);
    return await Promise.all(results);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

describe('JobShardMap shared by threads', () => {
  const seed = Number(process.env.JOBMAP_SEED ?? Date.now() % 2 ** 31);

  for (const { name, firstPage } of [
    { name: 'ids from 1', firstPage: 0 },
    { name: 'ids across 2^32', firstPage: 2 ** 32 / PAGE_IDS - 100 },
  ]) {
    it(`4 threads set, get and delete interleaved ids in the same pages (${name})`, async () => {
      const map = new JobShardMap({ maxPages: 32 });
      const pages = 400;
      let results: JobMapWorkerResult[];
      try {
        results = await runWorkers({ mode: 'map', map: map.shared, firstPage, pages, idsPerPage: 128, window: 96, count: 0 }, seed);
      } catch (err) {
        throw new Error(`JOBMAP_SEED=${seed}: ${(err as Error).message}`);
      }
      for (const r of results) {
        expect(r.sets).toBeGreaterThanOrEqual(pages * 128);
        expect(r.deletes).toBeGreaterThanOrEqual(pages * 128); // and the stragglers
      }
      // Threads did see each other's ids live (they ran at the same time, in the same pages).
      expect(results.reduce((n, r) => n + r.foreignHits, 0)).toBeGreaterThan(0);
      expect(map.liveIds).toBe(0);
      expect(map.pageCount()).toBeLessThanOrEqual(1); // the head page, kept while empty
      // 400 pages went through the map; their slots were reused, never more than 32 made.
      expect(map.pagesMade).toBeLessThanOrEqual(32);
      expect(map.bytesAllocated()).toBe(map.pagesMade * PAGE_IDS);
      map.invariants();
      // The main thread's handle sees what the workers left: nothing, then works on as before.
      const id = (firstPage + 3) * PAGE_IDS + 7;
      expect(map.get(id)).toBe(-1);
      map.set(id, 9);
      expect(map.get(id)).toBe(9);
      map.delete(id);
      expect(map.liveIds).toBe(0);
      map.invariants();
    });
  }
});

describe('JobIds shared by threads', () => {
  it('4 threads x 100k next() give unique ids with no gaps', async () => {
    const ids = new JobIds();
    const count = 100_000;
    const results = await runWorkers({ mode: 'ids', ids: ids.shared, firstPage: 0, pages: 0, idsPerPage: 0, window: 0, count }, 1);
    const all = new Float64Array(THREADS * count);
    results.forEach((r, i) => {
      expect(r.ids!.length).toBe(count);
      // Each thread's own ids come in increasing order.
      for (let j = 1; j < count; j++) if (!(r.ids![j]! > r.ids![j - 1]!)) throw new Error(`thread ${i}: ids not increasing at ${j}`);
      all.set(r.ids!, i * count);
    });
    all.sort();
    for (let j = 0; j < all.length; j++) if (all[j] !== j + 1) throw new Error(`sorted ids[${j}] = ${all[j]}, expected ${j + 1}`);
    expect(ids.peek()).toBe(THREADS * count + 1);
    expect(ids.next()).toBe(THREADS * count + 1);
  });
});
