// TubeTable: the tube registry (name <-> id, owning shard, the counts that decide a tube's life,
// beanstalkd's list-tubes order, two-phase id reuse) in SharedArrayBuffer memory, so that every
// thread serving connections can use the same table. TubeRegistry (tubes.ts) keeps its state here
// (the Router makes the table); it keeps beanstalkd's rules exactly (test/unit/tubetable.test.ts
// drives it with a seeded sequence against a model of the registry kept in plain objects).
//
// ---- Memory ------------------------------------------------------------------------------------
//
// One growable SharedArrayBuffer: a 128-byte header, then `cap` records of 256 bytes (cap a power
// of two, doubled under the lock when full, up to maxTubes). Record i holds:
//   - slot i (tube id i): state, generation, shard, the counts (using, watching, jobs, pinned),
//     refs (their sum), the name's hash and length, its hash-chain link, its list position, and
//     the name's bytes (latin1, at most 200: beanstalkd's limit);
//   - entry i of the list-tubes array (the id at position i), and
//   - head i of the name -> id hash index (cap buckets, chained through the slots).
// So everything grows with the one `grow()` at the end of the buffer; links are stored as id + 1
// so that fresh zeroed memory reads as "none". Views are length-tracking, so a thread that
// attached earlier sees a grown buffer without re-attaching.
//
// Slot states: FREE (never used, or reusable) -> LIVE (findable, in the list) -> DROPPING (freed:
// neither findable nor reusable until dropped(id) says its shard processed the drop) -> FREE.
// The generation is bumped each time a slot becomes LIVE (the first tube in a slot has gen 1), so
// a request naming (id, gen) can tell a stale id: isLive(id, gen).
//
// ---- Concurrency --------------------------------------------------------------------------------
//
// One spin lock (Atomics.compareExchange on a header word; the main thread may not Atomics.wait,
// and every hold is a hash lookup or a few stores, so we spin; other threads sleep on the word
// after 200 spins, which matters when threads outnumber cores: a holder that lost its core gets
// it back instead of every waiter spinning out its time slice). Under the lock: every lookup by
// name (acquire, find), creation, freeing, dropped(), growth, list(), invariants(). Everything in
// the JS memory model below is a sequentially consistent Atomics operation on the SAB, so all of
// them fall in one total order, and the lock's release/acquire orders the plain bookkeeping.
//
// refs = using + watching + jobs + pinned, kept in its own word, decides a tube's life: only a
// thread that moved refs from 1 to 0 may free the tube, and it frees it only if, under the lock,
// the slot is still LIVE with the generation it held and refs is still 0.
//
//   acquire(name, f)   lock; look the name up; found: add(f), add(refs); not found: create the
//                      tube with f = refs = 1; unlock.
//   retain(id, f)      (caller already holds a reference to id) add(f), add(refs); no lock.
//   release(id, f)     (caller holds an f reference to id) g = gen; sub(f); old = sub(refs), no lock.
//                      old > 1: done, the tube cannot be freed by this call. old === 1: lock; if
//                      state === LIVE && gen === g && refs === 0: free it (out of the index and
//                      the list, state DROPPING); unlock.
//
// Why an acquire can never revive a freed slot: freeing removes the name from the index under the
// lock. An acquire takes the lock too, so it runs wholly before or wholly after the free. After:
// the lookup misses and it creates a fresh tube (a new slot, or a reused one with a new
// generation once dropped() has been called). A freed slot is only written again by a creation
// after dropped(), which bumps its generation, so a (id, gen) from before can never match it.
//
// Why an acquire that found the slot keeps it alive: its add(refs) happens under the lock, before
// the unlock. A release that brought refs to 0 frees only after taking the lock, i.e. wholly
// before or wholly after that acquire. Before: the acquire would not have found the name (see
// above). After: the freeing check reads refs >= 1 and leaves the tube alone; the acquirer's own
// later release is then the one that may bring refs to 0 again and free it.
//
// Why exactly one release frees a tube: each free needs a refs 1 -> 0 step first and then the
// locked check. Several such steps can happen to one tube (0 is left again by an acquire that
// found it in between), but under the lock the first check that sees LIVE, the same generation
// and refs === 0 frees it, and every later check sees DROPPING or another generation.
//
// Why no tube is left live with refs 0 (once nobody is mid-call): refs only falls in release().
// The release that made the last 1 -> 0 step takes the lock and checks; if it finds refs >= 1, an
// acquire revived the tube after that step, and that acquirer's own last release makes a later
// 1 -> 0 step and checks again. invariants(true) checks this.
//
// Why lock-free increments/decrements are safe: retain() needs the caller to hold a reference, so
// refs >= 1 throughout and no free can happen between its check and its add (the caller's own
// release comes later in its program order). A release whose sub(refs) returned > 1 left refs >= 1
// and cannot free anything. Neither touches the index or the list.
//
// Readers without the lock: gen(id), shard(id), counts(id), isLive(id, gen) read single words.
// name(id) is a seqlock read: load gen, load state (LIVE needed), load the bytes, load gen again;
// a creation bumps gen before it rewrites a slot's name (with atomic stores), so an unchanged gen
// means the bytes belong to one tube. counts(id) reads four words one after another: exact when
// nobody changes them at the same time, each word exact in any case.

