import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Worker } from 'node:worker_threads';
import { Doorbell, DOORBELL_BYTES, kSeq, kSleepingOn } from '../../src/shared/doorbell.ts';
import { startWorker as startWorkerThread } from '../support/worker.ts';
import {
  COUNTERS_BYTES,
  kPing,
  kPong,
  kProduced,
  type DoorbellWorkerData,
  type DoorbellWorkerResult,
} from './doorbell-worker.ts';

const STALL_MS = 5_000;

afterEach(() => {
  vi.restoreAllMocks();
});

describe('Doorbell: one thread', () => {
  it('create/attach share state; attach rejects a wrong-sized SAB', () => {
    const a = Doorbell.create();
    const b = Doorbell.attach(a.sab);
    a.ring();
    expect(b.seq()).toBe(1);
    expect(() => Doorbell.attach(new SharedArrayBuffer(8))).toThrow(RangeError);
    expect(a.sab.byteLength).toBe(DOORBELL_BYTES);
    expect(Math.floor((kSeq * 4) / 64)).not.toBe(Math.floor((kSleepingOn * 4) / 64));
  });

  it('ring() on a busy (not sleeping) side costs no notify', () => {
    const bell = Doorbell.create();
    const notify = vi.spyOn(Atomics, 'notify');
    for (let i = 0; i < 1000; i++) bell.ring();
    expect(notify).not.toHaveBeenCalled();
    expect(bell.seq()).toBe(1000);
  });

  it('a burst of rings during one announced sleep notifies once', () => {
    const bell = Doorbell.create();
    const notify = vi.spyOn(Atomics, 'notify');
    bell.prepareWait();
    for (let i = 0; i < 100; i++) bell.ring();
    expect(notify).toHaveBeenCalledTimes(1);
  });

  it('cancelWait() withdraws the announcement', () => {
    const bell = Doorbell.create();
    const notify = vi.spyOn(Atomics, 'notify');
    bell.prepareWait();
    bell.cancelWait();
    bell.ring();
    expect(notify).not.toHaveBeenCalled();
  });

  it('wait() returns at once if rung after prepareWait()', () => {
    const bell = Doorbell.create();
    const seq = bell.prepareWait();
    bell.ring();
    const t0 = performance.now();
    expect(bell.wait(seq, 5000)).toBe('not-equal');
    expect(performance.now() - t0).toBeLessThan(1000);
  });

  it('wait() times out when nothing rings, and withdraws the announcement', () => {
    const bell = Doorbell.create();
    const seq = bell.prepareWait();
    const t0 = performance.now();
    expect(bell.wait(seq, 30)).toBe('timed-out');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
    const notify = vi.spyOn(Atomics, 'notify');
    bell.ring();
    expect(notify).not.toHaveBeenCalled();
  });

  it('waitAsync() resolves at once if already rung, and when rung later', async () => {
    const bell = Doorbell.create();
    let seq = bell.prepareWait();
    bell.ring();
    await bell.waitAsync(seq);

    seq = bell.prepareWait();
    let resolved = false;
    const pending = bell.waitAsync(seq).then(() => {
      resolved = true;
    });
    await new Promise((r) => setTimeout(r, 20));
    expect(resolved).toBe(false);
    bell.ring();
    await pending;
    expect(resolved).toBe(true);
  });
});

function startWorker(data: DoorbellWorkerData): { worker: Worker; result: Promise<DoorbellWorkerResult> } {
  const { worker, result } = startWorkerThread<DoorbellWorkerResult>(new URL('./doorbell-worker.ts', import.meta.url), data, 'doorbell worker');
  result.catch(() => {}); // observed by the test; avoid an unhandled rejection in between
  return { worker, result };
}

/** Main-thread sleep: waitAsync raced against a stall timer (waitAsync itself has no timeout). */
async function sleepUntil(bell: Doorbell, ready: () => boolean, what: string): Promise<boolean> {
  const seq = bell.prepareWait();
  if (ready()) {
    bell.cancelWait();
    return false;
  }
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<'stalled'>((resolve) => {
    timer = setTimeout(() => resolve('stalled'), STALL_MS);
  });
  const outcome = await Promise.race([bell.waitAsync(seq), stalled]);
  clearTimeout(timer);
  if (outcome === 'stalled') {
    throw new Error(`${what}: slept ${STALL_MS} ms without a wake-up (work visible: ${ready()}): lost wake-up`);
  }
  return true;
}

