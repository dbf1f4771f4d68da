// TubeTable: the tube registry (name <-> id, owning shard, the counts that decide a tube's life,
// beanstalkd's list-tubes order, two-phase id reuse) in SharedArrayBuffer memory, so that every
// thread serving connections can use the same table. TubeRegistry (tubes.ts) keeps its state here
// (the Router makes the table); it keeps beanstalkd's rules exactly (test/unit/tubetable.test.ts
// drives it with a seeded sequence against a model of the registry kept in plain objects).
//
// ---- Memory ------------------------------------------------------------------------------------
//
// Two growable SharedArrayBuffers (issue #15: a growable SAB never shrinks and its written pages
// stay resident, so what 50,000 tubes once needed is kept for good; keep it small).
//
// The table: a 256-byte header, then `cap` records of 64 bytes (cap a power of two, doubled under
// the lock when full, up to maxTubes). Record i holds:
//   - slot i (tube id i): state, generation, shard, the counts (using, watching, jobs, pinned),
//     refs (their sum), the name's hash and length, its hash-chain link, its list position, and
//     where its name is in the name heap;
//   - entry i of the list-tubes array (the id at position i), and
//   - head i of the name -> id hash index (cap buckets, chained through the slots).
// So all of that grows with the one `grow()` at the end of the buffer; links are stored as id + 1
// so that fresh zeroed memory reads as "none".
//
// The name heap: the names' bytes (latin1, at most 200: beanstalkd's limit), each in a block of
// whole 16-byte granules: a 4-byte header (the owner's id + 1 while in use, -granules when free),
// then the bytes. A name takes about its own length ("tube-12345": one granule), against the 200
// bytes every record once kept for it. Its bookkeeping is in the table's header, under the same
// lock: the end of the used part (`top`), one free list per block size (1..13 granules: exact fit,
// so a free block is reused as it is), and the bytes on the free lists. A block is allocated from
// its size's list, else at `top`; a block freed at `top` lowers it. Where neither fits: if half the
// used part is free blocks, compact() slides every name down over the holes (the heap keeps about
// what the live names need, whatever order they came and went in); else the heap doubles, up to
// maxTubes names of 200 bytes, which compaction always makes room in: so a make() never fails for
// the names when the table has a slot, and maxTubes stays the one limit.
//
// Views are length-tracking, so a thread that attached earlier sees grown buffers without
// re-attaching; `shared` holds both buffers (TubeTable.attach(shared) on another thread).
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
// name (acquire, find), creation, freeing, dropped(), growth, the name heap, list(), invariants().
// Everything in the JS memory model below is a sequentially consistent Atomics operation on the
// SABs, so all of them fall in one total order, and the lock's release/acquire orders the plain
// bookkeeping.
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
// counts(id) reads four words one after another: exact when nobody changes them at the same time,
// each word exact in any case.
//
// name(id) reads a name from the heap without the lock, a seqlock read:
//   m = load moves (odd: a compaction is under way, read again); g = load gen; load state (LIVE
//   needed, else undefined); load the name's block offset and length; load the bytes; load state
//   (LIVE needed, else undefined); load gen (=== g needed, else undefined); load moves (=== m
//   needed, else read again).
// The writers, all under the lock: make() bumps gen, then stores the block offset, the length and
// the bytes, then state LIVE; free() stores state DROPPING, then frees the block (its header and
// a free-list link are written into it, and a later make() of any slot may take it and write
// another name there); compact() adds 1 to moves, moves blocks (stores of bytes and offsets),
// adds 1 again. Every store into the heap is a one-byte Atomics.store, as name()'s loads are, so
// they too are in the one total order (Atomics of another size on the same bytes would not be).
// Why an answer is always the name of the tube (id, g), never another tube's bytes:
//   - No compaction overlapped the read: each one's stores lie between its two adds, and moves
//     only grows, so m even and unchanged means both adds of each compaction came before the
//     first load of moves or after the last one.
//   - The offset and length are those of the make() M that bumped gen to g (or a compaction's
//     before the read, which moved the same bytes): M's stores come before its LIVE store, and
//     the first state load saw LIVE after the gen load saw g; between M's gen bump and its LIVE
//     store the slot was FREE (M takes only FREE slots, and only M, holding the lock, writes its
//     state then), so that LIVE is M's or later. A later make() of this slot bumps gen first, so
//     it came after the last gen load.
//   - The bytes are M's: the block is M's tube's alone until free() of that tube frees it, which
//     comes after that free()'s DROPPING store. If that store came before the last state load,
//     the LIVE seen there was stored by a later make() of this slot, whose gen bump came before
//     it and so before the last gen load, which then is not g. So the block was not freed (nor
//     written by anyone) before the last state load, which came after every byte load.
// A name read half-way through a change can be any bytes (even an offset beyond the heap: name()
// then reads nothing); the checks after the bytes reject it. The block is freed as the tube leaves
// LIVE (freeing it at dropped() would be as safe, and later): so every block in use belongs to a
// LIVE slot, which invariants() checks.

