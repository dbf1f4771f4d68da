// TubeTable from several threads at once: 4 workers (tubetable-worker.ts) hammer acquire /
// retain / release / dropped on a few names they all use and on names of their own, while the
// main thread reads list(), names and invariants() under the same lock. Then: each live tube's
// counts are the sum of what the threads hold, no name twice, list() is exactly the live tubes,
// and no tube was freed twice or came back after its free (a reused slot got a new generation).

import { describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import { TubeTable } from '../../src/route/tubetable.ts';
import { mulberry32u32 } from '../support/prng.ts';
import { sharedName, type HeldTube, type TubeTableWorkerData, type TubeTableWorkerResult } from './tubetable-worker.ts';

const THREADS = 4;

async function hammer(seed: number, ops: number, sharedNames: number, ownNames: number) {
  const table = TubeTable.create({ shards: 3, initialTubes: 4 }); // grows while the threads run
  const defaultId = table.acquire('default', 'pinned');
  const go = new SharedArrayBuffer(4);
  const workers: Worker[] = [];
  const results: Promise<TubeTableWorkerResult>[] = [];
  for (let index = 0; index < THREADS; index++) {
    const data: TubeTableWorkerData = {
      kind: 'tubetable-worker',
      shared: table.shared,
      go,
      threads: THREADS,
      index,
      seed: seed * 1000 + index,
      ops,
      sharedNames,
      ownNames,
    };
    const worker = new Worker(new URL('./tubetable-worker.ts', import.meta.url), { workerData: data });
    workers.push(worker);
    results.push(
      new Promise<TubeTableWorkerResult>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
        worker.once('exit', (code) => reject(new Error(`tubetable worker exited with code ${code} before reporting`)));
      }),
    );
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
          mainHeld.push({ name, id, gen: table.gen(id), using: 0, watching: 1, jobs: 0, pinned: 0 });
        } else {
          const [h] = mainHeld.splice(rand() % mainHeld.length, 1);
          if (table.release(h!.id, 'watching')) table.dropped(h!.id);
        }
      }
      table.invariants(false);
      const names = table.listNames();
      expect(new Set(names).size).toBe(names.length);
      expect(names).toContain('default');
      mainChecks++;
      await new Promise((resolve) => setImmediate(resolve));
    }
    return { table, defaultId, results: await all, mainHeld, mainChecks, mainOps };
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

describe('TubeTable across threads', () => {
  for (const seed of [1, 2]) {
    it(`seed ${seed}: ${THREADS} threads acquire and release shared and own tubes; counts, list and generations hold`, async () => {
      const { table, defaultId, results, mainHeld, mainChecks, mainOps } = await hammer(seed, 60_000, 8, 40);
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
