// Single-producer single-consumer byte ring over a SharedArrayBuffer.
//
// The main thread and a shard worker each hold a Ring attached to the same SAB: one side only
// writes, the other only reads. The ring is a byte stream, not a record queue: framing (a u32
// length in front of each record, partial records kept across reads) is the caller's job, which
// lets one `write` carry a whole batch of records and costs one index publish per batch
// (MEASURED.md: ~0.04 µs per 32-byte record batched).
//
// Layout of the SAB (Int32 slots; byte offsets in brackets):
//   [0]   kHead      producer's free-running write index (bytes ever written, mod 2^32)
//   [4]   kCapacity  data capacity in bytes (read-only after create)
//   [8]   kMagic     RING_MAGIC, so attach() rejects a SAB that is not a ring
//   [64]  kTail      consumer's free-running read index, on its own cache line so the
//                    producer's stores to head do not invalidate the consumer's line and back
//   [128] data       `capacity` bytes
//
// Indices are free-running 32-bit counters kept as int32 and subtracted with `| 0`: the
// difference head - tail is exact modulo 2^32, and since capacity <= 2^30 it never reaches 2^31,
// so the wrap of the counters at 2^32 is harmless. A position in the data area is `index & mask`
// (capacity is a power of two, so it divides 2^32 and positions stay continuous across the wrap).
//
// Memory ordering: the data bytes are copied with plain typed-array `set`, then the index is
// published with one Atomics.store. JS Atomics are sequentially consistent, so a reader that
// Atomics.loads the new index also sees every byte written before the store.

export const kHead = 0;
export const kCapacity = 1;
export const kMagic = 2;
/** 16 Int32 slots = 64 bytes: the tail lives on the next cache line. */
export const kTail = 16;

/** Header bytes before the data area: two 64-byte cache lines (head's line, tail's line). */
export const RING_HEADER_BYTES = 128;
/** "RING" in ASCII; marks a SAB created by Ring.create. */
export const RING_MAGIC = 0x52494e47;
/** Capacity must stay below 2^31 so head - tail fits a signed int32; 1 GiB is plenty. */
export const RING_CAPACITY_BYTES_MAX = 2 ** 30;

/**
 * Copies up to this size use a byte loop: below it, creating the subarray view for `set` costs
 * more than the copy (bench/micro/ring.bench.ts, one 32-byte record per write).
 */
const SMALL_COPY_BYTES_MAX = 64;

export interface RingCreateOptions {
  /**
   * Initial value of both free-running indices (any int32-representable value, e.g. 2^32 - 5).
   * For tests that exercise the 2^32 wrap of the counters without writing 4 GiB first.
   */
  startIndex?: number;
}

function isPowerOfTwo(n: number): boolean {
  return Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;
}

export class Ring {
  readonly sab: SharedArrayBuffer;
  readonly capacity: number;
  private readonly mask: number;
  private readonly header: Int32Array;
  private readonly data: Uint8Array;
  // Producer-side cache of the consumer's tail. It only ever lags the real tail, so it
  // under-estimates free space and is safe; it saves a load of the consumer's cache line on
  // every write while there is room (the common case when records are written one by one).
  private cachedTail: number;
  // Consumer-side cache of the producer's head, same reasoning in the other direction.
  private cachedHead: number;

  private constructor(sab: SharedArrayBuffer) {
    if (sab.byteLength < RING_HEADER_BYTES) {
      throw new RangeError(`Ring: SAB of ${sab.byteLength} bytes has no room for the header`);
    }
    const header = new Int32Array(sab, 0, RING_HEADER_BYTES / 4);
    if (Atomics.load(header, kMagic) !== RING_MAGIC) {
      throw new TypeError('Ring: SAB was not created by Ring.create (bad magic)');
    }
    const capacity = Atomics.load(header, kCapacity);
    if (!isPowerOfTwo(capacity) || sab.byteLength !== RING_HEADER_BYTES + capacity) {
      throw new RangeError(`Ring: header capacity ${capacity} does not match SAB size ${sab.byteLength}`);
    }
    this.sab = sab;
    this.capacity = capacity;
    this.mask = capacity - 1;
    this.header = header;
    this.data = new Uint8Array(sab, RING_HEADER_BYTES, capacity);
    this.cachedTail = Atomics.load(header, kTail);
    this.cachedHead = Atomics.load(header, kHead);
  }

