// Copying a range of one byte array into another without making a view of it. `dst.set(src.subarray(...))`
// allocates a typed-array object per call; on the hot path (a job body into a ring record, a
// chunk, or a reply) that was several objects per job and a young-generation collection every
// few thousand jobs. Short ranges are copied by a loop, long ones by `set`, where one view is
// nothing beside the bytes.

/** Ranges up to this many bytes are copied byte by byte (no allocation). */
export const COPY_LOOP_MAX = 256;

/** Copies `src[start, end)` to `dst` at `at`. */
export function copyBytes(dst: Uint8Array, at: number, src: Uint8Array, start: number, end: number): void {
  const n = end - start;
  if (n > COPY_LOOP_MAX) {
    dst.set(src.subarray(start, end), at);
    return;
  }
  for (let i = 0; i < n; i++) dst[at + i] = src[start + i];
}
