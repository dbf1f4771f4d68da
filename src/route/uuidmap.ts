// workq job UUID -> (internal id, shard), on the main thread.
//
// workq clients name jobs by UUID, and complete / fail / delete / result / inspect job carry only
// that UUID, so the main thread must know which shard holds a job. Shards key their workq jobs by
// a small internal id (a float64, as beanstalk jobs) that the main thread hands out; the UUID is
// also how duplicates are refused across every shard.
//
// Open addressing with linear probing over typed arrays (no object per job): 16 key bytes as four
// u32 words, an f64 id and a u8 shard per slot, about 29 bytes a slot at most half full.
// Deletion shifts the following entries back, so there are no tombstones.

import { u32le } from '../shared/bytes.ts';

const MIN_CAPACITY = 1024;
const EMPTY_ID = 0; // internal ids start at 1

export class UuidMap {
  private cap = 0;
  private mask = 0;
  private keys: Uint32Array = new Uint32Array(0);
  private ids: Float64Array = new Float64Array(0);
  private shards: Uint8Array = new Uint8Array(0);
  private count = 0;

  constructor(capacity = MIN_CAPACITY) {
    let cap = MIN_CAPACITY;
    while (cap < capacity) cap *= 2;
    this.alloc(cap);
  }

  get size(): number {
    return this.count;
  }

  private alloc(cap: number): void {
    this.cap = cap;
    this.mask = cap - 1;
    this.keys = new Uint32Array(cap * 4);
    this.ids = new Float64Array(cap);
    this.shards = new Uint8Array(cap);
  }

  private home(w0: number, w1: number, w2: number, w3: number): number {
    // UUIDv4s are random, but clients choose them: mix every word so crafted ids still spread.
    let h = Math.imul(w0 ^ 0x9e3779b9, 0x85ebca6b);
    h = Math.imul(h ^ w1 ^ (h >>> 15), 0xc2b2ae35);
    h = Math.imul(h ^ w2 ^ (h >>> 13), 0x27d4eb2f);
    h ^= w3 ^ (h >>> 16);
    return h & this.mask;
  }

  /** Slot of `uuid[at, at+16)`, or -1. */
  private find(uuid: Uint8Array, at: number): number {
    const w0 = u32le(uuid, at);
    const w1 = u32le(uuid, at + 4);
    const w2 = u32le(uuid, at + 8);
    const w3 = u32le(uuid, at + 12);
    const keys = this.keys;
    for (let i = this.home(w0, w1, w2, w3); ; i = (i + 1) & this.mask) {
      if (this.ids[i] === EMPTY_ID) return -1;
      const k = i * 4;
      if (keys[k] === w0 && keys[k + 1] === w1 && keys[k + 2] === w2 && keys[k + 3] === w3) return i;
    }
  }

  /** Where the job is: pass the result to idAt / shardAt. -1 if there is no such job. */
  lookup(uuid: Uint8Array, at = 0): number {
    return this.find(uuid, at);
  }

  idAt(slot: number): number {
    return this.ids[slot];
  }

  shardAt(slot: number): number {
    return this.shards[slot];
  }

  /** Adds the job; false if the UUID is already there. `id` must be > 0. */
  insert(uuid: Uint8Array, at: number, id: number, shard: number): boolean {
    if (this.find(uuid, at) !== -1) return false;
    if ((this.count + 1) * 2 > this.cap) this.grow();
    this.place(u32le(uuid, at), u32le(uuid, at + 4), u32le(uuid, at + 8), u32le(uuid, at + 12), id, shard);
    this.count++;
    return true;
  }

  private place(w0: number, w1: number, w2: number, w3: number, id: number, shard: number): void {
    let i = this.home(w0, w1, w2, w3);
    while (this.ids[i] !== EMPTY_ID) i = (i + 1) & this.mask;
    const k = i * 4;
    this.keys[k] = w0;
    this.keys[k + 1] = w1;
    this.keys[k + 2] = w2;
    this.keys[k + 3] = w3;
    this.ids[i] = id;
    this.shards[i] = shard;
  }

  /**
   * Removes the job. With `onlyId`, only if it still maps to that internal id (a late "gone"
   * from a shard must not remove a newer job that reuses the UUID). Returns whether it removed.
   */
  remove(uuid: Uint8Array, at = 0, onlyId = 0): boolean {
    let i = this.find(uuid, at);
    if (i === -1 || (onlyId !== 0 && this.ids[i] !== onlyId)) return false;
    const keys = this.keys;
    // Backward-shift deletion: move later members of the probe run into the hole.
    for (let j = (i + 1) & this.mask; this.ids[j] !== EMPTY_ID; j = (j + 1) & this.mask) {
      const k = j * 4;
      const h = this.home(keys[k], keys[k + 1], keys[k + 2], keys[k + 3]);
      // Entry j may move to i when its home is not within (i, j] cyclically.
      const movable = i <= j ? h <= i || h > j : h <= i && h > j;
      if (!movable) continue;
      keys.copyWithin(i * 4, k, k + 4);
      this.ids[i] = this.ids[j];
      this.shards[i] = this.shards[j];
      i = j;
    }
    this.ids[i] = EMPTY_ID;
    this.count--;
    return true;
  }

  private grow(): void {
    const { keys, ids, shards, cap } = this;
    this.alloc(cap * 2);
    for (let i = 0; i < cap; i++) {
      if (ids[i] === EMPTY_ID) continue;
      const k = i * 4;
      this.place(keys[k], keys[k + 1], keys[k + 2], keys[k + 3], ids[i], shards[i]);
    }
  }
}
