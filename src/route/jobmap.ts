// Job id -> shard index, for routing `delete <id>`, `peek <id>`, `kick-job <id>` and friends to
// the shard that owns the job, in O(1) and about one byte per live id, shared by every thread that
// serves connections.
//
// Ids come from one sequential counter (JobIds), so live ids cluster: the map is paged. Each page
// covers PAGE_IDS consecutive ids with a byte each holding shard+1 (0 = unknown) and a count of its
// live ids; a page is dropped when its count reaches 0, so the pages in use follow the live ids
// rather than every id ever issued (a queue that has processed 10^9 jobs but holds 10^5 uses a few
// pages). The exception is the head page, the highest page made, where new ids go: it is kept while
// empty, so a queue holding one job or none at a time does not make and drop a page per job; it is
// dropped, if empty, when a higher page is made.
//
// Shared memory. Everything lives in two SharedArrayBuffers, so any number of threads can use one
// map (`map.shared` goes in workerData or a message; `JobShardMap.attach(shared)` on the other side):
//   pool     growable SAB of page slots, PAGE_IDS bytes each. It grows by a slot when a page is
//            made and no slot is free; a dropped page's slot (all zero, as its count says) goes on
//            a free list and is reused by the next page made, so the pool is as large as the most
//            pages ever live at once (a SAB cannot shrink). Slots never move, so every thread keeps
//            its own fixed views of them.
//   control  fixed SAB: a spin lock, a table version, per-slot live counts (one 64-byte line each,
//            as threads put and delete in different pages at once), per-slot generations, the page
//            number of each slot, the free list, and the page table (page number -> slot, open
//            addressing with linear probing, twice as many entries as slots). About 2.8 MiB with
//            the default maxPages, of which a new map touches ~130 KiB.
//
// Concurrency contract: any thread may set() ids it allocated and get() any id; each id is set and
// deleted by one thread at a time (the thread that allocated it sets it before sending the put; the
// thread that learns of the job's deletion deletes it), and a get() of an id that happens after its
// set (through the put's message) sees it. Different threads set and delete different ids in the
// same page at the same time. delete() of an id that is not set is a no-op (on a CPU that may
// reorder loads, such as ARM, that holds only while no other thread is dropping the id's page at
// that moment: callers delete ids they know to be set, once).
//
// How that is safe without a lock on the hot path:
// - A page's live count is changed with Atomics only. set() pins the page first (count + 1) and
//   then writes the byte (undoing the pin if the id was already set), delete() clears the byte and
//   then unpins, so the count is never below the number of set bytes: a count of 0 means an all-zero
//   page.
// - Making and dropping pages, and every change to the table, take the spin lock (the main thread
//   cannot Atomics.wait; the critical sections are a few dozen instructions, and a pool grow).
//   Whoever takes a count to 0 drops the page: under the lock it swaps the count from 0 to DEAD (a
//   large negative number) with compareExchange, so a racing set() that pinned it first keeps it,
//   and one that pins it after sees a negative count, unpins and takes the slow path.
// - Each slot has a generation, odd while it holds a page, bumped by every make and drop. Each thread
//   caches page -> (slot, generation, view) for a few pages; an operation through the cache reads
//   the byte and then checks the generation, so a slot dropped or reused by another thread since is
//   never read as this page's. These two are plain loads (Atomics.load is a builtin call, ~10 ns
//   here): for a set id, the set happened before (the put's message), and so did the drop and
//   remake of any page slot this thread's cache still names; and set() reads the generation after
//   its atomic add, a full barrier.
// - Readers look pages up in the table without the lock; the table version is odd while a writer
//   changes it, and a reader whose lookup straddled a change looks again.
// The cost on the hot path: a direct-mapped per-thread cache entry, a load of the byte and one of
// the generation; set and delete add one atomic add or sub on the page's count (bench/RESULTS.md:
// ~5 ns per operation more than the single-thread map's).

