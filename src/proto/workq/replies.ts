// Replies of the workq protocol, byte-exact with the workq server (github.com/iamduo/workq).
//
// The server writes every success reply as "+" followed by the handler's bytes (prot.SendReply)
// and every error as "-" followed by the error's text and \r\n (prot.SendErr): "-CODE\r\n" or
// "-CODE <text>\r\n". Constant answers are Buffers made once; the formatters build one Buffer
// per reply with one copy of any payload or result.

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

// ---- success ----

/** add, schedule, complete, fail, delete. workq server: `+OK\r\n` for fail too (the spec shows `OK\r\n`). */
export const REPLY_OK = b('+OK\r\n');
/** An inspect listing with nothing in it (inspect queues / jobs past the end). */
export const REPLY_OK_0 = b('+OK 0\r\n');
export const CRLF = b('\r\n');

// ---- errors ----

/** `-CLIENT-ERROR <text>\r\n`. */
export function clientError(text: string): Buffer {
  return b(`-CLIENT-ERROR ${text}\r\n`);
}

/** `-SERVER-ERROR <text>\r\n`. */
export function serverError(text: string): Buffer {
  return b(`-SERVER-ERROR ${text}\r\n`);
}

export const REPLY_NOT_FOUND = b('-NOT-FOUND\r\n');
/** Spec and server 0.2.0 on: `-TIMEOUT` (0.1.0 sent `-TIMED-OUT`). */
export const REPLY_TIMEOUT = b('-TIMEOUT\r\n');

// The client errors the parser decides, with the workq server's exact texts (prot.Err*,
// job.ErrInvalid*, handlers.Err*; note the mixed capitalisation, which is the server's).
export const REPLY_UNKNOWN_COMMAND = clientError('Unknown command');
export const REPLY_INVALID_ARGS = clientError('Invalid command args');
export const REPLY_INVALID_FLAGS = clientError('Invalid command flags');
export const REPLY_INVALID_PAYLOAD_SIZE = clientError('Invalid payload size');
export const REPLY_INVALID_RESULT_SIZE = clientError('Invalid result size');
export const REPLY_INVALID_ID = clientError('Invalid ID');
export const REPLY_INVALID_NAME = clientError('Invalid Name');
export const REPLY_INVALID_TTR = clientError('Invalid TTR');
export const REPLY_INVALID_TTL = clientError('Invalid TTL');
export const REPLY_INVALID_TIME = clientError('Invalid Time');
export const REPLY_INVALID_MAX_ATTEMPTS = clientError('Invalid Max Attempts');
export const REPLY_INVALID_MAX_FAILS = clientError('Invalid Max Fails');
export const REPLY_INVALID_PRIORITY = clientError('Invalid Priority');
export const REPLY_INVALID_WAIT_TIMEOUT = clientError('Invalid wait timeout');
export const REPLY_INVALID_CURSOR_OFFSET = clientError('Invalid cursor offset');
export const REPLY_INVALID_LIMIT = clientError('Invalid limit');
/** Ours: the workq server has no line limit short of its 1,058,576-byte read budget, past which
 * it drops the connection without a word. See LINE_BYTES_MAX in parser.ts. */
export const REPLY_COMMAND_TOO_LONG = clientError('Command too long');

// The errors execution decides (for the session / shard side; the parser never sends these).
/** add, schedule, run of an id the server already holds. */
export const REPLY_DUPLICATE_JOB = clientError('Duplicate job');
/** complete / fail of a job that already has a result. */
export const REPLY_DUPLICATE_RESULT = clientError('Duplicate result');
/** The server's answer when its registry and queues disagree (job.ErrQueueOutOfSync). */
export const REPLY_QUEUE_OUT_OF_SYNC = serverError('Queue out of sync');
/** Ours: with -b, the change is made in memory but the write-ahead log could not store it (disk full, I/O error). */
export const REPLY_UNLOGGED = serverError('Unable to log the change');

// ---- time ----

/** Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
export function daysFromCivil(y: number, m: number, d: number): number {
  y -= m <= 2 ? 1 : 0;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

const pad2 = (n: number): string => (n < 10 ? `0${n}` : `${n}`);

/**
 * A UTC time in the server's one format, Go layout "2006-01-02T15:04:05Z" (RFC 3339 in UTC,
 * whole seconds: a fraction is truncated, as Go's Format drops what the layout does not show).
 */
export function formatTime(ms: number): string {
  const secs = Math.floor(ms / 1000);
  let z = Math.floor(secs / 86400);
  const sod = secs - z * 86400;
  z += 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp + (mp < 10 ? 3 : -9);
  const y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  // Go's appendInt(year, 4): sign, then at least 4 digits.
  const ay = Math.abs(y);
  const year = (y < 0 ? '-' : '') + (ay < 1000 ? `000${ay}`.slice(-4) : `${ay}`);
  const hh = Math.floor(sod / 3600);
  const mm = Math.floor((sod % 3600) / 60);
  const ss = sod % 60;
  return `${year}-${pad2(m)}-${pad2(d)}T${pad2(hh)}:${pad2(mm)}:${pad2(ss)}Z`;
}

// ---- job and result blocks ----

/** Head text, then the data block, then \r\n: one Buffer, one copy of the data. */
function withBlock(head: string, data: Uint8Array, start: number, end: number): Buffer {
  const out = Buffer.allocUnsafe(head.length + (end - start) + 2);
  out.write(head, 0, 'latin1');
  out.set(data.subarray(start, end), head.length);
  out[out.length - 2] = 13;
  out[out.length - 1] = 10;
  return out;
}

