// One order for the batches of every thread that sends requests to shards (a mesh: connections
// served on several threads, src/route/shards.ts).
//
// beanstalkd applies commands one at a time. With connections on several threads, several threads
// ("sites") send requests to each shard, and the shards run in parallel. So that every shard sees
// the same order, as beanstalkd's one loop would:
//
// - A site hands over what it read in segments. Each segment takes one number from the shared
//   clock for all its parts (one per shard it has requests for, its own shard's included), so a
//   segment is one step in one global sequence.
// - Each shard applies segments in strictly increasing number. Before it applies number c it
//   makes sure no site may still publish a lower number to it: a site marks, per shard, that it
//   is taking a number (TAKING) and then which number it is writing (WRITING, with the number)
//   until the part is in the ring. A shard that finds a site TAKING, or WRITING a lower number,
//   waits (without blocking its thread) and looks again; a site that is neither takes its next
//   number after that look, so a larger one. After its look the shard reads the rings once more:
//   whatever was numbered lower is in them by then.
// - So a reserve's questions to several shards (one segment) see one cut of every thread's steps,
//   and anything that happened because of something another client was told (its request was
//   published before that reply was written) has a larger number.
// - A step that may make a job ready (a put, a release, a kick...) starts a new segment when the
//   segment already holds a request to another shard (ShardPool.readyStep), so the requests read
//   before it have lower numbers. A shard where a reserve waiting over several shards is parked
//   applies such a step in segment c only once every other shard has applied everything below c
//   (its frontier): a claim they make first goes first, as in beanstalkd.
//
// Frontiers: each shard publishes the lowest number it may still apply. Stopped before c, that is
// c. With nothing to apply, it is the clock's value read before its look at the sites and rings:
// anything numbered lower is already applied. A shard that waits for another one's frontier says
// so (WANT) and rings that one's doorbell, so it publishes afresh; a shard that publishes rings
// those that want it. An idle shard need not be woken at all: it says in shared memory when its
// last pass applied all it read (idle()), and a shard that finds it so, with no thread writing to
// it and its rings empty, knows it has applied everything numbered before (ShardPool.caughtUp).
// No wait is for ever: the lowest number not yet applied anywhere waits for nothing lower, and
// every shard applies its lowest number first.
//
// Numbers are free-running int32 compared with `| 0` (before()): what is in flight at once stays
// far below 2^31 segments, and frontiers are published afresh every 2^28 numbers (refreshDue).

/** Per (site, shard): the site is taking a number for a part to the shard. */
const TAKING = 1;
/** Per (site, shard): the site is writing the part numbered NUM into the shard's ring. */
const WRITING = 2;

const CLOCK = 0;
/** How many shards wait for frontiers now (on the clock's line: read with it). */
const WANTERS = 1;
/** Moves every REFRESH_EVERY numbers: every shard publishes its frontier afresh then (refreshDue). */
const REFRESH = 2;
/**
 * Frontiers are compared with numbers in flight (before()), which is right only while they are
 * less than 2^31 apart; a shard that nobody waited for might keep an old one that long. So every
 * 2^28 numbers every shard is asked to publish afresh.
 */
const REFRESH_EVERY = 1 << 28;
const LINE = 16; // int32 words in a 64-byte cache line
// Per shard (a line each): its frontier, the number it waits for the others to reach (WANT) and
// whether it waits (WANTING), and whether it is idle (IDLE, below).
const FRONTIER = 0;
const WANT = 1;
const WANTING = 2;
/** 1: the shard's last pass applied all it had read and found its rings empty (idle()). */
const IDLE = 3;

/** Whether number `a` comes before `b`. */
export const before = (a: number, b: number): boolean => ((a - b) | 0) < 0;

/** Where shard `shard`'s line starts (after the clock's); lineOf(shards): where the sites' words start. */
const lineOf = (shard: number): number => LINE * (1 + shard);
/** Int32 words per site: a (state, number) pair per shard, rounded up to cache lines. */
const siteStride = (shards: number): number => Math.ceil((2 * shards) / LINE) * LINE;
/** Bytes for `shards` shards: the clock's line, a line per shard, then the sites' words. */
const bytesFor = (shards: number): number => (lineOf(shards) + siteStride(shards) * (shards + 1)) * 4;

export class BatchSequence {
  readonly sab: SharedArrayBuffer;
  private readonly words: Int32Array;
  private readonly shards: number;
  private readonly siteStride: number;
  private readonly sitesAt: number;

  private constructor(sab: SharedArrayBuffer, shards: number) {
    this.sab = sab;
    this.words = new Int32Array(sab);
    this.shards = shards;
    this.siteStride = siteStride(shards);
    this.sitesAt = lineOf(shards);
  }

  /** For `shards` shards and `shards + 1` sites (each shard's thread, and the main thread). */
  static create(shards: number): BatchSequence {
    return new BatchSequence(new SharedArrayBuffer(bytesFor(shards)), shards);
  }

  static attach(sab: SharedArrayBuffer, shards: number): BatchSequence {
    const want = bytesFor(shards);
    if (sab.byteLength !== want) throw new RangeError(`BatchSequence: ${shards} shards need ${want} bytes, got ${sab.byteLength}`);
    return new BatchSequence(sab, shards);
  }