/** Ids per page: 64 Ki ids = 64 KiB per page; small enough that a sparse tail wastes little. */
export const PAGE_IDS = 65536;
const OFFSET_MASK = PAGE_IDS - 1; // `id & mask` is exact for any safe integer (ToInt32 is mod 2^32)
/** Shards are stored as shard+1 in a byte, so 0 means unknown and 255 shards fit (0..254). */
export const SHARD_MAX = 254;
/**
 * Pages live at once, by default: 32 Ki pages = 2 GiB of pool address space reserved (committed only
 * as pages are made) and about 3 MiB of control memory, enough for live ids spread over 2^31 ids.
 */
export const DEFAULT_MAX_PAGES = 32768;

// control: Int32 indices of the header (lock and version on cache lines of their own).
const H_LOCK = 0;
const H_VERSION = 16;
const H_SLOTS = 32; // slots made (the pool holds this many pages)
const H_FREE = 33; // slots on the free list
const H_IN_USE = 34; // slots holding a page
const H_MAX = 35; // maxPages
const H_MAGIC = 36;
/** The slot of the head page (the highest page made, where new ids go), or -1: kept while empty. */
const H_HEAD_SLOT = 37;
const HEADER_INTS = 48;
const MAGIC = 0x4a534d31; // "JSM1"
const GEN_BASE = HEADER_INTS;
const LIVE_STRIDE = 16; // ints: one 64-byte line per live count
/** A dropped page's count: pins that race with the drop keep it negative. */
const DEAD = -(2 ** 30);
const CACHE_ENTRIES = 16; // per thread, direct-mapped by page number
const CACHE_MASK = CACHE_ENTRIES - 1;
const NO_PAGE = -1;

interface Layout {
  maxPages: number;
  freeBase: number;
  tableBase: number;
  tableMask: number;
  liveBase: number;
  pageNoByteOffset: number;
  bytes: number;
}

function layout(maxPages: number): Layout {
  const freeBase = GEN_BASE + maxPages;
  const tableBase = freeBase + maxPages;
  const tableSize = 2 * maxPages;
  const liveBase = Math.ceil((tableBase + tableSize) / LIVE_STRIDE) * LIVE_STRIDE;
  const pageNoByteOffset = (liveBase + maxPages * LIVE_STRIDE) * 4; // 64-byte aligned
  return {
    maxPages,
    freeBase,
    tableBase,
    tableMask: tableSize - 1,
    liveBase,
    pageNoByteOffset,
    bytes: pageNoByteOffset + maxPages * 8,
  };
}

/** What another thread needs to attach to a map: pass it in workerData or postMessage. */
export interface JobShardMapShared {
  readonly control: SharedArrayBuffer;
  readonly pool: SharedArrayBuffer;
}

export interface JobShardMapOptions {
  /** Most pages live at once (a power of two, 4..2^20); set() throws RangeError beyond it. */
  maxPages?: number;
}

const pause: () => void =
  typeof (Atomics as { pause?: () => void }).pause === 'function'
    ? (Atomics as unknown as { pause: () => void }).pause.bind(Atomics)
    : () => {};

const NO_VIEW = new Uint8Array(0);

/** Job id -> shard, as the router uses it: a JobShardMap, or with one shard OneShard. */
export interface JobRouting {
  /** The shard of job `id`, or -1 if it is certainly not a job (see JobShardMap.get). */
  get(id: number): number;
  set(id: number, shard: number): void;
  delete(id: number): void;
  /** What another thread attaches to (null: nothing to share). */
  readonly shared: JobShardMapShared | null;
}

/**
 * With one shard every job is on shard 0, so nothing is kept per job (JobShardMap costs a byte a
 * job, and two atomic updates per put and delete). Any valid id goes to shard 0, which answers
 * NOT_FOUND for one it does not hold, as the map's -1 would have been answered.
 */
