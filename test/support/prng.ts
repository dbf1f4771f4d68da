// The tests' one seeded PRNG (mulberry32): small, fast, well mixed, and the same sequence for a
// seed everywhere, so a seed printed by any failing test replays it.

/** Uniform 32-bit unsigned integers. */
export function mulberry32u32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** Uniform numbers in [0, 1). */
export function mulberry32(seed: number): () => number {
  const next = mulberry32u32(seed);
  return () => next() / 4294967296;
}
