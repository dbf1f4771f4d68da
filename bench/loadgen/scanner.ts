// Reply scanners: bytes in, (kind, number, body prefix) out, with no allocation.
//
// FrameScanner is the protocol-neutral part: lines, bodies announced by length, split reads.
// ReplyScanner reads beanstalk replies with it; workq.ts's WorkqReplyScanner reads workq's.
//
// Works in place over the read buffer (nats-server's parser is the model, STYLE.md): a reply line
// is classified on its bytes and its numbers are accumulated digit by digit. Only a line that
// straddles two reads is copied, into a small scratch buffer owned by the scanner; a job body is
// jumped over by its announced length, and only its first `bodyPrefixBytes` bytes are kept (the
// generator needs the nonce and sequence number at the front, not the padding).
//
// The read buffer may be shared by every connection of a thread (net's `onread` option), so the
// scanner never keeps a reference to it between calls.

const CR = 13;
const LF = 10;
const SP = 32;
const ZERO = 48;

/**
 * Longest reply line we accept, CRLF included. Why 256: beanstalkd's longest reply is
 * "USING <tube>\r\n" with a 200-byte tube name; a longer line means we lost the framing.
 */
export const LINE_BYTES_MAX = 256;
export const BODY_PREFIX_BYTES_DEFAULT = 64;

// Reply kinds. Plain numbers (no enum: the code runs under type stripping).
export const REPLY_INSERTED = 1;
export const REPLY_BURIED = 2;
export const REPLY_USING = 3;
export const REPLY_WATCHING = 4;
export const REPLY_RESERVED = 5;
export const REPLY_DELETED = 6;
export const REPLY_TIMED_OUT = 7;
export const REPLY_DEADLINE_SOON = 8;
export const REPLY_NOT_FOUND = 9;
export const REPLY_OK = 10;
export const REPLY_FOUND = 11;
export const REPLY_RELEASED = 12;
export const REPLY_TOUCHED = 13;
export const REPLY_KICKED = 14;
export const REPLY_NOT_IGNORED = 15;
export const REPLY_PAUSED = 16;
export const REPLY_OUT_OF_MEMORY = 17;
export const REPLY_INTERNAL_ERROR = 18;
export const REPLY_BAD_FORMAT = 19;
export const REPLY_UNKNOWN_COMMAND = 20;
export const REPLY_EXPECTED_CRLF = 21;
export const REPLY_JOB_TOO_BIG = 22;
export const REPLY_DRAINING = 23;
/** Not a reply of the protocol: the stream lost its framing. The scanner stops after reporting it. */
export const REPLY_GARBLED = 24;
// workq replies (workq.ts scans them).
export const REPLY_WQ_OK = 25; //           "+OK": add, complete
export const REPLY_WQ_JOB = 26; //          "+OK 1" + "<id> <name> <ttr> <size>" + payload: lease
export const REPLY_WQ_TIMEOUT = 27; //      "-TIMEOUT": lease found nothing in time
export const REPLY_WQ_NOT_FOUND = 28; //    "-NOT-FOUND"
export const REPLY_WQ_CLIENT_ERROR = 29; // "-CLIENT-ERROR <text>"
export const REPLY_WQ_SERVER_ERROR = 30; // "-SERVER-ERROR <text>"
export const REPLY_KINDS = 31;
/** Not a reply yet: a line that only announces what follows (workq's "+OK 1"). */
export const REPLY_PENDING = 0;

// How each reply continues after its first word.
const ARGS_NONE = 0; //     "DELETED"
const ARGS_NUMBER = 1; //   "INSERTED <id>"
const ARGS_TEXT = 2; //     "USING <tube>": the argument is not needed
const ARGS_ID_BODY = 3; //  "RESERVED <id> <bytes>" + body
const ARGS_BODY = 4; //     "OK <bytes>" + body

interface Word {
  bytes: Uint8Array;
  kind: number;
  args: number;
}