export class OneShard implements JobRouting {
  readonly shared = null;

  get(id: number): number {
    return id > 0 && Number.isSafeInteger(id) ? 0 : -1;
  }

  set(_id: number, _shard: number): void {}

  delete(_id: number): void {}
}

export class JobShardMap implements JobRouting {
  /** The shared state, for JobShardMap.attach() on another thread. */
  readonly shared: JobShardMapShared;
  private readonly ctl: Int32Array;
  private readonly pageNos: Float64Array; // page number of each slot (valid while the slot is in use)
  private readonly pool: SharedArrayBuffer;
  private readonly maxPages: number;
  private readonly freeBase: number;
  private readonly tableBase: number;
  private readonly tableMask: number;
  private readonly liveBase: number;
  /** This thread's views of the pool's slots, made when first needed. */
  private readonly views: Uint8Array[] = [];
  // This thread's cache: page number -> slot, its generation when cached, and its view.
  private readonly cPage = new Float64Array(CACHE_ENTRIES).fill(NO_PAGE);
  private readonly cSlot = new Int32Array(CACHE_ENTRIES);
  private readonly cGen = new Int32Array(CACHE_ENTRIES);
  private readonly cView: Uint8Array[] = new Array<Uint8Array>(CACHE_ENTRIES).fill(NO_VIEW);

  constructor(opts: JobShardMapOptions = {}, shared?: JobShardMapShared) {
    let lay: Layout;
    if (shared === undefined) {
      const maxPages = opts.maxPages ?? DEFAULT_MAX_PAGES;
      if (!(Number.isInteger(maxPages) && maxPages >= 4 && maxPages <= 2 ** 20 && (maxPages & (maxPages - 1)) === 0)) {
        throw new RangeError(`JobShardMap: maxPages must be a power of two in 4..2^20, got ${maxPages}`);
      }
      lay = layout(maxPages);
      const control = new SharedArrayBuffer(lay.bytes);
      const pool = new SharedArrayBuffer(0, { maxByteLength: maxPages * PAGE_IDS });
      const ctl = new Int32Array(control);
      ctl[H_MAX] = maxPages;
      ctl[H_MAGIC] = MAGIC;
      ctl[H_HEAD_SLOT] = -1;
      this.shared = Object.freeze({ control, pool });
    } else {
      const { control, pool } = shared;
      if (!(control instanceof SharedArrayBuffer) || !(pool instanceof SharedArrayBuffer) || control.byteLength < HEADER_INTS * 4) {
        throw new TypeError('JobShardMap.attach: not a JobShardMap');
      }
      const head = new Int32Array(control, 0, HEADER_INTS);
      const maxPages = Atomics.load(head, H_MAX);
      if (Atomics.load(head, H_MAGIC) !== MAGIC) throw new TypeError('JobShardMap.attach: not a JobShardMap');
      lay = layout(maxPages);
      if (control.byteLength !== lay.bytes || !pool.growable || pool.maxByteLength !== maxPages * PAGE_IDS) {
        throw new TypeError('JobShardMap.attach: not a JobShardMap');
      }
      this.shared = shared;
    }
    this.ctl = new Int32Array(this.shared.control);
    this.pageNos = new Float64Array(this.shared.control, lay.pageNoByteOffset, lay.maxPages);
    this.pool = this.shared.pool;
    this.maxPages = lay.maxPages;
    this.freeBase = lay.freeBase;
    this.tableBase = lay.tableBase;
    this.tableMask = lay.tableMask;
    this.liveBase = lay.liveBase;
  }

  /** This thread's handle on a map made on another thread (from its `shared`). */
  static attach(shared: JobShardMapShared): JobShardMap {
    return new JobShardMap({}, shared);
  }

