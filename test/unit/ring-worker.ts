// Helpers for ring.test.ts and the worker side of its cross-thread test.
//
// Imported by the test for the helpers; run as a worker (workerData.kind === 'ring-worker') it
// streams framed records to the main thread on one ring while checking the records arriving on the
// other, sleeping on a Doorbell with Atomics.wait when neither ring lets it progress.
//
// Record framing on the wire: u32 payload length, payload, u32 FNV-1a of the payload. The payload
// bytes come from a PRNG seeded per stream, so the consumer regenerates and compares them exactly;
// the checksum additionally catches corruption independent of the generator.

import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Ring } from '../../src/shared/ring.ts';
import { Doorbell } from '../../src/shared/doorbell.ts';
import { mulberry32u32 as mulberry32 } from '../support/prng.ts';


function checksum(bytes: Uint8Array, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  return h >>> 0;
}

export interface StreamSpec {
  seed: number;
  records: number;
  payloadBytesMax: number;
}

const FRAME_OVERHEAD_BYTES = 8;

/** Generates a stream's records into a staging buffer and feeds them to a ring in pieces. */
export class RecordProducer {
  private readonly rand: () => number;
  private readonly spec: StreamSpec;
  private readonly stage: Uint8Array;
  private readonly view: DataView;
  private stageStart = 0;
  private stageEnd = 0;
  private produced = 0;
  private nextLen = -1; // drawn but not yet staged: the generator's order must not change
  bytesWritten = 0;

  constructor(spec: StreamSpec) {
    this.spec = spec;
    this.rand = mulberry32(spec.seed);
    this.stage = new Uint8Array(Math.max(65536, 2 * (spec.payloadBytesMax + FRAME_OVERHEAD_BYTES)));
    this.view = new DataView(this.stage.buffer);
  }

  get done(): boolean {
    return this.produced === this.spec.records && this.stageStart === this.stageEnd;
  }

  /** Writes what the ring takes; returns the bytes written this call. */
  pump(ring: Ring): number {
    let total = 0;
    for (;;) {
      if (this.stageStart === this.stageEnd) this.refill();
      if (this.stageStart === this.stageEnd) return total;
      const n = ring.write(this.stage, this.stageStart, this.stageEnd - this.stageStart);
      this.stageStart += n;
      total += n;
      this.bytesWritten += n;
      if (n === 0) return total;
    }
  }

  private refill(): void {
    this.stageStart = 0;
    this.stageEnd = 0;
    const room = this.stage.length;
    while (this.produced < this.spec.records) {
      if (this.nextLen < 0) this.nextLen = this.rand() % (this.spec.payloadBytesMax + 1);
      const len = this.nextLen;
      if (this.stageEnd + len + FRAME_OVERHEAD_BYTES > room) break;
      this.nextLen = -1;
      const at = this.stageEnd;
      this.view.setUint32(at, len, true);
      for (let i = 0; i < len; i++) this.stage[at + 4 + i] = this.rand() & 0xff;
      this.view.setUint32(at + 4 + len, checksum(this.stage, at + 4, at + 4 + len), true);
      this.stageEnd = at + len + FRAME_OVERHEAD_BYTES;
      this.produced++;
    }
  }
}

/** Reads a stream from a ring, reassembling records split across reads, and checks each one. */
export class RecordConsumer {
  private readonly rand: () => number;
  private readonly spec: StreamSpec;
  private readonly buf: Uint8Array;
  private readonly view: DataView;
  private pending = 0; // bytes of an incomplete record kept at the front of buf
  received = 0;
  bytesRead = 0;

  constructor(spec: StreamSpec) {
    this.spec = spec;
    this.rand = mulberry32(spec.seed);
    this.buf = new Uint8Array(Math.max(65536, 2 * (spec.payloadBytesMax + FRAME_OVERHEAD_BYTES)));
    this.view = new DataView(this.buf.buffer);
  }

  get done(): boolean {
    return this.received === this.spec.records;
  }

  /** Reads what the ring holds; returns the bytes read this call. Throws on any mismatch. */
  pump(ring: Ring, readBytesMax: number = Infinity): number {
    let total = 0;
    for (;;) {
      const room = Math.min(this.buf.length - this.pending, readBytesMax);
      const n = ring.read(this.buf, this.pending, room);
      if (n === 0) return total;
      total += n;
      this.bytesRead += n;
      const end = this.pending + n;
      let at = 0;
      while (end - at >= 4) {
        const len = this.view.getUint32(at, true);
        if (len > this.spec.payloadBytesMax) {
          throw new Error(`record ${this.received}: length ${len} > ${this.spec.payloadBytesMax} (framing lost)`);
        }
        if (end - at < len + FRAME_OVERHEAD_BYTES) break;
        const expectedLen = this.rand() % (this.spec.payloadBytesMax + 1);
        if (len !== expectedLen) throw new Error(`record ${this.received}: length ${len}, expected ${expectedLen}`);
        for (let i = 0; i < len; i++) {
          const want = this.rand() & 0xff;
          if (this.buf[at + 4 + i] !== want) {
            throw new Error(`record ${this.received}: byte ${i} is ${this.buf[at + 4 + i]}, expected ${want}`);
          }
        }
        const sum = this.view.getUint32(at + 4 + len, true);
        if (sum !== checksum(this.buf, at + 4, at + 4 + len)) throw new Error(`record ${this.received}: bad checksum`);
        at += len + FRAME_OVERHEAD_BYTES;
        this.received++;
        if (this.received > this.spec.records) throw new Error(`more than ${this.spec.records} records`);
      }
      this.buf.copyWithin(0, at, end);
      this.pending = end - at;
    }
  }
}

export interface RingWorkerData {
  kind: 'ring-worker';
  inbound: SharedArrayBuffer; // main -> worker
  outbound: SharedArrayBuffer; // worker -> main
  wakeWorker: SharedArrayBuffer; // bell the worker sleeps on
  wakeMain: SharedArrayBuffer; // bell the main thread sleeps on
  toWorker: StreamSpec;
  toMain: StreamSpec;
  stallMs: number; // a sleep this long without any ring is a lost wake-up
}

export interface RingWorkerResult {
  received: number;
  bytesRead: number;
  bytesWritten: number;
  sleeps: number;
}

function runWorker(data: RingWorkerData): RingWorkerResult {
  const inbound = Ring.attach(data.inbound);
  const outbound = Ring.attach(data.outbound);
  const myBell = Doorbell.attach(data.wakeWorker);
  const peerBell = Doorbell.attach(data.wakeMain);
  const producer = new RecordProducer(data.toMain);
  const consumer = new RecordConsumer(data.toWorker);
  let sleeps = 0;
  while (!(producer.done && consumer.done)) {
    const progress = producer.pump(outbound) + consumer.pump(inbound);
    if (progress > 0) {
      peerBell.ring(); // one ring per batch: new data for the main thread, or room freed for it
      continue;
    }
    const seq = myBell.prepareWait();
    if (inbound.readable() > 0 || (!producer.done && outbound.writable() > 0)) {
      myBell.cancelWait();
      continue;
    }
    sleeps++;
    if (myBell.wait(seq, data.stallMs) === 'timed-out') {
      throw new Error(`worker slept ${data.stallMs} ms without a ring: lost wake-up`);
    }
  }
  peerBell.ring();
  return { received: consumer.received, bytesRead: consumer.bytesRead, bytesWritten: producer.bytesWritten, sleeps };
}

if (!isMainThread && (workerData as { kind?: unknown } | null)?.kind === 'ring-worker') {
  parentPort!.postMessage(runWorker(workerData as RingWorkerData));
}
