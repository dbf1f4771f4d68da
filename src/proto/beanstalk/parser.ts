// Streaming parser of the beanstalk protocol, byte-exact with beanstalkd 1.12's prot.c framing.
//
// It parses in place: command lines and bodies are read straight out of the socket's chunk; only
// a line that straddles two reads is copied into a 224-byte scratch buffer (beanstalkd's own
// command buffer size), and only a body that straddles reads is copied into a body buffer.
// Validation and the `cmd-*` counting happen exactly where beanstalkd's dispatch_cmd does them,
// so odd inputs get beanstalkd's odd answers. The parser knows nothing of sockets or threads.

import { digitsGreater, I64_MAX_DIGITS, I64_MIN_DIGITS, sigDigits, U64_MAX_DIGITS } from '../digits.ts';
import { StreamParser } from '../stream.ts';
import {
  CMD_BURY, CMD_DELETE, CMD_IGNORE, CMD_KICK, CMD_KICK_JOB, CMD_LIST_TUBE_USED, CMD_LIST_TUBES,
  CMD_LIST_TUBES_WATCHED, CMD_PAUSE_TUBE, CMD_PEEK, CMD_PEEK_BURIED, CMD_PEEK_DELAYED,
  CMD_PEEK_READY, CMD_PUT, CMD_QUIT, CMD_RELEASE, CMD_RESERVE, CMD_RESERVE_JOB,
  CMD_RESERVE_TIMEOUT, CMD_STATS, CMD_STATS_JOB, CMD_STATS_TUBE, CMD_TOUCH, CMD_USE, CMD_WATCH,
} from './commands.ts';
import { REPLY_BAD_FORMAT, REPLY_EXPECTED_CRLF, REPLY_JOB_TOO_BIG, REPLY_UNKNOWN_COMMAND } from './replies.ts';

/** beanstalkd's LINE_BUF_SIZE: a command line, \r\n included, may be at most this long. */
export const LINE_BYTES_MAX = 224;
/** beanstalkd's MAX_TUBE_NAME_LEN - 1. */
export const TUBE_NAME_BYTES_MAX = 200;
/** beanstalkd's default `-z`. */
export const JOB_SIZE_DEFAULT = 65535;

export interface ParserSink {
  /** The `cmd-*` counter of `cmd` goes up (called exactly where beanstalkd counts). */
  count(cmd: number): void;
  /** A well-formed command; its arguments are in the parser's fields. Return false to stop
   * parsing until `resume()` (a blocking reserve, a barrier, a full output). */
  command(cmd: number): boolean;
  /** A put line was accepted: beanstalkd makes the job (and consumes a job id) here. */
  putStart(): void;
  /** The put's body, \r\n excluded, as a view valid only during the call. */
  putBody(buf: Uint8Array, start: number, end: number): boolean;
  /** A reply decided by the parser itself (BAD_FORMAT, UNKNOWN_COMMAND, JOB_TOO_BIG, EXPECTED_CRLF). */
  reply(msg: Buffer): boolean;
}

const S_COMMAND = 0;
const S_ENDLINE = 1; // discarding a too-long line up to its \r\n (beanstalkd STATE_WANT_ENDLINE)
const S_BODY = 2;
const S_SKIP = 3; // discarding a too-big body (beanstalkd STATE_BITBUCKET)

const CR = 13;
const LF = 10;

// beanstalkd's NAME_CHARS.
const NO_SCRATCH = new Uint8Array(0);
const NAME_CHAR = new Uint8Array(256);
for (const ch of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+/;.$_()') {
  NAME_CHAR[ch.charCodeAt(0)] = 1;
}
/** Whether `buf[s, e)` is a tube name beanstalkd takes: 1 to 200 of its NAME_CHARS, not starting with '-'. */
export function isTubeName(buf: Uint8Array, s: number, e: number): boolean {
  const len = e - s;
  if (len < 1 || len > TUBE_NAME_BYTES_MAX || buf[s] === 45) return false;
  for (let i = s; i < e; i++) if (!NAME_CHAR[buf[i]]) return false;
  return true;
}

