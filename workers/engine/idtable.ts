// Job id -> slot map without a JS object or Map entry per job: open addressing with linear
// probing over two typed arrays. Key 0 marks an empty cell (job ids are positive). Deletion
// shifts the following cluster back instead of leaving tombstones, so lookups never slow down
// after churn.

const MIN_CAPACITY = 16;
const MAX_LOAD = 0.6;
const TWO_32 = 4294967296;

export class IdTable {
  size = 0;
  private keys: Float64Array;
  private vals: Int32Array;
  private mask: number;
  private readonly minCapacity: number; // never shrink below the size asked for up front

  constructor(capacity = MIN_CAPACITY) {
    let cap = MIN_CAPACITY;
    while (cap * MAX_LOAD < capacity) cap *= 2;
    this.keys = new Float64Array(cap);
    this.vals = new Int32Array(cap);
    this.mask = cap - 1;
    this.minCapacity = cap;
  }

  get capacity(): number {
    return this.keys.length;
  }

  /** The slot stored for `id`, or -1. */
  get(id: number): number {
    if (!(id > 0)) return -1; // 0 is the empty marker; never a valid id
    const keys = this.keys;
    const mask = this.mask;
    for (let i = this.home(id); ; i = (i + 1) & mask) {
      const k = keys[i];
      if (k === id) return this.vals[i];
      if (k === 0) return -1;
    }
  }

  /** Adds `id -> slot`; returns false (and changes nothing) if `id` is already present. */
  insert(id: number, slot: number): boolean {
    if (!(id > 0)) throw new RangeError(`job id must be positive, got ${id}`);
    if (this.size + 1 > this.keys.length * MAX_LOAD) this.rehash(this.keys.length * 2);
    const keys = this.keys;
    const mask = this.mask;
    let i = this.home(id);
    for (; keys[i] !== 0; i = (i + 1) & mask) if (keys[i] === id) return false;
    keys[i] = id;
    this.vals[i] = slot;
    this.size++;
    return true;
  }

  /** Removes `id`; returns its slot, or -1 if it was absent. */
  remove(id: number): number {
    if (!(id > 0)) return -1;
    const keys = this.keys;
    const vals = this.vals;
    const mask = this.mask;
    let i = this.home(id);
    for (; keys[i] !== id; i = (i + 1) & mask) if (keys[i] === 0) return -1;
    const slot = vals[i];
    // Backward shift: pull later cluster members into the hole when the hole lies on their
    // probe path (cyclically between their home cell and where they sit now).
    for (let j = (i + 1) & mask; keys[j] !== 0; j = (j + 1) & mask) {
      const h = this.home(keys[j]);
      if (((j - h) & mask) >= ((j - i) & mask)) {
        keys[i] = keys[j];
        vals[i] = vals[j];
        i = j;
      }
    }
    keys[i] = 0;
    this.size--;
    // Shrink after a burst; at 1/8 load, halving leaves it at 1/4 so it cannot thrash.
    if (keys.length > this.minCapacity && this.size < keys.length >> 3) this.rehash(keys.length >> 1);
    return slot;
  }

  /** Throws unless every key is reachable from its home cell and the size is right. */
  check(): void {
    const keys = this.keys;
    const mask = this.mask;
    let n = 0;
    for (let i = 0; i < keys.length; i++) {
      if (keys[i] === 0) continue;
      n++;
      for (let j = this.home(keys[i]); j !== i; j = (j + 1) & mask) {
        if (keys[j] === 0) throw new Error(`idtable: id ${keys[i]} at ${i} unreachable (gap at ${j})`);
      }
    }
    if (n !== this.size) throw new Error(`idtable: size ${this.size} but ${n} keys stored`);
  }

  /** Calls fn for every entry (test/invariant helper). */
  forEach(fn: (id: number, slot: number) => void): void {
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] !== 0) fn(this.keys[i], this.vals[i]);
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
    const oldKeys = this.keys;
    const oldVals = this.vals;
    this.keys = new Float64Array(capacity);
    this.vals = new Int32Array(capacity);
    this.mask = capacity - 1;
    const keys = this.keys;
    const mask = this.mask;
    for (let i = 0; i < oldKeys.length; i++) {
      const k = oldKeys[i];
      if (k === 0) continue;
      let j = this.home(k);
      while (keys[j] !== 0) j = (j + 1) & mask;
      keys[j] = k;
      this.vals[j] = oldVals[i];
    }
  }
}
