// Job id -> slot map without a JS object or Map entry per job: open addressing with linear
// probing over one Int32Array of cells, each holding slot + 1 (0 marks an empty cell) and, in its
// top TAG_BITS, a few bits of the id's hash. The key is not stored: it is the owner's id column
// (`keys[slot]`, bound with bind()), which the owner keeps anyway. That makes a cell 4 bytes
// instead of 12 (a Float64 key beside the slot); the tag spares most probes the read of the id
// column (a cache miss) for a cell that holds another id. Deletion shifts the following cluster
// back instead of leaving tombstones, so lookups never slow down after churn.
//
// Contract with the owner: keys[slot] holds the id before insert(id, slot) and keeps it until
// remove(id) returned; when the owner replaces its column (it grows), it calls bind() again. The
// column is a Float64Array (workq's store) or an OffsetColumn (the beanstalk engine's 4-byte ids).
//
// The cells are the table's own (it grows and shrinks them with its size: workq's store), or laid
// out by the owner beside its columns (adopt(): the beanstalk engine, which sizes them for its
// slots with cellsFor). An owner's cells come and go with its column block, so a grown table's old
// cells are not a block of their own left in the C heap: freed there, a few MB below the
// allocator's mmap threshold stay in the heap, RSS the allocator keeps (at 1M jobs, ~9 B a job).

import type { OffsetColumn } from './columns.ts';

const MIN_CAPACITY = 16;
const MAX_LOAD = 0.75;
/** The table grows by this factor when it passes MAX_LOAD (any capacity, not a power of two: a
 *  cell's home is the hash scaled to the capacity), so it holds 1.33-2x its entries in cells
 *  rather than 1.33-2.67x (at 1M jobs: 1.35M cells, 5.4 bytes a job, instead of 2^21, 8.4). */
export const IDTABLE_GROWTH = 1.5;
const TAG_BITS = 5;
const SLOT_BITS = 32 - TAG_BITS;
const SLOT_MASK = (1 << SLOT_BITS) - 1;
/** Slots the table can name: a cell keeps slot + 1 in its low 27 bits (134M jobs in one engine). */
export const IDTABLE_SLOTS_MAX = SLOT_MASK;
const TWO_32 = 4294967296;
const NO_KEYS = new Float64Array(0);

export class IdTable {
  size = 0;
  private cells: Int32Array; // tag << SLOT_BITS | slot + 1; 0 = empty
  private keys: Float64Array = NO_KEYS;
  private col: OffsetColumn | null = null; // when bound to an OffsetColumn (keys unused)
  private cap: number; // cells.length
  private readonly minCapacity: number; // never shrink below the size asked for up front
  private adopted = false; // the owner lays the cells out (adopt): no shrinking here

  constructor(capacity = MIN_CAPACITY) {
    let cap = MIN_CAPACITY;
    while (cap * MAX_LOAD < capacity) cap = Math.ceil(cap * IDTABLE_GROWTH);
    this.cells = new Int32Array(cap);
    this.cap = cap;
    this.minCapacity = cap;
  }

  /** Points the table at the owner's id column (indexed by slot). */
  bind(keys: Float64Array | OffsetColumn): void {
    if (keys instanceof Float64Array) {
      this.keys = keys;
      this.col = null;
    } else {
      this.keys = NO_KEYS;
      this.col = keys;
    }
  }

  private key(slot: number): number {
    const col = this.col;
    return col === null ? this.keys[slot] : col.get(slot);
  }

  /** Cells that hold `entries` ids within the load limit (what an owner that lays the cells out
   *  gives adopt() for its slots). */
  static cellsFor(entries: number): number {
    return Math.max(MIN_CAPACITY, Math.ceil(entries / MAX_LOAD));
  }

  /**
   * Moves the entries into `cells` (all zero, from the owner's column block; at least
   * cellsFor(size + 1) of them), which the table uses from now on. From then on it no longer
   * shrinks by itself: the owner gives it new cells when it lays its columns out again. (It still
   * grows by itself past its load limit, so an owner that sized the cells short stays correct.)
   */
  adopt(cells: Int32Array): void {
    if (cells.length < IdTable.cellsFor(this.size + 1)) throw new RangeError(`idtable: ${cells.length} cells for ${this.size} entries`);
    this.adopted = true;
    this.rehashInto(cells);
  }

  get capacity(): number {
    return this.cells.length;
  }

  /** Bytes held by the table. */
  get bytes(): number {
    return this.cells.byteLength;
  }

  /** The slot stored for `id`, or -1. */
  get(id: number): number {
    if (!(id > 0)) return -1; // ids are positive; 0 is what a freed slot's key reads as
    const cells = this.cells;
    const cap = this.cap;
    const h = hash(id);
    const tag = h & ((1 << TAG_BITS) - 1);
    for (let i = this.home(h); ; i = i + 1 === cap ? 0 : i + 1) {
      const c = cells[i];
      if (c === 0) return -1;
      if (c >>> SLOT_BITS === tag && this.key((c & SLOT_MASK) - 1) === id) return (c & SLOT_MASK) - 1;
    }
  }

