// Streaming parser of the workq protocol, byte-exact with the workq server's framing and
// validation (github.com/iamduo/workq 0.2.x: int/prot/prot.go, int/handlers/*.go,
// int/job/{job,controller}.go, with github.com/satori/go.uuid v1.0.0 for ids).
//
// It parses in place: command lines and payloads are read straight out of the socket's chunk;
// only a line that straddles two reads is copied into a LINE_BYTES_MAX scratch buffer, and only
// a payload that straddles reads is copied into a payload buffer. The arguments of the last
// command are fields of the parser (no object per command). The parser knows nothing of sockets
// or threads: it is fed chunks split at any byte and reports to a sink.
//
// The server validates in three steps, and so does this parser, in the same order, so a command
// with several faults gets the same error as from the server:
//   1. framing (prot.ParseCmd): flags syntax, command name, argument count, payload size; then
//      the payload and its \r\n trailer are read;
//   2. syntax (the handler): flag count, id, numbers, time, flags' values;
//   3. ranges (the job controller): UUIDv4, name, TTR, TTL, schedule time.
// Errors of steps 2 and 3 come only after the payload is read (the server reads it first).

import { digitsGreater, I64_MAX_DIGITS, I64_MIN_DIGITS, sigDigits, U64_MAX_DIGITS } from '../digits.ts';
import { StreamParser } from '../stream.ts';
import {
  CMD_ADD, CMD_COMPLETE, CMD_DELETE, CMD_FAIL, CMD_INSPECT_JOB, CMD_INSPECT_JOBS, CMD_INSPECT_QUEUE,
  CMD_INSPECT_QUEUES, CMD_INSPECT_SCHEDULED_JOBS, CMD_INSPECT_SERVER, CMD_LEASE, CMD_RESULT, CMD_RUN,
  CMD_SCHEDULE,
} from './commands.ts';
import {
  REPLY_COMMAND_TOO_LONG, REPLY_INVALID_ARGS, REPLY_INVALID_CURSOR_OFFSET, REPLY_INVALID_FLAGS,
  REPLY_INVALID_ID, REPLY_INVALID_LIMIT, REPLY_INVALID_MAX_ATTEMPTS, REPLY_INVALID_MAX_FAILS,
  REPLY_INVALID_NAME, REPLY_INVALID_PAYLOAD_SIZE, REPLY_INVALID_PRIORITY, REPLY_INVALID_RESULT_SIZE,
  REPLY_INVALID_TIME, REPLY_INVALID_TTL, REPLY_INVALID_TTR, REPLY_INVALID_WAIT_TIMEOUT, REPLY_OK,
  REPLY_UNKNOWN_COMMAND, daysFromCivil,
} from './replies.ts';

// ---- limits ----

/**
 * A command line, \r\n included, may be at most this long. workq server: its only limit is a
 * read budget per command, prot.MaxRead = 1,058,576 bytes, commented "10000 bytes - max command
 * limit + 1048576 bytes - job max payload"; past the budget its reader hits EOF and the
 * connection is dropped. We take the 10,000 bytes it names as the line limit and, unlike the
 * server, answer REPLY_COMMAND_TOO_LONG once the line's \n arrives and go on.
 */
export const LINE_BYTES_MAX = 10000;
/** The server's prot.MaxRead, for reference: line plus payload of one command. */
export const READ_BYTES_MAX = 1058576;
/** job.MaxPayload: 1 MiB. */
export const PAYLOAD_BYTES_MAX = 1048576;
/** job.MaxResult: 1 MiB (complete and fail are held to it by prot's readPayload). */
export const RESULT_BYTES_MAX = 1048576;
/** job.MaxName. */
export const NAME_BYTES_MAX = 255;
/** job.MaxTTR: 24 hours in ms; TTR 0 is refused too. */
export const TTR_MS_MAX = 86400000;
/** job.MaxTTL: 30 days in ms; TTL 0 is refused too. workq server: the spec says 2^64-1 (2^64 for schedule). */
export const TTL_MS_MAX = 2592000000;
/** job.MaxTimeout: 24 hours in ms, for lease, run and result. 0 is allowed. */
export const WAIT_TIMEOUT_MS_MAX = 86400000;
/** -max-attempts and -max-fails are parsed as uint8. */
export const MAX_ATTEMPTS_MAX = 255;
export const MAX_FAILS_MAX = 255;
/** handlers.MaxLimit for inspect queues / jobs / scheduled-jobs (its comment says 1000; the code says 100). */
export const INSPECT_LIMIT_MAX = 100;
/**
 * Flags an add or schedule may carry. workq server: any keys count (an unknown flag is accepted
 * and ignored); a fourth flag is "Invalid command args"; flags may stand anywhere after the
 * command name, between arguments too.
 */