const WORDS: Array<[string, number, number]> = [
  ['INSERTED', REPLY_INSERTED, ARGS_NUMBER],
  ['BURIED', REPLY_BURIED, ARGS_NUMBER], // "BURIED <id>" after put; plain "BURIED" after bury
  ['USING', REPLY_USING, ARGS_TEXT],
  ['WATCHING', REPLY_WATCHING, ARGS_NUMBER],
  ['RESERVED', REPLY_RESERVED, ARGS_ID_BODY],
  ['DELETED', REPLY_DELETED, ARGS_NONE],
  ['TIMED_OUT', REPLY_TIMED_OUT, ARGS_NONE],
  ['DEADLINE_SOON', REPLY_DEADLINE_SOON, ARGS_NONE],
  ['NOT_FOUND', REPLY_NOT_FOUND, ARGS_NONE],
  ['OK', REPLY_OK, ARGS_BODY],
  ['FOUND', REPLY_FOUND, ARGS_ID_BODY],
  ['RELEASED', REPLY_RELEASED, ARGS_NONE],
  ['TOUCHED', REPLY_TOUCHED, ARGS_NONE],
  ['KICKED', REPLY_KICKED, ARGS_NUMBER],
  ['NOT_IGNORED', REPLY_NOT_IGNORED, ARGS_NONE],
  ['PAUSED', REPLY_PAUSED, ARGS_NONE],
  ['OUT_OF_MEMORY', REPLY_OUT_OF_MEMORY, ARGS_NONE],
  ['INTERNAL_ERROR', REPLY_INTERNAL_ERROR, ARGS_NONE],
  ['BAD_FORMAT', REPLY_BAD_FORMAT, ARGS_NONE],
  ['UNKNOWN_COMMAND', REPLY_UNKNOWN_COMMAND, ARGS_NONE],
  ['EXPECTED_CRLF', REPLY_EXPECTED_CRLF, ARGS_NONE],
  ['JOB_TOO_BIG', REPLY_JOB_TOO_BIG, ARGS_NONE],
  ['DRAINING', REPLY_DRAINING, ARGS_NONE],
];

export const REPLY_NAMES: string[] = new Array<string>(REPLY_KINDS).fill('?');
for (const [name, kind] of WORDS) REPLY_NAMES[kind] = name;
REPLY_NAMES[REPLY_GARBLED] = 'GARBLED';
REPLY_NAMES[REPLY_WQ_OK] = '+OK';
REPLY_NAMES[REPLY_WQ_JOB] = '+OK 1 (job)';
REPLY_NAMES[REPLY_WQ_TIMEOUT] = '-TIMEOUT';
REPLY_NAMES[REPLY_WQ_NOT_FOUND] = '-NOT-FOUND';
REPLY_NAMES[REPLY_WQ_CLIENT_ERROR] = '-CLIENT-ERROR';
REPLY_NAMES[REPLY_WQ_SERVER_ERROR] = '-SERVER-ERROR';

/** Words by first byte: a reply is classified with one table lookup and a short compare. */
const WORDS_BY_FIRST_BYTE: Word[][] = Array.from({ length: 256 }, () => []);
for (const [name, kind, args] of WORDS) {
  const bytes = Buffer.from(name, 'latin1');
  WORDS_BY_FIRST_BYTE[bytes[0]!]!.push({ bytes, kind, args });
}

export interface ReplySink {
  /**
   * One reply. `arg` is the first number (job id, watch count) or -1. For replies with a body
   * (RESERVED, FOUND, OK, workq's job), `body[bodyStart .. bodyStart + bodyKeptBytes)` is the body's prefix
   * and `bodyBytes` its full length; the view is only valid during the call.
   */
  onReply(kind: number, arg: number, body: Uint8Array, bodyStart: number, bodyKeptBytes: number, bodyBytes: number): void;
}

const EMPTY = new Uint8Array(0);

// Scanner states.
const STATE_LINE = 0;
const STATE_BODY = 1;
const STATE_FAILED = 2;

/**
 * Lines and length-announced bodies, split anywhere across reads. A subclass classifies each
 * line (parseLine) into the parsed* fields: a kind, a number, and the length of a body that
 * follows (-1 if none). Kind REPLY_PENDING consumes a line without reporting a reply.
 */