  /** Ids set and not deleted, over all threads (exact when no thread is changing the map). */
  get liveIds(): number {
    const c = this.ctl;
    const slots = Atomics.load(c, H_SLOTS);
    let total = 0;
    for (let s = 0; s < slots; s++) {
      if ((Atomics.load(c, GEN_BASE + s) & 1) === 0) continue;
      const n = Atomics.load(c, this.liveBase + s * LIVE_STRIDE);
      if (n > 0) total += n;
    }
    return total;
  }

  /** Page slots the pool has made so far (each PAGE_IDS bytes; freed slots are reused). */
  get pagesMade(): number {
    return Atomics.load(this.ctl, H_SLOTS);
  }

  /** Record that job `id` lives on `shard` (overwrites a previous shard for the same id). */
  set(id: number, shard: number): void {
    checkId(id);
    if (!(shard >= 0 && shard <= SHARD_MAX && Number.isInteger(shard))) {
      throw new RangeError(`JobShardMap: shard must be an integer in 0..${SHARD_MAX}, got ${shard}`);
    }
    const offset = id & OFFSET_MASK;
    const pageNo = (id - offset) / PAGE_IDS;
    const k = pageNo & CACHE_MASK;
    let slot: number;
    if (this.cPage[k] === pageNo) {
      slot = this.cSlot[k]!;
      // Pin the page, then make sure the slot still holds it (no drop or reuse since cached).
      // (The add is a full barrier, so the plain read of the generation after it is not stale.)
      if (Atomics.add(this.ctl, this.liveBase + slot * LIVE_STRIDE, 1) < 0 || this.ctl[GEN_BASE + slot] !== this.cGen[k]) {
        this.unpin(slot);
        slot = this.pinSlow(pageNo, k);
      }
    } else {
      slot = this.pinSlow(pageNo, k);
    }
    const view = this.cView[k]!;
    const prev = view[offset]!;
    view[offset] = shard + 1;
    if (prev !== 0) this.unpin(slot); // was set already: its own pin holds the page
  }

  /**
   * The shard of job `id`, or -1 if the id is unknown (never issued, deleted, or not a valid id at
   * all: ids here come straight from client commands, and a bad one is a NOT_FOUND, not a bug).
   */
  get(id: number): number {
    if (!(id > 0 && Number.isSafeInteger(id))) return -1;
    const offset = id & OFFSET_MASK;
    const pageNo = (id - offset) / PAGE_IDS;
    const k = pageNo & CACHE_MASK;
    if (this.cPage[k] === pageNo) {
      const b = this.cView[k]![offset]!;
      if (this.ctl[GEN_BASE + this.cSlot[k]!] === this.cGen[k]) return b - 1;
    }
    for (;;) {
      if (!this.find(pageNo, k)) return -1;
      const b = this.cView[k]![offset]!;
      if (this.ctl[GEN_BASE + this.cSlot[k]!] === this.cGen[k]) return b - 1;
    }
  }

  /** Forget job `id`; a no-op if unknown. Drops the page when its last live id goes. */
  delete(id: number): void {
    checkId(id);
    const offset = id & OFFSET_MASK;
    const pageNo = (id - offset) / PAGE_IDS;
    const k = pageNo & CACHE_MASK;
    for (;;) {
      if (this.cPage[k] !== pageNo && !this.find(pageNo, k)) return;
      const slot = this.cSlot[k]!;
      const view = this.cView[k]!;
      const b = view[offset]!;
      if (this.ctl[GEN_BASE + slot] !== this.cGen[k]) {
        this.cPage[k] = NO_PAGE; // dropped or reused by another thread since cached
        continue;
      }
      if (b === 0) return;
      // The id is set, and only this thread deletes it: it pins the page until the unpin below.
      view[offset] = 0;
      if (Atomics.sub(this.ctl, this.liveBase + slot * LIVE_STRIDE, 1) === 1) this.emptied(slot);
      return;
    }
  }

  /** Bytes held in the pool of page slots (pages in use and free slots kept for reuse). */
  bytesAllocated(): number {
    return this.pool.byteLength;
  }

