// Decimal helpers the protocol parsers share for the rare numbers too long for a double to judge.

export const U64_MAX_DIGITS = '18446744073709551615';
export const I64_MAX_DIGITS = '9223372036854775807';
/** The magnitude of INT64_MIN. */
export const I64_MIN_DIGITS = '9223372036854775808';

/** Digits of buf[s, e) without leading zeros, as a string (for the rare overflow checks). */
export function sigDigits(buf: Uint8Array, s: number, e: number): string {
  while (s < e - 1 && buf[s] === 48) s++;
  return Buffer.from(buf.buffer, buf.byteOffset + s, e - s).toString('latin1');
}

/** a > b for decimal digit strings without leading zeros. */
export function digitsGreater(a: string, b: string): boolean {
  return a.length !== b.length ? a.length > b.length : a > b;
}