describe('Doorbell: across real worker threads', () => {
  it('ping-pong: every round is a wake-up on both sides (main waitAsync, worker Atomics.wait)', async () => {
    const rounds = 5000;
    const toWorker = Doorbell.create();
    const toMain = Doorbell.create();
    const countersSab = new SharedArrayBuffer(COUNTERS_BYTES);
    const counters = new Int32Array(countersSab);
    const { worker, result } = startWorker({
      kind: 'doorbell-worker',
      role: 'echo',
      bell: toWorker.sab,
      peerBell: toMain.sab,
      counters: countersSab,
      rounds,
      stallMs: STALL_MS,
      seed: 1,
    });
    try {
      let mainSleeps = 0;
      for (let r = 1; r <= rounds; r++) {
        Atomics.store(counters, kPing, r);
        toWorker.ring();
        while (Atomics.load(counters, kPong) < r) {
          if (await sleepUntil(toMain, () => Atomics.load(counters, kPong) >= r, `main round ${r}`)) mainSleeps++;
        }
      }
      const out = await result;
      expect(out.seen).toBe(rounds);
      expect(out.sleeps + mainSleeps).toBeGreaterThan(0);
    } finally {
      await worker.terminate();
    }
  });

  it('a producer thread ringing 200k times while the main thread sleeps: nothing lost', async () => {
    const rounds = 200_000;
    const toMain = Doorbell.create();
    const unused = Doorbell.create();
    const countersSab = new SharedArrayBuffer(COUNTERS_BYTES);
    const counters = new Int32Array(countersSab);
    const { worker, result } = startWorker({
      kind: 'doorbell-worker',
      role: 'burst-producer',
      bell: unused.sab,
      peerBell: toMain.sab,
      counters: countersSab,
      rounds,
      stallMs: STALL_MS,
      seed: 12345,
    });
    try {
      let seen = 0;
      const t0 = performance.now();
      while (seen < rounds) {
        const produced = Atomics.load(counters, kProduced);
        if (produced > seen) {
          seen = produced;
          continue;
        }
        await sleepUntil(toMain, () => Atomics.load(counters, kProduced) > seen, `main at ${seen}`);
      }
      expect(seen).toBe(rounds);
      expect(performance.now() - t0).toBeLessThan(STALL_MS);
      expect((await result).seen).toBe(rounds);
    } finally {
      await worker.terminate();
    }
  });

  it('a producer thread ringing 200k times while a consumer thread blocks in Atomics.wait', async () => {
    const rounds = 200_000;
    const bell = Doorbell.create();
    const unused = Doorbell.create();
    const countersSab = new SharedArrayBuffer(COUNTERS_BYTES);
    const common = { kind: 'doorbell-worker' as const, counters: countersSab, rounds, stallMs: STALL_MS };
    const consumer = startWorker({ ...common, role: 'consumer', bell: bell.sab, peerBell: unused.sab, seed: 1 });
    const producer = startWorker({ ...common, role: 'burst-producer', bell: unused.sab, peerBell: bell.sab, seed: 99 });
    try {
      const [c, p] = await Promise.all([consumer.result, producer.result]);
      expect(p.seen).toBe(rounds);
      expect(c.seen).toBe(rounds);
    } finally {
      await Promise.all([consumer.worker.terminate(), producer.worker.terminate()]);
    }
  });

  it('canary: a ring() that skips the notify is caught as a lost wake-up', async () => {
    const toWorker = Doorbell.create();
    const toMain = Doorbell.create();
    const countersSab = new SharedArrayBuffer(COUNTERS_BYTES);
    const counters = new Int32Array(countersSab);
    const { worker, result } = startWorker({
      kind: 'doorbell-worker',
      role: 'echo',
      bell: toWorker.sab,
      peerBell: toMain.sab,
      counters: countersSab,
      rounds: 1,
      stallMs: 300,
      seed: 1,
    });
    try {
      // Wait until the worker has announced its sleep and is (surely) inside Atomics.wait.
      const bellState = new Int32Array(toWorker.sab);
      while (Atomics.load(bellState, kSleepingOn) !== Atomics.load(bellState, kSeq)) await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, 50));
      Atomics.store(counters, kPing, 1);
      Atomics.add(bellState, kSeq, 1); // the broken ring(): bumps seq, never notifies
      await expect(result).rejects.toThrow(/lost wake-up/);
    } finally {
      await worker.terminate();
    }
  });
});
