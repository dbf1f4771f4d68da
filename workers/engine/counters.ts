// Per-job event counters (beanstalkd's reserves, timeouts, releases, buries, kicks) in one byte
// each instead of four. Almost every job's counters stay small, so a value that reaches 255 moves
// to a side Map keyed by slot * COUNTERS + counter, holding the full count; the byte then just
// says "look in the map". A job pays 5 bytes, plus a Map entry only for counters past 254.

import { growU8 } from './columns.ts';

export const COUNTERS = 5;
export const C_RESERVES = 0, C_TIMEOUTS = 1, C_RELEASES = 2, C_BURIES = 3, C_KICKS = 4;

const BIG = 255; // the byte value meaning "the count is in `big`"
const MAX = 4294967295; // beanstalkd's counters are 32-bit unsigned; they wrap

export class Counters {
  private small: Uint8Array = new Uint8Array(0);
  private readonly big = new Map<number, number>();

  /** Makes room for slots below `slots`. */
  grow(slots: number): void {
    this.small = growU8(this.small, slots * COUNTERS);
  }

  /** The byte column (slot * COUNTERS + counter), for an owner that lays columns out itself. */
  get column(): Uint8Array {
    return this.small;
  }

  /** Takes over `column`, which must already hold a copy of the current one (and be longer). */
  adopt(column: Uint8Array): void {
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
    const i = slot * COUNTERS + k;
    const v = this.small[i];
    return v === BIG ? (this.big.get(i) as number) : v;
  }

  inc(slot: number, k: number): void {
    const i = slot * COUNTERS + k;
    const v = this.small[i];
    if (v < BIG - 1) this.small[i] = v + 1;
    else if (v === BIG - 1) {
      this.small[i] = BIG;
      this.big.set(i, BIG);
    } else {
      const n = this.big.get(i) as number;
      this.big.set(i, n === MAX ? 0 : n + 1);
    }
  }

  set(slot: number, k: number, value: number): void {
    const i = slot * COUNTERS + k;
    if (this.small[i] === BIG) this.big.delete(i);
    if (value < BIG) this.small[i] = value;
    else {
      this.small[i] = BIG;
      this.big.set(i, value);
    }
  }

  /** All five back to 0 (a slot being reused or freed). */
  clear(slot: number): void {
    const at = slot * COUNTERS;
    const small = this.small;
    for (let i = at; i < at + COUNTERS; i++) {
      if (small[i] === BIG) this.big.delete(i);
      small[i] = 0;
    }
  }
}