import { isMainThread } from 'node:worker_threads';
import { fnv1a32String } from './hash.ts';

/** The counts that keep a tube alive. `pinned` is a count too (the default tube, tubes a move runs on). */
export type TubeCountField = 'using' | 'watching' | 'jobs' | 'pinned';

export interface TubeCounts {
  using: number;
  watching: number;
  jobs: number;
  pinned: number;
}

export interface TubeTableOptions {
  /** Shard count for shard(id): FNV-1a of the name modulo this (as shardOf). */
  shards: number;
  /** Largest number of slots (live + dropping tubes); sets the SAB's maxByteLength. Default 2^20. */
  maxTubes?: number;
  /** Slots allocated at first (rounded up to a power of two). Default 64. */
  initialTubes?: number;
}

export const TUBE_NAME_MAX_BYTES = 200;

// Header (Int32 indices).
const H_LOCK = 0; // its own cache line
const H_MAGIC = 16;
const H_CAP = 17; // records allocated (power of two)
const H_HWM = 18; // records ever used (the next never-used id)
const H_COUNT = 19; // live tubes = list length
const H_FREE = 20; // head of the reusable-id stack, id + 1 (0: empty)
const H_DROPPING = 21; // slots waiting for dropped()
const H_SHARDS = 22;
const H_MAXCAP = 23;
const H_SLEEPERS = 24; // threads asleep (Atomics.wait) on H_LOCK
const HEADER_BYTES = 128;
const HEADER_INTS = HEADER_BYTES / 4;
const MAGIC = 0x54554245; // 'TUBE'

// Record (Int32 offsets within a 256-byte record).
const REC_BYTES = 256;
const REC_INTS = REC_BYTES / 4;
const R_STATE = 0;
const R_GEN = 1;
const R_SHARD = 2;
const R_REFS = 3;
const R_USING = 4;
const R_WATCHING = 5;
const R_JOBS = 6;
const R_PINNED = 7;
const R_HASH = 8;
const R_NAMELEN = 9;
const R_NEXT = 10; // LIVE: next in its hash chain; FREE: next reusable id (both id + 1)
const R_POS = 11; // LIVE: position in the list
const R_LIST_AT = 12; // the list's entry at position (this record's index): an id
const R_BUCKET = 13; // hash bucket (this record's index): first id of its chain, id + 1
const R_NAME_BYTE = 56; // byte offset of the name within the record
const _NAME_END = R_NAME_BYTE + TUBE_NAME_MAX_BYTES; // 256: fits

const SPINS_BEFORE_SLEEP = 200;

const FREE = 0;
const LIVE = 1;
const DROPPING = 2;

