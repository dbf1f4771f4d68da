// Job bodies packed into large chunks instead of one Buffer per job: fewer objects for the GC
// to trace and no per-body allocation header. A record is the body's bytes alone, back to back
// (an empty body takes 1 byte, so a chunk holding only empty bodies still counts as live): the
// slot columns say where each body is, and compaction finds a chunk's live bodies by scanning
// the chunk column between the lowest and highest slot the chunk ever held (at most O(slots) per
// compaction, which frees at least 3/4 of a chunk, itself at least a quarter of the live bytes
// once those pass 4 MiB).
//
// Chunks are bump-allocated. A chunk whose live bytes drop to 0 is dropped (one is kept as a
// spare, if it is the size the next chunk will be); a retired chunk whose live fraction falls
// below 1/4 is compacted: its live bodies are copied into the current chunk. So at most ~4x the
// live bytes are ever held, plus two chunks. A dropped chunk's memory is given back at once
// (the ArrayBuffer is detached), not whenever V8 next collects it: after a burst drains, a full
// collection may not come for minutes. When the current chunk empties while it is larger than
// the live bytes call for, it is swapped for a small one, so a drained store holds a chunk of
// MIN_CHUNK_SIZE, not the burst's 32 MiB.
//
// Chunk size follows the live bytes: a new chunk is the smallest power of two from MIN_CHUNK_SIZE
// up to `chunkSize` that is at least a quarter of them. A busy queue holding few jobs keeps its
// current and spare chunks small (the bump pointer walks through every page of a chunk, so each
// costs its full size in RSS), while a large backlog gets big chunks (see DEFAULT_CHUNK_SIZE).

import { copyBytes } from '../../src/shared/bytes.ts';
import { type ColumnBlock, growU16, growU32, release as releaseBuffer, U16Column } from './columns.ts';

// 32 MiB: at or above the C allocator's largest mmap threshold, so every chunk is a mapping of its
// own. Its pages cost RSS only once written, and a dropped chunk goes back to the system whole;
// 4 MiB chunks came from the thread's malloc arena, which kept their holes (~33 B per job at
// 1M 100-byte jobs). Compaction copies at most a quarter of a chunk.
export const DEFAULT_CHUNK_SIZE = 32 << 20;
/** The smallest chunk made while few bodies are held. */
export const MIN_CHUNK_SIZE = 1 << 20;
/** Bytes of per-slot location columns: offset (4), chunk (2), length (2; from 65535 on, in a side map). */
export const SLOT_BYTES = 8;
/** Chunks held at once, at most: a chunk's number takes 2 bytes a slot (0xffff: no body). Every
 *  chunk but a test's is at least MIN_CHUNK_SIZE, so that is 64 GiB of chunks. */
export const CHUNKS_MAX = 0xffff;
const NO_CHUNK = 0xffff;
/** The largest body, in bytes. */
export const BODY_BYTES_MAX = 0x7fffffff - 8;
const EMPTY = new Uint8Array(0);

class Chunk {
  readonly buf: Uint8Array;
  used = 0; // bump pointer
  live = 0; // bytes of live records
  // The lowest and highest slot ever placed here: compaction scans the chunk column between them.
  lo = 0x7fffffff;
  hi = -1;
  constructor(size: number) {
    this.buf = new Uint8Array(new ArrayBuffer(size));
  }
}

/** Gives a chunk's memory back now. */
function release(c: Chunk): void {
  releaseBuffer(c.buf.buffer as ArrayBuffer);
}

function recordSize(len: number): number {
  return len === 0 ? 1 : len;
}

export class BodyStore {
  readonly chunkSize: number;
  // Per-slot location columns (slot numbers are the engine's).
  private chunkOf: Uint16Array; // NO_CHUNK: no body
  private offOf: Uint32Array; // offset of the body in its chunk
  private readonly lenOf = new U16Column();
  private chunks: (Chunk | null)[] = [];
  private freeChunkIds: number[] = [];
  private spare: Chunk | null = null;
  private cur: number;
  private readonly minChunk: number;
  private compacting = false;
  /** Bytes of live records in all chunks (the sum of their `live`), kept as they change. */
  private live = 0;
  /** Number of compactions so far (observable for tests and stats). */
  compactions = 0;

  constructor(chunkSize = DEFAULT_CHUNK_SIZE, slots = 16, minChunkSize = MIN_CHUNK_SIZE) {
    if (chunkSize < 64 || chunkSize % 4 !== 0) throw new RangeError(`bad chunk size ${chunkSize}`);
    this.chunkSize = chunkSize;
    if (minChunkSize < 64 || minChunkSize % 4 !== 0) throw new RangeError(`bad min chunk size ${minChunkSize}`);
    this.minChunk = Math.min(minChunkSize, chunkSize);
    this.chunkOf = new Uint16Array(slots).fill(NO_CHUNK);
    this.offOf = new Uint32Array(slots);
    this.lenOf.adopt(new Uint16Array(slots));
    this.cur = this.newChunk(this.minChunk);
  }

