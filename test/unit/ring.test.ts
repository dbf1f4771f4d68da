import { describe, expect, it } from 'vitest';
import { Ring, RING_HEADER_BYTES, kHead, kTail } from '../../src/shared/ring.ts';
import { Doorbell } from '../../src/shared/doorbell.ts';
import { mulberry32u32 as mulberry32 } from '../support/prng.ts';
import { startWorker } from '../support/worker.ts';
import {
  RecordConsumer,
  RecordProducer,
  type RingWorkerData,
  type RingWorkerResult,
} from './ring-worker.ts';

function pattern(len: number, salt: number): Uint8Array {
  const out = new Uint8Array(len);
  for (let i = 0; i < len; i++) out[i] = (i * 31 + salt * 7 + 1) & 0xff;
  return out;
}

/** Writes and reads `n` bytes so both indices move to `start + n`. */
function advance(ring: Ring, n: number): void {
  const junk = new Uint8Array(n);
  expect(ring.write(junk, 0, n)).toBe(n);
  expect(ring.read(junk, 0, n)).toBe(n);
}

describe('Ring: creation and attach', () => {
  it('rejects capacities that are not powers of two', () => {
    for (const bad of [0, 3, 12, 1000, -8, 8.5, 2 ** 31]) {
      expect(() => Ring.create(bad), String(bad)).toThrow(RangeError);
    }
    expect(Ring.create(8).capacity).toBe(8);
    expect(Ring.create(8).sab.byteLength).toBe(RING_HEADER_BYTES + 8);
  });

  it('puts head and tail on separate 64-byte cache lines', () => {
    expect(Math.floor((kHead * 4) / 64)).not.toBe(Math.floor((kTail * 4) / 64));
  });

  it('rejects a SAB that is not a ring', () => {
    expect(() => Ring.attach(new SharedArrayBuffer(RING_HEADER_BYTES + 8))).toThrow(TypeError);
    expect(() => Ring.attach(new SharedArrayBuffer(16))).toThrow(RangeError);
  });

  it('an attached ring sees the same bytes', () => {
    const a = Ring.create(16);
    const b = Ring.attach(a.sab);
    expect(a.write(pattern(5, 1), 0, 5)).toBe(5);
    expect(b.readable()).toBe(5);
    const dst = new Uint8Array(5);
    expect(b.read(dst, 0, 5)).toBe(5);
    expect(dst).toEqual(pattern(5, 1));
    expect(a.readable()).toBe(0);
  });

  it('checks source and destination bounds', () => {
    const r = Ring.create(8);
    expect(() => r.write(new Uint8Array(4), 2, 3)).toThrow(RangeError);
    expect(() => r.write(new Uint8Array(4), -1, 1)).toThrow(RangeError);
    expect(() => r.read(new Uint8Array(4), 3, 2)).toThrow(RangeError);
  });
});

describe('Ring: full and empty', () => {
  it('empty ring reads nothing', () => {
    const r = Ring.create(8);
    const dst = new Uint8Array(8);
    expect(r.readable()).toBe(0);
    expect(r.writable()).toBe(8);
    expect(r.read(dst, 0, 8)).toBe(0);
    expect(r.read(dst, 0, 0)).toBe(0);
  });

  it('fills exactly to capacity, then accepts nothing', () => {
    const r = Ring.create(8);
    expect(r.write(pattern(8, 2), 0, 8)).toBe(8);
    expect(r.readable()).toBe(8);
    expect(r.writable()).toBe(0);
    expect(r.write(pattern(1, 0), 0, 1)).toBe(0);
    const dst = new Uint8Array(8);
    expect(r.read(dst, 0, 8)).toBe(8);
    expect(dst).toEqual(pattern(8, 2));
    expect(r.writable()).toBe(8);
  });

  it('a write larger than the free space is partial', () => {
    const r = Ring.create(8);
    expect(r.write(pattern(5, 3), 0, 5)).toBe(5);
    const src = pattern(10, 4);
    expect(r.write(src, 0, 10)).toBe(3);
    const dst = new Uint8Array(8);
    expect(r.read(dst, 0, 8)).toBe(8);
    expect(dst).toEqual(Uint8Array.from([...pattern(5, 3), ...src.subarray(0, 3)]));
    // The caller resumes from where the ring stopped.
    expect(r.write(src, 3, 7)).toBe(7);
    expect(r.read(dst, 1, 7)).toBe(7);
    expect(dst.subarray(1, 8)).toEqual(src.subarray(3, 10));
  });

  it('a read with a small maxLen leaves the rest', () => {
    const r = Ring.create(16);
    r.write(pattern(10, 5), 0, 10);
    const dst = new Uint8Array(10);
    expect(r.read(dst, 0, 4)).toBe(4);
    expect(r.readable()).toBe(6);
    expect(r.read(dst, 4, 100 - 94)).toBe(6);
    expect(dst).toEqual(pattern(10, 5));
  });
});