  /** The number the next segment will take. */
  now(): number {
    return Atomics.load(this.words, CLOCK);
  }

  private at(site: number, shard: number): number {
    return this.sitesAt + site * this.siteStride + 2 * shard;
  }

  /**
   * `site` takes the number of a segment with parts for the shards `to[0..n)`: each is marked
   * as being written until written(). Returns the number.
   */
  take(site: number, to: Int32Array, n: number): number {
    const w = this.words;
    for (let i = 0; i < n; i++) Atomics.store(w, this.at(site, to[i]), TAKING);
    const num = Atomics.add(w, CLOCK, 1);
    for (let i = 0; i < n; i++) {
      const a = this.at(site, to[i]);
      Atomics.store(w, a + 1, num);
      Atomics.store(w, a, WRITING);
    }
    return num;
  }

  /**
   * Whether number `num` (just taken) starts a new refresh: the caller rings every shard, which
   * then publishes its frontier afresh (refreshEpoch() moved).
   */
  refreshDue(num: number): boolean {
    if ((num & (REFRESH_EVERY - 1)) !== 0) return false;
    Atomics.add(this.words, REFRESH, 1);
    return true;
  }

  refreshEpoch(): number {
    return Atomics.load(this.words, REFRESH);
  }

  /** `site`'s part for `shard` is all in the shard's ring. */
  written(site: number, shard: number): void {
    Atomics.store(this.words, this.at(site, shard), 0);
  }

  /**
   * Whether some site other than `own` may still publish to `shard` a segment numbered before
   * `c` (it is taking a number, or writing a lower one). After this says no, what was numbered
   * before `c` for the shard is in its rings.
   */
  blocks(shard: number, own: number, c: number): boolean {
    const w = this.words;
    for (let site = 0; site <= this.shards; site++) {
      if (site === own) continue;
      const a = this.at(site, shard);
      const state = Atomics.load(w, a);
      if (state === TAKING) return true;
      if (state === WRITING && before(Atomics.load(w, a + 1), c)) return true;
    }
    return false;
  }

  /**
   * The lowest number a site other than `own` is writing to `shard` (or `upTo` if none is lower);
   * null while one is taking a number (it is not known yet).
   */
  lowestWriting(shard: number, own: number, upTo: number): number | null {
    const w = this.words;
    let low = upTo;
    for (let site = 0; site <= this.shards; site++) {
      if (site === own) continue;
      const a = this.at(site, shard);
      const state = Atomics.load(w, a);
      if (state === TAKING) return null;
      if (state === WRITING) {
        const num = Atomics.load(w, a + 1);
        if (before(num, low)) low = num;
      }
    }
    return low;
  }

  frontier(shard: number): number {
    return Atomics.load(this.words, lineOf(shard) + FRONTIER);
  }

  /** `shard` has applied everything numbered before `f` and will apply nothing lower. */
  publish(shard: number, f: number): void {
    Atomics.store(this.words, lineOf(shard) + FRONTIER, f);
  }

  /** `shard` waits until every other shard's frontier reaches `c`. */
  want(shard: number, c: number): void {
    const base = lineOf(shard);
    Atomics.store(this.words, base + WANT, c);
    if (Atomics.exchange(this.words, base + WANTING, 1) === 0) Atomics.add(this.words, WANTERS, 1);
  }

  /** `shard` waits no more. */
  wantNone(shard: number): void {
    if (Atomics.exchange(this.words, lineOf(shard) + WANTING, 0) === 1) Atomics.sub(this.words, WANTERS, 1);
  }

  /**
   * Whether some shard waits for frontiers. Only then need a shard with nothing to apply publish
   * its own: one that starts to wait says so first, then rings the shards that are behind.
   */
  anyWants(): boolean {
    return Atomics.load(this.words, WANTERS) !== 0;
  }

  /** Whether `shard` waits for the other shards' frontiers to reach `f` or less. */
  wants(shard: number, f: number): boolean {
    const base = lineOf(shard);
    return Atomics.load(this.words, base + WANTING) === 1 && !before(f, Atomics.load(this.words, base + WANT));
  }

  /** Whether a shard other than `shard` waits for frontiers to reach more than `f`. */
  wantedAbove(shard: number, f: number): boolean {
    if (!this.anyWants()) return false;
    for (let z = 0; z < this.shards; z++) {
      if (z === shard) continue;
      const base = lineOf(z);
      if (Atomics.load(this.words, base + WANTING) === 1 && before(f, Atomics.load(this.words, base + WANT))) return true;
    }
    return false;
  }

  /**
   * Whether `shard` has nothing left to apply as of its last pass: set to false before it reads
   * its rings (and before its own thread numbers a segment with a part for it), to true once a
   * pass has applied all it read and found nothing more. With every ring into it empty and no
   * thread writing to it in between two reads that say true, it has applied everything numbered
   * before: what another shard can tell without waking it (ShardPool.caughtUp).
   */
  idle(shard: number): boolean {
    return Atomics.load(this.words, lineOf(shard) + IDLE) === 1;
  }

  setIdle(shard: number, idle: boolean): void {
    Atomics.store(this.words, lineOf(shard) + IDLE, idle ? 1 : 0);
  }
}