// C's isspace, which strtol/strtoul skip.
const C_SPACE = new Uint8Array(256);
for (const c of [32, 9, 10, 11, 12, 13]) C_SPACE[c] = 1;

const bytes = (s: string): Uint8Array => Buffer.from(s, 'latin1');
const P_PUT = bytes('put ');
const P_PEEKJOB = bytes('peek ');
const P_PEEK_READY = bytes('peek-ready');
const P_PEEK_DELAYED = bytes('peek-delayed');
const P_PEEK_BURIED = bytes('peek-buried');
const P_RESERVE_TIMEOUT = bytes('reserve-with-timeout ');
const P_RESERVE_JOB = bytes('reserve-job ');
const P_RESERVE = bytes('reserve');
const P_DELETE = bytes('delete ');
const P_RELEASE = bytes('release ');
const P_BURY = bytes('bury ');
const P_KICK = bytes('kick ');
const P_KICKJOB = bytes('kick-job ');
const P_TOUCH = bytes('touch ');
const P_STATSJOB = bytes('stats-job ');
const P_STATS_TUBE = bytes('stats-tube ');
const P_STATS = bytes('stats');
const P_USE = bytes('use ');
const P_WATCH = bytes('watch ');
const P_IGNORE = bytes('ignore ');
const P_LIST_TUBES_WATCHED = bytes('list-tubes-watched');
const P_LIST_TUBE_USED = bytes('list-tube-used');
const P_LIST_TUBES = bytes('list-tubes');
const P_QUIT = bytes('quit');
const P_PAUSE_TUBE = bytes('pause-tube');


function hasPrefix(buf: Uint8Array, s: number, e: number, p: Uint8Array): boolean {
  if (e - s < p.length) return false;
  for (let i = 0; i < p.length; i++) if (buf[s + i] !== p[i]) return false;
  return true;
}



export class Parser extends StreamParser {
  readonly sink: ParserSink;
  jobSizeMax: number;

  // Arguments of the last command.
  id = 0;
  pri = 0;
  delaySec = 0;
  ttrSec = 0;
  bodyBytes = 0;
  timeoutSec = -1; // reserve-with-timeout; < 0 waits forever, as beanstalkd's int pending_timeout
  kickCount = 0;
  name = '';

  private state = S_COMMAND;
  /** Made when a line first straddles two reads (an idle connection holds none). */
  private scratch: Uint8Array = NO_SCRATCH;
  private scratchLen = 0;
  private body: Uint8Array | null = null; // a body that straddles reads
  private bodyHave = 0;
  private skipLeft = 0;
  private skipReply: Buffer = REPLY_JOB_TOO_BIG;
  private num = 0; // value of the last read number
  private numEnd = 0; // offset after it

  constructor(sink: ParserSink, jobSizeMax = JOB_SIZE_DEFAULT) {
    super();
    this.sink = sink;
    this.jobSizeMax = jobSizeMax;
  }

  /** Consumes bytes of `buf` from `pos` up to `end`; returns where it stopped (`end` when all used). */
  protected override feed(buf: Buffer, pos: number, end: number): number {
    while (pos < end && !this.paused) {
      switch (this.state) {
        case S_COMMAND:
        case S_ENDLINE:
          pos = this.lineStep(buf, pos, end);
          break;
        case S_BODY:
          pos = this.bodyStep(buf, pos, end);
          break;
        case S_SKIP: {
          const n = Math.min(this.skipLeft, end - pos);
          this.skipLeft -= n;
          pos += n;
          if (this.skipLeft === 0) {
            this.state = S_COMMAND;
            if (!this.sink.reply(this.skipReply)) this.paused = true;
          }
          break;
        }
      }
    }
    return pos;
  }

