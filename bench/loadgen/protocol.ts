// What the load generator sends, pre-encoded once per run.
//
// A put is a template copied into the output buffer with the job's sequence number written over
// a fixed-width digit field; a delete is a constant prefix plus the id digits. Nothing on the hot
// path builds a string (STYLE.md habit 3).
//
// Job body layout (bodyBytes >= BODY_BYTES_MIN):
//   nonce (8 hex chars) ':' seq (11 decimal digits, zero padded) '.' padding up to bodyBytes
// The nonce is per run, so a job from another run (or another client) is recognised as foreign;
// the sequence number lets the ledger check that every acknowledged put was reserved and deleted
// exactly once.

export const NONCE_BYTES = 8;
export const SEQ_DIGITS = 11; // 10^11 jobs: far more than any run can put
export const SEQ_OFFSET = NONCE_BYTES + 1;
export const BODY_BYTES_MIN = SEQ_OFFSET + SEQ_DIGITS;
/** beanstalkd's default max-job-size (-z); bigger bodies would get JOB_TOO_BIG. */
export const BODY_BYTES_MAX = 65_535;

export const CRLF = Buffer.from('\r\n');
const ZERO = 48;

export const CMD_RESERVE = Buffer.from('reserve\r\n');
export const CMD_DELETE_PREFIX = Buffer.from('delete ');

export function reserveWithTimeout(timeoutS: number): Buffer {
  return Buffer.from(`reserve-with-timeout ${timeoutS}\r\n`);
}

export interface PutTemplate {
  /** The whole command: header line, body, CRLF (makeBody: the body alone). */
  bytes: Buffer;
  /** Offset of the first sequence digit inside `bytes`. */
  seqOffset: number;
}

export function makeNonce(): string {
  return Math.floor(Math.random() * 0xffffffff)
    .toString(16)
    .padStart(NONCE_BYTES, '0');
}

/** A job body: nonce, ':', zeroed sequence digits (at `seqOffset`), '.' padding. */
export function makeBody(nonce: string, bodyBytes: number, maxBytes = BODY_BYTES_MAX): PutTemplate {
  if (nonce.length !== NONCE_BYTES) throw new Error(`nonce must be ${NONCE_BYTES} characters`);
  if (bodyBytes < BODY_BYTES_MIN || bodyBytes > maxBytes) {
    throw new RangeError(`body size must be ${BODY_BYTES_MIN}..${maxBytes} bytes, got ${bodyBytes}`);
  }
  const body = Buffer.alloc(bodyBytes, '.');
  body.write(nonce, 0, 'latin1');
  body[NONCE_BYTES] = 58; // ':'
  body.fill(ZERO, SEQ_OFFSET, SEQ_OFFSET + SEQ_DIGITS);
  return { bytes: body, seqOffset: SEQ_OFFSET };
}

export function makePutTemplate(nonce: string, bodyBytes: number, pri: number, ttrS: number): PutTemplate {
  const body = makeBody(nonce, bodyBytes);
  const header = Buffer.from(`put ${pri} 0 ${ttrS} ${bodyBytes}\r\n`);
  return { bytes: Buffer.concat([header, body.bytes, CRLF]), seqOffset: header.length + body.seqOffset };
}

/** Writes `value` as exactly `width` zero-padded decimal digits ending before `end`. */
export function writeFixedDigits(buf: Uint8Array, end: number, width: number, value: number): void {
  let v = value;
  for (let i = end - 1; i >= end - width; i--) {
    const q = Math.floor(v / 10);
    buf[i] = ZERO + (v - q * 10);
    v = q;
  }
}

/** Writes `value` (a non-negative integer) in decimal at `offset`; returns the offset after it. */
export function writeDecimal(buf: Uint8Array, offset: number, value: number): number {
  let digits = 1;
  for (let p = 10; p <= value; p *= 10) digits++;
  writeFixedDigits(buf, offset + digits, digits, value);
  return offset + digits;
}

/**
 * Reads the job sequence number from a body prefix; -1 if the prefix is not one of ours
 * (nonce mismatch, too short, or not digits).
 */
export function readBodySeq(body: Uint8Array, start: number, keptBytes: number, nonce: Uint8Array): number {
  if (keptBytes < BODY_BYTES_MIN) return -1;
  for (let i = 0; i < NONCE_BYTES; i++) if (body[start + i] !== nonce[i]) return -1;
  let seq = 0;
  const first = start + SEQ_OFFSET;
  for (let i = first; i < first + SEQ_DIGITS; i++) {
    const d = body[i]! - ZERO;
    if (d < 0 || d > 9) return -1;
    seq = seq * 10 + d;
  }
  return seq;
}

/**
 * Beanstalk tube name (workq: job name) of tube `index` in a run: unique per run so runs never
 * see each other's jobs.
 */
export function tubeName(nonce: string, index: number): string {
  return `bench.${nonce}.${index}`;
}
