// Growing typed-array job columns: both engines (beanstalk's and workq's) keep a job as a slot
// number into columns that grow when full; these copy a column into a bigger one. And the narrow
// columns of the beanstalk engine: OffsetColumn (ids and ms times, 4 bytes) and U16Column (TTR,
// delay, tube number, body length: 2 bytes), each with a side map for the rare wide value.

export function growF64(a: Float64Array, n: number): Float64Array {
  const b = new Float64Array(n);
  b.set(a);
  return b;
}

export function growU32(a: Uint32Array, n: number): Uint32Array {
  const b = new Uint32Array(n);
  b.set(a);
  return b;
}

export function growI32(a: Int32Array, n: number): Int32Array {
  const b = new Int32Array(n);
  b.set(a);
  return b;
}

export function growU16(a: Uint16Array, n: number): Uint16Array {
  const b = new Uint16Array(n);
  b.set(a);
  return b;
}

export function growU8(a: Uint8Array, n: number): Uint8Array {
  const b = new Uint8Array(n);
  b.set(a);
  return b;
}

/**
 * Lays a generation of columns out in one ArrayBuffer, largest elements first so every view is
 * aligned. Growing then frees and allocates one block rather than one per column: past a few
 * tens of MB the allocator maps such a block on its own and returns it whole when the old
 * generation is collected, whereas many mid-sized column buffers leave holes in the heap that
 * RSS keeps (measured: ~25 bytes per job at 1M jobs).
 */
export class ColumnBlock {
  private readonly buf: ArrayBuffer;
  private off = 0;
  constructor(bytes: number) {
    this.buf = new ArrayBuffer(bytes);
  }

  f64(old: Float64Array, n: number): Float64Array {
    const a = new Float64Array(this.buf, this.take(n * 8, 8), n);
    a.set(old);
    return a;
  }

  u32(old: Uint32Array, n: number): Uint32Array {
    const a = new Uint32Array(this.buf, this.take(n * 4, 4), n);
    a.set(old);
    return a;
  }

  i32(old: Int32Array, n: number): Int32Array {
    const a = new Int32Array(this.buf, this.take(n * 4, 4), n);
    a.set(old);
    return a;
  }

  u16(old: Uint16Array, n: number): Uint16Array {
    const a = new Uint16Array(this.buf, this.take(n * 2, 2), n);
    a.set(old);
    return a;
  }

  u8(old: Uint8Array, n: number): Uint8Array {
    const a = new Uint8Array(this.buf, this.take(n, 1), n);
    a.set(old);
    return a;
  }

  private take(bytes: number, align: number): number {
    if (this.off % align !== 0) throw new Error(`column block: offset ${this.off} not aligned to ${align} (order columns by element size)`);
    const at = this.off;
    this.off += bytes;
    if (this.off > this.buf.byteLength) throw new RangeError(`column block: ${this.off} bytes asked of ${this.buf.byteLength}`);
    return at;
  }
}

/**
 * Gives `buf`'s memory back now (detaching it frees the backing store), rather than whenever V8
 * next runs a full collection: after a burst drains, that may not come for minutes. Every view
 * of it must be dead.
 */
export function release(buf: ArrayBuffer): void {
  (buf as ArrayBuffer & { transfer?: (n: number) => ArrayBuffer }).transfer?.(0);
}

/** The cell value of an OffsetColumn whose slot's value is in its side map. */
export const WIDE = -1;
/** The largest offset a cell holds: cells are Int32 (a value below 2^31 stays a small integer in
 *  V8, where a Uint32 cell past 2^31 became a heap number or a float compare: ~10% slower heaps). */
export const OFFSET_MAX = 0x7fffffff;
/** How far behind the value that sets (or moves) the base the window starts: 2^29, ~6.2 days of
 *  ms or 537 million ids behind, and ~18.6 days or 1.6 billion ahead. */
export const OFFSET_LEAD = 0x20000000;

/**
 * A column of integers (job ids, ms timestamps) kept as offsets from a base: 4 bytes a slot
 * instead of a Float64's 8. The values of a queue cluster (ids are handed out in order, times are
 * around now), so the window [base, base + OFFSET_MAX] holds nearly all of them; a value outside
 * it, or not an integer (a test's clock), is kept whole in a side map and its cell says WIDE.
 *
 * The window moves forward when a value just past its end comes (ids and times only grow): the
 * base becomes that value - OFFSET_LEAD and every live slot is re-encoded, those left behind going
 * to the side map. That costs one pass over the column, so it is allowed once per cells.length/4
 * sets at most (amortized O(1) per set, whatever the values); until then such values go to the
 * side map. A value more than OFFSET_LEAD past the end (a delay of weeks) never moves the window.
 *
 * `live(slot)` says which slots hold a value of this column (a rebase leaves the others alone).
 */