  // beanstalkd looks for the FIRST \r among the bytes it holds (all but the last one); the line
  // ends there only if \n follows. With LINE_BYTES_MAX bytes held and no line end, the line is
  // too long: it is dropped and the rest up to the next \r\n earns BAD_FORMAT.
  private lineStep(buf: Buffer, pos: number, end: number): number {
    if (this.scratchLen === 0) {
      const n = Math.min(LINE_BYTES_MAX, end - pos);
      const limit = pos + n - 1;
      let cr = pos;
      while (cr < limit && buf[cr] !== CR) cr++;
      if (cr < limit) {
        if (buf[cr + 1] === LF) {
          this.lineDone(buf, pos, cr);
          return cr + 2;
        }
        // A stray \r: beanstalkd will find no line end in this window until it fills up.
      }
      if (n === LINE_BYTES_MAX) {
        this.windowFull();
        return pos + LINE_BYTES_MAX;
      }
      if (this.scratch.length === 0) this.scratch = new Uint8Array(LINE_BYTES_MAX);
      this.scratch.set(buf.subarray(pos, end), 0);
      this.scratchLen = end - pos;
      return end;
    }
    // The line started in an earlier read: continue it in the scratch buffer.
    const had = this.scratchLen;
    const take = Math.min(LINE_BYTES_MAX - had, end - pos);
    this.scratch.set(buf.subarray(pos, pos + take), had);
    const n = had + take;
    const sc = this.scratch;
    let cr = -1;
    for (let i = 0; i < n - 1; i++) {
      if (sc[i] === CR) {
        cr = i;
        break;
      }
    }
    if (cr !== -1 && sc[cr + 1] === LF) {
      this.scratchLen = 0;
      this.lineDone(sc, 0, cr);
      return pos + (cr + 2 - had);
    }
    if (n === LINE_BYTES_MAX) {
      this.scratchLen = 0;
      this.windowFull();
      return pos + take;
    }
    this.scratchLen = n;
    return pos + take;
  }

  private windowFull(): void {
    this.state = S_ENDLINE;
  }

  private lineDone(buf: Uint8Array, s: number, e: number): void {
    if (this.state === S_ENDLINE) {
      this.state = S_COMMAND;
      if (!this.sink.reply(REPLY_BAD_FORMAT)) this.paused = true;
      return;
    }
    if (!this.dispatch(buf, s, e)) this.paused = true;
  }

  private bodyStep(buf: Buffer, pos: number, end: number): number {
    const want = this.bodyBytes + 2;
    if (this.body === null) {
      if (end - pos >= want) {
        // The whole body is in this read: hand out a view, no copy.
        this.state = S_COMMAND;
        const last = pos + want;
        const ok = buf[last - 2] === CR && buf[last - 1] === LF;
        const go = ok ? this.sink.putBody(buf, pos, last - 2) : this.sink.reply(REPLY_EXPECTED_CRLF);
        if (!go) this.paused = true;
        return last;
      }
      this.body = new Uint8Array(want);
      this.bodyHave = 0;
    }
    const n = Math.min(want - this.bodyHave, end - pos);
    this.body.set(buf.subarray(pos, pos + n), this.bodyHave);
    this.bodyHave += n;
    pos += n;
    if (this.bodyHave === want) {
      const body = this.body;
      this.body = null;
      this.state = S_COMMAND;
      const ok = body[want - 2] === CR && body[want - 1] === LF;
      const go = ok ? this.sink.putBody(body, 0, want - 2) : this.sink.reply(REPLY_EXPECTED_CRLF);
      if (!go) this.paused = true;
    }
    return pos;
  }

  // ---- numbers, as beanstalkd's read_u32 / read_u64 / strtol / strtoul read them ----