export const JOB_FLAGS_MAX = 3;
/** Flags a run may carry. */
export const RUN_FLAGS_MAX = 1;
/** Go's zero time.Time, 0001-01-01T00:00:00Z, in ms since the Unix epoch. */
export const GO_ZERO_TIME_MS = -62135596800000;

export interface WorkqSink {
  /**
   * A valid command; its arguments are in the parser's fields (valid until the next event; the
   * payload of add/schedule/run/complete/fail only during this call). Return false to stop
   * parsing until `resume()` (a blocking lease/run/result, a full output).
   */
  command(cmd: number): boolean;
  /** A reply decided by the parser itself: a `-CLIENT-ERROR`, or `+OK` (see delete). */
  reply(msg: Buffer): boolean;
  /**
   * workq server: a line that ends in \n without \r before it is a read error there, and the
   * connection is dropped without a reply. The session should close; the parser ignores
   * everything after.
   */
  drop(): void;
}

export interface ParserOptions {
  /** ms since the Unix epoch, for schedule's "time + TTL is past" check. Default Date.now. */
  clock?: () => number;
}

const S_LINE = 0;
const S_ENDLINE = 1; // discarding a too-long line up to its \n
const S_BODY = 2; // reading a payload / result and its \r\n
const S_SKIP = 3; // discarding a too-big payload and its trailer
const S_CLOSED = 4; // the connection is to be dropped

const CR = 13;
const LF = 10;
const SP = 32;
const DASH = 45;
const EQ = 61;

const EMPTY = new Uint8Array(0);

// job.nameRe: ^[a-zA-Z0-9_.-]*$
const NAME_CHAR = new Uint8Array(256);
for (const ch of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-') NAME_CHAR[ch.charCodeAt(0)] = 1;

// encoding/hex: either case.
const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 16; i++) {
  HEX['0123456789abcdef'.charCodeAt(i)] = i;
  HEX['0123456789ABCDEF'.charCodeAt(i)] = i;
}
const HEX_LOWER = Buffer.from('0123456789abcdef', 'latin1');
const UUID_GROUPS = [8, 4, 4, 4, 12];

const bytes = (s: string): Uint8Array => Buffer.from(s, 'latin1');
const W_ADD = bytes('add');
const W_RUN = bytes('run');
const W_FAIL = bytes('fail');
const W_LEASE = bytes('lease');
const W_RESULT = bytes('result');
const W_DELETE = bytes('delete');
const W_INSPECT = bytes('inspect');
const W_SCHEDULE = bytes('schedule');
const W_COMPLETE = bytes('complete');
const W_SERVER = bytes('server');
const W_QUEUES = bytes('queues');
const W_QUEUE = bytes('queue');
const W_JOBS = bytes('jobs');
const W_SCHEDULED_JOBS = bytes('scheduled-jobs');
const W_JOB = bytes('job');
const W_URN = bytes('urn:uuid:');
const F_PRIORITY = bytes('priority');
const F_MAX_ATTEMPTS = bytes('max-attempts');
const F_MAX_FAILS = bytes('max-fails');


function equals(buf: Uint8Array, s: number, e: number, w: Uint8Array): boolean {
  if (e - s !== w.length) return false;
  for (let i = 0; i < w.length; i++) if (buf[s + i] !== w[i]) return false;
  return true;
}