describe('Ring: records straddling the wrap', () => {
  for (const capacity of [8, 16]) {
    it(`capacity ${capacity}: every start offset, every length, every read split`, () => {
      for (let start = 0; start < capacity; start++) {
        for (let len = 1; len <= capacity; len++) {
          for (let split = 0; split <= len; split++) {
            const r = Ring.create(capacity);
            advance(r, start);
            const src = pattern(len, start * 100 + len);
            expect(r.write(src, 0, len)).toBe(len);
            const dst = new Uint8Array(len);
            expect(r.read(dst, 0, split)).toBe(split);
            expect(r.read(dst, split, len - split)).toBe(len - split);
            expect(dst, `start ${start} len ${len} split ${split}`).toEqual(src);
            expect(r.readable()).toBe(0);
            r.invariants();
          }
        }
      }
    });
  }

  it('writes split at every offset reassemble across the wrap', () => {
    const capacity = 8;
    for (let start = 0; start < capacity; start++) {
      for (let split = 0; split <= capacity; split++) {
        const r = Ring.create(capacity);
        advance(r, start);
        const src = pattern(capacity, start + split);
        expect(r.write(src, 0, split)).toBe(split);
        expect(r.write(src, split, capacity - split)).toBe(capacity - split);
        const dst = new Uint8Array(capacity);
        expect(r.read(dst, 0, capacity)).toBe(capacity);
        expect(dst).toEqual(src);
      }
    }
  });
});

// Random sizes against a plain array model. Seeded; the seed is in every failure message.
type RingLike = Pick<Ring, 'write' | 'read' | 'readable' | 'writable' | 'capacity' | 'invariants'>;

function fuzzAgainstModel(ring: RingLike, seed: number, steps: number): void {
  const rand = mulberry32(seed);
  const model: number[] = [];
  const capacity = ring.capacity;
  const scratch = new Uint8Array(capacity * 2 + 16);
  let nextByte = 0;
  for (let step = 0; step < steps; step++) {
    const where = `seed ${seed} step ${step}`;
    if (rand() % 2 === 0) {
      const len = rand() % (capacity + (capacity >> 1) + 1);
      const off = rand() % (scratch.length - len + 1);
      for (let i = 0; i < len; i++) scratch[off + i] = (nextByte + i) & 0xff;
      const expected = Math.min(len, capacity - model.length);
      const n = ring.write(scratch, off, len);
      if (n !== expected) throw new Error(`${where}: write(${len}) = ${n}, expected ${expected}`);
      for (let i = 0; i < n; i++) model.push((nextByte + i) & 0xff);
      nextByte = (nextByte + n) & 0xff;
    } else {
      const maxLen = rand() % (capacity + (capacity >> 1) + 1);
      const off = rand() % (scratch.length - maxLen + 1);
      const expected = Math.min(maxLen, model.length);
      const n = ring.read(scratch, off, maxLen);
      if (n !== expected) throw new Error(`${where}: read(${maxLen}) = ${n}, expected ${expected}`);
      const want = model.splice(0, n);
      for (let i = 0; i < n; i++) {
        if (scratch[off + i] !== want[i]) {
          throw new Error(`${where}: byte ${i} of read is ${scratch[off + i]}, expected ${want[i]}`);
        }
      }
    }
    if (ring.readable() !== model.length) throw new Error(`${where}: readable ${ring.readable()} != ${model.length}`);
    if (ring.writable() !== capacity - model.length) throw new Error(`${where}: writable wrong`);
    ring.invariants();
  }
  // Drain, so the ring is empty for whoever uses it next and the tail of the stream is checked too.
  const n = ring.read(scratch, 0, capacity);
  if (n !== model.length) throw new Error(`seed ${seed} drain: read ${n}, expected ${model.length}`);
  for (let i = 0; i < n; i++) {
    if (scratch[i] !== model[i]) throw new Error(`seed ${seed} drain: byte ${i} is ${scratch[i]}, expected ${model[i]}`);
  }
}

