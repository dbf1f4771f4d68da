// Binary min-heap of job slots. The ordering lives outside the heap (in the engine's typed-array
// columns), so the heap only stores slot numbers and reports every move through `setPos`, which
// lets the owner keep a position column and remove any element from the middle in O(log n)
// (the same trick beanstalkd uses with `heap_index`).

/** True when slot `a` must come out before slot `b`. Must be a strict total order. */
export type Less = (a: number, b: number) => boolean;
/** Records that `slot` now sits at `pos` (-1 once it left the heap). */
export type SetPos = (slot: number, pos: number) => void;

const MIN_CAPACITY = 8;
/** The items of every heap that has never held anything (a tube that only ever had buried or
 *  delayed jobs, or none yet): tubes come and go by the thousand, each with two heaps. */
const NO_ITEMS = new Int32Array(0);
const SHRINK_ABOVE = 64; // small heaps never shrink: not worth the copy

export class IndexHeap {
  items: Int32Array;
  size = 0;
  private readonly less: Less;
  private readonly setPos: SetPos;

  constructor(less: Less, setPos: SetPos, capacity = MIN_CAPACITY) {
    this.less = less;
    this.setPos = setPos;
    this.items = capacity > MIN_CAPACITY ? new Int32Array(capacity) : NO_ITEMS;
  }

  /** The smallest slot, or -1 when empty. */
  peek(): number {
    return this.size > 0 ? this.items[0] : -1;
  }

  push(slot: number): void {
    if (this.size === this.items.length) this.resize(this.items.length * 2);
    this.siftUp(this.size++, slot);
  }

  /** Removes and returns the smallest slot, or -1 when empty. */
  pop(): number {
    if (this.size === 0) return -1;
    const top = this.items[0];
    this.removeAt(0);
    return top;
  }

  /** Removes the element at heap position `pos` (taken from the owner's position column). */
  removeAt(pos: number): void {
    if (pos < 0 || pos >= this.size) throw new RangeError(`heap position ${pos} out of range 0..${this.size}`);
    const items = this.items;
    this.setPos(items[pos], -1);
    const last = items[--this.size];
    if (pos < this.size) {
      // Put the last element into the hole; it may need to go either way.
      if (pos > 0 && this.less(last, items[(pos - 1) >> 1])) this.siftUp(pos, last);
      else this.siftDown(pos, last);
    }
    // Give memory back after a burst, with hysteresis (shrink at 1/4 full, to 1/2).
    if (this.items.length > SHRINK_ABOVE && this.size < this.items.length >> 2) this.resize(this.items.length >> 1);
  }

  /** Restores order after the key of the element at `pos` changed. */
  update(pos: number): void {
    const items = this.items;
    const slot = items[pos];
    if (pos > 0 && this.less(slot, items[(pos - 1) >> 1])) this.siftUp(pos, slot);
    else this.siftDown(pos, slot);
  }

  /** Throws unless the heap order holds and `getPos` agrees with every element's position. */
  check(getPos: (slot: number) => number, name = 'heap'): void {
    const items = this.items;
    for (let i = 0; i < this.size; i++) {
      const s = items[i];
      if (getPos(s) !== i) throw new Error(`${name}: slot ${s} at ${i} but position column says ${getPos(s)}`);
      if (i > 0 && this.less(s, items[(i - 1) >> 1])) throw new Error(`${name}: order broken at ${i}`);
    }
  }

  private siftUp(i: number, slot: number): void {
    const items = this.items;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const ps = items[p];
      if (!this.less(slot, ps)) break;
      items[i] = ps;
      this.setPos(ps, i);
      i = p;
    }
    items[i] = slot;
    this.setPos(slot, i);
  }

  private siftDown(i: number, slot: number): void {
    const items = this.items;
    const n = this.size;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      let cs = items[c];
      if (c + 1 < n && this.less(items[c + 1], cs)) cs = items[++c];
      if (!this.less(cs, slot)) break;
      items[i] = cs;
      this.setPos(cs, i);
      i = c;
    }
    items[i] = slot;
    this.setPos(slot, i);
  }

  private resize(capacity: number): void {
    const next = new Int32Array(Math.max(MIN_CAPACITY, capacity));
    next.set(this.items.subarray(0, this.size));
    this.items = next;
  }
}
