// copyBytes (src/shared/bytes.ts): the hot path's copy of a range without a view, by a loop up to
// COPY_LOOP_MAX bytes and by `set` past it. Both paths copy exactly the range, to the offset asked.

import { describe, expect, it } from 'vitest';
import { COPY_LOOP_MAX, copyBytes } from '../../src/shared/bytes.ts';

describe('copyBytes', () => {
  for (const n of [0, 1, 7, COPY_LOOP_MAX, COPY_LOOP_MAX + 1, 3 * COPY_LOOP_MAX]) {
    it(`copies ${n} bytes from the middle of one array to the middle of another`, () => {
      const src = new Uint8Array(n + 20);
      for (let i = 0; i < src.length; i++) src[i] = (i * 7 + 3) & 0xff;
      const dst = new Uint8Array(n + 40).fill(0xee);
      copyBytes(dst, 13, src, 5, 5 + n);
      expect([...dst.subarray(0, 13)]).toEqual(new Array(13).fill(0xee));
      expect([...dst.subarray(13, 13 + n)]).toEqual([...src.subarray(5, 5 + n)]);
      expect([...dst.subarray(13 + n)]).toEqual(new Array(dst.length - 13 - n).fill(0xee));
    });
  }
});
