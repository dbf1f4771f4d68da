// Tube name -> shard. FNV-1a 32-bit over the name's bytes, modulo the shard count.
//
// Stable across processes and versions (the shard of a tube must not change between runs with
// the same shard count), cheap for short names, and computable in place over the parser's read
// buffer without building a string. The string form hashes the UTF-8 bytes, so a name gives the
// same shard whether it arrives as a string or as bytes. (beanstalkd tube names are ASCII; the
// UTF-8 path exists only so the two forms can never disagree.)

const FNV_OFFSET_BASIS = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

const utf8 = new TextEncoder();

/** FNV-1a 32-bit of `bytes[start, end)`, as an unsigned 32-bit integer. */
export function fnv1a32(bytes: Uint8Array, start: number = 0, end: number = bytes.length): number {
  if (start < 0 || end > bytes.length || start > end) {
    throw new RangeError(`fnv1a32: [${start}, ${end}) is outside ${bytes.length} bytes`);
  }
  let h = FNV_OFFSET_BASIS;
  for (let i = start; i < end; i++) {
    h = Math.imul(h ^ bytes[i]!, FNV_PRIME);
  }
  return h >>> 0;
}

/** FNV-1a 32-bit of a string's UTF-8 bytes; equal to fnv1a32 of `Buffer.from(s)`. */
export function fnv1a32String(s: string): number {
  let h = FNV_OFFSET_BASIS;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x7f) return fnv1a32(utf8.encode(s)); // rare: not a beanstalkd tube name
    h = Math.imul(h ^ c, FNV_PRIME);
  }
  return h >>> 0;
}

/** The shard (0..shards-1) owning tube `name`; the same for the string and its UTF-8 bytes. */
export function shardOf(name: string | Uint8Array, shards: number): number {
  if (!(shards >= 1 && Number.isInteger(shards))) {
    throw new RangeError(`shardOf: shard count must be a positive integer, got ${shards}`);
  }
  const h = typeof name === 'string' ? fnv1a32String(name) : fnv1a32(name, 0, name.length);
  return h % shards;
}

/** shardOf for a name held in `bytes[start, end)` (e.g. the parser's read buffer), no copy. */
export function shardOfBytes(bytes: Uint8Array, start: number, end: number, shards: number): number {
  if (!(shards >= 1 && Number.isInteger(shards))) {
    throw new RangeError(`shardOfBytes: shard count must be a positive integer, got ${shards}`);
  }
  return fnv1a32(bytes, start, end) % shards;
}