function fieldOffset(field: TubeCountField): number {
  switch (field) {
    case 'using':
      return R_USING;
    case 'watching':
      return R_WATCHING;
    case 'jobs':
      return R_JOBS;
    case 'pinned':
      return R_PINNED;
    default:
      throw new TypeError(`TubeTable: unknown count ${String(field)}`);
  }
}

function pow2AtLeast(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

const pause: (n?: number) => void =
  typeof (Atomics as unknown as { pause?: unknown }).pause === 'function'
    ? (Atomics as unknown as { pause: (n?: number) => void }).pause
    : () => {};

export class TubeTable {
  /** The memory to hand to another thread (workerData, postMessage); there: TubeTable.attach(shared). */
  readonly shared: SharedArrayBuffer;
  readonly shards: number;
  private readonly i32: Int32Array;
  /**
   * A fixed-length view of the buffer as long as it was when made, for the operations without the
   * lock (retain, release, isLive, the counts, the lock word itself): V8 runs Atomics on it about
   * three times as fast as on the length-tracking i32. rec() makes it again when asked for an id
   * beyond it (the buffer grew); the header is always in it.
   */
  private fixed: Int32Array;
  private readonly u8: Uint8Array;
  /** Whether this thread's last acquire() created the tube (tell its shard the name). */
  created = false;
  /** Whether this thread may sleep on the lock (Atomics.wait) after spinning a while. */
  private readonly canSleep: boolean;

  private constructor(shared: SharedArrayBuffer, canSleep: boolean) {
    this.shared = shared;
    this.canSleep = canSleep;
    this.i32 = new Int32Array(shared); // length-tracking: follows grow() from any thread
    this.fixed = new Int32Array(shared, 0, shared.byteLength >> 2);
    this.u8 = new Uint8Array(shared);
    this.shards = Atomics.load(this.i32, H_SHARDS);
  }

  /** `canSleep`: see attach(). */
  static create(options: TubeTableOptions, canSleep = !isMainThread): TubeTable {
    const { shards } = options;
    if (!(Number.isInteger(shards) && shards >= 1)) {
      throw new RangeError(`TubeTable: shard count must be a positive integer, got ${shards}`);
    }
    const maxTubes = pow2AtLeast(options.maxTubes ?? 1 << 20);
    const cap = Math.min(maxTubes, pow2AtLeast(Math.max(1, options.initialTubes ?? 64)));
    if (maxTubes > 1 << 22) throw new RangeError(`TubeTable: maxTubes ${maxTubes} is above 2^22`);
    const sab = new SharedArrayBuffer(HEADER_BYTES + cap * REC_BYTES, {
      maxByteLength: HEADER_BYTES + maxTubes * REC_BYTES,
    });
    const h = new Int32Array(sab);
    h[H_CAP] = cap;
    h[H_SHARDS] = shards;
    h[H_MAXCAP] = maxTubes;
    Atomics.store(h, H_MAGIC, MAGIC);
    return new TubeTable(sab, canSleep);
  }

  /**
   * The table in `shared` (its `shared` from another thread). `canSleep`: whether this thread may
   * Atomics.wait for the lock after spinning a while (by default every thread but the main one,
   * which must spin); sleeping lets a lock holder that lost its core run again sooner when there
   * are more threads than cores.
   */
  static attach(shared: SharedArrayBuffer, canSleep = !isMainThread): TubeTable {
    if (!(shared instanceof SharedArrayBuffer) || !shared.growable || shared.byteLength < HEADER_BYTES) {
      throw new TypeError('TubeTable.attach: not a growable SharedArrayBuffer of a TubeTable');
    }
    if (Atomics.load(new Int32Array(shared, 0, HEADER_INTS), H_MAGIC) !== MAGIC) {
      throw new TypeError('TubeTable.attach: not a TubeTable');
    }
    return new TubeTable(shared, canSleep);
  }

  // ---- the lock ----

  // The lock word is 0 (free) or 1 (held). A thread that may sleep announces itself in
  // H_SLEEPERS before Atomics.wait(H_LOCK, 1); unlock stores 0 and then notifies if it sees a
  // sleeper. No lost wake-up: if the sleeper's add comes before unlock's load, unlock notifies,
  // and a notify that comes before the sleeper queued means the store of 0 came before its
  // wait's value check, which then returns at once; if the add comes after the load, the store
  // of 0 came before the add and so before the wait's value check, which returns at once too.
  // (The wait also has a timeout, as a belt over the braces.)

  private lock(): void {
    const h = this.fixed;
    if (Atomics.compareExchange(h, H_LOCK, 0, 1) === 0) return;
    let spins = 0;
    for (;;) {
      // Test before test-and-set: spin on a load, not on the cache line's ownership.
      while (Atomics.load(h, H_LOCK) !== 0) {
        if (this.canSleep && spins >= SPINS_BEFORE_SLEEP) {
          Atomics.add(h, H_SLEEPERS, 1);
          Atomics.wait(h, H_LOCK, 1, 1);
          Atomics.sub(h, H_SLEEPERS, 1);
        } else {
          pause(spins < 64 ? 1 : 16);
          spins++;
        }
      }
      if (Atomics.compareExchange(h, H_LOCK, 0, 1) === 0) return;
    }
  }

  private unlock(): void {
    const h = this.fixed;
    Atomics.store(h, H_LOCK, 0);
    if (Atomics.load(h, H_SLEEPERS) !== 0) Atomics.notify(h, H_LOCK, 1);
  }

  // ---- the public operations ----

  /**
   * Finds or creates tube `name` and adds 1 to its `field` count, atomically with the lookup.
   * Returns its id; `this.created` says whether this call made it (its shard must learn the name).
   */
  acquire(name: string, field: TubeCountField): number {
    const off = fieldOffset(field);
    const hash = checkName(name);
    const h = this.i32;
    this.lock();
    try {
      let id = this.lookup(name, hash);
      if (id >= 0) {
        const r = HEADER_INTS + id * REC_INTS;
        Atomics.add(h, r + off, 1);
        Atomics.add(h, r + R_REFS, 1);
        this.created = false;
        return id;
      }
      id = this.make(name, hash, off);
      this.created = true;
      return id;
    } finally {
      this.unlock();
    }
  }

  /** Adds 1 to `field` of tube `id`, which the caller already holds a reference to (any count). No lock. */
  retain(id: number, field: TubeCountField): void {
    const off = fieldOffset(field);
    const r = this.rec(id);
    const h = this.fixed;
    if (Atomics.load(h, r + R_STATE) !== LIVE || Atomics.load(h, r + R_REFS) <= 0) {
      throw new Error(`TubeTable.retain: tube ${id} is not held`);
    }
    Atomics.add(h, r + off, 1);
    Atomics.add(h, r + R_REFS, 1);
  }

  /**
   * Takes 1 from `field` of tube `id` (the caller holds such a reference). Returns true if that
   * freed the tube: its shard must be told to drop it, and dropped(id) called once it has.
   */
  release(id: number, field: TubeCountField): boolean {
    const off = fieldOffset(field);
    const r = this.rec(id);
    const h = this.fixed;
    const gen = Atomics.load(h, r + R_GEN);
    if (Atomics.load(h, r + R_STATE) !== LIVE) throw new Error(`TubeTable.release: tube ${id} is not live`);
    if (Atomics.sub(h, r + off, 1) <= 0) {
      Atomics.add(h, r + off, 1);
      throw new Error(`TubeTable.release: tube ${id} has no ${field} to release`);
    }
    if (Atomics.sub(h, r + R_REFS, 1) !== 1) return false;
    this.lock();
    try {
      if (
        Atomics.load(h, r + R_STATE) !== LIVE ||
        Atomics.load(h, r + R_GEN) !== gen ||
        Atomics.load(h, r + R_REFS) !== 0
      ) {
        return false; // revived by an acquire, or already freed by another release
      }
      this.free(id);
      return true;
    } finally {
      this.unlock();
    }
  }

  /** The shard has processed the drop of freed tube `id`: the id may now be reused. */
  dropped(id: number): void {
    const r = this.rec(id);
    const h = this.fixed;
    this.lock();
    try {
      if (Atomics.load(h, r + R_STATE) !== DROPPING) throw new Error(`TubeTable.dropped: tube ${id} was not freed`);
      Atomics.store(h, r + R_STATE, FREE);
      h[r + R_NEXT] = h[H_FREE]!;
      h[H_FREE] = id + 1;
      Atomics.sub(h, H_DROPPING, 1);
    } finally {
      this.unlock();
    }
  }

  /** The id of live tube `name`, or -1. Takes no reference: the answer may be stale at once. */
  find(name: string): number {
    const hash = checkName(name);
    this.lock();
    try {
      return this.lookup(name, hash);
    } finally {
      this.unlock();
    }
  }

  /** Whether `id` is still the live tube of generation `gen`. */
  isLive(id: number, gen: number): boolean {
    const r = this.rec(id);
    return Atomics.load(this.fixed, r + R_GEN) === gen && Atomics.load(this.fixed, r + R_STATE) === LIVE;
  }

  /** The name of live tube `id`, or undefined if it is not live (any more). */
  name(id: number): string | undefined {
    const r = this.rec(id);
    const h = this.fixed;
    const u8 = this.u8;
    const gen = Atomics.load(h, r + R_GEN);
    if (Atomics.load(h, r + R_STATE) !== LIVE) return undefined;
    const len = Atomics.load(h, r + R_NAMELEN);
    if (len < 1 || len > TUBE_NAME_MAX_BYTES) return undefined;
    const at = r * 4 + R_NAME_BYTE;
    let s = '';
    for (let i = 0; i < len; i++) s += String.fromCharCode(Atomics.load(u8, at + i));
    return Atomics.load(h, r + R_GEN) === gen ? s : undefined;
  }

  /** The shard owning tube `id` (meaningful while it is live). */
  shard(id: number): number {
    const r = this.rec(id);
    return Atomics.load(this.fixed, r + R_SHARD);
  }

  /** The generation of slot `id`: bumped each time a tube is created in it (first tube: 1). */
  gen(id: number): number {
    const r = this.rec(id);
    return Atomics.load(this.fixed, r + R_GEN);
  }

  counts(id: number): TubeCounts {
    const r = this.rec(id);
    const h = this.fixed;
    return {
      using: Atomics.load(h, r + R_USING),
      watching: Atomics.load(h, r + R_WATCHING),
      jobs: Atomics.load(h, r + R_JOBS),
      pinned: Atomics.load(h, r + R_PINNED),
    };
  }

  /** Live tubes' ids in beanstalkd's list-tubes order. */
  list(): number[] {
    const h = this.i32;
    this.lock();
    try {
      const n = h[H_COUNT]!;
      const out = new Array<number>(n);
      for (let p = 0; p < n; p++) out[p] = h[HEADER_INTS + p * REC_INTS + R_LIST_AT]!;
      return out;
    } finally {
      this.unlock();
    }
  }

  /** Live tubes' names in list-tubes order, read under one lock (a consistent snapshot). */
  listNames(): string[] {
    const h = this.i32;
    this.lock();
    try {
      const n = h[H_COUNT]!;
      const out = new Array<string>(n);
      for (let p = 0; p < n; p++) out[p] = this.nameUnlocked(h[HEADER_INTS + p * REC_INTS + R_LIST_AT]!);
      return out;
    } finally {
      this.unlock();
    }
  }

  /** Live tubes. */
  get count(): number {
    return Atomics.load(this.fixed, H_COUNT);
  }

  /** Slots ever used: every id so far is below it (ids at or above it are no tube's yet). */
  get highWater(): number {
    return Atomics.load(this.fixed, H_HWM);
  }

  /** Freed tubes whose dropped() has not come yet. */
  get dropping(): number {
    return Atomics.load(this.fixed, H_DROPPING);
  }

  /** Slots allocated now (grows by doubling). */
  get capacity(): number {
    return Atomics.load(this.fixed, H_CAP);
  }

  /**
   * Checks the table's internal consistency (index <-> slots <-> list, free stack, counters) under
   * the lock; throws an Error saying what is wrong. `quiescent`: nobody is changing counts now, so
   * also refs === using + watching + jobs + pinned and refs > 0 for every live tube.
   */
  invariants(quiescent = true): void {
    const h = this.i32;
    this.lock();
    try {
      const fail = (msg: string): never => {
        throw new Error(`TubeTable invariants: ${msg}`);
      };
      const cap = h[H_CAP]!;
      const hwm = h[H_HWM]!;
      const count = h[H_COUNT]!;
      if (cap & (cap - 1) || cap > h[H_MAXCAP]!) fail(`capacity ${cap}`);
      if (this.shared.byteLength < HEADER_BYTES + cap * REC_BYTES) fail(`buffer shorter than capacity ${cap}`);
      if (!(0 <= count && count <= hwm && hwm <= cap)) fail(`count ${count}, hwm ${hwm}, capacity ${cap}`);
      const R = (id: number) => HEADER_INTS + id * REC_INTS;
      // Slots.
      let live = 0;
      let dropping = 0;
      const names = new Map<string, number>();
      for (let id = 0; id < hwm; id++) {
        const r = R(id);
        const st = h[r + R_STATE]!;
        if (st === LIVE) {
          live++;
          const name = this.nameUnlocked(id);
          if (name.length < 1 || name.length > TUBE_NAME_MAX_BYTES) fail(`tube ${id}: name length ${name.length}`);
          const prev = names.get(name);
          if (prev !== undefined) fail(`name ${JSON.stringify(name)} in tubes ${prev} and ${id}`);
          names.set(name, id);
          const hash = fnv1a32String(name);
          if (h[r + R_HASH]! >>> 0 !== hash) fail(`tube ${id}: stored hash is not its name's`);
          if (h[r + R_SHARD] !== hash % this.shards) fail(`tube ${id}: shard ${h[r + R_SHARD]}`);
          if (h[r + R_GEN]! < 1) fail(`tube ${id}: generation ${h[r + R_GEN]}`);
          const pos = h[r + R_POS]!;
          if (!(pos >= 0 && pos < count) || h[R(pos) + R_LIST_AT] !== id) fail(`tube ${id}: list position ${pos}`);
          for (const off of [R_USING, R_WATCHING, R_JOBS, R_PINNED]) {
            if (h[r + off]! < 0) fail(`tube ${id}: negative count`);
          }
          if (quiescent) {
            const sum = h[r + R_USING]! + h[r + R_WATCHING]! + h[r + R_JOBS]! + h[r + R_PINNED]!;
            if (h[r + R_REFS] !== sum) fail(`tube ${id}: refs ${h[r + R_REFS]}, counts sum to ${sum}`);
            if (sum === 0) fail(`tube ${id} (${name}): live with no reference`);
          }
        } else if (st === DROPPING) {
          dropping++;
        } else if (st !== FREE) {
          fail(`tube ${id}: state ${st}`);
        }
      }
      if (live !== count) fail(`${live} live slots, count ${count}`);
      if (dropping !== h[H_DROPPING]) fail(`${dropping} dropping slots, counter ${h[H_DROPPING]}`);
      for (let id = hwm; id < cap; id++) {
        if (h[R(id) + R_STATE] !== FREE || h[R(id) + R_GEN] !== 0) fail(`slot ${id} above hwm ${hwm} was used`);
      }
      // List: exactly the live tubes, each once (positions checked above, so no duplicates).
      for (let p = 0; p < count; p++) {
        const id = h[R(p) + R_LIST_AT]!;
        if (!(id >= 0 && id < hwm) || h[R(id) + R_STATE] !== LIVE || h[R(id) + R_POS] !== p) {
          fail(`list[${p}] = ${id} is not a live tube at that position`);
        }
      }
      // Index: every chain entry live, in its hash's bucket, findable; entries === count.
      let indexed = 0;
      for (let b = 0; b < cap; b++) {
        let link = h[R(b) + R_BUCKET]!;
        while (link !== 0) {
          const id = link - 1;
          if (!(id >= 0 && id < hwm) || h[R(id) + R_STATE] !== LIVE) fail(`bucket ${b} holds ${id}, not live`);
          if ((h[R(id) + R_HASH]! & (cap - 1)) !== b) fail(`tube ${id} in bucket ${b}, not its hash's`);
          if (++indexed > count) fail('index holds more entries than live tubes (or a cycle)');
          link = h[R(id) + R_NEXT]!;
        }
      }
      if (indexed !== count) fail(`index holds ${indexed} entries, count ${count}`);
      for (const [name, id] of names) {
        if (this.lookup(name, fnv1a32String(name)) !== id) fail(`lookup of ${JSON.stringify(name)} misses tube ${id}`);
      }
      // Free stack: FREE slots below hwm, each once.
      let free = 0;
      let link = h[H_FREE]!;
      while (link !== 0) {
        const id = link - 1;
        if (!(id >= 0 && id < hwm) || h[R(id) + R_STATE] !== FREE) fail(`free stack holds ${id}, not a free slot`);
        if (++free > hwm) fail('free stack has a cycle');
        link = h[R(id) + R_NEXT]!;
      }
      if (live + dropping + free !== hwm) fail(`${live} live + ${dropping} dropping + ${free} free != hwm ${hwm}`);
    } finally {
      this.unlock();
    }
  }

  // ---- under the lock ----

  private rec(id: number): number {
    if (!(Number.isInteger(id) && id >= 0 && id < Atomics.load(this.fixed, H_HWM))) {
      throw new RangeError(`TubeTable: no tube id ${id}`);
    }
    const r = HEADER_INTS + id * REC_INTS;
    // The slot exists (id < hwm, and the buffer grows before hwm passes its end): see it.
    if (r + REC_INTS > this.fixed.length) this.fixed = new Int32Array(this.shared, 0, this.shared.byteLength >> 2);
    return r;
  }

  private lookup(name: string, hash: number): number {
    const h = this.i32;
    const u8 = this.u8;
    const cap = h[H_CAP]!;
    const len = name.length;
    let link = h[HEADER_INTS + (hash & (cap - 1)) * REC_INTS + R_BUCKET]!;
    while (link !== 0) {
      const id = link - 1;
      const r = HEADER_INTS + id * REC_INTS;
      if (h[r + R_HASH]! >>> 0 === hash && h[r + R_NAMELEN] === len) {
        const at = r * 4 + R_NAME_BYTE;
        let i = 0;
        while (i < len && u8[at + i] === name.charCodeAt(i)) i++;
        if (i === len) return id;
      }
      link = h[r + R_NEXT]!;
    }
    return -1;
  }

  private make(name: string, hash: number, off: number): number {
    const h = this.i32;
    let id: number;
    if (h[H_FREE] !== 0) {
      id = h[H_FREE]! - 1;
      h[H_FREE] = h[HEADER_INTS + id * REC_INTS + R_NEXT]!;
    } else {
      if (h[H_HWM] === h[H_CAP]) this.grow();
      id = h[H_HWM]!;
      Atomics.store(h, H_HWM, id + 1);
    }
    const r = HEADER_INTS + id * REC_INTS;
    // Generation first, name after, state LIVE last: name()'s seqlock read depends on this order.
    Atomics.add(h, r + R_GEN, 1);
    const at = r * 4 + R_NAME_BYTE;
    for (let i = 0; i < name.length; i++) Atomics.store(this.u8, at + i, name.charCodeAt(i));
    Atomics.store(h, r + R_NAMELEN, name.length);
    h[r + R_HASH] = hash | 0;
    Atomics.store(h, r + R_SHARD, hash % this.shards);
    Atomics.store(h, r + R_USING, 0);
    Atomics.store(h, r + R_WATCHING, 0);
    Atomics.store(h, r + R_JOBS, 0);
    Atomics.store(h, r + R_PINNED, 0);
    Atomics.store(h, r + off, 1);
    Atomics.store(h, r + R_REFS, 1);
    // Index: push on its bucket's chain.
    const b = HEADER_INTS + (hash & (h[H_CAP]! - 1)) * REC_INTS + R_BUCKET;
    h[r + R_NEXT] = h[b]!;
    h[b] = id + 1;
    // List: append at the end (beanstalkd's ms_append).
    const n = h[H_COUNT]!;
    h[HEADER_INTS + n * REC_INTS + R_LIST_AT] = id;
    h[r + R_POS] = n;
    Atomics.store(h, H_COUNT, n + 1);
    Atomics.store(h, r + R_STATE, LIVE);
    return id;
  }

  private free(id: number): void {
    const h = this.i32;
    const r = HEADER_INTS + id * REC_INTS;
    // Index: unlink from its chain.
    let at = HEADER_INTS + (h[r + R_HASH]! & (h[H_CAP]! - 1)) * REC_INTS + R_BUCKET;
    while (h[at] !== id + 1) {
      if (h[at] === 0) throw new Error(`TubeTable: tube ${id} missing from the index`);
      at = HEADER_INTS + (h[at]! - 1) * REC_INTS + R_NEXT;
    }
    h[at] = h[r + R_NEXT]!;
    h[r + R_NEXT] = 0;
    // List: the last item moves into the hole (beanstalkd's ms_delete).
    const n = h[H_COUNT]! - 1;
    const pos = h[r + R_POS]!;
    const last = h[HEADER_INTS + n * REC_INTS + R_LIST_AT]!;
    h[HEADER_INTS + pos * REC_INTS + R_LIST_AT] = last;
    h[HEADER_INTS + last * REC_INTS + R_POS] = pos;
    Atomics.store(h, H_COUNT, n);
    Atomics.store(h, r + R_STATE, DROPPING);
    Atomics.add(h, H_DROPPING, 1);
  }

  /** Doubles the records and rehashes the index into twice the buckets. */
  private grow(): void {
    const h = this.i32;
    const cap = h[H_CAP]!;
    if (cap >= h[H_MAXCAP]!) throw new RangeError(`TubeTable: full (${cap} tubes, the maximum)`);
    const next = cap * 2;
    this.shared.grow(HEADER_BYTES + next * REC_BYTES);
    for (let b = 0; b < cap; b++) h[HEADER_INTS + b * REC_INTS + R_BUCKET] = 0;
    const hwm = h[H_HWM]!;
    for (let id = 0; id < hwm; id++) {
      const r = HEADER_INTS + id * REC_INTS;
      if (h[r + R_STATE] !== LIVE) continue;
      const b = HEADER_INTS + (h[r + R_HASH]! & (next - 1)) * REC_INTS + R_BUCKET;
      h[r + R_NEXT] = h[b]!;
      h[b] = id + 1;
    }
    Atomics.store(h, H_CAP, next);
  }

  private nameUnlocked(id: number): string {
    const r = HEADER_INTS + id * REC_INTS;
    const len = this.i32[r + R_NAMELEN]!;
    const at = r * 4 + R_NAME_BYTE;
    let s = '';
    for (let i = 0; i < len; i++) s += String.fromCharCode(this.u8[at + i]!);
    return s;
  }
}

/** Checks a tube name's length and bytes (latin1, 1..200); returns its FNV-1a hash. */
function checkName(name: string): number {
  const len = name.length;
  if (len < 1 || len > TUBE_NAME_MAX_BYTES) {
    throw new RangeError(`TubeTable: tube name of ${len} bytes (1..${TUBE_NAME_MAX_BYTES})`);
  }
  for (let i = 0; i < len; i++) {
    if (name.charCodeAt(i) > 0xff) throw new RangeError('TubeTable: tube name is not latin1');
  }
  return fnv1a32String(name);
}