import { isMainThread } from 'node:worker_threads';
import { fnv1a32String } from './hash.ts';
import { i32le } from '../shared/bytes.ts';

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

/** What TubeTable.attach() takes: the table and its name heap (both growable). */
export interface TubeTableShared {
  readonly table: SharedArrayBuffer;
  readonly names: SharedArrayBuffer;
}

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
const H_NAME_TOP = 25; // name heap: bytes in blocks (the next block goes here)
const H_NAME_FREE_BYTES = 26; // name heap: bytes in free blocks
const H_NAME_MOVES = 27; // name heap: odd while compact() moves names (name()'s seqlock)
const H_NAME_COMPACTIONS = 28; // name heap: compact() calls so far
const H_NAME_MOVED = 29; // name heap: name blocks compact() has moved so far
const H_NAME_FREE_LISTS = 32; // name heap: first free block of each size (1..13 granules), offset + 1
const HEADER_BYTES = 256;
const HEADER_INTS = HEADER_BYTES / 4;
const MAGIC = 0x54554245; // 'TUBE'

// Record (Int32 offsets within a 64-byte record).
const REC_BYTES = 64;
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
const R_NAME_AT = 14; // LIVE: byte offset of its name's block in the name heap
const _REC_END = R_NAME_AT + 1; // 15 words: fits in 16

/** A name heap block is whole granules: 16 bytes, so "tube-12345" and its header take one. */
export const NAME_GRANULE_BYTES = 16;
const NAME_BLOCK_HEADER_BYTES = 4; // the owner's id + 1, or -granules when free
/** The largest block: a 200-byte name and its header, in 13 granules (208 bytes). */
export const NAME_BLOCK_MAX_BYTES =
  Math.ceil((NAME_BLOCK_HEADER_BYTES + TUBE_NAME_MAX_BYTES) / NAME_GRANULE_BYTES) * NAME_GRANULE_BYTES;
const NAME_SIZES = NAME_BLOCK_MAX_BYTES / NAME_GRANULE_BYTES; // 13 free lists
/** The name heap's first size (it doubles from there, as needed): 64 short names. */
export const NAME_HEAP_INITIAL_BYTES = 1024;
/**
 * The name heap's largest size, per tube of maxTubes: every tube with a 200-byte name. Compaction
 * packs the live names, so the heap never needs more (maxTubes 2^20: 208 MiB of address space,
 * resident only as far as names have used it).
 */
