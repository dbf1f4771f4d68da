// The worker side of sequence-threads.test.ts: run as a worker (workerData.kind ===
// 'sequence-worker'), it is either a site that hands over segments or a shard that applies them.
//
// 'site': `count` segments, each to a random non-empty set of the shards it has rings to. For each
// it takes a number (BatchSequence.take), writes an 8-byte record [number, DATA] into the ring of
// each shard of the segment and says that part is written. Now and then it dawdles (a short spin
// or sleep) after taking the number and between parts, and it sometimes writes a record in two
// pieces, so that a shard looks while a part is not yet begun or half in its ring. At the end it
// writes an [0, END] record into each of its rings. It reports the numbers it sent to each shard.
// 'shard': reads its rings into its own buffers and applies records as the mesh does
// (ShardPool.serveSources): the lowest head number c, unless blocks() says a site may still
// publish a lower one (then it looks again later); if not, it reads the rings once more and
// applies the lowest head. With `checkBlocks` false it skips the blocks() check. It reports the
// numbers it applied, in order, once every ring has brought its END.

import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { BatchSequence, before } from '../../src/shared/sequence.ts';
import { Ring } from '../../src/shared/ring.ts';

export const DATA = 1;
export const END = 2;
const RECORD_BYTES = 8;

export interface SequenceWorkerData {
  kind: 'sequence-worker';
  role: 'site' | 'shard';
  seq: SharedArrayBuffer;
  shards: number;
  /** The site's index, or the shard's (which is also its own site, skipped by blocks()). */
  index: number;
  /** Site: per shard, its ring to that shard (null: none). Shard: per site, the ring from it. */
  rings: (SharedArrayBuffer | null)[];
  /** Site: segments to hand over. */
  count: number;
  seed: number;
  /** Shard: whether to ask blocks() before applying (false: the broken scheduler). */
  checkBlocks: boolean;
  /** Int32 [0]: set to 1 to make the worker give up. */
  stop: SharedArrayBuffer;
  /** Date.now() after which the worker gives up. */
  deadline: number;
}

export interface SequenceWorkerResult {
  /** Site: per shard, the numbers sent to it, in the order sent. Shard: [the numbers applied, in order]. */
  numbers: Int32Array[];
  /** Shard: applied numbers not strictly after the one applied before. */
  outOfOrder: number;
  /** Shard: looks where blocks() said to wait. */
  blocked: number;
  /** Shard: records in its rings that were neither DATA nor END, or a record after END. */
  garbled: number;
  /** Whether it gave up (stop flag or deadline) before it was done. */
  gaveUp: boolean;
}

/** Thrown out of a site's loop when it must give up. */
class GiveUp extends Error {}

function xorshift(seed: number): () => number {
  let s = seed | 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return s >>> 0;
  };
}

function runSite(d: SequenceWorkerData): SequenceWorkerResult {
  const seq = BatchSequence.attach(d.seq, d.shards);
  const stop = new Int32Array(d.stop);
  const nap = new Int32Array(new SharedArrayBuffer(4));
  const rand = xorshift(d.seed);
  const rings = d.rings.map((sab) => (sab === null ? null : Ring.attach(sab)));
  const mine: number[] = [];
  for (let z = 0; z < d.shards; z++) if (rings[z] !== null) mine.push(z);
  const sent: number[][] = Array.from({ length: d.shards }, () => []);
  const to = new Int32Array(d.shards);
  const rec = new Uint8Array(RECORD_BYTES);
  const view = new DataView(rec.buffer);
  let gaveUp = false;

  const dawdle = (): void => {
    const r = rand();
    if ((r & 7) === 0) {
      const m = (r >>> 8) & 511;
      for (let k = 0; k < m; k++) Atomics.load(nap, 0);
    } else if ((r & 63) === 1) Atomics.wait(nap, 0, 0, 0.002);
  };
  const giveUp = (): boolean => Atomics.load(stop, 0) !== 0 || Date.now() > d.deadline;

  /** Writes rec[from, to) into `ring`, waiting while it is full. */
  const put = (ring: Ring, from: number, end: number): void => {
    while (from < end) {
      const n = ring.write(rec, from, end - from);
      from += n;
      if (n === 0) {
        if (giveUp()) throw new GiveUp();
        Atomics.wait(nap, 0, 0, 0.01); // let the shard's thread run (2 cores for 5 threads)
      }
    }
  };
  const record = (ring: Ring, num: number, kind: number): void => {
    view.setInt32(0, num, true);
    view.setInt32(4, kind, true);
    const r = rand();
    if ((r & 7) === 0) {
      const cut = 1 + ((r >>> 3) % (RECORD_BYTES - 1));
      put(ring, 0, cut);
      dawdle();
      put(ring, cut, RECORD_BYTES);
    } else put(ring, 0, RECORD_BYTES);
  };

  try {
    for (let i = 0; i < d.count; i++) {
      if ((i & 1023) === 0 && giveUp()) throw new GiveUp();
      let n = 0;
      const bits = rand();
      const rot = bits >>> 16;
      for (let k = 0; k < mine.length; k++) if ((bits >>> k) & 1) to[n++] = mine[(k + rot) % mine.length];
      if (n === 0) to[n++] = mine[rot % mine.length];
      const num = seq.take(d.index, to, n);
      dawdle();
      for (let j = 0; j < n; j++) {
        const z = to[j];
        record(rings[z] as Ring, num, DATA);
        seq.written(d.index, z);
        sent[z].push(num);
        dawdle();
      }
    }
    for (const z of mine) record(rings[z] as Ring, 0, END);
  } catch (err) {
    if (!(err instanceof GiveUp)) throw err;
    gaveUp = true;
  }
  return { numbers: sent.map((a) => Int32Array.from(a)), outOfOrder: 0, blocked: 0, garbled: 0, gaveUp };
}


