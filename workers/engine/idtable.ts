// Job id -> slot map without a JS object or Map entry per job: open addressing with linear
// probing over one Int32Array of cells, each holding slot + 1 (0 marks an empty cell). The key is
// not stored: it is the owner's id column (`keys[slot]`, bound with bind()), which the owner keeps
// anyway. That makes a cell 4 bytes instead of 12 (a Float64 key beside the slot), at the cost of
// one more memory read per probe. Deletion shifts the following cluster back instead of leaving
// tombstones, so lookups never slow down after churn.
//
// Contract with the owner: keys[slot] holds the id before insert(id, slot) and keeps it until
// remove(id) returned; when the owner replaces its column (it grows), it calls bind() again. The
// column is a Float64Array (workq's store) or an OffsetColumn (the beanstalk engine's 4-byte ids).

import type { OffsetColumn } from './columns.ts';

const MIN_CAPACITY = 16;
const MAX_LOAD = 0.75;
const TWO_32 = 4294967296;
const NO_KEYS = new Float64Array(0);

export class IdTable {
  size = 0;
  private cells: Int32Array; // slot + 1, 0 = empty
  private keys: Float64Array = NO_KEYS;
  private col: OffsetColumn | null = null; // when bound to an OffsetColumn (keys unused)
  private mask: number;
  private readonly minCapacity: number; // never shrink below the size asked for up front

  constructor(capacity = MIN_CAPACITY) {
    let cap = MIN_CAPACITY;
    while (cap * MAX_LOAD < capacity) cap *= 2;
    this.cells = new Int32Array(cap);
    this.mask = cap - 1;
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
    const mask = this.mask;
    const col = this.col;
    if (col !== null) {
      // An id inside the column's window is its offset in the cell: compare offsets.
      const off = id - col.base;
      if ((off | 0) === off && off >= 0) {
        const offs = col.cells;
        for (let i = this.home(id); ; i = (i + 1) & mask) {
          const c = cells[i];
          if (c === 0) return -1;
          if (offs[c - 1] === off) return c - 1;
        }
      }
    }
    for (let i = this.home(id); ; i = (i + 1) & mask) {
      const c = cells[i];
      if (c === 0) return -1;
      if (this.key(c - 1) === id) return c - 1;
    }
  }

  /** Adds `id -> slot` (keys[slot] must already be `id`); returns false (and changes nothing)
   *  if `id` is already present under another slot. */
  insert(id: number, slot: number): boolean {
    if (!(id > 0)) throw new RangeError(`job id must be positive, got ${id}`);
    if (this.key(slot) !== id) throw new Error(`idtable: keys[${slot}] is ${this.key(slot)}, not ${id}`);
    if (this.size + 1 > this.cells.length * MAX_LOAD) this.rehash(this.cells.length * 2);
    const cells = this.cells;
    const mask = this.mask;
    let i = this.home(id);
    for (; cells[i] !== 0; i = (i + 1) & mask) if (this.key(cells[i] - 1) === id) return false;
    cells[i] = slot + 1;
    this.size++;
    return true;
  }

  /** Removes `id`; returns its slot, or -1 if it was absent. */
  remove(id: number): number {
    if (!(id > 0)) return -1;
    const cells = this.cells;
    const mask = this.mask;
    let i = this.home(id);
    for (;; i = (i + 1) & mask) {
      const c = cells[i];
      if (c === 0) return -1;
      if (this.key(c - 1) === id) break;
    }
    const slot = cells[i] - 1;
    // Backward shift: pull later cluster members into the hole when the hole lies on their
    // probe path (cyclically between their home cell and where they sit now).
    for (let j = (i + 1) & mask; cells[j] !== 0; j = (j + 1) & mask) {
      const h = this.home(this.key(cells[j] - 1));
      if (((j - h) & mask) >= ((j - i) & mask)) {
        cells[i] = cells[j];
        i = j;
      }
    }
    cells[i] = 0;
    this.size--;
    // Shrink after a burst; at 1/8 load, halving leaves it at 1/4 so it cannot thrash.
    if (cells.length > this.minCapacity && this.size < cells.length >> 3) this.rehash(cells.length >> 1);
    return slot;
  }

  /** Throws unless every key is reachable from its home cell and the size is right. */
  check(): void {
    const cells = this.cells;
    const mask = this.mask;
    let n = 0;
    for (let i = 0; i < cells.length; i++) {
      if (cells[i] === 0) continue;
      n++;
      const id = this.key(cells[i] - 1);
      if (!(id > 0)) throw new Error(`idtable: cell ${i} holds slot ${cells[i] - 1} whose key is ${id}`);
      for (let j = this.home(id); j !== i; j = (j + 1) & mask) {
        if (cells[j] === 0) throw new Error(`idtable: id ${id} at ${i} unreachable (gap at ${j})`);
      }
    }
    if (n !== this.size) throw new Error(`idtable: size ${this.size} but ${n} keys stored`);
  }

  /** Calls fn for every entry (test/invariant helper). */
  forEach(fn: (id: number, slot: number) => void): void {
    for (let i = 0; i < this.cells.length; i++) if (this.cells[i] !== 0) fn(this.key(this.cells[i] - 1), this.cells[i] - 1);
  }

  // Ids are integers below 2^53: mix both 32-bit halves, then a murmur-style finalizer so
  // sequential ids spread over the table.
  private home(id: number): number {
    let h = (id >>> 0) ^ Math.imul((id / TWO_32) >>> 0, 0x27d4eb2d);
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    return (h ^ (h >>> 16)) & this.mask;
  }

  private rehash(capacity: number): void {
    const old = this.cells;
    const cells = new Int32Array(capacity);
    this.cells = cells;
    this.mask = capacity - 1;
    const mask = this.mask;
    for (let i = 0; i < old.length; i++) {
      const c = old[i];
      if (c === 0) continue;
      let j = this.home(this.key(c - 1));
      while (cells[j] !== 0) j = (j + 1) & mask;
      cells[j] = c;
    }
  }
}
