// Worker side of doorbell.test.ts. Roles:
//   echo            sleeps on `bell` until counters[kPing] moves, copies it to counters[kPong],
//                   rings `peerBell`; every round needs a wake-up, so a lost one stalls the run.
//   burst-producer  bumps counters[kProduced] to 1..rounds, ringing `peerBell` each time, with
//                   short random pauses so the consumer falls asleep between bursts.
//   consumer        blocking consumer of counters[kProduced], sleeping on `bell`.
// A sleep of `stallMs` without progress is reported as a lost wake-up.

import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Doorbell } from '../../src/shared/doorbell.ts';

export const kPing = 0;
export const kPong = 16;
export const kProduced = 32;
export const COUNTERS_BYTES = 192;

export interface DoorbellWorkerData {
  kind: 'doorbell-worker';
  role: 'echo' | 'burst-producer' | 'consumer';
  bell: SharedArrayBuffer; // the bell this worker sleeps on
  peerBell: SharedArrayBuffer; // the bell this worker rings
  counters: SharedArrayBuffer;
  rounds: number;
  stallMs: number;
  seed: number;
}

export interface DoorbellWorkerResult {
  sleeps: number;
  seen: number;
}

function sleepUntil(bell: Doorbell, ready: () => boolean, stallMs: number, what: string): boolean {
  const seq = bell.prepareWait();
  if (ready()) {
    bell.cancelWait();
    return false;
  }
  if (bell.wait(seq, stallMs) === 'timed-out') {
    // Either work was published and we were not woken (lost wake-up), or the peer stalled.
    throw new Error(`${what}: slept ${stallMs} ms without a wake-up (work visible: ${ready()}): lost wake-up`);
  }
  return true;
}

function run(data: DoorbellWorkerData): DoorbellWorkerResult {
  const bell = Doorbell.attach(data.bell);
  const peerBell = Doorbell.attach(data.peerBell);
  const counters = new Int32Array(data.counters);
  let sleeps = 0;
  let seen = 0;
  switch (data.role) {
    case 'echo':
      while (seen < data.rounds) {
        const ping = Atomics.load(counters, kPing);
        if (ping > seen) {
          seen = ping;
          Atomics.store(counters, kPong, ping);
          peerBell.ring();
          continue;
        }
        if (sleepUntil(bell, () => Atomics.load(counters, kPing) > seen, data.stallMs, 'echo')) sleeps++;
      }
      break;
    case 'burst-producer': {
      let x = data.seed >>> 0 || 1;
      for (let i = 1; i <= data.rounds; i++) {
        Atomics.store(counters, kProduced, i);
        peerBell.ring();
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        if ((x & 1023) === 0) {
          // Pause 0-200 µs so the consumer drains and goes to sleep mid-stream.
          const until = performance.now() + ((x >>> 10) % 200) / 1000;
          while (performance.now() < until);
        }
      }
      seen = data.rounds;
      break;
    }
    case 'consumer':
      while (seen < data.rounds) {
        const produced = Atomics.load(counters, kProduced);
        if (produced > seen) {
          seen = produced;
          continue;
        }
        if (sleepUntil(bell, () => Atomics.load(counters, kProduced) > seen, data.stallMs, 'consumer')) sleeps++;
      }
      break;
  }
  return { sleeps, seen };
}

if (!isMainThread && (workerData as { kind?: unknown } | null)?.kind === 'doorbell-worker') {
  parentPort!.postMessage(run(workerData as DoorbellWorkerData));
}