  /** read_u32/read_u64: spaces, then a digit is required; with mustEnd the number must end the line. */
  private readUint(buf: Uint8Array, p: number, e: number, u64: boolean, mustEnd: boolean): boolean {
    while (p < e && buf[p] === 32) p++;
    if (p >= e || buf[p] < 48 || buf[p] > 57) return false;
    const start = p;
    let v = 0;
    while (p < e && buf[p] >= 48 && buf[p] <= 57) {
      v = v * 10 + (buf[p] - 48);
      p++;
    }
    if (p - start > 9) {
      const d = sigDigits(buf, start, p);
      if (digitsGreater(d, U64_MAX_DIGITS)) return false; // strtoumax: ERANGE
      if (!u64 && v > 0xffffffff) return false;
    }
    if (mustEnd && p !== e) return false;
    this.num = v;
    this.numEnd = p;
    return true;
  }

  /** C strtol/strtoul prefix: whitespace, sign, digits. Returns false on ERANGE; no digits => value 0, numEnd = -1. */
  private readCInt(buf: Uint8Array, p: number, e: number, unsigned: boolean): boolean {
    while (p < e && C_SPACE[buf[p]]) p++;
    let neg = false;
    if (p < e && (buf[p] === 43 || buf[p] === 45)) {
      neg = buf[p] === 45;
      p++;
    }
    const start = p;
    while (p < e && buf[p] >= 48 && buf[p] <= 57) p++;
    if (p === start) {
      this.num = 0;
      this.numEnd = -1;
      return true;
    }
    if (p - start <= 9) {
      // Below 10^9, so below 2^31 either way: the low 32 bits need no BigInt (a string and a
      // BigInt per reserve-with-timeout were on the profile of a client with one command in flight).
      let v = 0;
      for (let i = start; i < p; i++) v = v * 10 + (buf[i] - 48);
      this.num = !neg || v === 0 ? v : unsigned ? 4294967296 - v : -v;
      this.numEnd = p;
      return true;
    }
    const d = sigDigits(buf, start, p);
    if (unsigned) {
      if (digitsGreater(d, U64_MAX_DIGITS)) return false;
      // Negation happens in unsigned long; the caller keeps the low 32 bits (C's conversion to uint).
      let v = BigInt(d);
      if (neg) v = (1n << 64n) - v;
      this.num = Number(BigInt.asUintN(32, v));
    } else {
      // LONG_MIN's magnitude is one more than LONG_MAX's.
      if (digitsGreater(d, I64_MAX_DIGITS) && !(neg && d === I64_MIN_DIGITS)) return false;
      let v = BigInt(d);
      if (neg) v = -v;
      this.num = Number(BigInt.asIntN(32, v)); // (int) of a long
    }
    this.numEnd = p;
    return true;
  }

  private validTube(buf: Uint8Array, s: number, e: number): boolean {
    if (!isTubeName(buf, s, e)) return false;
    this.name = Buffer.from(buf.buffer, buf.byteOffset + s, e - s).toString('latin1');
    return true;
  }

  private bad(): boolean {
    return this.sink.reply(REPLY_BAD_FORMAT);
  }