export class FrameScanner {
  protected readonly sink: ReplySink;
  private readonly bodyPrefixBytes: number;
  private readonly lineBytesMax: number;
  private state = STATE_LINE;
  /** Part of a reply line that arrived without its LF. */
  private readonly line: Uint8Array;
  private lineBytes = 0;
  /** Reply whose body is being skipped. */
  private bodyKind = 0;
  private bodyArg = -1;
  private bodyBytes = 0;
  /** Body bytes plus CRLF consumed so far. */
  private bodyConsumed = 0;
  private readonly bodyPrefix: Uint8Array;
  // Results of parseLine, kept in fields so the parse allocates nothing.
  protected parsedKind = 0;
  protected parsedArg = -1;
  protected parsedBodyBytes = -1;

  constructor(sink: ReplySink, bodyPrefixBytes: number, lineBytesMax: number) {
    this.sink = sink;
    this.bodyPrefixBytes = bodyPrefixBytes;
    this.bodyPrefix = new Uint8Array(bodyPrefixBytes);
    this.lineBytesMax = lineBytesMax;
    this.line = new Uint8Array(lineBytesMax);
  }

  get failed(): boolean {
    return this.state === STATE_FAILED;
  }

  /** True between replies: no partial line or body is pending. */
  get idle(): boolean {
    return this.state === STATE_LINE && this.lineBytes === 0;
  }

  /** Scans `buf[start .. end)`. */
  feed(buf: Uint8Array, start: number, end: number): void {
    let pos = start;
    while (pos < end) {
      if (this.state === STATE_LINE) {
        pos = this.scanLine(buf, pos, end);
      } else if (this.state === STATE_BODY) {
        pos = this.scanBody(buf, pos, end);
      } else {
        return;
      }
    }
  }

  private scanLine(buf: Uint8Array, pos: number, end: number): number {
    // Find LF, looking no further than the line limit.
    const limit = Math.min(end, pos + this.lineBytesMax - this.lineBytes);
    let lf = pos;
    while (lf < limit && buf[lf] !== LF) lf++;
    if (lf === limit) {
      if (limit < end || this.lineBytes + (limit - pos) >= this.lineBytesMax) return this.garbled();
      this.line.set(buf.subarray(pos, end), this.lineBytes);
      this.lineBytes += end - pos;
      return end;
    }
    let ok: boolean;
    if (this.lineBytes === 0) {
      ok = lf > pos && buf[lf - 1] === CR && this.parseLine(buf, pos, lf - 1);
    } else {
      // The line straddled reads: complete it in the scratch buffer and parse it there.
      this.line.set(buf.subarray(pos, lf + 1), this.lineBytes);
      const lineEnd = this.lineBytes + (lf - pos);
      this.lineBytes = 0;
      ok = lineEnd > 0 && this.line[lineEnd - 1] === CR && this.parseLine(this.line, 0, lineEnd - 1);
    }
    if (!ok) return this.garbled();
    const next = lf + 1;
    if (this.parsedBodyBytes < 0) {
      if (this.parsedKind !== REPLY_PENDING) this.sink.onReply(this.parsedKind, this.parsedArg, EMPTY, 0, 0, 0);
      return next;
    }
    const bodyBytes = this.parsedBodyBytes;
    if (end - next >= bodyBytes + 2) {
      // Fast path: the whole body and its CRLF are in this read.
      if (buf[next + bodyBytes] !== CR || buf[next + bodyBytes + 1] !== LF) return this.garbled();
      const kept = bodyBytes < this.bodyPrefixBytes ? bodyBytes : this.bodyPrefixBytes;
      this.sink.onReply(this.parsedKind, this.parsedArg, buf, next, kept, bodyBytes);
      return next + bodyBytes + 2;
    }
    this.state = STATE_BODY;
    this.bodyKind = this.parsedKind;
    this.bodyArg = this.parsedArg;
    this.bodyBytes = bodyBytes;
    this.bodyConsumed = 0;
    return next;
  }