  /** A new empty ring; `capacityBytes` must be a power of two in 1..RING_CAPACITY_BYTES_MAX. */
  static create(capacityBytes: number, options?: RingCreateOptions): Ring {
    if (!isPowerOfTwo(capacityBytes) || capacityBytes > RING_CAPACITY_BYTES_MAX) {
      throw new RangeError(
        `Ring: capacity must be a power of two <= ${RING_CAPACITY_BYTES_MAX}, got ${capacityBytes}`,
      );
    }
    const sab = new SharedArrayBuffer(RING_HEADER_BYTES + capacityBytes);
    const header = new Int32Array(sab, 0, RING_HEADER_BYTES / 4);
    const start = (options?.startIndex ?? 0) | 0;
    header[kHead] = start;
    header[kTail] = start;
    header[kCapacity] = capacityBytes;
    // The magic goes last so a concurrent attach never sees a half-initialised header.
    Atomics.store(header, kMagic, RING_MAGIC);
    return new Ring(sab);
  }

  /** The other side's view of a ring made by `create` (typically after postMessage of `sab`). */
  static attach(sab: SharedArrayBuffer): Ring {
    return new Ring(sab);
  }

  /** Bytes the consumer can read now. */
  readable(): number {
    return (Atomics.load(this.header, kHead) - Atomics.load(this.header, kTail)) | 0;
  }

  /** Bytes the producer can write now. */
  writable(): number {
    return this.capacity - this.readable();
  }

  /**
   * Producer: copy up to `len` bytes of `src` starting at `off` into the ring and publish them
   * with one store of head. Returns the number of bytes copied: less than `len` (maybe 0) when the
   * ring is short of room; the caller keeps the rest.
   */
  write(src: Uint8Array, off: number, len: number): number {
    if (off < 0 || len < 0 || off + len > src.length) {
      throw new RangeError(`Ring.write: [${off}, ${off}+${len}) is outside a source of ${src.length} bytes`);
    }
    const header = this.header;
    const capacity = this.capacity;
    const head = Atomics.load(header, kHead);
    let free = capacity - ((head - this.cachedTail) | 0);
    if (free < len) {
      this.cachedTail = Atomics.load(header, kTail);
      free = capacity - ((head - this.cachedTail) | 0);
    }
    const n = len < free ? len : free;
    if (n === 0) return 0;
    const pos = head & this.mask;
    const first = capacity - pos; // room before the end of the data area
    const data = this.data;
    if (n <= SMALL_COPY_BYTES_MAX && n <= first) {
      for (let i = 0; i < n; i++) data[pos + i] = src[off + i]!;
    } else if (n <= first) {
      data.set(src.subarray(off, off + n), pos);
    } else {
      // Straddles the wrap: the tail end of the data area, then its start.
      data.set(src.subarray(off, off + first), pos);
      data.set(src.subarray(off + first, off + n), 0);
    }
    Atomics.store(header, kHead, (head + n) | 0);
    return n;
  }

  /**
   * Consumer: copy up to `maxLen` available bytes into `dst` at `off` and publish the new tail
   * with one store. Returns the number of bytes copied (0 when the ring is empty).
   */
  read(dst: Uint8Array, off: number, maxLen: number): number {
    if (off < 0 || maxLen < 0 || off + maxLen > dst.length) {
      throw new RangeError(`Ring.read: [${off}, ${off}+${maxLen}) is outside a destination of ${dst.length} bytes`);
    }
    const header = this.header;
    const tail = Atomics.load(header, kTail);
    let avail = (this.cachedHead - tail) | 0;
    if (avail < maxLen) {
      this.cachedHead = Atomics.load(header, kHead);
      avail = (this.cachedHead - tail) | 0;
    }
    const n = maxLen < avail ? maxLen : avail;
    if (n === 0) return 0;
    const pos = tail & this.mask;
    const first = this.capacity - pos;
    const data = this.data;
    if (n <= SMALL_COPY_BYTES_MAX && n <= first) {
      for (let i = 0; i < n; i++) dst[off + i] = data[pos + i]!;
    } else if (n <= first) {
      dst.set(data.subarray(pos, pos + n), off);
    } else {
      dst.set(data.subarray(pos, this.capacity), off);
      dst.set(data.subarray(0, n - first), off + first);
    }
    Atomics.store(header, kTail, (tail + n) | 0);
    return n;
  }

  /** Assertions about our own mistakes; for tests and fuzzers, not the hot path. */
  invariants(): void {
    const used = this.readable();
    if (used < 0 || used > this.capacity) {
      throw new Error(`Ring invariant: readable ${used} outside 0..${this.capacity}`);
    }
    if (Atomics.load(this.header, kMagic) !== RING_MAGIC) throw new Error('Ring invariant: magic overwritten');
    if (Atomics.load(this.header, kCapacity) !== this.capacity) throw new Error('Ring invariant: capacity overwritten');
  }
}