  /** One command line buf[s, e), \r\n excluded. beanstalkd's dispatch_cmd. */
  private dispatch(buf: Uint8Array, s: number, e: number): boolean {
    const sink = this.sink;
    // beanstalkd NUL-terminates the line and compares lengths: a NUL inside is BAD_FORMAT.
    for (let i = s; i < e; i++) if (buf[i] === 0) return this.bad();
    const len = e - s;
    // Prefix tests in beanstalkd's which_cmd order (grouped by first byte, order kept within).
    switch (buf[s]) {
      case 112: // p
        if (hasPrefix(buf, s, e, P_PUT)) return this.put(buf, s + 4, e);
        if (hasPrefix(buf, s, e, P_PEEKJOB)) return this.idCommand(CMD_PEEK, buf, s + 5, e);
        if (hasPrefix(buf, s, e, P_PEEK_READY)) return this.bare(CMD_PEEK_READY, len, P_PEEK_READY.length);
        if (hasPrefix(buf, s, e, P_PEEK_DELAYED)) return this.bare(CMD_PEEK_DELAYED, len, P_PEEK_DELAYED.length);
        if (hasPrefix(buf, s, e, P_PEEK_BURIED)) return this.bare(CMD_PEEK_BURIED, len, P_PEEK_BURIED.length);
        if (hasPrefix(buf, s, e, P_PAUSE_TUBE)) return this.pauseTube(buf, s + P_PAUSE_TUBE.length, e);
        break;
      case 114: // r
        if (hasPrefix(buf, s, e, P_RESERVE_TIMEOUT)) {
          if (!this.readCInt(buf, s + P_RESERVE_TIMEOUT.length, e, false)) return this.bad();
          this.timeoutSec = this.num;
          sink.count(CMD_RESERVE_TIMEOUT);
          return sink.command(CMD_RESERVE_TIMEOUT);
        }
        if (hasPrefix(buf, s, e, P_RESERVE_JOB)) return this.idCommand(CMD_RESERVE_JOB, buf, s + P_RESERVE_JOB.length, e);
        if (hasPrefix(buf, s, e, P_RESERVE)) {
          if (len !== P_RESERVE.length) return this.bad();
          this.timeoutSec = -1;
          sink.count(CMD_RESERVE);
          return sink.command(CMD_RESERVE);
        }
        if (hasPrefix(buf, s, e, P_RELEASE)) {
          if (!this.readUint(buf, s + P_RELEASE.length, e, true, false)) return this.bad();
          this.id = this.num;
          if (!this.readUint(buf, this.numEnd, e, false, false)) return this.bad();
          this.pri = this.num;
          if (!this.readUint(buf, this.numEnd, e, false, true)) return this.bad();
          this.delaySec = this.num;
          sink.count(CMD_RELEASE);
          return sink.command(CMD_RELEASE);
        }
        break;
      case 100: // d
        if (hasPrefix(buf, s, e, P_DELETE)) return this.idCommand(CMD_DELETE, buf, s + P_DELETE.length, e);
        break;
      case 98: // b
        if (hasPrefix(buf, s, e, P_BURY)) {
          if (!this.readUint(buf, s + P_BURY.length, e, true, false)) return this.bad();
          this.id = this.num;
          if (!this.readUint(buf, this.numEnd, e, false, true)) return this.bad();
          this.pri = this.num;
          sink.count(CMD_BURY);
          return sink.command(CMD_BURY);
        }
        break;
      case 107: // k
        if (hasPrefix(buf, s, e, P_KICK)) {
          // strtoul: a sign is accepted (kick -1 kicks 2^32-1 jobs), trailing bytes are ignored.
          if (!this.readCInt(buf, s + P_KICK.length, e, true) || this.numEnd === -1) return this.bad();
          this.kickCount = this.num;
          sink.count(CMD_KICK);
          return sink.command(CMD_KICK);
        }
        if (hasPrefix(buf, s, e, P_KICKJOB)) return this.idCommand(CMD_KICK_JOB, buf, s + P_KICKJOB.length, e);
        break;
      case 116: // t
        if (hasPrefix(buf, s, e, P_TOUCH)) return this.idCommand(CMD_TOUCH, buf, s + P_TOUCH.length, e);
        break;
      case 115: // s
        if (hasPrefix(buf, s, e, P_STATSJOB)) return this.idCommand(CMD_STATS_JOB, buf, s + P_STATSJOB.length, e);
        if (hasPrefix(buf, s, e, P_STATS_TUBE)) return this.tubeCommand(CMD_STATS_TUBE, buf, s + P_STATS_TUBE.length, e);
        if (hasPrefix(buf, s, e, P_STATS)) return this.bare(CMD_STATS, len, P_STATS.length);
        break;
      case 117: // u
        if (hasPrefix(buf, s, e, P_USE)) return this.tubeCommand(CMD_USE, buf, s + P_USE.length, e);
        break;
      case 119: // w
        if (hasPrefix(buf, s, e, P_WATCH)) return this.tubeCommand(CMD_WATCH, buf, s + P_WATCH.length, e);
        break;
      case 105: // i
        if (hasPrefix(buf, s, e, P_IGNORE)) return this.tubeCommand(CMD_IGNORE, buf, s + P_IGNORE.length, e);
        break;
      case 108: // l
        if (hasPrefix(buf, s, e, P_LIST_TUBES_WATCHED)) return this.bare(CMD_LIST_TUBES_WATCHED, len, P_LIST_TUBES_WATCHED.length);
        if (hasPrefix(buf, s, e, P_LIST_TUBE_USED)) return this.bare(CMD_LIST_TUBE_USED, len, P_LIST_TUBE_USED.length);
        if (hasPrefix(buf, s, e, P_LIST_TUBES)) return this.bare(CMD_LIST_TUBES, len, P_LIST_TUBES.length);
        break;
      case 113: // q
        if (hasPrefix(buf, s, e, P_QUIT)) return sink.command(CMD_QUIT); // "quitx" quits too
        break;
    }
    return sink.reply(REPLY_UNKNOWN_COMMAND);
  }

