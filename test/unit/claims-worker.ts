// The worker side of claims-threads.test.ts: run as a worker (workerData.kind === 'claims-worker'),
// it attaches to the Claims made on the main thread and posts what it saw.
//
// 'claim' mode: round after round, the main thread opens a wait in each of `slots` slots and
// publishes (slot, ticket) pairs; every worker (and the main thread) then tries to claim every
// pair, each starting at a different pair, and adds its wins to the round's per-pair counts.
// 'slots' mode: takes `count` slots while the other workers do too (the buffer grows under
// them), opens and claims a wait in each, and sends the slots back.

import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Claims, type ClaimsShared } from '../../src/shared/claims.ts';

export interface ClaimsWorkerData {
  kind: 'claims-worker';
  mode: 'claim' | 'slots';
  claims: ClaimsShared;
  thread: number;
  /** Int32: [0] round (0: not yet, -1: stop), [1] workers done with the round, [2] workers ready. */
  control: SharedArrayBuffer;
  /** Int32 pairs [slot, ticket] × pairs ('claim'). */
  pairs: SharedArrayBuffer;
  /** Int32 wins per pair this round ('claim'). */
  wins: SharedArrayBuffer;
  count: number;
}

export interface ClaimsWorkerResult {
  wins: number;
  slots: number[];
  bad: string | null;
}

function run(d: ClaimsWorkerData): ClaimsWorkerResult {
  const claims = Claims.attach(d.claims);
  const control = new Int32Array(d.control);
  const res: ClaimsWorkerResult = { wins: 0, slots: [], bad: null };
  Atomics.add(control, 2, 1);
  if (d.mode === 'slots') {
    while (Atomics.load(control, 0) === 0) Atomics.wait(control, 0, 0, 50);
    for (let i = 0; i < d.count; i++) {
      const slot = claims.slot();
      const ticket = claims.open(slot);
      if (!claims.isOpen(slot, ticket)) res.bad ??= `slot ${slot}: the wait just opened is not open`;
      if (!claims.claim(slot, ticket)) res.bad ??= `slot ${slot}: its only claimer lost`;
      res.slots.push(slot);
    }
    return res;
  }
  const pairs = new Int32Array(d.pairs);
  const wins = new Int32Array(d.wins);
  const n = pairs.length / 2;
  let seen = 0;
  for (;;) {
    Atomics.wait(control, 0, seen);
    const round = Atomics.load(control, 0);
    if (round === -1) return res;
    if (round === seen) continue;
    seen = round;
    for (let k = 0; k < n; k++) {
      const i = (k + d.thread * 7) % n;
      if (claims.claim(pairs[2 * i], pairs[2 * i + 1])) {
        Atomics.add(wins, i, 1);
        res.wins++;
      }
    }
    Atomics.add(control, 1, 1);
    Atomics.notify(control, 1);
  }
}

if (!isMainThread && (workerData as { kind?: string })?.kind === 'claims-worker') {
  parentPort?.postMessage(run(workerData as ClaimsWorkerData));
}