  /** Number of pages in use (the head page, where new ids go, is kept while empty); for tests and stats. */
  pageCount(): number {
    return Atomics.load(this.ctl, H_IN_USE);
  }

  /** Assertions about our own mistakes; O(slots * PAGE_IDS), for tests only, with no thread changing the map. */
  invariants(): void {
    const c = this.ctl;
    const slots = c[H_SLOTS]!;
    const free = c[H_FREE]!;
    if (this.pool.byteLength !== slots * PAGE_IDS) throw new Error(`JobShardMap invariant: pool holds ${this.pool.byteLength} bytes for ${slots} slots`);
    if (c[H_LOCK] !== 0) throw new Error('JobShardMap invariant: lock held');
    if ((c[H_VERSION]! & 1) !== 0) throw new Error('JobShardMap invariant: table version odd');
    const onFree = new Set<number>();
    for (let i = 0; i < free; i++) onFree.add(c[this.freeBase + i]!);
    if (onFree.size !== free) throw new Error('JobShardMap invariant: a slot is on the free list twice');
    let inUse = 0;
    const pages = new Set<number>();
    for (let s = 0; s < slots; s++) {
      const gen = c[GEN_BASE + s]!;
      const live = c[this.liveBase + s * LIVE_STRIDE]!;
      const view = this.view(s);
      let nonZero = 0;
      for (let i = 0; i < PAGE_IDS; i++) if (view[i] !== 0) nonZero++;
      if ((gen & 1) === 0) {
        if (!onFree.has(s)) throw new Error(`JobShardMap invariant: slot ${s} is neither in use nor free`);
        if (live !== DEAD) throw new Error(`JobShardMap invariant: free slot ${s} counts ${live - DEAD} pins`);
        if (nonZero !== 0) throw new Error(`JobShardMap invariant: free slot ${s} holds ${nonZero} ids`);
        continue;
      }
      inUse++;
      const pageNo = this.pageNos[s]!;
      if (onFree.has(s)) throw new Error(`JobShardMap invariant: slot ${s} is in use and free`);
      if (nonZero !== live) throw new Error(`JobShardMap invariant: page ${pageNo} counts ${live} live ids, holds ${nonZero}`);
      if (live === 0 && s !== c[H_HEAD_SLOT]) throw new Error(`JobShardMap invariant: empty page ${pageNo} was kept`);
      if (pages.has(pageNo)) throw new Error(`JobShardMap invariant: page ${pageNo} is in two slots`);
      pages.add(pageNo);
      if (this.lookupLocked(pageNo) !== s) throw new Error(`JobShardMap invariant: the table does not find page ${pageNo}`);
    }
    const head = c[H_HEAD_SLOT]!;
    if (head >= 0 && ((c[GEN_BASE + head]! & 1) === 0 || [...pages].some((p) => p > this.pageNos[head]!))) {
      throw new Error('JobShardMap invariant: the head page is not the highest page in use');
    }
    if (inUse !== c[H_IN_USE]) throw new Error(`JobShardMap invariant: ${inUse} slots in use, header says ${c[H_IN_USE]}`);
    if (inUse + free !== slots) throw new Error(`JobShardMap invariant: ${inUse} in use + ${free} free != ${slots} slots`);
    let entries = 0;
    for (let i = 0; i <= this.tableMask; i++) if (c[this.tableBase + i] !== 0) entries++;
    if (entries !== inUse) throw new Error(`JobShardMap invariant: ${entries} table entries for ${inUse} pages`);
  }

  // ---- slow paths ----

  private view(slot: number): Uint8Array {
    let v = this.views[slot];
    if (v === undefined) {
      v = new Uint8Array(this.pool, slot * PAGE_IDS, PAGE_IDS);
      this.views[slot] = v;
    }
    return v;
  }

