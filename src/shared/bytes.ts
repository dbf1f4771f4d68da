// Copying a range of one byte array into another without making a view of it. `dst.set(src.subarray(...))`
// allocates a typed-array object per call; on the hot path (a job body into a ring record, a
// chunk, or a reply) that was several objects per job and a young-generation collection every
// few thousand jobs. Short ranges are copied by a loop, long ones by `set`, where one view is
// nothing beside the bytes.
//
// Not by Buffer's `copy`, though it was as fast as `set` and allocated nothing: that is a fast
// call into Node's C++ for every body, and the first CI run with it lost a test process to a
// SIGSEGV, after thirteen green runs with this loop. The crash did not come back when looked for,
// so nothing proves the copy caused it; but it was the only change that reached native code, for
// ~50 ns a command that no benchmark here resolves. Here only V8's own builtins touch the bytes.

/** Ranges up to this many bytes are copied byte by byte (no allocation). */
export const COPY_LOOP_MAX = 256;

/** Copies `src[start, end)` to `dst` at `at` (the caller has checked that it fits). */
export function copyBytes(dst: Uint8Array, at: number, src: Uint8Array, start: number, end: number): void {
  const n = end - start;
  if (n > COPY_LOOP_MAX) {
    dst.set(src.subarray(start, end), at);
    return;
  }
  for (let i = 0; i < n; i++) dst[at + i] = src[start + i];
}

// Little-endian fields of a record, read from its bytes. Buffer's readUInt32LE and readDoubleLE
// check their offset and type on every call: measured here, a record's five u32 fields and its f64
// took 62 ns through them and 19 ns read byte by byte. Records are read several times per command
// (a request, its reply, the shard's turn), always within a record whose length was checked first.

const F64 = new Float64Array(1);
const F64_BYTES = new Uint8Array(F64.buffer);
/** Whether this host stores a Float64Array's bytes little-endian (every platform Node runs on but s390x). */
const HOST_LE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** The unsigned 32-bit little-endian integer at `at`. */
export function u32le(b: Uint8Array, at: number): number {
  return (b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (b[at + 3] << 24)) >>> 0;
}

/** The signed 32-bit little-endian integer at `at`. */
export function i32le(b: Uint8Array, at: number): number {
  return b[at] | (b[at + 1] << 8) | (b[at + 2] << 16) | (b[at + 3] << 24);
}

/** The little-endian float64 at `at`. */
export function f64le(b: Uint8Array, at: number): number {
  const s = F64_BYTES;
  if (!HOST_LE) {
    for (let i = 0; i < 8; i++) s[7 - i] = b[at + i];
    return F64[0];
  }
  s[0] = b[at];
  s[1] = b[at + 1];
  s[2] = b[at + 2];
  s[3] = b[at + 3];
  s[4] = b[at + 4];
  s[5] = b[at + 5];
  s[6] = b[at + 6];
  s[7] = b[at + 7];
  return F64[0];
}