/** strconv.ParseUint(s, 10, bits): digits only (no sign, no underscore), in range. -1 if not. */
function parseUint(buf: Uint8Array, s: number, e: number, bits: number): number {
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
function parseInt32(buf: Uint8Array, s: number, e: number): number {
  return parseSigned(buf, s, e, 32);
}

/** strconv.Atoi on 64-bit. */
function atoi(buf: Uint8Array, s: number, e: number): number {
  return parseSigned(buf, s, e, 64);
}

function isDigit(buf: Uint8Array, i: number, e: number): boolean {
  return i < e && buf[i] >= 48 && buf[i] <= 57;
}

function daysIn(month: number, year: number): number {
  if (month === 2) return (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

export class Parser extends StreamParser {
  readonly sink: WorkqSink;
  readonly clock: () => number;

  // ---- arguments of the last command ----
  /** The job id's 16 bytes (overwritten by the next command: copy what you keep). */
  readonly id = new Uint8Array(16);
  /** The job id in canonical form, lowercase: what the server echoes (uuid.String()). */
  idText = '';
  /** add, schedule, run, inspect queue / jobs / scheduled-jobs. */
  name = '';
  /** lease: the names, in order (this array is reused by the next lease). */
  readonly names: string[] = [];
  ttrMs = 0;
  ttlMs = 0;
  /** lease, run, result: the wait timeout in ms. */
  timeoutMs = 0;
  /** schedule: the time, ms since the Unix epoch (a fraction below 1 ms dropped). */
  scheduleMs = 0;
  /**
   * workq server: a schedule of Go's zero time (0001-01-01T00:00:00Z) is taken as not scheduled
   * (job.Time is zero): no "time + TTL is past" check, TTL counts from creation, the job is due
   * at once and `inspect` shows no `time` key.
   */
  scheduleZero = false;
  /** -priority, default 0. workq server: a signed int32, for schedule and run too (their spec sections say 0..2^32). */
  priority = 0;
  /** -max-attempts, -max-fails (add, schedule), default 0: unlimited. */
  maxAttempts = 0;
  maxFails = 0;
  /** inspect queues / jobs / scheduled-jobs. */
  offset = 0;
  limit = 0;
  /** The payload (add, schedule, run) or result (complete, fail): body[bodyStart, bodyEnd), during command() only. */
  body: Uint8Array = EMPTY;
  bodyStart = 0;
  bodyEnd = 0;

  private state = S_LINE;
  private readonly scratch = new Uint8Array(LINE_BYTES_MAX);
  private scratchLen = 0;
  private bodyBuf: Uint8Array | null = null; // a payload that straddles reads
  private bodyHave = 0;
  private bodyWant = 0; // payload + 2
  private skipLeft = 0;
  private pendingCmd = 0;
  private pendingReply: Buffer | null = null; // the verdict on a payload command, given after its payload
  private sizeReply: Buffer = REPLY_INVALID_PAYLOAD_SIZE;

  // Tokens of the current line: positional arguments (the command name first) and flags.
  private readonly argS = new Int32Array(LINE_BYTES_MAX / 2 + 1);
  private readonly argE = new Int32Array(LINE_BYTES_MAX / 2 + 1);
  private argc = 0;
  private flagc = 0;
  private priS = -1;
  private priE = 0;
  private attS = -1;
  private attE = 0;
  private failS = -1;
  private failE = 0;
  private readonly otherFlags = new Set<string>();
  private readonly idTextBuf = Buffer.alloc(36);

  constructor(sink: WorkqSink, options: ParserOptions = {}) {
    super();
    this.sink = sink;
    this.clock = options.clock ?? Date.now;
  }

  /** Consumes bytes of `buf` from `pos`; returns where it stopped. */
  protected override feed(buf: Buffer, pos: number): number {
    const end = buf.length;
    while (pos < end && !this.paused) {
      switch (this.state) {
        case S_LINE:
          pos = this.lineStep(buf, pos, end);
          break;
        case S_ENDLINE: {
          const lf = buf.indexOf(LF, pos);
          if (lf === -1) return end;
          this.state = S_LINE;
          if (!this.sink.reply(REPLY_COMMAND_TOO_LONG)) this.paused = true;
          pos = lf + 1;
          break;
        }
        case S_BODY:
          pos = this.bodyStep(buf, pos, end);
          break;
        case S_SKIP: {
          const n = Math.min(this.skipLeft, end - pos);
          this.skipLeft -= n;
          pos += n;
          if (this.skipLeft <= 0) this.state = S_LINE;
          break;
        }
        default: // S_CLOSED
          return end;
      }
    }
    return pos;
  }

  // The server reads a line with bufio's ReadBytes('\n'). A line, \n included, longer than
  // LINE_BYTES_MAX is dropped up to its \n and answered REPLY_COMMAND_TOO_LONG.
  private lineStep(buf: Buffer, pos: number, end: number): number {
    if (this.scratchLen === 0) {
      const limit = Math.min(end, pos + LINE_BYTES_MAX);
      const lf = buf.indexOf(LF, pos);
      if (lf !== -1 && lf < limit) {
        this.lineDone(buf, pos, lf);
        return lf + 1;
      }
      if (limit - pos === LINE_BYTES_MAX) {
        this.state = S_ENDLINE;
        return limit;
      }
      this.scratch.set(buf.subarray(pos, end), 0);
      this.scratchLen = end - pos;
      return end;
    }
    // The line started in an earlier read: continue it in the scratch buffer.
    const had = this.scratchLen;
    const take = Math.min(LINE_BYTES_MAX - had, end - pos);
    let lf = buf.indexOf(LF, pos);
    if (lf >= pos + take) lf = -1;
    if (lf !== -1) {
      this.scratch.set(buf.subarray(pos, lf), had);
      this.scratchLen = 0;
      this.lineDone(this.scratch, 0, had + (lf - pos));
      return lf + 1;
    }
    this.scratch.set(buf.subarray(pos, pos + take), had);
    if (had + take === LINE_BYTES_MAX) {
      this.scratchLen = 0;
      this.state = S_ENDLINE;
    } else {
      this.scratchLen = had + take;
    }
    return pos + take;
  }

  /** buf[s, lf) is a line, lf the index of its \n. */
  private lineDone(buf: Uint8Array, s: number, lf: number): void {
    // workq server: prot.ParseCmd splits lines at \n; `len(line) < 2` or no \r before the \n is
    // ErrReadErr, on which the server closes the connection without a reply. So do we.
    if (lf === s || buf[lf - 1] !== CR) {
      this.state = S_CLOSED;
      this.sink.drop();
      return;
    }
    if (!this.dispatch(buf, s, lf - 1)) this.paused = true;
  }

  private bodyStep(buf: Buffer, pos: number, end: number): number {
    const want = this.bodyWant;
    if (this.bodyBuf === null) {
      if (end - pos >= want) {
        // The whole payload is in this read: hand out a view, no copy.
        this.state = S_LINE;
        if (!this.bodyDone(buf, pos, pos + want - 2)) this.paused = true;
        return pos + want;
      }
      this.bodyBuf = new Uint8Array(want);
      this.bodyHave = 0;
    }
    const n = Math.min(want - this.bodyHave, end - pos);
    this.bodyBuf.set(buf.subarray(pos, pos + n), this.bodyHave);
    this.bodyHave += n;
    if (this.bodyHave === want) {
      const body = this.bodyBuf;
      this.bodyBuf = null;
      this.state = S_LINE;
      if (!this.bodyDone(body, 0, want - 2)) this.paused = true;
    }
    return pos + n;
  }

  /** The payload buf[s, e) and its two trailer bytes have been read. */
  private bodyDone(buf: Uint8Array, s: number, e: number): boolean {
    // prot.readPayload: the two bytes after the payload must be \r\n (they are consumed either
    // way). workq server: it reads them with one bufio Read, which returns a single byte when
    // only one is buffered, so a good trailer split across TCP segments can fail there; here
    // the outcome never depends on how the input was split.
    if (buf[e] !== CR || buf[e + 1] !== LF) return this.sink.reply(this.sizeReply);
    if (this.pendingReply !== null) return this.sink.reply(this.pendingReply);
    // job.ValidateTime(j.Expiration()), the controller's last check that can fail.
    if (this.pendingCmd === CMD_SCHEDULE && !this.scheduleZero && this.clock() > this.scheduleMs + this.ttlMs) {
      return this.sink.reply(REPLY_INVALID_TIME);
    }
    this.body = buf;
    this.bodyStart = s;
    this.bodyEnd = e;
    const go = this.sink.command(this.pendingCmd);
    this.body = EMPTY; // do not hold on to the socket's chunk
    return go;
  }

  // ---- tokens: prot.ParseCmd ----

  /** A `-key=value` token. prot.ParseCmd: the key (after "-") and the value (up to a second "=", if any) must not be empty, nor the key repeat. */
  private addFlag(buf: Uint8Array, ts: number, eq: number, te: number): boolean {
    if (eq - ts <= 1) return false;
    let ve = eq + 1;
    while (ve < te && buf[ve] !== EQ) ve++;
    if (ve === eq + 1) return false;
    const ks = ts + 1;
    if (equals(buf, ks, eq, F_PRIORITY)) {
      if (this.priS >= 0) return false;
      this.priS = eq + 1;
      this.priE = ve;
    } else if (equals(buf, ks, eq, F_MAX_ATTEMPTS)) {
      if (this.attS >= 0) return false;
      this.attS = eq + 1;
      this.attE = ve;
    } else if (equals(buf, ks, eq, F_MAX_FAILS)) {
      if (this.failS >= 0) return false;
      this.failS = eq + 1;
      this.failE = ve;
    } else {
      const key = Buffer.from(buf.buffer, buf.byteOffset + ks, eq - ks).toString('latin1');
      if (this.otherFlags.has(key)) return false;
      this.otherFlags.add(key);
    }
    this.flagc++;
    return true;
  }

  /** One command line buf[s, e), \r\n excluded. */
  private dispatch(buf: Uint8Array, s: number, e: number): boolean {
    const sink = this.sink;
    // bytes.Split on ' ': empty pieces are skipped; a piece starting with '-' that holds '=' is a
    // flag, anything else (a negative number too) a positional argument.
    const argS = this.argS;
    const argE = this.argE;
    let argc = 0;
    this.flagc = 0;
    this.priS = this.attS = this.failS = -1;
    if (this.otherFlags.size > 0) this.otherFlags.clear();
    let p = s;
    while (p < e) {
      if (buf[p] === SP) {
        p++;
        continue;
      }
      const ts = p;
      let eq = -1;
      while (p < e && buf[p] !== SP) {
        if (eq < 0 && buf[p] === EQ) eq = p;
        p++;
      }
      if (buf[ts] !== DASH || eq < 0) {
        argS[argc] = ts;
        argE[argc] = p;
        argc++;
      } else if (!this.addFlag(buf, ts, eq, p)) {
        return sink.reply(REPLY_INVALID_FLAGS); // before the command name is even looked at
      }
    }
    this.argc = argc;
    // The command is the text before the first space: a leading space, or a flag first, is unknown.
    if (argc === 0 || argS[0] !== s) return sink.reply(REPLY_UNKNOWN_COMMAND);
    const ns = s;
    const ne = argE[0];
    switch (ne - ns) {
      case 3:
        if (equals(buf, ns, ne, W_ADD)) return this.payloadLine(CMD_ADD, buf, 6, 5, REPLY_INVALID_PAYLOAD_SIZE);
        if (equals(buf, ns, ne, W_RUN)) return this.payloadLine(CMD_RUN, buf, 6, 5, REPLY_INVALID_PAYLOAD_SIZE);
        break;
      case 4:
        if (equals(buf, ns, ne, W_FAIL)) return this.payloadLine(CMD_FAIL, buf, 3, 2, REPLY_INVALID_RESULT_SIZE);
        break;
      case 5:
        if (equals(buf, ns, ne, W_LEASE)) return this.lease(buf);
        break;
      case 6:
        if (equals(buf, ns, ne, W_RESULT)) return this.result(buf);
        if (equals(buf, ns, ne, W_DELETE)) return this.delete(buf);
        break;
      case 7:
        if (equals(buf, ns, ne, W_INSPECT)) return this.inspect(buf);
        break;
      case 8:
        if (equals(buf, ns, ne, W_SCHEDULE)) return this.payloadLine(CMD_SCHEDULE, buf, 7, 6, REPLY_INVALID_PAYLOAD_SIZE);
        if (equals(buf, ns, ne, W_COMPLETE)) return this.payloadLine(CMD_COMPLETE, buf, 3, 2, REPLY_INVALID_PAYLOAD_SIZE);
        break;
    }
    return sink.reply(REPLY_UNKNOWN_COMMAND);
  }

  // ---- payload commands ----

  /**
   * prot.ParseCmd for add/schedule/run/complete/fail: exactly `argc` positional arguments (the
   * command name counted), then the size (strconv.Atoi; negative or over 1 MiB is an error).
   * fail says "Invalid result size" where the others say "Invalid payload size".
   */
  private payloadLine(cmd: number, buf: Uint8Array, argc: number, sizeArg: number, sizeReply: Buffer): boolean {
    if (this.argc !== argc) return this.sink.reply(REPLY_INVALID_ARGS);
    const size = atoi(buf, this.argS[sizeArg], this.argE[sizeArg]);
    // workq server: a bad size (like bad flags or a wrong argument count before it) is answered
    // at once and the payload is not read, so its bytes are then parsed as commands. The same
    // here, except for a size over the limit: its payload and trailer are skipped (as beanstalkd
    // skips a JOB_TOO_BIG body), where the server would parse them as commands.
    if (Number.isNaN(size) || size < 0) return this.sink.reply(sizeReply);
    if (size > PAYLOAD_BYTES_MAX) {
      this.state = S_SKIP;
      this.skipLeft = size + 2;
      return this.sink.reply(sizeReply);
    }
    this.pendingCmd = cmd;
    this.sizeReply = sizeReply;
    this.pendingReply = this.checkPayloadCommand(cmd, buf);
    this.bodyWant = size + 2;
    this.state = S_BODY;
    return true;
  }

  /** Steps 2 and 3 for a payload command, while its line is at hand; the verdict waits for the payload. */
  private checkPayloadCommand(cmd: number, buf: Uint8Array): Buffer | null {
    const argS = this.argS;
    const argE = this.argE;
    this.maxAttempts = 0;
    this.maxFails = 0;
    this.priority = 0;
    this.scheduleZero = false;
    switch (cmd) {
      case CMD_ADD:
      case CMD_SCHEDULE: {
        // handlers.buildJobFrom{Add,Sched}Cmd: args id name ttr ttl [time] size.
        if (this.flagc > JOB_FLAGS_MAX) return REPLY_INVALID_ARGS;
        if (!this.parseId(buf, argS[1], argE[1])) return REPLY_INVALID_ID;
        const ttr = parseUint(buf, argS[3], argE[3], 32);
        if (ttr < 0) return REPLY_INVALID_TTR;
        const ttl = parseUint(buf, argS[4], argE[4], 64);
        if (ttl < 0) return REPLY_INVALID_TTL;
        if (cmd === CMD_SCHEDULE && !this.parseTime(buf, argS[5], argE[5])) return REPLY_INVALID_TIME;
        const err = this.parseJobFlags(buf);
        if (err !== null) return err;
        // job.ValidateAddJob (schedule's too): id, name, ttr, ttl, then time (after the payload).
        // For add that time is created + TTL, never past with TTL >= 1 ms: not checked.
        if (!this.idIsV4()) return REPLY_INVALID_ID;
        if (!this.parseName(buf, argS[2], argE[2])) return REPLY_INVALID_NAME;
        if (ttr === 0 || ttr > TTR_MS_MAX) return REPLY_INVALID_TTR;
        if (ttl === 0 || ttl > TTL_MS_MAX) return REPLY_INVALID_TTL;
        this.ttrMs = ttr;
        this.ttlMs = ttl;
        return null;
      }
      case CMD_RUN: {
        // handlers.buildJobFromRunCmd: args id name ttr wait-timeout size; one flag at most.
        // workq server: only -priority is read; any other single flag is accepted and ignored.
        if (this.flagc > RUN_FLAGS_MAX) return REPLY_INVALID_ARGS;
        if (!this.parseId(buf, argS[1], argE[1])) return REPLY_INVALID_ID;
        const ttr = parseUint(buf, argS[3], argE[3], 32);
        if (ttr < 0) return REPLY_INVALID_TTR;
        if (this.priS >= 0) {
          const pri = parseInt32(buf, this.priS, this.priE);
          if (Number.isNaN(pri)) return REPLY_INVALID_PRIORITY;
          this.priority = pri;
        }
        // handlers.parseTimeout, in the run handler before the controller.
        const timeout = parseUint(buf, argS[4], argE[4], 32);
        if (timeout < 0 || timeout > WAIT_TIMEOUT_MS_MAX) return REPLY_INVALID_WAIT_TIMEOUT;
        // job.ValidateRunJob: id, name, ttr.
        if (!this.idIsV4()) return REPLY_INVALID_ID;
        if (!this.parseName(buf, argS[2], argE[2])) return REPLY_INVALID_NAME;
        if (ttr === 0 || ttr > TTR_MS_MAX) return REPLY_INVALID_TTR;
        this.ttrMs = ttr;
        this.timeoutMs = timeout;
        return null;
      }
      default: {
        // complete / fail: args id size; no flags.
        if (this.flagc !== 0) return REPLY_INVALID_ARGS;
        if (!this.parseId(buf, argS[1], argE[1])) return REPLY_INVALID_ID;
        if (!this.idIsV4()) return REPLY_INVALID_ID; // Controller.{Complete,Fail}: ValidateID
        return null;
      }
    }
  }

  /** -max-attempts (uint8), -max-fails (uint8), -priority (int32), checked in that order. */
  private parseJobFlags(buf: Uint8Array): Buffer | null {
    if (this.attS >= 0) {
      const v = parseUint(buf, this.attS, this.attE, 8);
      if (v < 0) return REPLY_INVALID_MAX_ATTEMPTS;
      this.maxAttempts = v;
    }
    if (this.failS >= 0) {
      const v = parseUint(buf, this.failS, this.failE, 8);
      if (v < 0) return REPLY_INVALID_MAX_FAILS;
      this.maxFails = v;
    }
    if (this.priS >= 0) {
      const v = parseInt32(buf, this.priS, this.priE);
      if (Number.isNaN(v)) return REPLY_INVALID_PRIORITY;
      this.priority = v;
    }
    return null;
  }

  // ---- line-only commands ----

  private lease(buf: Uint8Array): boolean {
    const sink = this.sink;
    const argc = this.argc;
    if (argc < 3 || this.flagc !== 0) return sink.reply(REPLY_INVALID_ARGS);
    const timeout = parseUint(buf, this.argS[argc - 1], this.argE[argc - 1], 32);
    if (timeout < 0 || timeout > WAIT_TIMEOUT_MS_MAX) return sink.reply(REPLY_INVALID_WAIT_TIMEOUT);
    // Controller.Lease: each name, in order (after the timeout, which the handler parses first).
    for (let i = 1; i < argc - 1; i++) {
      if (!this.validName(buf, this.argS[i], this.argE[i])) return sink.reply(REPLY_INVALID_NAME);
    }
    const names = this.names;
    names.length = 0;
    for (let i = 1; i < argc - 1; i++) names.push(this.text(buf, this.argS[i], this.argE[i]));
    this.timeoutMs = timeout;
    return sink.command(CMD_LEASE);
  }

  private result(buf: Uint8Array): boolean {
    const sink = this.sink;
    if (this.argc !== 3 || this.flagc !== 0) return sink.reply(REPLY_INVALID_ARGS);
    if (!this.parseId(buf, this.argS[1], this.argE[1]) || !this.idIsV4()) return sink.reply(REPLY_INVALID_ID);
    const timeout = parseUint(buf, this.argS[2], this.argE[2], 32);
    if (timeout < 0 || timeout > WAIT_TIMEOUT_MS_MAX) return sink.reply(REPLY_INVALID_WAIT_TIMEOUT);
    this.timeoutMs = timeout;
    return sink.command(CMD_RESULT);
  }

  private delete(buf: Uint8Array): boolean {
    const sink = this.sink;
    if (this.argc !== 2 || this.flagc !== 0) return sink.reply(REPLY_INVALID_ARGS);
    if (!this.parseId(buf, this.argS[1], this.argE[1])) return sink.reply(REPLY_INVALID_ID);
    // workq server: Controller.Delete refuses a non-v4 id with ErrInvalidID, and the delete
    // handler, which only looks for ErrNotFound, answers that with +OK.
    if (!this.idIsV4()) return sink.reply(REPLY_OK);
    return sink.command(CMD_DELETE);
  }

  /** handlers.InspectHandler routes on the object; each sub-handler counts its own arguments. */
  private inspect(buf: Uint8Array): boolean {
    const sink = this.sink;
    const argS = this.argS;
    const argE = this.argE;
    const argc = this.argc;
    if (argc < 2) return sink.reply(REPLY_INVALID_ARGS); // prot: at least the object
    const os = argS[1];
    const oe = argE[1];
    const n = argc - 1; // the handlers' ArgC: the object and what follows
    const noFlags = this.flagc === 0;
    if (equals(buf, os, oe, W_SERVER)) {
      if (n !== 1 || !noFlags) return sink.reply(REPLY_INVALID_ARGS);
      return sink.command(CMD_INSPECT_SERVER);
    }
    if (equals(buf, os, oe, W_QUEUES)) {
      if (n !== 3 || !noFlags) return sink.reply(REPLY_INVALID_ARGS);
      const err = this.parsePage(buf, 2);
      if (err !== null) return sink.reply(err);
      return sink.command(CMD_INSPECT_QUEUES);
    }
    if (equals(buf, os, oe, W_QUEUE)) {
      if (n !== 2 || !noFlags) return sink.reply(REPLY_INVALID_ARGS);
      if (!this.parseName(buf, argS[2], argE[2])) return sink.reply(REPLY_INVALID_NAME);
      return sink.command(CMD_INSPECT_QUEUE);
    }
    const jobs = equals(buf, os, oe, W_JOBS);
    if (jobs || equals(buf, os, oe, W_SCHEDULED_JOBS)) {
      if (n !== 4 || !noFlags) return sink.reply(REPLY_INVALID_ARGS);
      if (!this.parseName(buf, argS[2], argE[2])) return sink.reply(REPLY_INVALID_NAME);
      const err = this.parsePage(buf, 3);
      if (err !== null) return sink.reply(err);
      return sink.command(jobs ? CMD_INSPECT_JOBS : CMD_INSPECT_SCHEDULED_JOBS);
    }
    if (equals(buf, os, oe, W_JOB)) {
      if (n !== 2 || !noFlags) return sink.reply(REPLY_INVALID_ARGS);
      // Only parsed, not held to v4: a non-v4 id is simply not found.
      if (!this.parseId(buf, argS[2], argE[2])) return sink.reply(REPLY_INVALID_ID);
      return sink.command(CMD_INSPECT_JOB);
    }
    return sink.reply(REPLY_UNKNOWN_COMMAND);
  }

  /** Cursor offset (uint32) at argument i, limit (uint16, 1..100) at i + 1. */
  private parsePage(buf: Uint8Array, i: number): Buffer | null {
    const offset = parseUint(buf, this.argS[i], this.argE[i], 32);
    if (offset < 0) return REPLY_INVALID_CURSOR_OFFSET;
    const limit = parseUint(buf, this.argS[i + 1], this.argE[i + 1], 16);
    if (limit < 1 || limit > INSPECT_LIMIT_MAX) return REPLY_INVALID_LIMIT;
    this.offset = offset;
    this.limit = limit;
    return null;
  }

  // ---- values ----

  private text(buf: Uint8Array, s: number, e: number): string {
    return Buffer.from(buf.buffer, buf.byteOffset + s, e - s).toString('latin1');
  }

  /** job.ValidateName: 1..255 bytes of [a-zA-Z0-9_.-]. */
  private validName(buf: Uint8Array, s: number, e: number): boolean {
    if (e - s < 1 || e - s > NAME_BYTES_MAX) return false;
    for (let i = s; i < e; i++) if (!NAME_CHAR[buf[i]]) return false;
    return true;
  }

  private parseName(buf: Uint8Array, s: number, e: number): boolean {
    if (!this.validName(buf, s, e)) return false;
    this.name = this.text(buf, s, e);
    return true;
  }

  /**
   * uuid.FromString of satori/go.uuid v1.0.0, as the server's parseID calls it. workq server:
   * that version is lenient: at least 32 bytes; an optional "urn:uuid:" or "{" prefix; five
   * groups of 8-4-4-4-12 hex digits of either case, each optionally preceded by one "-"; and
   * anything after the 32nd digit ignored ("{...}" passes by that, so does "...xyz"). Input too
   * short for its groups makes that version index out of range and the server crash; here it is
   * "Invalid ID". On success, fills `id` and `idText` (canonical, lowercase).
   */
  private parseId(buf: Uint8Array, s: number, e: number): boolean {
    if (e - s < 32) return false;
    let p = s;
    if (equals(buf, p, p + 9, W_URN)) p += 9;
    else if (buf[p] === 123) p++; // '{'
    const id = this.id;
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
    const t = this.idTextBuf;
    let q = 0;
    for (let i = 0; i < 16; i++) {
      if (i === 4 || i === 6 || i === 8 || i === 10) t[q++] = DASH;
      t[q++] = HEX_LOWER[id[i] >> 4];
      t[q++] = HEX_LOWER[id[i] & 15];
    }
    this.idText = t.toString('latin1');
    return true;
  }

  /** job.ValidateID: not nil, version 4, RFC 4122 variant. */
  private idIsV4(): boolean {
    const id = this.id;
    return id[6] >> 4 === 4 && (id[8] & 0xc0) === 0x80;
  }

  /**
   * workq server: the spec asks for RFC 3339 UTC "2020-02-02T00:00:00Z"; the server accepts
   * what time.Parse("2006-01-02T15:04:05Z", s) accepts, as current Go parses that layout: a
   * 4-digit year; 2-digit month, day, minute, second; an hour of 1 or 2 digits (Go's "15" is not
   * fixed-width); a fraction of seconds ("." or "," then digits, only the first 9 count) although
   * the layout has none; then a literal "Z". Ranges as Go checks them, the day against the
   * month's length (Go 1.7, which built 0.2, let day 00 and 10+-digit fractions through
   * differently; current Go is followed). Sets scheduleMs and scheduleZero.
   */
  private parseTime(buf: Uint8Array, s: number, e: number): boolean {
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
    this.scheduleMs =
      daysFromCivil(year, month, day) * 86400000 + hour * 3600000 + minute * 60000 + second * 1000 + Math.floor(nanos / 1e6);
    this.scheduleZero = this.scheduleMs === GO_ZERO_TIME_MS && nanos === 0;
    return true;
  }
}