describe('Ring: seeded random sizes against a model', () => {
  const runSeed = Number(process.env.RING_SEED ?? Date.now() % 2 ** 31);
  const seeds = [1, 2, 3, 0xdecafbad, runSeed];
  for (const seed of seeds) {
    it(`seed ${seed}`, () => {
      for (const capacity of [1, 2, 8, 16, 64, 1024]) {
        fuzzAgainstModel(Ring.create(capacity), seed + capacity, 3000);
      }
    });
  }

  // Free-running indices near the int32 sign boundary and the uint32 wrap.
  for (const startIndex of [2 ** 31 - 5, 2 ** 32 - 5, -1]) {
    it(`indices starting at ${startIndex} wrap correctly`, () => {
      for (const capacity of [8, 16, 256]) {
        const r = Ring.create(capacity, { startIndex });
        fuzzAgainstModel(r, runSeed ^ capacity, 2000);
        fuzzAgainstModel(Ring.attach(r.sab), runSeed ^ (capacity + 1), 200);
      }
    });
  }

  it('after 2^32 bytes of traffic the indices still agree (start just below the wrap)', () => {
    const r = Ring.create(16, { startIndex: 2 ** 32 - 3 });
    const header = new Int32Array(r.sab, 0, 32);
    const src = pattern(10, 9);
    expect(r.write(src, 0, 10)).toBe(10);
    // Head crossed 2^32 (now 7 as uint32), tail has not.
    expect(header[kHead]! >>> 0).toBe(7);
    expect(header[kTail]! >>> 0).toBe(2 ** 32 - 3);
    expect(r.readable()).toBe(10);
    expect(r.writable()).toBe(6);
    const dst = new Uint8Array(10);
    expect(r.read(dst, 0, 10)).toBe(10);
    expect(dst).toEqual(src);
    expect(header[kTail]! >>> 0).toBe(7);
  });

  it('canary: the fuzzer catches a ring that corrupts a byte on wrapped reads', () => {
    const real = Ring.create(8);
    const broken: RingLike = {
      capacity: real.capacity,
      write: (src, off, len) => real.write(src, off, len),
      read: (dst, off, maxLen) => {
        const n = real.read(dst, off, maxLen);
        if (n > 3) dst[off + 3] = dst[off + 3]! ^ 1;
        return n;
      },
      readable: () => real.readable(),
      writable: () => real.writable(),
      invariants: () => real.invariants(),
    };
    expect(() => fuzzAgainstModel(broken, 7, 3000)).toThrow(/seed 7 step \d+: byte 3/);
  });
});

describe('Ring: framed records across the wrap (same thread)', () => {
  it('records larger than the ring pass through a 16-byte ring', () => {
    const spec = { seed: 42, records: 500, payloadBytesMax: 40 };
    const ring = Ring.create(16);
    const producer = new RecordProducer(spec);
    const consumer = new RecordConsumer(spec);
    const rand = mulberry32(99);
    while (!consumer.done) {
      producer.pump(ring);
      consumer.pump(ring, 1 + (rand() % 16)); // odd read sizes split every header and trailer
    }
    expect(producer.done).toBe(true);
    expect(consumer.bytesRead).toBe(producer.bytesWritten);
  });
});

