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
//
// This file is the framing; the checks of steps 2 and 3 are in validate.ts (Parser extends its
// CommandValidator) and the value parsers they use (numbers, UUIDs, times) in values.ts.

import { CMD_ADD, CMD_COMPLETE, CMD_FAIL, CMD_RUN, CMD_SCHEDULE } from './commands.ts';
import {
  REPLY_COMMAND_TOO_LONG, REPLY_INVALID_ARGS, REPLY_INVALID_FLAGS, REPLY_INVALID_PAYLOAD_SIZE,
  REPLY_INVALID_RESULT_SIZE, REPLY_INVALID_TIME, REPLY_UNKNOWN_COMMAND,
} from './replies.ts';
import { CommandValidator, type CommandSink } from './validate.ts';
import { atoi, bytes, equals } from './values.ts';

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

/** What the parser reports to: the checks' CommandSink (validate.ts: command, reply), and drop. */
export interface WorkqSink extends CommandSink {
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

const W_ADD = bytes('add');
const W_RUN = bytes('run');
const W_FAIL = bytes('fail');
const W_LEASE = bytes('lease');
const W_RESULT = bytes('result');
const W_DELETE = bytes('delete');
const W_INSPECT = bytes('inspect');
const W_SCHEDULE = bytes('schedule');
const W_COMPLETE = bytes('complete');
const F_PRIORITY = bytes('priority');
const F_MAX_ATTEMPTS = bytes('max-attempts');
const F_MAX_FAILS = bytes('max-fails');

export class Parser extends CommandValidator {
  readonly sink: WorkqSink;
  readonly clock: () => number;

  // The last command's payload: the one argument the framing fills (the checks in validate.ts
  // fill the others).
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

  // Tokens of the current line: positional arguments (the command name first) and flags; the
  // checks (validate.ts) read all but otherFlags.
  protected readonly argS = new Int32Array(LINE_BYTES_MAX / 2 + 1);
  protected readonly argE = new Int32Array(LINE_BYTES_MAX / 2 + 1);
  protected argc = 0;
  protected flagc = 0;
  protected priS = -1;
  protected priE = 0;
  protected attS = -1;
  protected attE = 0;
  protected failS = -1;
  protected failE = 0;
  private readonly otherFlags = new Set<string>();

  constructor(sink: WorkqSink, options: ParserOptions = {}) {
    super();
    this.sink = sink;
    this.clock = options.clock ?? Date.now;
  }

  /** Consumes bytes of `buf` from `pos` up to `end`; returns where it stopped. */
  protected override feed(whole: Buffer, pos: number, end: number): number {
    // This parser searches with indexOf, which reads to the buffer's end: it parses a view.
    const buf = end < whole.length ? whole.subarray(0, end) : whole;
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
}