  /** Makes room for slot numbers below `slots`; the columns are carved from `block` when the
   *  owner lays its columns out in one (SLOT_BYTES of it per slot). */
  growSlots(slots: number, block?: ColumnBlock): void {
    if (slots <= this.chunkOf.length) return;
    const n = this.chunkOf.length;
    if (block) {
      this.offOf = block.u32(this.offOf, slots); // the 4-byte column first, for alignment
      this.chunkOf = block.u16(this.chunkOf, slots);
      this.lenOf.adopt(block.u16(this.lenOf.cells, slots));
    } else {
      this.offOf = growU32(this.offOf, slots);
      this.chunkOf = growU16(this.chunkOf, slots);
      this.lenOf.adopt(growU16(this.lenOf.cells, slots));
    }
    this.chunkOf.fill(NO_CHUNK, n);
  }

  /** Forgets the slot columns (no slot holds a body): the owner lays them out again with growSlots. */
  dropSlots(): void {
    if (this.liveBytes !== 0) throw new Error('bodystore: dropSlots with bodies held');
    this.chunkOf = new Uint16Array(0);
    this.offOf = new Uint32Array(0);
    this.lenOf.adopt(new Uint16Array(0));
    this.lenOf.reset();
  }

  /** Copies `data[start, end)` in as the body of `slot` (which must not hold a body). */
  put(slot: number, data: Uint8Array, start = 0, end = data.length): void {
    if (this.chunkOf[slot] !== NO_CHUNK) throw new Error(`bodystore: slot ${slot} already has a body`);
    if (end - start > BODY_BYTES_MAX) throw new RangeError(`body too large: ${end - start}`);
    this.place(slot, data, start, end);
  }

  /** Hands the body of `slot` to `w` as a range of its chunk (no view made). */
  copyTo(slot: number, w: { bytes(src: Uint8Array, start: number, end: number): void }): void {
    const cid = this.chunkOf[slot];
    if (cid === NO_CHUNK) return;
    const start = this.offOf[slot];
    w.bytes((this.chunks[cid] as Chunk).buf, start, start + this.lenOf.get(slot));
  }

  /** A view of the body of `slot`; valid until the next put/free (compaction moves bodies). */
  get(slot: number): Uint8Array {
    const cid = this.chunkOf[slot];
    if (cid === NO_CHUNK) return EMPTY;
    const start = this.offOf[slot];
    return (this.chunks[cid] as Chunk).buf.subarray(start, start + this.lenOf.get(slot));
  }

  length(slot: number): number {
    return this.chunkOf[slot] === NO_CHUNK ? 0 : this.lenOf.get(slot);
  }

  free(slot: number): void {
    const cid = this.chunkOf[slot];
    if (cid === NO_CHUNK) throw new Error(`bodystore: slot ${slot} has no body`);
    const c = this.chunks[cid] as Chunk;
    const size = recordSize(this.lenOf.get(slot));
    c.live -= size;
    this.live -= size;
    this.chunkOf[slot] = NO_CHUNK;
    this.lenOf.clear(slot);
    if (cid === this.cur) {
      if (c.live === 0) {
        // Current chunk emptied: rewind, or swap it for a smaller one if it is larger than the
        // live bytes call for (the end of a burst).
        c.used = 0;
        c.lo = 0x7fffffff;
        c.hi = -1;
        if (c.buf.length > this.nextChunkSize() && !this.compacting) {
          this.cur = this.newChunk(this.nextChunkSize());
          this.dropChunk(cid);
        }
      }
    } else if (c.live === 0) {
      this.dropChunk(cid);
    } else if (c.live * 4 < c.used) {
      this.compact(cid);
    }
  }

  /** Bytes of live records (the bodies; 1 for an empty one). */
  get liveBytes(): number {
    return this.live;
  }

  /** Size of the next regular chunk: a power of two >= a quarter of the live bytes, within
   *  [min(MIN_CHUNK_SIZE, chunkSize), chunkSize]. Asked only when a chunk fills or empties. */
  nextChunkSize(): number {
    const live = this.liveBytes;
    let size = this.minChunk;
    while (size < this.chunkSize && size * 4 < live) size *= 2;
    return Math.min(size, this.chunkSize);
  }

  /** Bytes of chunk memory held (including the spare). */
  get heldBytes(): number {
    let n = this.spare ? this.spare.buf.length : 0;
    for (const c of this.chunks) if (c) n += c.buf.length;
    return n;
  }

  /** Bytes of the per-slot location columns. */
  get slotBytes(): number {
    return this.chunkOf.length * SLOT_BYTES;
  }

  get chunkCount(): number {
    let n = 0;
    for (const c of this.chunks) if (c) n++;
    return n;
  }