/**
 * lease: `+OK 1\r\n<id> <name> <ttr> <payload-size>\r\n<payload>\r\n`, the TTR in ms as given at
 * add. As the spec and the workq server since 0.2.0 (b361010 "Add TTR to lease command reply":
 * prot.OkJobResp(id, name, ttr, payload)); go-workq since b301b13 reads exactly these four
 * fields. (0.1.0 sent `<id> <name> <payload-size>`.)
 */
export function leaseReply(idText: string, name: string, ttrMs: number, payload: Uint8Array, start = 0, end = payload.length): Buffer {
  return withBlock(`+OK 1\r\n${idText} ${name} ${ttrMs} ${end - start}\r\n`, payload, start, end);
}

/** run and result: `+OK 1\r\n<id> <0|1> <result-size>\r\n<result>\r\n`. */
export function resultReply(idText: string, success: boolean, result: Uint8Array, start = 0, end = result.length): Buffer {
  return withBlock(`+OK 1\r\n${idText} ${success ? 1 : 0} ${end - start}\r\n`, result, start, end);
}

// ---- inspect ----

/** What `inspect job`, `inspect jobs` and `inspect scheduled-jobs` show of one job. */
export interface InspectedJob {
  idText: string;
  name: string;
  ttrMs: number;
  ttlMs: number;
  payload: Uint8Array;
  maxAttempts: number;
  attempts: number;
  maxFails: number;
  fails: number;
  priority: number;
  state: number;
  createdMs: number;
  /** The schedule time, or null for a job that was added (the `time` key is then left out). */
  scheduleMs: number | null;
}

/**
 * One job's block: `<id> <key-count>\r\n` then `<key> <value>\r\n` lines, in the server's
 * order (handlers.JobResp): name ttr ttl payload-size payload max-attempts attempts max-fails
 * fails priority state created [time]; 12 keys, 13 with `time`. workq server: no `id` key (the
 * spec's key list has one; its examples, like the server, have none); `payload` is the raw
 * bytes, CR/LF included, so only `payload-size` tells where it ends.
 */
export function jobBlock(j: InspectedJob): Buffer {
  const scheduled = j.scheduleMs !== null;
  const head =
    `${j.idText} ${scheduled ? 13 : 12}\r\n` +
    `name ${j.name}\r\n` +
    `ttr ${j.ttrMs}\r\n` +
    `ttl ${j.ttlMs}\r\n` +
    `payload-size ${j.payload.length}\r\n` +
    'payload ';
  const tail =
    '\r\n' +
    `max-attempts ${j.maxAttempts}\r\n` +
    `attempts ${j.attempts}\r\n` +
    `max-fails ${j.maxFails}\r\n` +
    `fails ${j.fails}\r\n` +
    `priority ${j.priority}\r\n` +
    `state ${j.state}\r\n` +
    `created ${formatTime(j.createdMs)}\r\n` +
    (scheduled ? `time ${formatTime(j.scheduleMs as number)}\r\n` : '');
  const out = Buffer.allocUnsafe(head.length + j.payload.length + tail.length);
  out.write(head, 0, 'latin1');
  out.set(j.payload, head.length);
  out.write(tail, head.length + j.payload.length, 'latin1');
  return out;
}

/** One queue's block: `<name> 2\r\nready-len <n>\r\nscheduled-len <n>\r\n` (handlers.QueueResp). */
export function queueBlock(name: string, readyLen: number, scheduledLen: number): Buffer {
  return b(`${name} 2\r\nready-len ${readyLen}\r\nscheduled-len ${scheduledLen}\r\n`);
}

/**
 * `+OK <count>\r\n` followed by the blocks: every inspect reply but `inspect server`.
 * workq server: with the "+" (prot.SendReply), where several spec examples show `OK <count>`.
 */
export function inspectReply(blocks: readonly Buffer[]): Buffer {
  const head = b(`+OK ${blocks.length}\r\n`);
  return Buffer.concat([head, ...blocks]);
}

/**
 * The key count the server writes for `inspect server`. workq server: it writes `server 2`
 * although three keys follow (the spec says `server 3`; the server's own test of this reply is
 * inverted and passes only while the count is wrong). Kept byte-exact here; a client that
 * trusts the count reads `started ...` as the start of the next reply.
 */
export const INSPECT_SERVER_KEY_COUNT = 2;

/** `inspect server`: `+OK 1\r\nserver 2\r\nactive-clients <n>\r\nevicted-jobs <n>\r\nstarted <time>\r\n`. */
export function inspectServerReply(activeClients: number, evictedJobs: number, startedMs: number): Buffer {
  return b(
    `+OK 1\r\nserver ${INSPECT_SERVER_KEY_COUNT}\r\n` +
      `active-clients ${activeClients}\r\n` +
      `evicted-jobs ${evictedJobs}\r\n` +
      `started ${formatTime(startedMs)}\r\n`,
  );
}

const HEX_DIGITS = '0123456789abcdef';

/** A 16-byte UUID in canonical lowercase form (uuid.String()). */
export function uuidText(b: Uint8Array, at = 0): string {
  let s = '';
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) s += '-';
    const v = b[at + i];
    s += HEX_DIGITS[v >> 4] + HEX_DIGITS[v & 15];
  }
  return s;
}
