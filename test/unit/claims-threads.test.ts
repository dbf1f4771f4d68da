// Claims (src/shared/claims.ts) raced for by real threads: a wait parked in several shards ends
// exactly once whichever threads claim it at the same moment, and slots taken by several threads
// while the buffer grows are distinct and usable.

import { describe, expect, it } from 'vitest';
import type { Worker } from 'node:worker_threads';
import { Claims } from '../../src/shared/claims.ts';
import { startWorker } from '../support/worker.ts';
import type { ClaimsWorkerData, ClaimsWorkerResult } from './claims-worker.ts';

const THREADS = 4;

function start(mode: ClaimsWorkerData['mode'], claims: Claims, pairsN: number, count: number) {
  const control = new SharedArrayBuffer(12);
  const pairs = new SharedArrayBuffer(8 * pairsN);
  const wins = new SharedArrayBuffer(4 * pairsN);
  const workers: Worker[] = [];
  const results: Promise<ClaimsWorkerResult>[] = [];
  for (let thread = 0; thread < THREADS; thread++) {
    const data: ClaimsWorkerData = { kind: 'claims-worker', mode, claims: claims.shared, thread, control, pairs, wins, count };
    const { worker, result } = startWorker<ClaimsWorkerResult>(new URL('./claims-worker.ts', import.meta.url), data, `claims worker ${thread}`);
    workers.push(worker);
    results.push(result);
  }
  return { control: new Int32Array(control), pairs: new Int32Array(pairs), wins: new Int32Array(wins), workers, results };
}

async function until(what: string, ok: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

describe('Claims shared by threads', () => {
  it('every wait is claimed exactly once when five threads claim it at once, round after round', async () => {
    const claims = Claims.create();
    const N = 256;
    const ROUNDS = 200;
    const w = start('claim', claims, N, 0);
    try {
      const slots = Array.from({ length: N }, () => claims.slot());
      await until('workers ready', () => Atomics.load(w.control, 2) === THREADS);
      let mainWins = 0;
      for (let round = 1; round <= ROUNDS; round++) {
        const epoch = claims.epoch;
        w.wins.fill(0);
        for (let i = 0; i < N; i++) {
          w.pairs[2 * i] = slots[i];
          w.pairs[2 * i + 1] = claims.open(slots[i]);
        }
        Atomics.store(w.control, 1, 0);
        Atomics.store(w.control, 0, round);
        Atomics.notify(w.control, 0);
        // The connection's own thread ends waits too (a timeout), from the other end.
        for (let i = N - 1; i >= 0; i--) {
          if (claims.claim(w.pairs[2 * i], w.pairs[2 * i + 1])) {
            Atomics.add(w.wins, i, 1);
            mainWins++;
          }
        }
        await until(`round ${round}`, () => Atomics.load(w.control, 1) === THREADS);
        const twice = [...w.wins].findIndex((n) => n !== 1);
        expect(twice, `round ${round}: pair ${twice} claimed ${w.wins[twice]} times`).toBe(-1);
        expect(claims.epoch - epoch).toBe(N); // each claim moved the epoch once
        // and logged its slot under its epoch, whichever thread it was
        const logged = Array.from({ length: N }, (_, k) => claims.claimedAt(epoch + k));
        expect(new Set(logged)).toEqual(new Set(slots));
        for (let i = 0; i < N; i++) expect(claims.isOpen(w.pairs[2 * i], w.pairs[2 * i + 1])).toBe(false);
      }
      Atomics.store(w.control, 0, -1);
      Atomics.notify(w.control, 0);
      const results = await Promise.all(w.results);
      const total = results.reduce((s, r) => s + r.wins, mainWins);
      expect(total).toBe(N * ROUNDS);
      // They did race: more than one thread won claims.
      expect(results.filter((r) => r.wins > 0).length + (mainWins > 0 ? 1 : 0)).toBeGreaterThan(1);
    } finally {
      await Promise.all(w.workers.map((x) => x.terminate()));
    }
  });

  it('slots taken by four threads while the buffer grows are distinct, and each works', async () => {
    const claims = Claims.create();
    const COUNT = 3000; // 4 × 3000 slots: the buffer (1,024 at first) grows several times under them
    const w = start('slots', claims, 1, COUNT);
    try {
      await until('workers ready', () => Atomics.load(w.control, 2) === THREADS);
      Atomics.store(w.control, 0, 1);
      Atomics.notify(w.control, 0);
      const results = await Promise.all(w.results);
      for (const r of results) expect(r.bad).toBeNull();
      const all = results.flatMap((r) => r.slots);
      expect(new Set(all).size).toBe(THREADS * COUNT);
      // Every thread's slot is in this thread's view too (length-tracking over the grown buffer).
      for (const slot of all) expect(claims.isOpen(slot, 0)).toBe(true); // claimed: 0
    } finally {
      await Promise.all(w.workers.map((x) => x.terminate()));
    }
  });
});