  /** Throws unless every chunk's records and counters agree with the location columns;
   *  `liveSlots` is how many slots the caller believes hold bodies. */
  check(liveSlots: number): void {
    const records: number[][] = this.chunks.map(() => []); // per chunk: offset, size pairs
    let owned = 0;
    let liveAll = 0;
    for (const c of this.chunks) if (c) liveAll += c.live;
    if (liveAll !== this.live) throw new Error(`bodystore: chunks hold ${liveAll} live bytes, the total says ${this.live}`);
    for (let s = 0; s < this.chunkOf.length; s++) {
      const cid = this.chunkOf[s];
      if (cid === NO_CHUNK) continue;
      owned++;
      if (!this.chunks[cid]) throw new Error(`bodystore: slot ${s} in dropped chunk ${cid}`);
      records[cid].push(this.offOf[s], recordSize(this.lenOf.get(s)));
    }
    for (let cid = 0; cid < this.chunks.length; cid++) {
      const c = this.chunks[cid];
      if (!c) continue;
      const r = records[cid];
      const order = Array.from({ length: r.length / 2 }, (_, i) => i).sort((a, b) => r[2 * a] - r[2 * b]);
      let end = 0;
      let live = 0;
      for (const i of order) {
        if (r[2 * i] < end) throw new Error(`bodystore: chunk ${cid} records overlap at ${r[2 * i]}`);
        end = r[2 * i] + r[2 * i + 1];
        live += r[2 * i + 1];
      }
      if (end > c.used) throw new Error(`bodystore: chunk ${cid} record ends at ${end}, used ${c.used}`);
      if (live !== c.live) throw new Error(`bodystore: chunk ${cid} live ${c.live} but records sum to ${live}`);
      if (c.used > c.buf.length) throw new Error(`bodystore: chunk ${cid} overfull`);
      if (cid !== this.cur && live === 0) throw new Error(`bodystore: empty retired chunk ${cid} kept`);
    }
    if (!this.chunks[this.cur]) throw new Error('bodystore: no current chunk');
    if (owned !== liveSlots) throw new Error(`bodystore: ${owned} slots with bodies, caller expects ${liveSlots}`);
  }

  private place(slot: number, data: Uint8Array, start: number, end: number): void {
    const len = end - start;
    const size = recordSize(len);
    let cid: number;
    const cur = this.chunks[this.cur] as Chunk;
    if (cur.used + size <= cur.buf.length) {
      cid = this.cur;
    } else if (size > this.nextChunkSize()) {
      cid = this.newChunk(size); // a body bigger than a chunk gets a chunk of its own
    } else {
      this.rollOver();
      cid = this.cur;
    }
    const c = this.chunks[cid] as Chunk;
    const off = c.used;
    copyBytes(c.buf, off, data, start, end);
    if (slot < c.lo) c.lo = slot;
    if (slot > c.hi) c.hi = slot;
    c.used += size;
    c.live += size;
    this.live += size;
    this.chunkOf[slot] = cid;
    this.offOf[slot] = off;
    this.lenOf.set(slot, len);
  }

  // Retires the current chunk and starts a fresh one. A retired chunk that is already mostly
  // dead is compacted right away, since no later free might ever trigger it (but not during a
  // compaction: a later free in it does it then).
  private rollOver(): void {
    const old = this.cur;
    this.cur = this.newChunk(this.nextChunkSize());
    const c = this.chunks[old] as Chunk;
    if (c.live === 0) this.dropChunk(old);
    else if (c.live * 4 < c.used && !this.compacting) this.compact(old);
  }

  // Copies the live records of chunk `cid` into the current chunk (rolling over as needed;
  // chunk sizes vary, so that may take more than one), then drops it. Its records are found
  // through the chunk column.
  private compact(cid: number): void {
    const c = this.chunks[cid] as Chunk;
    const chunkOf = this.chunkOf;
    this.compacting = true;
    for (let s = c.lo; s <= c.hi && c.live > 0; s++) {
      if (chunkOf[s] !== cid) continue;
      const off = this.offOf[s];
      const len = this.lenOf.get(s);
      chunkOf[s] = NO_CHUNK;
      c.live -= recordSize(len);
      this.live -= recordSize(len);
      this.place(s, c.buf, off, off + len);
    }
    this.compacting = false;
    this.compactions++;
    this.dropChunk(cid);
  }

  private newChunk(size: number): number {
    let c: Chunk;
    if (this.spare && this.spare.buf.length === size) {
      c = this.spare;
      this.spare = null;
    } else {
      // A spare of another size would be kept for nothing.
      if (this.spare) release(this.spare);
      this.spare = null;
      c = new Chunk(size);
    }
    c.used = 0;
    c.live = 0;
    c.lo = 0x7fffffff;
    c.hi = -1;
    const cid = this.freeChunkIds.length > 0 ? (this.freeChunkIds.pop() as number) : this.chunks.length;
    if (cid >= CHUNKS_MAX) {
      release(c);
      throw new RangeError(`bodystore: more than CHUNKS_MAX (${CHUNKS_MAX}) chunks`);
    }
    this.chunks[cid] = c;
    return cid;
  }

  private dropChunk(cid: number): void {
    const c = this.chunks[cid] as Chunk;
    this.chunks[cid] = null;
    this.freeChunkIds.push(cid);
    // Keep one to avoid churn, if it is the size the next chunk will be; give the rest back.
    if (!this.spare && c.buf.length === this.nextChunkSize()) this.spare = c;
    else release(c);
  }
}