  private fill(k: number, pageNo: number, slot: number, gen: number): void {
    this.cPage[k] = pageNo;
    this.cSlot[k] = slot;
    this.cGen[k] = gen;
    this.cView[k] = this.view(slot);
  }

  /** Looks page `pageNo` up without the lock and caches it in entry k; false if it has no page. */
  private find(pageNo: number, k: number): boolean {
    const c = this.ctl;
    const mask = this.tableMask;
    for (;;) {
      const version = Atomics.load(c, H_VERSION);
      if ((version & 1) !== 0) {
        pause();
        continue;
      }
      let slot = -1;
      let gen = 0;
      let i = pageNo & mask;
      for (let probes = 0; probes <= mask; probes++, i = (i + 1) & mask) {
        const e = Atomics.load(c, this.tableBase + i);
        if (e === 0) break;
        if (this.pageNos[e - 1] === pageNo) {
          slot = e - 1;
          gen = Atomics.load(c, GEN_BASE + slot);
          break;
        }
      }
      if (Atomics.load(c, H_VERSION) !== version) continue; // the table changed under the lookup
      if (slot < 0) return false;
      this.fill(k, pageNo, slot, gen);
      return true;
    }
  }

  /** The slot of page `pageNo`, made if it has none, pinned (count + 1) and cached in entry k. */
  private pinSlow(pageNo: number, k: number): number {
    const c = this.ctl;
    if (this.find(pageNo, k)) {
      const slot = this.cSlot[k]!;
      if (Atomics.add(c, this.liveBase + slot * LIVE_STRIDE, 1) >= 0 && Atomics.load(c, GEN_BASE + slot) === this.cGen[k]) {
        return slot;
      }
      this.unpin(slot);
    }
    this.lock();
    try {
      let slot = this.lookupLocked(pageNo);
      if (slot < 0) slot = this.make(pageNo);
      // In the table, so not dropped: drops take the lock. Its count may be 0 with a drop waiting
      // for the lock; the pin makes that drop's compareExchange fail.
      Atomics.add(c, this.liveBase + slot * LIVE_STRIDE, 1);
      this.fill(k, pageNo, slot, Atomics.load(c, GEN_BASE + slot));
      return slot;
    } finally {
      this.unlock();
    }
  }

  private unpin(slot: number): void {
    if (Atomics.sub(this.ctl, this.liveBase + slot * LIVE_STRIDE, 1) === 1) this.emptied(slot);
  }

  /**
   * The count of `slot` went to 0: drop its page unless it is the head page (new ids go there, so a
   * queue holding one job or none at a time does not make and drop a page per job). A head page
   * that stops being head while empty is dropped by make(); the sequentially consistent sub before
   * this load and make()'s store of the new head before its load of the old head's count mean that
   * at least one of the two sees the other.
   */
  private emptied(slot: number): void {
    if (Atomics.load(this.ctl, H_HEAD_SLOT) !== slot) this.tryDrop(slot);
  }

  /** Drops the page in `slot` if its count is (still) 0. */
  private tryDrop(slot: number): void {
    const c = this.ctl;
    this.lock();
    try {
      // Only a slot in use can count 0 (a free one counts DEAD plus racing pins).
      if (c[H_HEAD_SLOT] === slot) return;
      if (Atomics.compareExchange(c, this.liveBase + slot * LIVE_STRIDE, 0, DEAD) !== 0) return;
      this.dropLocked(slot);
    } finally {
      this.unlock();
    }
  }

  /** Under the lock, its count swapped from 0 to DEAD: frees `slot`. */
  private dropLocked(slot: number): void {
    const c = this.ctl;
    Atomics.add(c, H_VERSION, 1); // odd: the table is changing
    this.tableRemove(slot);
    Atomics.add(c, GEN_BASE + slot, 1); // even: free
    const free = c[H_FREE]!;
    Atomics.store(c, this.freeBase + free, slot);
    Atomics.store(c, H_FREE, free + 1);
    Atomics.sub(c, H_IN_USE, 1);
    Atomics.add(c, H_VERSION, 1);
  }