  /** A command with no arguments: anything after the name is BAD_FORMAT. */
  private bare(cmd: number, len: number, nameLen: number): boolean {
    if (len !== nameLen) return this.bad();
    this.sink.count(cmd);
    return this.sink.command(cmd);
  }

  private idCommand(cmd: number, buf: Uint8Array, p: number, e: number): boolean {
    if (!this.readUint(buf, p, e, true, true)) return this.bad();
    this.id = this.num;
    this.sink.count(cmd);
    return this.sink.command(cmd);
  }

  private tubeCommand(cmd: number, buf: Uint8Array, p: number, e: number): boolean {
    if (!this.validTube(buf, p, e)) return this.bad();
    this.sink.count(cmd);
    return this.sink.command(cmd);
  }

  private pauseTube(buf: Uint8Array, p: number, e: number): boolean {
    // read_tube_name: spaces, then the longest run of name characters (the command's own name
    // need not be followed by a space: "pause-tubefoo 1" pauses "foo").
    while (p < e && buf[p] === 32) p++;
    const ns = p;
    while (p < e && NAME_CHAR[buf[p]]) p++;
    if (p === ns) return this.bad();
    if (!this.readUint(buf, p, e, false, true)) return this.bad();
    this.delaySec = this.num;
    this.sink.count(CMD_PAUSE_TUBE);
    if (!this.validTube(buf, ns, p)) return this.bad();
    return this.sink.command(CMD_PAUSE_TUBE);
  }

  private put(buf: Uint8Array, p: number, e: number): boolean {
    const sink = this.sink;
    if (!this.readUint(buf, p, e, false, false)) return this.bad();
    this.pri = this.num;
    if (!this.readUint(buf, this.numEnd, e, false, false)) return this.bad();
    this.delaySec = this.num;
    if (!this.readUint(buf, this.numEnd, e, false, false)) return this.bad();
    this.ttrSec = this.num;
    if (!this.readUint(buf, this.numEnd, e, false, false)) return this.bad();
    this.bodyBytes = this.num;
    sink.count(CMD_PUT);
    if (this.bodyBytes > this.jobSizeMax) {
      // Throw the body away, then answer (beanstalkd checks the size before trailing garbage).
      this.state = S_SKIP;
      this.skipLeft = this.bodyBytes + 2;
      this.skipReply = REPLY_JOB_TOO_BIG;
      return true;
    }
    if (this.numEnd !== e) return this.bad(); // trailing garbage; the body is then read as commands
    if (this.ttrSec < 1) this.ttrSec = 1;
    sink.putStart();
    this.state = S_BODY;
    return true;
  }
}
