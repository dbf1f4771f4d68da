// The workq server's value parsers, byte-exact with the Go functions it calls: strconv's
// integers, satori/go.uuid v1.0.0's uuid.FromString and uuid.String, and time.Parse of the
// schedule layout. Each reads buf[s, e) in place. The checks that call them, in the server's
// order, are in validate.ts; the framing is in parser.ts.

import { digitsGreater, I64_MAX_DIGITS, I64_MIN_DIGITS, sigDigits, U64_MAX_DIGITS } from '../digits.ts';
import { daysFromCivil } from './replies.ts';

/** Go's zero time.Time, 0001-01-01T00:00:00Z, in ms since the Unix epoch. */
export const GO_ZERO_TIME_MS = -62135596800000;

const DASH = 45;

// encoding/hex: either case.
const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 16; i++) {
  HEX['0123456789abcdef'.charCodeAt(i)] = i;
  HEX['0123456789ABCDEF'.charCodeAt(i)] = i;
}
const HEX_LOWER = Buffer.from('0123456789abcdef', 'latin1');
const UUID_GROUPS = [8, 4, 4, 4, 12];

/** A constant token (command word, flag key, prefix) as bytes, for `equals`. */
export const bytes = (s: string): Uint8Array => Buffer.from(s, 'latin1');
const W_URN = bytes('urn:uuid:');

/** Where parseTime puts the time it read (the parser's schedule fields). */
export interface ScheduleTime {
  scheduleMs: number;
  scheduleZero: boolean;
}

export function equals(buf: Uint8Array, s: number, e: number, w: Uint8Array): boolean {
  if (e - s !== w.length) return false;
  for (let i = 0; i < w.length; i++) if (buf[s + i] !== w[i]) return false;
  return true;
}

/** buf[s, e) as a string, one char per byte. */
export function text(buf: Uint8Array, s: number, e: number): string {
  return Buffer.from(buf.buffer, buf.byteOffset + s, e - s).toString('latin1');
}

/** strconv.ParseUint(s, 10, bits): digits only (no sign, no underscore), in range. -1 if not. */
export function parseUint(buf: Uint8Array, s: number, e: number, bits: number): number {
  if (s >= e) return -1;
  let v = 0;
  for (let i = s; i < e; i++) {
    const d = buf[i] - 48;
    if (d < 0 || d > 9) return -1;
    v = v * 10 + d;
  }
  if (bits === 64) {
    if (e - s >= 20 && digitsGreater(sigDigits(buf, s, e), U64_MAX_DIGITS)) return -1;
    return v; // exact up to 2^53; only ever compared with limits far below
  }
  return v > 2 ** bits - 1 ? -1 : v;
}

/** Go's decimal integer parse: optional sign, then digits only. NaN if malformed or out of range. */
function parseSigned(buf: Uint8Array, s: number, e: number, bits: 32 | 64): number {
  let neg = false;
  if (s < e && (buf[s] === 43 || buf[s] === 45)) {
    neg = buf[s] === 45;
    s++;
  }
  if (s >= e) return NaN;
  let v = 0;
  for (let i = s; i < e; i++) {
    const d = buf[i] - 48;
    if (d < 0 || d > 9) return NaN;
    v = v * 10 + d;
  }
  if (bits === 32) {
    if (v > (neg ? 2147483648 : 2147483647)) return NaN;
  } else if (e - s >= 19 && digitsGreater(sigDigits(buf, s, e), neg ? I64_MIN_DIGITS : I64_MAX_DIGITS)) {
    return NaN;
  }
  return neg ? 0 - v : v;
}

/** strconv.ParseInt(s, 10, 32). */
export function parseInt32(buf: Uint8Array, s: number, e: number): number {
  return parseSigned(buf, s, e, 32);
}

/** strconv.Atoi on 64-bit. */
export function atoi(buf: Uint8Array, s: number, e: number): number {
  return parseSigned(buf, s, e, 64);
}

function isDigit(buf: Uint8Array, i: number, e: number): boolean {
  return i < e && buf[i] >= 48 && buf[i] <= 57;
}