  private scanBody(buf: Uint8Array, pos: number, end: number): number {
    const total = this.bodyBytes + 2;
    const take = Math.min(end - pos, total - this.bodyConsumed);
    const kept = Math.min(this.bodyBytes, this.bodyPrefixBytes);
    // Copy what still belongs to the prefix; the rest of the body is skipped.
    if (this.bodyConsumed < kept) {
      const n = Math.min(take, kept - this.bodyConsumed);
      this.bodyPrefix.set(buf.subarray(pos, pos + n), this.bodyConsumed);
    }
    // Check the CRLF after the body wherever it falls.
    for (let i = 0; i < take; i++) {
      const at = this.bodyConsumed + i;
      if (at === this.bodyBytes && buf[pos + i] !== CR) return this.garbled();
      if (at === this.bodyBytes + 1 && buf[pos + i] !== LF) return this.garbled();
      if (at < this.bodyBytes) i += this.bodyBytes - at - 1; // jump over the body
    }
    this.bodyConsumed += take;
    if (this.bodyConsumed === total) {
      this.state = STATE_LINE;
      this.sink.onReply(this.bodyKind, this.bodyArg, this.bodyPrefix, 0, kept, this.bodyBytes);
    }
    return pos + take;
  }

  /**
   * Classifies the line `buf[start .. cr)` (its CR at `cr`, LF after it) into the parsed* fields;
   * false if it is not a reply of the protocol.
   */
  protected parseLine(_buf: Uint8Array, _start: number, _cr: number): boolean {
    return false;
  }

  /** Parses decimal digits from `pos` into parsedArg; returns the index after them, -1 if none. */
  protected parseNumber(buf: Uint8Array, pos: number, cr: number): number {
    let value = 0;
    let i = pos;
    while (i < cr) {
      const d = buf[i]! - ZERO;
      if (d < 0 || d > 9) break;
      value = value * 10 + d;
      i++;
    }
    if (i === pos || i - pos > 20) return -1;
    this.parsedArg = value;
    return i;
  }

  private garbled(): number {
    this.state = STATE_FAILED;
    this.sink.onReply(REPLY_GARBLED, -1, EMPTY, 0, 0, 0);
    return Number.MAX_SAFE_INTEGER;
  }
}

/** Beanstalk replies. */
export class ReplyScanner extends FrameScanner {
  constructor(sink: ReplySink, bodyPrefixBytes = BODY_PREFIX_BYTES_DEFAULT) {
    super(sink, bodyPrefixBytes, LINE_BYTES_MAX);
  }

  protected override parseLine(buf: Uint8Array, start: number, cr: number): boolean {
    let wordEnd = start;
    while (wordEnd < cr && buf[wordEnd] !== SP) wordEnd++;
    const word = this.lookup(buf, start, wordEnd);
    if (word === null) return false;
    this.parsedKind = word.kind;
    this.parsedArg = -1;
    this.parsedBodyBytes = -1;
    switch (word.args) {
      case ARGS_NONE:
        return wordEnd === cr;
      case ARGS_TEXT:
        return true;
      case ARGS_NUMBER: {
        if (wordEnd === cr) return word.kind === REPLY_BURIED; // "BURIED" without an id, after bury
        const after = this.parseNumber(buf, wordEnd + 1, cr);
        return after === cr;
      }
      case ARGS_ID_BODY: {
        const after = this.parseNumber(buf, wordEnd + 1, cr);
        if (after < 0 || after === cr) return false;
        const id = this.parsedArg;
        const after2 = this.parseNumber(buf, after + 1, cr);
        if (after2 !== cr) return false;
        this.parsedBodyBytes = this.parsedArg;
        this.parsedArg = id;
        return true;
      }
      case ARGS_BODY: {
        const after = this.parseNumber(buf, wordEnd + 1, cr);
        if (after !== cr) return false;
        this.parsedBodyBytes = this.parsedArg;
        this.parsedArg = -1;
        return true;
      }
    }
    return false;
  }

  private lookup(buf: Uint8Array, start: number, end: number): Word | null {
    if (end === start) return null;
    const candidates = WORDS_BY_FIRST_BYTE[buf[start]!]!;
    const len = end - start;
    outer: for (let w = 0; w < candidates.length; w++) {
      const word = candidates[w]!;
      if (word.bytes.length !== len) continue;
      for (let i = 1; i < len; i++) if (word.bytes[i] !== buf[start + i]) continue outer;
      return word;
    }
    return null;
  }
}
