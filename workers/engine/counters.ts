// Per-job event counters (beanstalkd's reserves, timeouts, releases, buries, kicks) packed into
// 16 bits a job instead of five bytes: reserves 6 bits, releases 4, timeouts, buries and kicks 2
// each. Almost every job's counters stay small, so a counter whose field fills up moves to a side
// Map keyed by slot * COUNTERS + counter, holding the full count; the all-ones field then just
// says "look in the map". A job pays 2 bytes, plus a Map entry only for a counter past its
// INLINE_MAX (a job reserved 63 times, released 15 times, or timed out, buried or kicked thrice).

import { growU16 } from './columns.ts';

export const COUNTERS = 5;
export const C_RESERVES = 0, C_TIMEOUTS = 1, C_RELEASES = 2, C_BURIES = 3, C_KICKS = 4;
/** Bytes of counters per slot. */
export const COUNTER_BYTES = 2;

// Field of each counter (indexed by C_*) in the slot's 16 bits.
const SHIFT = [0, 10, 6, 12, 14];
const FULL = [63, 3, 15, 3, 3]; // all ones: the count is in `big`
/** The largest count each counter (indexed by C_*) keeps in its field. */
export const INLINE_MAX: readonly number[] = FULL.map((f) => f - 1);
const MAX = 4294967295; // beanstalkd's counters are 32-bit unsigned; they wrap

export class Counters {
  private small: Uint16Array = new Uint16Array(0);
  private readonly big = new Map<number, number>();

  /** Makes room for slots below `slots`. */
  grow(slots: number): void {
    this.small = growU16(this.small, slots);
  }

  /** The column (one 16-bit word per slot), for an owner that lays columns out itself. */
  get column(): Uint16Array {
    return this.small;
  }

  /** Takes over `column`, which must already hold a copy of the current one (and be longer). */
  adopt(column: Uint16Array): void {
    this.small = column;
  }

  get bytes(): number {
    return this.small.byteLength;
  }

  /** Counters kept in the side map (for tests). */
  get overflowed(): number {
    return this.big.size;
  }

  get(slot: number, k: number): number {
    const full = FULL[k];
    const f = (this.small[slot] >> SHIFT[k]) & full;
    return f === full ? (this.big.get(slot * COUNTERS + k) as number) : f;
  }

  inc(slot: number, k: number): void {
    const full = FULL[k];
    const shift = SHIFT[k];
    const w = this.small[slot];
    const f = (w >> shift) & full;
    if (f < full - 1) this.small[slot] = w + (1 << shift);
    else if (f === full - 1) {
      this.small[slot] = w | (full << shift);
      this.big.set(slot * COUNTERS + k, full);
    } else {
      const i = slot * COUNTERS + k;
      const n = this.big.get(i) as number;
      this.big.set(i, n === MAX ? 0 : n + 1);
    }
  }

  set(slot: number, k: number, value: number): void {
    const full = FULL[k];
    const shift = SHIFT[k];
    const w = this.small[slot];
    const i = slot * COUNTERS + k;
    if (((w >> shift) & full) === full) this.big.delete(i);
    if (value < full) this.small[slot] = (w & ~(full << shift)) | (value << shift);
    else {
      this.small[slot] = w | (full << shift);
      this.big.set(i, value);
    }
  }

  /** All five back to 0 (a slot being reused or freed). */
  clear(slot: number): void {
    const w = this.small[slot];
    if (w === 0) return;
    // A full field (all ones) has its count in the side map; the usual job has none.
    const anyFull = (w & 0x3f) === 0x3f || ((w >> 6) & 15) === 15 || ((w >> 10) & 3) === 3 || ((w >> 12) & 3) === 3 || w >> 14 === 3;
    if (anyFull) for (let k = 0; k < COUNTERS; k++) if (((w >> SHIFT[k]) & FULL[k]) === FULL[k]) this.big.delete(slot * COUNTERS + k);
    this.small[slot] = 0;
  }
}