  /** Under the lock: a slot for page `pageNo`, from the free list or a new one, in the table. */
  private make(pageNo: number): number {
    const c = this.ctl;
    let slot: number;
    const free = c[H_FREE]!;
    if (free > 0) {
      slot = c[this.freeBase + free - 1]!;
      Atomics.store(c, H_FREE, free - 1);
    } else {
      slot = c[H_SLOTS]!;
      if (slot >= this.maxPages) {
        throw new RangeError(`JobShardMap: more than ${this.maxPages} pages of live ids (maxPages)`);
      }
      this.pool.grow((slot + 1) * PAGE_IDS);
      Atomics.store(c, this.liveBase + slot * LIVE_STRIDE, DEAD);
      Atomics.store(c, H_SLOTS, slot + 1);
    }
    Atomics.add(c, H_VERSION, 1); // odd
    this.pageNos[slot] = pageNo;
    // DEAD plus pins racing from the slot's last page, which they will take back: those alone.
    Atomics.sub(c, this.liveBase + slot * LIVE_STRIDE, DEAD);
    Atomics.add(c, GEN_BASE + slot, 1); // odd: in use
    let i = pageNo & this.tableMask;
    while (c[this.tableBase + i] !== 0) i = (i + 1) & this.tableMask;
    Atomics.store(c, this.tableBase + i, slot + 1);
    Atomics.add(c, H_IN_USE, 1);
    Atomics.add(c, H_VERSION, 1); // even
    const head = c[H_HEAD_SLOT]!;
    if (head < 0 || pageNo > this.pageNos[head]!) {
      Atomics.store(c, H_HEAD_SLOT, slot);
      // The old head page is an ordinary page now: dropped if empty (else by its last delete).
      if (head >= 0 && Atomics.compareExchange(c, this.liveBase + head * LIVE_STRIDE, 0, DEAD) === 0) this.dropLocked(head);
    }
    return slot;
  }

  /** Under the lock (or with no thread changing the map): the slot of page `pageNo`, or -1. */
  private lookupLocked(pageNo: number): number {
    const c = this.ctl;
    for (let i = pageNo & this.tableMask; ; i = (i + 1) & this.tableMask) {
      const e = c[this.tableBase + i]!;
      if (e === 0) return -1;
      if (this.pageNos[e - 1] === pageNo) return e - 1;
    }
  }

  /** Under the lock, version odd: takes `slot` out of the table (linear probing, backward shift). */
  private tableRemove(slot: number): void {
    const c = this.ctl;
    const base = this.tableBase;
    const mask = this.tableMask;
    let i = this.pageNos[slot]! & mask;
    while (c[base + i] !== slot + 1) i = (i + 1) & mask;
    Atomics.store(c, base + i, 0);
    // Move later entries of the run back over the hole when their home is not between it and them.
    for (let j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const e = c[base + j]!;
      if (e === 0) return;
      const home = this.pageNos[e - 1]! & mask;
      const between = i <= j ? i < home && home <= j : i < home || home <= j;
      if (between) continue;
      Atomics.store(c, base + i, e);
      Atomics.store(c, base + j, 0);
      i = j;
    }
  }

  private lock(): void {
    const c = this.ctl;
    while (Atomics.compareExchange(c, H_LOCK, 0, 1) !== 0) {
      while (Atomics.load(c, H_LOCK) !== 0) pause();
    }
  }

  private unlock(): void {
    Atomics.store(this.ctl, H_LOCK, 0);
  }
}

function checkId(id: number): void {
  // Job ids are positive and come from one counter, so they stay safe integers (< 2^53).
  if (!(id > 0 && Number.isSafeInteger(id))) {
    throw new RangeError(`JobShardMap: job id must be a positive safe integer, got ${id}`);
  }
}
