// The workq dialect of the load generator (github.com/iamduo/workq 0.2; spec in
// /work/shared/specs/workq-protocol.txt): pre-encoded commands, job ids, and the reply scanner.
//
// The load modes map one to one: put → `add`, reserve → `lease <names> <timeout-ms>`, delete →
// `complete <id> 0` with an empty result, tubes → job names. There is no `use`/`watch`: each
// connection's add carries its job name and its lease lists the names it takes jobs from.
//
// Job ids. workq jobs are named by a client-chosen UUIDv4. Ours are a function of the run nonce
// and the job's sequence number, so every thread computes the same id for a job without any
// coordination, a lease can be checked against the payload it carries (id and sequence number
// must agree), and no command pays for a random number:
//
//   xxxxxxxx-NNNN-4NNN-vNhh-ssssssssssss
//   x  32 bits: a mix (murmur3 fmix32, a bijection) of the sequence number's low 32 bits
//   N  the 32-bit run nonce;  h, v: 8 + 2 bits of a hash of the nonce (v: variant 10xx)
//   s  48 bits: the sequence number XOR a mask from the nonce
// Unique within a run (s is a bijection of seq < 2^48) and across runs with different nonces (N);
// x makes the leading digits as varied as random ids are.

import { CRLF, makeBody, type PutTemplate } from './protocol.ts';
import { FrameScanner, REPLY_PENDING, REPLY_WQ_CLIENT_ERROR, REPLY_WQ_JOB, REPLY_WQ_NOT_FOUND, REPLY_WQ_OK, REPLY_WQ_SERVER_ERROR, REPLY_WQ_TIMEOUT, BODY_PREFIX_BYTES_DEFAULT, type ReplySink } from './scanner.ts';

export const WORKQ_DEFAULT_PORT = 9922;
/** job.MaxPayload of the workq server. */
export const WQ_PAYLOAD_BYTES_MAX = 1_048_576;
/** job.MaxTTR, ms. */
export const WQ_TTR_MS_MAX = 86_400_000;
/** job.MaxTTL, ms (30 days). */
export const WQ_TTL_MS_MAX = 2_592_000_000;
export const UUID_BYTES = 36;

const HEX = Buffer.from('0123456789abcdef', 'latin1');
const CR = 13;
const LF = 10;
const SP = 32;

function fmix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Writes the low `digits` × 4 bits of `value` as lowercase hex ending before `end`. */
function writeHex(buf: Uint8Array, end: number, digits: number, value: number): void {
  let v = value;
  for (let i = end - 1; i >= end - digits; i--) {
    buf[i] = HEX[v & 15]!;
    v >>>= 4;
  }
}

/** The job ids of one run (see the top of this file). */
export class JobIds {
  private readonly seqMix: number;
  private readonly maskHi: number;
  private readonly maskLo: number;
  /** The 16 characters between the two varying fields: "-NNNN-4NNN-vNhh-". */
  private readonly middle: Buffer;
  private readonly scratch = new Uint8Array(UUID_BYTES);

  constructor(nonce: string) {
    const n = Number.parseInt(nonce, 16) >>> 0;
    const h = fmix32(n ^ 0x9e3779b9);
    this.seqMix = h;
    this.maskHi = (h >>> 8) & 0xffffff;
    this.maskLo = fmix32(h) & 0xffffff;
    const middle = Buffer.from('-0000-4000-8000-', 'latin1');
    writeHex(middle, 5, 4, n >>> 16);
    writeHex(middle, 10, 3, n & 0xfff);
    middle[11] = HEX[8 | ((h >>> 8) & 3)]!;
    writeHex(middle, 15, 3, (((n >>> 12) & 0xf) << 8) | (h & 0xff));
    this.middle = middle;
  }

  /** Writes the id of job `seq` (36 bytes) at `at`. */
  write(buf: Uint8Array, at: number, seq: number): void {
    this.writeVarying(buf, at, seq);
    buf.set(this.middle, at + 8);
  }

  /** Only the two fields that depend on `seq`: for a template whose middle is already in place. */
  writeVarying(buf: Uint8Array, at: number, seq: number): void {
    writeHex(buf, at + 8, 8, fmix32((seq >>> 0) ^ this.seqMix));
    writeHex(buf, at + 30, 6, (Math.floor(seq / 0x1000000) ^ this.maskHi) & 0xffffff);
    writeHex(buf, at + 36, 6, ((seq & 0xffffff) ^ this.maskLo) & 0xffffff);
  }

  text(seq: number): string {
    this.write(this.scratch, 0, seq);
    return Buffer.from(this.scratch).toString('latin1');
  }

  /** True if `buf[at .. at + 36)` is the id of job `seq`. */
  matches(buf: Uint8Array, at: number, seq: number): boolean {
    const s = this.scratch;
    this.write(s, 0, seq);
    for (let i = 0; i < UUID_BYTES; i++) if (buf[at + i] !== s[i]) return false;
    return true;
  }
}

export interface AddTemplate extends PutTemplate {
  /** Offset of the job id inside `bytes`. */
  idOffset: number;
}

/**
 * `add <id> <name> <ttr-ms> <ttl-ms> <size>\r\n<body>\r\n`, with the id's middle already written:
 * per job only the id's two varying fields and the sequence digits change.
 */
export function makeAddTemplate(ids: JobIds, nonce: string, name: string, bodyBytes: number, ttrMs: number, ttlMs: number): AddTemplate {
  const body = makeBody(nonce, bodyBytes, WQ_PAYLOAD_BYTES_MAX);
  const head = Buffer.from(`add ${'0'.repeat(UUID_BYTES)} ${name} ${ttrMs} ${ttlMs} ${bodyBytes}\r\n`, 'latin1');
  const idOffset = 4;
  ids.write(head, idOffset, 0);
  return { bytes: Buffer.concat([head, body.bytes, CRLF]), seqOffset: head.length + body.seqOffset, idOffset };
}