function daysIn(month: number, year: number): number {
  if (month === 2) return (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/**
 * uuid.FromString of satori/go.uuid v1.0.0, as the server's parseID calls it. workq server:
 * that version is lenient: at least 32 bytes; an optional "urn:uuid:" or "{" prefix; five
 * groups of 8-4-4-4-12 hex digits of either case, each optionally preceded by one "-"; and
 * anything after the 32nd digit ignored ("{...}" passes by that, so does "...xyz"). Input too
 * short for its groups makes that version index out of range and the server crash; here it is
 * "Invalid ID". On success, `id` holds its 16 bytes (on failure, some may be overwritten).
 */
export function parseUuid(buf: Uint8Array, s: number, e: number, id: Uint8Array): boolean {
  if (e - s < 32) return false;
  let p = s;
  if (equals(buf, p, p + 9, W_URN)) p += 9;
  else if (buf[p] === 123) p++; // '{'
  let o = 0;
  for (const group of UUID_GROUPS) {
    if (p >= e) return false;
    if (buf[p] === DASH) p++;
    if (e - p < group) return false;
    for (let i = 0; i < group; i += 2) {
      const hi = HEX[buf[p + i]];
      const lo = HEX[buf[p + i + 1]];
      if (hi < 0 || lo < 0) return false;
      id[o++] = (hi << 4) | lo;
    }
    p += group;
  }
  return true;
}

/** uuid.String(): the canonical form of `id`, lowercase, written into `t` (36 bytes). */
export function uuidText(id: Uint8Array, t: Buffer): string {
  let q = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) t[q++] = DASH;
    t[q++] = HEX_LOWER[id[i] >> 4];
    t[q++] = HEX_LOWER[id[i] & 15];
  }
  return t.toString('latin1');
}

/**
 * workq server: the spec asks for RFC 3339 UTC "2020-02-02T00:00:00Z"; the server accepts
 * what time.Parse("2006-01-02T15:04:05Z", s) accepts, as current Go parses that layout: a
 * 4-digit year; 2-digit month, day, minute, second; an hour of 1 or 2 digits (Go's "15" is not
 * fixed-width); a fraction of seconds ("." or "," then digits, only the first 9 count) although
 * the layout has none; then a literal "Z". Ranges as Go checks them, the day against the
 * month's length (Go 1.7, which built 0.2, let day 00 and 10+-digit fractions through
 * differently; current Go is followed). Sets into.scheduleMs and into.scheduleZero.
 */
export function parseTime(buf: Uint8Array, s: number, e: number, into: ScheduleTime): boolean {
  let p = s;
  const num = (n: number): number => {
    let v = 0;
    for (let i = 0; i < n; i++) {
      if (!isDigit(buf, p, e)) return -1;
      v = v * 10 + (buf[p++] - 48);
    }
    return v;
  };
  const lit = (c: number): boolean => p < e && buf[p++] === c;
  const year = num(4);
  if (year < 0 || !lit(DASH)) return false;
  const month = num(2);
  if (month < 1 || month > 12 || !lit(DASH)) return false;
  const day = num(2);
  if (day < 1 || !lit(84)) return false; // 'T'
  const hour = num(isDigit(buf, p + 1, e) ? 2 : 1);
  if (hour < 0 || hour > 23 || !lit(58)) return false; // ':'
  const minute = num(2);
  if (minute < 0 || minute > 59 || !lit(58)) return false;
  const second = num(2);
  if (second < 0 || second > 59) return false;
  let nanos = 0;
  if (e - p >= 2 && (buf[p] === 46 || buf[p] === 44) && isDigit(buf, p + 1, e)) {
    p++;
    let digits = 0;
    while (isDigit(buf, p, e)) {
      if (digits < 9) {
        nanos = nanos * 10 + (buf[p] - 48);
        digits++;
      }
      p++;
    }
    while (digits < 9) {
      nanos *= 10;
      digits++;
    }
  }
  if (!lit(90) || p !== e) return false; // 'Z', then nothing
  if (day > daysIn(month, year)) return false;
  into.scheduleMs =
    daysFromCivil(year, month, day) * 86400000 + hour * 3600000 + minute * 60000 + second * 1000 + Math.floor(nanos / 1e6);
  into.scheduleZero = into.scheduleMs === GO_ZERO_TIME_MS && nanos === 0;
  return true;
}