async function runCrossThread(opts: {
  inboundBytes: number;
  outboundBytes: number;
  toWorker: RingWorkerData['toWorker'];
  toMain: RingWorkerData['toMain'];
}): Promise<{ worker: RingWorkerResult; mainBytesRead: number; mainSleeps: number }> {
  const inbound = Ring.create(opts.inboundBytes);
  const outbound = Ring.create(opts.outboundBytes);
  const wakeWorker = Doorbell.create();
  const wakeMain = Doorbell.create();
  const stallMs = 10_000;
  const data: RingWorkerData = {
    kind: 'ring-worker',
    inbound: inbound.sab,
    outbound: outbound.sab,
    wakeWorker: wakeWorker.sab,
    wakeMain: wakeMain.sab,
    toWorker: opts.toWorker,
    toMain: opts.toMain,
    stallMs,
  };
  const { worker, result } = startWorker<RingWorkerResult>(new URL('./ring-worker.ts', import.meta.url), data, 'ring worker');
  let workerFailed: unknown = undefined;
  result.catch((err: unknown) => {
    workerFailed = err;
    wakeMain.ring(); // release our waitAsync so the loop sees the failure
  });

  const producer = new RecordProducer(opts.toWorker);
  const consumer = new RecordConsumer(opts.toMain);
  let sleeps = 0;
  try {
    while (!(producer.done && consumer.done)) {
      if (workerFailed !== undefined) throw workerFailed;
      const progress = producer.pump(inbound) + consumer.pump(outbound);
      if (progress > 0) {
        wakeWorker.ring();
        continue;
      }
      const seq = wakeMain.prepareWait();
      if (outbound.readable() > 0 || (!producer.done && inbound.writable() > 0)) {
        wakeMain.cancelWait();
        continue;
      }
      sleeps++;
      let timer: NodeJS.Timeout | undefined;
      const stalled = new Promise<'stalled'>((resolve) => {
        timer = setTimeout(() => resolve('stalled'), stallMs);
      });
      const outcome = await Promise.race([wakeMain.waitAsync(seq), stalled]);
      clearTimeout(timer);
      if (outcome === 'stalled') throw new Error(`main thread slept ${stallMs} ms without a ring: lost wake-up`);
    }
    const workerResult = await result;
    return { worker: workerResult, mainBytesRead: consumer.bytesRead, mainSleeps: sleeps };
  } finally {
    await worker.terminate();
  }
}

describe('Ring: across a real worker thread', () => {
  it('streams a few MB of framed records both ways through 64 KiB rings', async () => {
    const toWorker = { seed: 11, records: 20_000, payloadBytesMax: 300 };
    const toMain = { seed: 12, records: 20_000, payloadBytesMax: 300 };
    const out = await runCrossThread({ inboundBytes: 65536, outboundBytes: 65536, toWorker, toMain });
    expect(out.worker.received).toBe(toWorker.records);
    expect(out.worker.bytesRead).toBeGreaterThan(2_500_000);
    expect(out.mainBytesRead).toBe(out.worker.bytesWritten);
  });

  it('streams records bigger than the rings through tiny rings (constant wrap and full)', async () => {
    const toWorker = { seed: 21, records: 2_000, payloadBytesMax: 1500 };
    const toMain = { seed: 22, records: 2_000, payloadBytesMax: 1500 };
    const out = await runCrossThread({ inboundBytes: 1024, outboundBytes: 256, toWorker, toMain });
    expect(out.worker.received).toBe(toWorker.records);
    expect(out.mainBytesRead).toBe(out.worker.bytesWritten);
    expect(out.mainBytesRead).toBeGreaterThan(1_000_000);
  });
});