/** `lease <name>... <timeout-ms>\r\n`. */
export function leaseCommand(names: string[], timeoutMs: number): Buffer {
  return Buffer.from(`lease ${names.join(' ')} ${timeoutMs}\r\n`, 'latin1');
}

/** `complete <id> 0\r\n\r\n`: an empty result. The id is written at COMPLETE_ID_OFFSET. */
export const COMPLETE_TEMPLATE = Buffer.from(`complete ${'0'.repeat(UUID_BYTES)} 0\r\n\r\n`, 'latin1');
export const COMPLETE_ID_OFFSET = 9;

/** Longest workq reply line we accept: an id, a name of up to 255 bytes, a size; or an error text. */
export const WQ_LINE_BYTES_MAX = 512;

const W_OK = Buffer.from('+OK', 'latin1');
const W_TIMEOUT = Buffer.from('-TIMEOUT', 'latin1');
const W_NOT_FOUND = Buffer.from('-NOT-FOUND', 'latin1');
const W_CLIENT_ERROR = Buffer.from('-CLIENT-ERROR', 'latin1');
const W_SERVER_ERROR = Buffer.from('-SERVER-ERROR', 'latin1');

function startsWith(buf: Uint8Array, start: number, end: number, word: Uint8Array): boolean {
  if (end - start < word.length) return false;
  for (let i = 0; i < word.length; i++) if (buf[start + i] !== word[i]) return false;
  return end - start === word.length || buf[start + word.length] === SP;
}

/**
 * workq replies: `+OK`, `+OK 1` + job line + payload (lease), `-TIMEOUT`, `-NOT-FOUND`,
 * `-CLIENT-ERROR <text>`, `-SERVER-ERROR <text>`. The leased job's id is in `id` while the sink
 * handles the reply; an error's text in `errorText`. The job line is `<id> <name> <ttr> <size>`
 * as the spec, the workq server (0.2.0 on) and shardstalk send it; the TTR is checked to be a
 * number and not kept. The three-field `<id> <name> <size>` of workq 0.1.0 is read as well.
 */
export class WorkqReplyScanner extends FrameScanner {
  readonly id = new Uint8Array(UUID_BYTES);
  /** Text of the last error reply (allocated only for errors). */
  errorText = '';
  /** "+OK 1" was read: the next line is a job line. */
  private expectJob = false;

  constructor(sink: ReplySink, bodyPrefixBytes = BODY_PREFIX_BYTES_DEFAULT) {
    super(sink, bodyPrefixBytes, WQ_LINE_BYTES_MAX);
  }

  override get idle(): boolean {
    return super.idle && !this.expectJob;
  }

  protected override parseLine(buf: Uint8Array, start: number, cr: number): boolean {
    this.parsedArg = -1;
    this.parsedBodyBytes = -1;
    if (this.expectJob) {
      this.expectJob = false;
      return this.parseJobLine(buf, start, cr);
    }
    if (startsWith(buf, start, cr, W_OK)) {
      if (cr === start + W_OK.length) {
        this.parsedKind = REPLY_WQ_OK;
        return true;
      }
      // "+OK <count>": only a single job (lease) is expected here.
      if (this.parseNumber(buf, start + W_OK.length + 1, cr) !== cr || this.parsedArg !== 1) return false;
      this.parsedArg = -1;
      this.parsedKind = REPLY_PENDING;
      this.expectJob = true;
      return true;
    }
    if (startsWith(buf, start, cr, W_TIMEOUT) && cr === start + W_TIMEOUT.length) {
      this.parsedKind = REPLY_WQ_TIMEOUT;
      return true;
    }
    if (startsWith(buf, start, cr, W_NOT_FOUND) && cr === start + W_NOT_FOUND.length) {
      this.parsedKind = REPLY_WQ_NOT_FOUND;
      return true;
    }
    const client = startsWith(buf, start, cr, W_CLIENT_ERROR);
    if (client || startsWith(buf, start, cr, W_SERVER_ERROR)) {
      this.parsedKind = client ? REPLY_WQ_CLIENT_ERROR : REPLY_WQ_SERVER_ERROR;
      this.errorText = Buffer.from(buf.subarray(start, cr)).toString('latin1');
      return true;
    }
    return false;
  }

  /** `<id> <name> <ttr> <size>`, or `<id> <name> <size>` (0.1.0). */
  private parseJobLine(buf: Uint8Array, start: number, cr: number): boolean {
    if (cr - start < UUID_BYTES + 4 || buf[start + UUID_BYTES] !== SP) return false;
    const nameStart = start + UUID_BYTES + 1;
    let nameEnd = nameStart;
    while (nameEnd < cr && buf[nameEnd] !== SP) nameEnd++;
    if (nameEnd === nameStart || nameEnd === cr) return false; // no name, or nothing after it
    const first = this.parseNumber(buf, nameEnd + 1, cr); // the TTR, or the size (0.1.0)
    if (first < 0) return false;
    if (first !== cr && (buf[first] !== SP || this.parseNumber(buf, first + 1, cr) !== cr)) return false;
    for (let i = 0; i < UUID_BYTES; i++) {
      const c = buf[start + i]!;
      if (c === SP || c === CR || c === LF) return false;
      this.id[i] = c;
    }
    this.parsedKind = REPLY_WQ_JOB;
    this.parsedBodyBytes = this.parsedArg;
    this.parsedArg = -1;
    return true;
  }
}