  /** Adds `id -> slot` (keys[slot] must already be `id`); returns false (and changes nothing)
   *  if `id` is already present under another slot. */
  insert(id: number, slot: number): boolean {
    if (!(id > 0)) throw new RangeError(`job id must be positive, got ${id}`);
    if (slot >= IDTABLE_SLOTS_MAX) throw new RangeError(`idtable: slot ${slot} past IDTABLE_SLOTS_MAX (${IDTABLE_SLOTS_MAX})`);
    if (this.key(slot) !== id) throw new Error(`idtable: keys[${slot}] is ${this.key(slot)}, not ${id}`);
    if (this.size + 1 > this.cells.length * MAX_LOAD) this.rehash(Math.ceil(this.cells.length * IDTABLE_GROWTH));
    const cells = this.cells;
    const cap = this.cap;
    const h = hash(id);
    const tag = h & ((1 << TAG_BITS) - 1);
    let i = this.home(h);
    for (; cells[i] !== 0; i = i + 1 === cap ? 0 : i + 1) {
      const c = cells[i];
      if (c >>> SLOT_BITS === tag && this.key((c & SLOT_MASK) - 1) === id) return false;
    }
    cells[i] = (tag << SLOT_BITS) | (slot + 1);
    this.size++;
    return true;
  }

  /** Removes `id`; returns its slot, or -1 if it was absent. */
  remove(id: number): number {
    if (!(id > 0)) return -1;
    const cells = this.cells;
    const cap = this.cap;
    const h = hash(id);
    const tag = h & ((1 << TAG_BITS) - 1);
    let i = this.home(h);
    for (;; i = i + 1 === cap ? 0 : i + 1) {
      const c = cells[i];
      if (c === 0) return -1;
      if (c >>> SLOT_BITS === tag && this.key((c & SLOT_MASK) - 1) === id) break;
    }
    const slot = (cells[i] & SLOT_MASK) - 1;
    // Backward shift: pull later cluster members into the hole when the hole lies on their
    // probe path (cyclically between their home cell and where they sit now).
    for (let j = i + 1 === cap ? 0 : i + 1; cells[j] !== 0; j = j + 1 === cap ? 0 : j + 1) {
      const hj = this.home(hash(this.key((cells[j] & SLOT_MASK) - 1)));
      if ((j >= hj ? j - hj : j - hj + cap) >= (j >= i ? j - i : j - i + cap)) {
        cells[i] = cells[j];
        i = j;
      }
    }
    cells[i] = 0;
    this.size--;
    // Shrink after a burst; at 1/8 load, halving leaves it at 1/4 so it cannot thrash.
    if (!this.adopted && cells.length > this.minCapacity && this.size < cells.length >> 3) this.rehash(Math.max(this.minCapacity, cells.length >> 1));
    return slot;
  }

  /** Throws unless every key is reachable from its home cell, its tag is right and the size is right. */
  check(): void {
    const cells = this.cells;
    const cap = this.cap;
    let n = 0;
    for (let i = 0; i < cells.length; i++) {
      if (cells[i] === 0) continue;
      n++;
      const id = this.key((cells[i] & SLOT_MASK) - 1);
      if (!(id > 0)) throw new Error(`idtable: cell ${i} holds slot ${(cells[i] & SLOT_MASK) - 1} whose key is ${id}`);
      const h = hash(id);
      if (cells[i] >>> SLOT_BITS !== (h & ((1 << TAG_BITS) - 1))) throw new Error(`idtable: id ${id} at ${i} has a wrong tag`);
      for (let j = this.home(h); j !== i; j = j + 1 === cap ? 0 : j + 1) {
        if (cells[j] === 0) throw new Error(`idtable: id ${id} at ${i} unreachable (gap at ${j})`);
      }
    }
    if (n !== this.size) throw new Error(`idtable: size ${this.size} but ${n} keys stored`);
  }

  /** Calls fn for every entry (test/invariant helper). */
  forEach(fn: (id: number, slot: number) => void): void {
    for (let i = 0; i < this.cells.length; i++) {
      const c = this.cells[i];
      if (c !== 0) fn(this.key((c & SLOT_MASK) - 1), (c & SLOT_MASK) - 1);
    }
  }

  // The hash's high bits scaled to the capacity (the tag takes its low bits).
  private home(h: number): number {
    return Math.floor(((h >>> 0) * this.cap) / TWO_32);
  }

  private rehash(capacity: number): void {
    this.rehashInto(new Int32Array(capacity));
  }

  private rehashInto(cells: Int32Array): void {
    const old = this.cells;
    const capacity = cells.length;
    this.cells = cells;
    this.cap = capacity;
    for (let i = 0; i < old.length; i++) {
      const c = old[i];
      if (c === 0) continue;
      let j = this.home(hash(this.key((c & SLOT_MASK) - 1)));
      while (cells[j] !== 0) j = j + 1 === capacity ? 0 : j + 1;
      cells[j] = c;
    }
  }
}

// Ids are integers below 2^53: mix both 32-bit halves, then a murmur-style finalizer so
// sequential ids spread over the table. A 32-bit integer (signed).
function hash(id: number): number {
  let h = (id >>> 0) ^ Math.imul((id / TWO_32) >>> 0, 0x27d4eb2d);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return h ^ (h >>> 16);
}