export class OffsetColumn {
  cells: Int32Array = new Int32Array(0);
  base = NaN; // set by the first value
  readonly wide = new Map<number, number>();
  rebases = 0;
  private sets = 0;
  private readonly live: (slot: number) => boolean;

  constructor(live: (slot: number) => boolean) {
    this.live = live;
  }

  get(s: number): number {
    const c = this.cells[s];
    return c >= 0 ? this.base + c : (this.wide.get(s) as number);
  }

  set(s: number, v: number): void {
    const cells = this.cells;
    if (cells[s] < 0) this.wide.delete(s);
    const off = v - this.base;
    this.sets++;
    if ((off | 0) === off && off >= 0) cells[s] = off;
    else this.setOutside(s, v);
  }

  /** Stores `raw` (0..OFFSET_MAX) in the cell as is, for a slot whose cell means something else in
   *  some state (the engine's bury stamp); get() must not be asked for it. */
  setRaw(s: number, raw: number): void {
    if (this.cells[s] < 0) this.wide.delete(s);
    this.cells[s] = raw;
  }

  /** The slot holds no value any more (its cell keeps a stale offset, or 0 if it was WIDE). */
  clear(s: number): void {
    if (this.cells[s] < 0) {
      this.wide.delete(s);
      this.cells[s] = 0;
    }
  }

  /** Takes over `cells`, which must already hold a copy of the current ones (and be longer). */
  adopt(cells: Int32Array): void {
    this.cells = cells;
  }

  /** Forgets every value and the base (no slot is live). */
  reset(): void {
    this.wide.clear();
    this.base = NaN;
    this.sets = 0;
  }

  private setOutside(s: number, v: number): void {
    const cells = this.cells;
    if (Number.isInteger(v)) {
      if (Number.isNaN(this.base)) {
        this.base = v - OFFSET_LEAD;
        cells[s] = OFFSET_LEAD;
        return;
      }
      const past = v - this.base - OFFSET_MAX - 1;
      if (past >= 0 && past < OFFSET_LEAD && this.sets >= cells.length >> 2) {
        this.rebase(v - OFFSET_LEAD);
        this.wide.delete(s); // the slot itself may have been re-encoded from a stale value
        cells[s] = OFFSET_LEAD;
        return;
      }
    }
    cells[s] = WIDE;
    this.wide.set(s, v);
  }

  private rebase(base: number): void {
    const cells = this.cells;
    const wide = this.wide;
    const old = this.base;
    for (let s = 0; s < cells.length; s++) {
      if (!this.live(s)) continue;
      const c = cells[s];
      const v = c >= 0 ? old + c : (wide.get(s) as number);
      const off = v - base;
      if ((off | 0) === off && off >= 0) {
        if (c < 0) wide.delete(s);
        cells[s] = off;
      } else {
        cells[s] = WIDE;
        wide.set(s, v);
      }
    }
    this.base = base;
    this.sets = 0;
    this.rebases++;
  }
}

/** The cell value of a U16Column whose slot's value is in its side map; also the first value
 *  that goes there. */
export const U16_WIDE = 0xffff;

/**
 * A column of u32 values that are nearly always small (a job's TTR and delay in seconds: 18 hours
 * fit), 2 bytes a slot: a value from U16_WIDE up is kept in a side map and its cell says U16_WIDE.
 */
export class U16Column {
  cells: Uint16Array = new Uint16Array(0);
  readonly wide = new Map<number, number>();

  get(s: number): number {
    const c = this.cells[s];
    return c !== U16_WIDE ? c : (this.wide.get(s) as number);
  }

  set(s: number, v: number): void {
    const cells = this.cells;
    if (v < U16_WIDE) {
      if (cells[s] === U16_WIDE) this.wide.delete(s);
      cells[s] = v;
    } else {
      cells[s] = U16_WIDE;
      this.wide.set(s, v);
    }
  }

  /** The slot holds no value any more. */
  clear(s: number): void {
    if (this.cells[s] === U16_WIDE) {
      this.wide.delete(s);
      this.cells[s] = 0;
    }
  }

  /** Takes over `cells`, which must already hold a copy of the current ones (and be longer). */
  adopt(cells: Uint16Array): void {
    this.cells = cells;
  }

  /** Forgets every value (no slot is live). */
  reset(): void {
    this.wide.clear();
  }
}