export const NAME_HEAP_BYTES_PER_TUBE = NAME_BLOCK_MAX_BYTES;
const _FREE_LISTS_END = H_NAME_FREE_LISTS + NAME_SIZES; // 45 ints: fits in the header

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
  readonly shared: TubeTableShared;
  readonly shards: number;
  private readonly i32: Int32Array;
  /**
   * A fixed-length view of the buffer as long as it was when made, for the operations without the
   * lock (retain, release, isLive, the counts, the lock word itself): V8 runs Atomics on it about
   * three times as fast as on the length-tracking i32. rec() makes it again when asked for an id
   * beyond it (the buffer grew); the header is always in it.
   */
  private fixed: Int32Array;
  /** The name heap, length-tracking (under the lock). */
  private readonly names: Uint8Array;
  /** The name heap as long as it was when made, for name() (made again as fixed is). */
  private namesFixed: Uint8Array;
  /** Whether this thread's last acquire() created the tube (tell its shard the name). */
  created = false;
  /** Whether this thread may sleep on the lock (Atomics.wait) after spinning a while. */
  private readonly canSleep: boolean;

  private constructor(shared: TubeTableShared, canSleep: boolean) {
    this.shared = shared;
    this.canSleep = canSleep;
    this.i32 = new Int32Array(shared.table); // length-tracking: follows grow() from any thread
    this.fixed = new Int32Array(shared.table, 0, shared.table.byteLength >> 2);
    this.names = new Uint8Array(shared.names);
    this.namesFixed = new Uint8Array(shared.names, 0, shared.names.byteLength);
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
    const table = new SharedArrayBuffer(HEADER_BYTES + cap * REC_BYTES, {
      maxByteLength: HEADER_BYTES + maxTubes * REC_BYTES,
    });
    const namesMax = maxTubes * NAME_HEAP_BYTES_PER_TUBE;
    const names = new SharedArrayBuffer(Math.min(NAME_HEAP_INITIAL_BYTES, namesMax), { maxByteLength: namesMax });
    const h = new Int32Array(table);
    h[H_CAP] = cap;
    h[H_SHARDS] = shards;
    h[H_MAXCAP] = maxTubes;
    Atomics.store(h, H_MAGIC, MAGIC);
    return new TubeTable(Object.freeze({ table, names }), canSleep);
  }

  /**
   * The table in `shared` (its `shared` from another thread). `canSleep`: whether this thread may
   * Atomics.wait for the lock after spinning a while (by default every thread but the main one,
   * which must spin); sleeping lets a lock holder that lost its core run again sooner when there
   * are more threads than cores.
   */
  static attach(shared: TubeTableShared, canSleep = !isMainThread): TubeTable {
    const { table, names } = (shared ?? {}) as Partial<TubeTableShared>;
    if (
      !(table instanceof SharedArrayBuffer && table.growable && table.byteLength >= HEADER_BYTES) ||
      !(names instanceof SharedArrayBuffer && names.growable)
    ) {
      throw new TypeError('TubeTable.attach: not the growable SharedArrayBuffers of a TubeTable');
    }
    const h = new Int32Array(table, 0, HEADER_INTS);
    if (Atomics.load(h, H_MAGIC) !== MAGIC) throw new TypeError('TubeTable.attach: not a TubeTable');
    if (names.maxByteLength !== Atomics.load(h, H_MAXCAP) * NAME_HEAP_BYTES_PER_TUBE) {
      throw new TypeError("TubeTable.attach: names is not this table's name heap");
    }
    return new TubeTable(Object.freeze({ table, names }), canSleep);
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

  /** The name of live tube `id`, or undefined if it is not live (any more). Without the lock: see the top. */
  name(id: number): string | undefined {
    const r = this.rec(id);
    const h = this.fixed;
    for (;;) {
      const moves = Atomics.load(h, H_NAME_MOVES);
      if (moves & 1) {
        pause(16); // compact() is moving names (under the lock, a short while)
        continue;
      }
      const gen = Atomics.load(h, r + R_GEN);
      if (Atomics.load(h, r + R_STATE) !== LIVE) return undefined;
      const at = Atomics.load(h, r + R_NAME_AT) + NAME_BLOCK_HEADER_BYTES;
      const len = Atomics.load(h, r + R_NAMELEN);
      let s = '';
      let whole = len >= 1 && len <= TUBE_NAME_MAX_BYTES && at >= NAME_BLOCK_HEADER_BYTES;
      if (whole && at + len > this.namesFixed.length) {
        // The heap grew since this view was made (it did before this name's block was taken).
        this.namesFixed = new Uint8Array(this.shared.names, 0, this.shared.names.byteLength);
        whole = at + len <= this.namesFixed.length;
      }
      if (whole) {
        const u8 = this.namesFixed;
        for (let i = 0; i < len; i++) s += String.fromCharCode(Atomics.load(u8, at + i));
      }
      if (Atomics.load(h, r + R_STATE) !== LIVE || Atomics.load(h, r + R_GEN) !== gen) return undefined;
      if (Atomics.load(h, H_NAME_MOVES) !== moves) continue; // moved meanwhile: read it again
      if (!whole) throw new Error(`TubeTable.name: tube ${id} is live with name block ${at}, length ${len}`);
      return s;
    }
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
   * Compacts the name heap now if it holds free blocks (otherwise that waits for a new name that
   * needs room: roomForName); returns whether it did. A test moves names this way while other
   * threads read them.
   */
  compactNames(): boolean {
    this.lock();
    try {
      if (this.i32[H_NAME_FREE_BYTES]! === 0) return false;
      this.compact();
      return true;
    } finally {
      this.unlock();
    }
  }

  /** The name heap: bytes in blocks (live names and free blocks), in free blocks, allocated; compactions and blocks moved so far. */
  get nameHeap(): { usedBytes: number; freeBytes: number; sizeBytes: number; compactions: number; moved: number } {
    const h = this.i32;
    this.lock();
    try {
      return {
        usedBytes: h[H_NAME_TOP]!,
        freeBytes: h[H_NAME_FREE_BYTES]!,
        sizeBytes: this.shared.names.byteLength,
        compactions: h[H_NAME_COMPACTIONS]!,
        moved: h[H_NAME_MOVED]!,
      };
    } finally {
      this.unlock();
    }
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
      if (this.shared.table.byteLength < HEADER_BYTES + cap * REC_BYTES) fail(`buffer shorter than capacity ${cap}`);
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
      // Name heap: blocks tile [0, top): each live tube's block once, its header its id; the
      // others free, each on its size's list once; the free bytes counted.
      const top = h[H_NAME_TOP]!;
      if (!(top >= 0 && top % NAME_GRANULE_BYTES === 0 && top <= this.shared.names.byteLength)) fail(`name heap top ${top}`);
      if (Atomics.load(h, H_NAME_MOVES) & 1) fail('name heap: moves is odd out of compact()');
      const blockOf = new Map<number, number>(); // live tubes' blocks -> id
      for (let id = 0; id < hwm; id++) {
        if (h[R(id) + R_STATE] === LIVE) blockOf.set(h[R(id) + R_NAME_AT]!, id);
      }
      if (blockOf.size !== live) fail('name heap: two live tubes share a block');
      const freeBlocks = new Set<number>();
      let at = 0;
      let freeBytes = 0;
      while (at < top) {
        const head = this.loadWord(at);
        if (head > 0) {
          const id = head - 1;
          if (blockOf.get(at) !== id) fail(`name heap: block ${at} says tube ${id}, which is not there`);
          blockOf.delete(at);
          at += nameBlockBytes(h[R(id) + R_NAMELEN]!);
        } else if (head < 0 && -head <= NAME_SIZES) {
          freeBlocks.add(at);
          freeBytes += -head * NAME_GRANULE_BYTES;
          at += -head * NAME_GRANULE_BYTES;
        } else {
          fail(`name heap: block ${at} has header ${head}`);
        }
      }
      if (at !== top) fail(`name heap: blocks end at ${at}, top ${top}`);
      if (blockOf.size !== 0) fail(`name heap: tube ${[...blockOf.values()][0]}'s block is not in the heap`);
      if (freeBytes !== h[H_NAME_FREE_BYTES]) fail(`name heap: ${freeBytes} free bytes, counter ${h[H_NAME_FREE_BYTES]}`);
      for (let k = 0; k < NAME_SIZES; k++) {
        for (let link = h[H_NAME_FREE_LISTS + k]!; link !== 0; link = this.loadWord(link - 1 + NAME_BLOCK_HEADER_BYTES)) {
          const block = link - 1;
          if (!freeBlocks.delete(block) || this.loadWord(block) !== -(k + 1)) fail(`name heap: free list ${k + 1} holds ${block}`);
        }
      }
      if (freeBlocks.size !== 0) fail(`name heap: free block ${[...freeBlocks][0]} is on no list`);
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
    if (r + REC_INTS > this.fixed.length) this.fixed = new Int32Array(this.shared.table, 0, this.shared.table.byteLength >> 2);
    return r;
  }

  private lookup(name: string, hash: number): number {
    const h = this.i32;
    const u8 = this.names;
    const cap = h[H_CAP]!;
    const len = name.length;
    let link = h[HEADER_INTS + (hash & (cap - 1)) * REC_INTS + R_BUCKET]!;
    while (link !== 0) {
      const id = link - 1;
      const r = HEADER_INTS + id * REC_INTS;
      if (h[r + R_HASH]! >>> 0 === hash && h[r + R_NAMELEN] === len) {
        const at = h[r + R_NAME_AT]! + NAME_BLOCK_HEADER_BYTES;
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
    // The slot (a reused one, or the next new one: growing the records, or throwing when full),
    // then the name's block, then take the slot: nothing is changed if either throws.
    const reuse = h[H_FREE] !== 0;
    if (!reuse && h[H_HWM] === h[H_CAP]) this.grow();
    const id = reuse ? h[H_FREE]! - 1 : h[H_HWM]!;
    const block = this.allocName(id, name.length);
    if (reuse) h[H_FREE] = h[HEADER_INTS + id * REC_INTS + R_NEXT]!;
    else Atomics.store(h, H_HWM, id + 1);
    const r = HEADER_INTS + id * REC_INTS;
    // Generation first, name after, state LIVE last: name()'s seqlock read depends on this order.
    Atomics.add(h, r + R_GEN, 1);
    Atomics.store(h, r + R_NAME_AT, block);
    const at = block + NAME_BLOCK_HEADER_BYTES;
    for (let i = 0; i < name.length; i++) Atomics.store(this.names, at + i, name.charCodeAt(i));
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
    // Its name's block only now, after DROPPING: name() relies on this order (see the top).
    this.freeName(h[r + R_NAME_AT]!, h[r + R_NAMELEN]!);
  }

  /** Doubles the records and rehashes the index into twice the buckets. */
  private grow(): void {
    const h = this.i32;
    const cap = h[H_CAP]!;
    if (cap >= h[H_MAXCAP]!) throw new RangeError(`TubeTable: full (${cap} tubes, the maximum)`);
    const next = cap * 2;
    this.shared.table.grow(HEADER_BYTES + next * REC_BYTES);
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
    const at = this.i32[r + R_NAME_AT]! + NAME_BLOCK_HEADER_BYTES;
    let s = '';
    for (let i = 0; i < len; i++) s += String.fromCharCode(this.names[at + i]!);
    return s;
  }

  // ---- the name heap (under the lock) ----
  //
  // Every store into the heap is a one-byte Atomics.store, as are name()'s loads: so all of them
  // are in the one total order its proof uses (Atomics of another size on the same bytes would
  // not be). Under the lock, plain loads see what earlier holders stored.

  /** The offset of a new block for a `len`-byte name of tube `id` (its header written). */
  private allocName(id: number, len: number): number {
    const h = this.i32;
    const size = nameBlockBytes(len);
    const list = H_NAME_FREE_LISTS + size / NAME_GRANULE_BYTES - 1;
    let block: number;
    if (h[list] !== 0) {
      block = h[list]! - 1;
      h[list] = this.loadWord(block + NAME_BLOCK_HEADER_BYTES); // its free-list link
      h[H_NAME_FREE_BYTES] -= size;
    } else {
      if (h[H_NAME_TOP]! + size > this.shared.names.byteLength) this.roomForName(size);
      block = h[H_NAME_TOP]!;
      h[H_NAME_TOP] = block + size;
    }
    this.storeWord(block, id + 1);
    return block;
  }

  /** Frees the block at `block` of a `len`-byte name: at the top, lowers it; else on its free list. */
  private freeName(block: number, len: number): void {
    const h = this.i32;
    const size = nameBlockBytes(len);
    if (block + size === h[H_NAME_TOP]) {
      h[H_NAME_TOP] = block;
      return;
    }
    const list = H_NAME_FREE_LISTS + size / NAME_GRANULE_BYTES - 1;
    this.storeWord(block, -(size / NAME_GRANULE_BYTES));
    this.storeWord(block + NAME_BLOCK_HEADER_BYTES, h[list]!);
    h[list] = block + 1;
    h[H_NAME_FREE_BYTES] += size;
  }

  /**
   * Makes `size` bytes of room at the top: compacts if half the used part is free blocks (so the
   * heap keeps about what live names need), else grows (doubling, up to its maximum; compacting
   * there if it has to). At the maximum, compaction always makes room while the table has a slot:
   * at most maxTubes - 1 other names are live, each in at most NAME_BLOCK_MAX_BYTES.
   */
  private roomForName(size: number): void {
    const h = this.i32;
    const names = this.shared.names;
    if (h[H_NAME_FREE_BYTES]! > 0 && h[H_NAME_FREE_BYTES]! * 2 >= h[H_NAME_TOP]!) this.compact();
    if (h[H_NAME_TOP]! + size <= names.byteLength) return;
    if (h[H_NAME_TOP]! + size > names.maxByteLength && h[H_NAME_FREE_BYTES]! > 0) this.compact();
    const need = h[H_NAME_TOP]! + size;
    if (need <= names.byteLength) return;
    if (need > names.maxByteLength) throw new Error(`TubeTable: name heap full (${h[H_NAME_TOP]} bytes of live names)`);
    names.grow(Math.min(names.maxByteLength, Math.max(need, names.byteLength * 2)));
  }

  /**
   * Slides every live name's block down over the free ones, in address order (a block only moves
   * to a lower offset, over bytes already moved or free), and empties the free lists. name()
   * readers see `moves` odd meanwhile, or changed after, and read again.
   */
  private compact(): void {
    const h = this.i32;
    const u8 = this.names;
    const top = h[H_NAME_TOP]!;
    Atomics.add(h, H_NAME_MOVES, 1);
    let from = 0;
    let to = 0;
    while (from < top) {
      const head = this.loadWord(from);
      if (head < 0) {
        from += -head * NAME_GRANULE_BYTES;
        continue;
      }
      const r = HEADER_INTS + (head - 1) * REC_INTS;
      const size = nameBlockBytes(h[r + R_NAMELEN]!);
      if (to !== from) {
        for (let i = 0; i < size; i++) Atomics.store(u8, to + i, u8[from + i]!);
        Atomics.store(h, r + R_NAME_AT, to);
        h[H_NAME_MOVED]!++;
      }
      from += size;
      to += size;
    }
    for (let k = 0; k < NAME_SIZES; k++) h[H_NAME_FREE_LISTS + k] = 0;
    h[H_NAME_FREE_BYTES] = 0;
    h[H_NAME_TOP] = to;
    Atomics.add(h, H_NAME_MOVES, 1);
    h[H_NAME_COMPACTIONS]!++;
  }

  private loadWord(at: number): number {
    return i32le(this.names, at);
  }

  private storeWord(at: number, v: number): void {
    const u8 = this.names;
    for (let k = 0; k < 4; k++) Atomics.store(u8, at + k, (v >>> (8 * k)) & 0xff);
  }
}

/** The bytes of the block a `len`-byte name takes: its header and bytes, in whole granules. */
function nameBlockBytes(len: number): number {
  return Math.ceil((NAME_BLOCK_HEADER_BYTES + len) / NAME_GRANULE_BYTES) * NAME_GRANULE_BYTES;
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