/** One site's ring as the shard reads it: whole records parsed into a queue of numbers. */
class Source {
  readonly ring: Ring;
  private readonly queue: number[] = [];
  private head = 0;
  private readonly part = new Uint8Array(RECORD_BYTES);
  private readonly partView = new DataView(this.part.buffer);
  private partLen = 0;
  ended = false;
  garbled = 0;

  constructor(ring: Ring) {
    this.ring = ring;
  }

  pull(scratch: Uint8Array): void {
    for (;;) {
      const n = this.ring.read(scratch, 0, scratch.length);
      if (n === 0) return;
      for (let i = 0; i < n; i++) {
        this.part[this.partLen++] = scratch[i];
        if (this.partLen < RECORD_BYTES) continue;
        this.partLen = 0;
        const num = this.partView.getInt32(0, true);
        const kind = this.partView.getInt32(4, true);
        if (this.ended || (kind !== DATA && kind !== END)) this.garbled++;
        else if (kind === END) this.ended = true;
        else this.queue.push(num);
      }
    }
  }

  get ready(): boolean {
    return this.head < this.queue.length;
  }

  headNum(): number {
    return this.queue[this.head];
  }

  shift(): number {
    const num = this.queue[this.head++];
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    }
    return num;
  }
}

function runShard(d: SequenceWorkerData): SequenceWorkerResult {
  const seq = BatchSequence.attach(d.seq, d.shards);
  const stop = new Int32Array(d.stop);
  const nap = new Int32Array(new SharedArrayBuffer(4));
  const sources = d.rings.filter((sab) => sab !== null).map((sab) => new Source(Ring.attach(sab)));
  const scratch = new Uint8Array(4096);
  const applied: number[] = [];
  let outOfOrder = 0;
  let blocked = 0;
  let gaveUp = false;

  const pullAll = (): void => {
    for (const s of sources) s.pull(scratch);
  };
  const lowest = (): Source | null => {
    let best: Source | null = null;
    for (const s of sources) if (s.ready && (best === null || before(s.headNum(), best.headNum()))) best = s;
    return best;
  };

  for (let looks = 0; ; looks++) {
    if ((looks & 1023) === 0 && (Atomics.load(stop, 0) !== 0 || Date.now() > d.deadline)) {
      gaveUp = true;
      break;
    }
    pullAll();
    let best = lowest();
    if (best === null) {
      if (sources.every((s) => s.ended)) break;
      Atomics.wait(nap, 0, 0, 0.005); // nothing yet: let the sites' threads run
      continue;
    }
    const c = best.headNum();
    if (d.checkBlocks && seq.blocks(d.index, d.index, c)) {
      blocked++;
      continue;
    }
    // Whatever was numbered before c is in the rings now.
    pullAll();
    best = lowest() as Source;
    const num = best.shift();
    if (applied.length > 0 && !before(applied[applied.length - 1], num)) outOfOrder++;
    applied.push(num);
  }
  const garbled = sources.reduce((n, s) => n + s.garbled, 0);
  return { numbers: [Int32Array.from(applied)], outOfOrder, blocked, garbled, gaveUp };
}

if (!isMainThread && (workerData as { kind?: string })?.kind === 'sequence-worker') {
  const d = workerData as SequenceWorkerData;
  parentPort?.postMessage(d.role === 'site' ? runSite(d) : runShard(d));
}
