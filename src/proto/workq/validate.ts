// Steps 2 and 3 of the workq server's validation (parser.ts lists all three), once the framing
// has split a line into arguments and flags and read any payload's size: each command's syntax
// as its handler checks it (flag count, id, numbers, time, flags' values), then the ranges the
// job controller checks (UUIDv4, name, TTR, TTL), in the server's order, so that a command with
// several faults gets the server's error. What passes fills the arguments of the last command.
//
// Parser (parser.ts) extends CommandValidator: the framing owns the line's tokens and calls these
// checks, which see the tokens through the abstract fields below. A base class rather than an
// object of its own because the session reads the arguments as the parser's fields.

import { StreamParser } from '../stream.ts';
import {
  CMD_ADD, CMD_DELETE, CMD_INSPECT_JOB, CMD_INSPECT_JOBS, CMD_INSPECT_QUEUE, CMD_INSPECT_QUEUES,
  CMD_INSPECT_SCHEDULED_JOBS, CMD_INSPECT_SERVER, CMD_LEASE, CMD_RESULT, CMD_RUN, CMD_SCHEDULE,
} from './commands.ts';
import {
  REPLY_INVALID_ARGS, REPLY_INVALID_CURSOR_OFFSET, REPLY_INVALID_ID, REPLY_INVALID_LIMIT,
  REPLY_INVALID_MAX_ATTEMPTS, REPLY_INVALID_MAX_FAILS, REPLY_INVALID_NAME, REPLY_INVALID_PRIORITY,
  REPLY_INVALID_TIME, REPLY_INVALID_TTL, REPLY_INVALID_TTR, REPLY_INVALID_WAIT_TIMEOUT, REPLY_OK,
  REPLY_UNKNOWN_COMMAND,
} from './replies.ts';
import { bytes, equals, parseInt32, parseTime, parseUint, parseUuid, text, uuidText } from './values.ts';

// ---- limits ----

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

// job.nameRe: ^[a-zA-Z0-9_.-]*$
const NAME_CHAR = new Uint8Array(256);
for (const ch of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-') NAME_CHAR[ch.charCodeAt(0)] = 1;

const W_SERVER = bytes('server');
const W_QUEUES = bytes('queues');
const W_QUEUE = bytes('queue');
const W_JOBS = bytes('jobs');
const W_SCHEDULED_JOBS = bytes('scheduled-jobs');
const W_JOB = bytes('job');

/** What the checks report to: the parser's sink (WorkqSink, parser.ts) but for the framing's drop(). */
export interface CommandSink {
  /**
   * A valid command; its arguments are in the parser's fields (valid until the next event; the
   * payload of add/schedule/run/complete/fail only during this call). Return false to stop
   * parsing until `resume()` (a blocking lease/run/result, a full output).
   */
  command(cmd: number): boolean;
  /** A reply decided by the parser itself: a `-CLIENT-ERROR`, or `+OK` (see delete). */
  reply(msg: Buffer): boolean;
}

export abstract class CommandValidator extends StreamParser {
  protected abstract readonly sink: CommandSink;

  // ---- the tokens of the current line, as the framing (parser.ts) found them ----
  /** Positional arguments buf[argS[i], argE[i]), i < argc, the command name first. */
  protected abstract readonly argS: Int32Array;
  protected abstract readonly argE: Int32Array;
  protected abstract argc: number;
  /** Flags on the line; the values of the three known ones are buf[priS, priE) etc. (start -1: absent). */
  protected abstract flagc: number;
  protected abstract priS: number;
  protected abstract priE: number;
  protected abstract attS: number;
  protected abstract attE: number;
  protected abstract failS: number;
  protected abstract failE: number;

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
  private readonly idTextBuf = Buffer.alloc(36);

  // ---- payload commands ----

  /** Steps 2 and 3 for a payload command, while its line is at hand; the verdict waits for the payload. */
  protected checkPayloadCommand(cmd: number, buf: Uint8Array): Buffer | null {
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
        if (cmd === CMD_SCHEDULE && !parseTime(buf, argS[5], argE[5], this)) return REPLY_INVALID_TIME;
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

  protected lease(buf: Uint8Array): boolean {
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
    for (let i = 1; i < argc - 1; i++) names.push(text(buf, this.argS[i], this.argE[i]));
    this.timeoutMs = timeout;
    return sink.command(CMD_LEASE);
  }

  protected result(buf: Uint8Array): boolean {
    const sink = this.sink;
    if (this.argc !== 3 || this.flagc !== 0) return sink.reply(REPLY_INVALID_ARGS);
    if (!this.parseId(buf, this.argS[1], this.argE[1]) || !this.idIsV4()) return sink.reply(REPLY_INVALID_ID);
    const timeout = parseUint(buf, this.argS[2], this.argE[2], 32);
    if (timeout < 0 || timeout > WAIT_TIMEOUT_MS_MAX) return sink.reply(REPLY_INVALID_WAIT_TIMEOUT);
    this.timeoutMs = timeout;
    return sink.command(CMD_RESULT);
  }

  protected delete(buf: Uint8Array): boolean {
    const sink = this.sink;
    if (this.argc !== 2 || this.flagc !== 0) return sink.reply(REPLY_INVALID_ARGS);
    if (!this.parseId(buf, this.argS[1], this.argE[1])) return sink.reply(REPLY_INVALID_ID);
    // workq server: Controller.Delete refuses a non-v4 id with ErrInvalidID, and the delete
    // handler, which only looks for ErrNotFound, answers that with +OK.
    if (!this.idIsV4()) return sink.reply(REPLY_OK);
    return sink.command(CMD_DELETE);
  }

  /** handlers.InspectHandler routes on the object; each sub-handler counts its own arguments. */
  protected inspect(buf: Uint8Array): boolean {
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

  // ---- names and ids (job.ValidateName, job.ValidateID) ----

  /** job.ValidateName: 1..255 bytes of [a-zA-Z0-9_.-]. */
  private validName(buf: Uint8Array, s: number, e: number): boolean {
    if (e - s < 1 || e - s > NAME_BYTES_MAX) return false;
    for (let i = s; i < e; i++) if (!NAME_CHAR[buf[i]]) return false;
    return true;
  }

  private parseName(buf: Uint8Array, s: number, e: number): boolean {
    if (!this.validName(buf, s, e)) return false;
    this.name = text(buf, s, e);
    return true;
  }

  /** The server's parseID: uuid.FromString (values.ts). On success, fills `id` and `idText` (canonical, lowercase). */
  private parseId(buf: Uint8Array, s: number, e: number): boolean {
    if (!parseUuid(buf, s, e, this.id)) return false;
    this.idText = uuidText(this.id, this.idTextBuf);
    return true;
  }

  /** job.ValidateID: not nil, version 4, RFC 4122 variant. */
  private idIsV4(): boolean {
    const id = this.id;
    return id[6] >> 4 === 4 && (id[8] & 0xc0) === 0x80;
  }
}
