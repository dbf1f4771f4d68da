// Binary records exchanged between the main thread and the shard threads over the SAB rings.
//
// Every record is a fixed 32-byte header, optionally followed by a payload (a job body, a tube
// list, or a few float64 statistics). Both directions use the same header layout so one encoder
// and one decoder serve both threads. Little-endian throughout (DataView-free: Buffer's
// read/write*LE methods are as fast and avoid an object per record).
//
//   offset size  request (main -> shard)             reply / event (shard -> main)
//   0      u32   total record length (header+payload)
//   4      u8    op (OP_*)                           kind (R_* or E_*)
//   5      u8    unused (zero)                       1: the change was made but could not be logged
//   6..7         unused (zero)
//   8      u32   conn                                conn (events) / u32 result a
//   12     u32   a (tube, pri, count...)             a2
//   16     u32   b (pri, delay...)                   b
//   20     u32   c (delay, ttr...)                   c
//   24     f64   job id                              job id / deadline / value

import { copyBytes, f64le, i32le, u32le } from './bytes.ts';

export const HEADER_BYTES = 32;

// Requests, main -> shard. Every request gets exactly one reply, in order, so the main thread
// matches replies to requests with a FIFO per shard instead of tags.
export const OP_PUT = 1; //            conn, a=tube, b=pri, c=delaySec, id; payload: u32 ttr, body
export const OP_RESERVE = 2; //        conn, a=tube count; payload u32[count] tube ids: take the best ready job of these
//                                     tubes now (the fan-in's take), or R_NONE; never waits
export const OP_PEEK_BEST = 3; //      a=tube count; payload u32[count]. Reply R_BEST or R_NONE, payload f64: where the shard read it (ShardCore's stamp)
// 4 was OP_RESERVE_IF_READY (reserve a peeked job by id), replaced by OP_RESERVE_BOUNDED.
export const OP_RESERVE_JOB = 5; //    conn, id
export const OP_DELETE = 6; //         conn, id
export const OP_RELEASE = 7; //        conn, id, b=pri, c=delaySec
export const OP_BURY = 8; //           conn, id, b=pri
export const OP_TOUCH = 9; //          conn, id
export const OP_KICK = 10; //          a=tube, b=count
export const OP_KICK_JOB = 11; //      id
export const OP_PEEK = 12; //          id
export const OP_PEEK_READY = 13; //    a=tube
export const OP_PEEK_DELAYED = 14; //  a=tube
export const OP_PEEK_BURIED = 15; //   a=tube
export const OP_STATS_JOB = 16; //     id
export const OP_STATS_TUBE = 17; //    a=tube
export const OP_TOTALS = 18; //
export const OP_PAUSE_TUBE = 19; //    a=tube, b=delaySec, id=sent at (ms): the pause counts from then
export const OP_DROP_TUBE = 20; //     a=tube
export const OP_RELEASE_CONN = 21; //  conn, a = how many of the jobs it reserved longest ago to give back, b = 1: all of them:
//                                     the connection has gone (its reserve waiting here ends, what it kept behind it is
//                                     dropped); R_OK a = jobs given back (Router.releaseHeld)
export const OP_SHUTDOWN = 22; //
export const OP_TUBE_NAME = 23; //     a=tube; payload: the name (the shard's log records name tubes)
export const OP_RESTORE = 24; //       a=tube, b=pri, c=delaySec, id; payload (48 bytes + body): u32 ttr, u32 state, f64 deadline,
//                                     f64 created, u32 x5 counters, u32 pad, body (a job recovered from the log)
export const OP_WAL_SYNC = 25; //      make everything logged so far durable now
export const OP_EXPIRE = 27; //        conn, b=reserves, id: the main thread has taken the job from conn's held jobs after
//                                     E_TIMED_OUT; it goes back to ready unless conn deleted, released or buried it first
export const OP_RESERVE_BOUNDED = 26; // conn, a=tube count, b=bound pri, id=bound id (0: none); payload u32[count] tube ids:
//                                     reserve the best ready job of these tubes if it comes before (b, id), else R_NONE
export const OP_LIST_JOBS = 28; //      a=tube, b=state (1 ready, 2 reserved, 3 delayed, 4 buried), c=limit (<= LIST_JOBS_MAX),
//                                     id=cursor id (0: from the start); payload f64 cursor key (listKey of the last job
//                                     seen): one page of the tube's jobs in that state, in the state's order (R_JOB_LIST)
export const OP_CLEAR_TUBE = 29; //    a=tube, b=states (CLEAR_* bits), c=most jobs to delete (<= CLEAR_JOBS_MAX): deletes
//                                     them as `delete` does, logged; R_IDS a=count, b=1 if jobs remain in those states
export const OP_PUT_BURIED = 30; //    as OP_PUT, and the new job is buried at once (the API's move of a buried job)
export const OP_RESERVE_WAIT = 31; //  conn, a=tube count, b=timeout (s), c=RESERVE_FOREVER or 0, id=the soonest TTR end (ms) of
//                                     the jobs conn holds on other shards (Infinity: none); payload u32[count] tube ids: a
//                                     connection's reserve over tubes all on this shard (workers/waits.ts). R_JOB, R_NONE
//                                     (a = END_*), or R_PARKED: it waits here, and its answer comes as E_RESERVED / E_WAIT_END;
//                                     until then conn's later requests are kept, answered R_DEFERRED, and applied after
//                                     it in order (their replies come as E_DEFERRED)
export const OP_TAKE_ID = 51; //      conn: uses up a job id now (a put that failed behind a reserve that might wait). R_OK, id
export const OP_FAN_WAIT = 52; //     conn, a=tube count, c=claim slot, id=ticket (src/shared/claims.ts); payload u32[count], then f64: the stamp its first OP_PEEK_BEST got there (absent: now)
//                                     tube ids: a reserve over several shards waits on these tubes too, in their waiting sets;
//                                     a job that becomes ready there goes to it if this shard wins its claim (E_RESERVED).
//                                     R_OK: b = 0 parked; else c = a tube with a ready job now, not parked, and b = 1: this
//                                     shard won the claim (the wait has ended: the caller starts over), b = 2: another
//                                     thread had claimed it first
export const OP_BATCH = 53; //         id = the batch's number (a mesh's clock): the requests after it, up to the next
//                                     OP_BATCH, were handed over at once; a shard applies the batches of all its rings in
//                                     the order of their numbers (see src/route/shards.ts). Never reaches a ShardCore
export const OP_AFTER = 54; //         a=count; payload u32 pairs [shard, position]: the next request may make a job ready;
//                                     if a reserve waiting over several shards is parked here, it waits until each of those
//                                     shards has applied its request stream up to that position (src/shared/order.ts). No
//                                     reply
export const OP_CANCEL_WAIT = 50; //   conn: conn can no longer wait (its peer shut its sending side): a reserve parked now
//                                     or later ends at once (E_WAIT_END END_TIMED_OUT). R_OK
/**
 * Whether a request of `op` (with `delaySec`, for a put or a release) may make a job ready at
 * once, and so is a step in the order across shards (ShardPool.readyStep): a put or release
 * without delay, a kick, a kick-job, a pause-tube (it may end a pause).
 */
export function mayMakeReady(op: number, delaySec: number): boolean {
  if (op === OP_PUT || op === OP_RELEASE) return delaySec === 0;
  return op === OP_KICK || op === OP_KICK_JOB || op === OP_PAUSE_TUBE;
}

/** Most jobs one OP_LIST_JOBS page holds. */
export const LIST_JOBS_MAX = 1000;
/** Body bytes an OP_LIST_JOBS item carries at most (its preview). */
export const LIST_PREVIEW_BYTES = 64;
/** Most jobs one OP_CLEAR_TUBE deletes; the caller asks again while jobs remain, so other requests interleave. */
export const CLEAR_JOBS_MAX = 10_000;
/** OP_CLEAR_TUBE's states. Reserved jobs are never cleared (see README, "JSON API"). */
export const CLEAR_READY = 1;
export const CLEAR_DELAYED = 2;
export const CLEAR_BURIED = 4;
/** f64 fields of one R_JOB_LIST item (LIST_*), then LIST_PREVIEW_LEN preview bytes. */
export const LIST_ID = 0;
export const LIST_PRI = 1;
export const LIST_STATE = 2;
export const LIST_AGE = 3; //       seconds, as stats-job
export const LIST_DELAY = 4; //     seconds, as stats-job
export const LIST_TTR = 5;
export const LIST_TIME_LEFT = 6; // seconds, as stats-job
export const LIST_RESERVES = 7;
export const LIST_TIMEOUTS = 8;
export const LIST_RELEASES = 9;
export const LIST_BURIES = 10;
export const LIST_KICKS = 11;
export const LIST_BODY_BYTES = 12;
export const LIST_KEY = 13; //      the cursor key: ready pri, delayed deadline (ms), buried FIFO stamp, reserved 0
export const LIST_PREVIEW_LEN = 14;
export const LIST_FIELDS = 15;

// workq requests (the workq protocol's jobs live in the same shards, in workers/engine/workq.ts).
// `id` is the job's internal id: a number the main thread hands out per workq job (never reused),
// mapped from the client's UUID on the main thread (src/route/workq.ts).
export const OP_WQ_ADD = 32; //        a=queue, b=priority (int32 as u32), c=ttrMs, id; payload (WQ_ADD_FIXED bytes + payload):
//                                     f64 ttlMs (0: never expires, a run job), f64 scheduleMs (NaN: not scheduled),
//                                     f64 createdMs, u8 maxAttempts, u8 maxFails, u16 0, u32 0, 16 bytes UUID, body
export const OP_WQ_LEASE = 33; //      a=queue count; payload u32[count] queue ids
export const OP_WQ_PEEK = 34; //       a=queue count; payload u32[count] queue ids
export const OP_WQ_LEASE_BOUNDED = 35; // a=queue count, b=bound priority (int32 as u32), id=bound id; payload f64 bound
//                                     schedule key, f64 bound created, u32[count] queue ids: lease the best ready job of
//                                     these queues if it comes before the bound (priority desc, schedule, created, id), else R_NONE
export const OP_WQ_COMPLETE = 36; //   id; payload: the result
export const OP_WQ_FAIL = 37; //       id; payload: the result
export const OP_WQ_DELETE = 38; //     id
export const OP_WQ_RESULT = 39; //     id
export const OP_WQ_RUN_END = 40; //    id: a run's wait timeout passed
export const OP_WQ_LENS = 41; //       a=queue count; payload u32[count] queue ids
export const OP_WQ_INSPECT_JOB = 42; // id
export const OP_WQ_INSPECT_JOBS = 43; // a=queue, b=offset, c=limit, conn=1 scheduled / 0 ready
export const OP_WQ_QUEUE_NAME = 44; // a=queue; payload: the name (the shard's log records name queues)
export const OP_WQ_RESTORE = 45; //  a=queue, b=priority, c=ttrMs, id; payload (WQ_RESTORE_FIXED bytes + payload + result):
//                                   f64 ttlMs, f64 scheduleMs, f64 createdMs, u8 maxAttempts, u8 maxFails, u16 0,
//                                   u32 attempts, f64 leaseDeadline, u32 state, u32 payloadLen, 16 bytes UUID, payload, result
/** Fixed bytes of OP_WQ_RESTORE's payload. */
export const WQ_RESTORE_FIXED = 64;
/** Fixed bytes of OP_WQ_ADD's payload before the job's payload. */
export const WQ_ADD_FIXED = 48;
/** f64 fields of one job in R_WQ_JOBS / OP_WQ_INSPECT_JOB replies (see WQ_INFO_*), then 16 bytes UUID, then the payload. */
export const WQ_INFO_FIELDS = 12;
export const WQ_INFO_QUEUE = 0;
export const WQ_INFO_PRIORITY = 1;
export const WQ_INFO_TTR = 2;
export const WQ_INFO_TTL = 3;
export const WQ_INFO_MAX_ATTEMPTS = 4;
export const WQ_INFO_ATTEMPTS = 5;
export const WQ_INFO_MAX_FAILS = 6;
export const WQ_INFO_FAILS = 7;
export const WQ_INFO_STATE = 8;
export const WQ_INFO_CREATED = 9;
export const WQ_INFO_SCHEDULE = 10; // NaN: not scheduled
export const WQ_INFO_PAYLOAD_LEN = 11;
/** Bytes of one job's fixed part in those replies. */
export const WQ_INFO_BYTES = WQ_INFO_FIELDS * 8 + 16;

// Replies, shard -> main (one per request).
export const R_NONE = 1; //   nothing found / refused
export const R_OK = 2; //     a = small result (state, count, tube), value@24 = f64 (deadline...)
export const R_JOB = 3; //    a = tube, b = 1 if more ready jobs remain in the queues asked (workq leases), id@24 (to OP_RESERVE_JOB:
//                            @8 the state it was taken from, c = a delayed job's delay left in seconds, rounded up),
//                            payload: f64 deadline then the body bytes
export const R_BEST = 4; //   b = pri, id@24
export const R_NUMS = 5; //   a = count; payload f64[count]
export const R_JOB_LIST = 8; // a = count, b = 1 if more jobs follow this page; payload count x (f64[LIST_FIELDS], preview bytes)
export const R_PARKED = 10; //   to OP_RESERVE_WAIT: it waits in the shard
export const R_DEFERRED = 11; // the request waits behind its connection's parked reserve; its reply comes as E_DEFERRED
export const R_DROPPED = 12; //  (inside E_DEFERRED) a kept request dropped because its connection closed (id echoed)
export const R_IDS = 9; //      a = count, b = 1 if jobs remain, c = tube; payload f64[count] ids (OP_CLEAR_TUBE: the ids deleted)

// R_NUMS payloads by request, f64 number i (read with payloadF64).
// OP_TOTALS: this shard's jobs by state and job timeouts, then its write-ahead log's figures.
export const TOTALS_URGENT = 0;
export const TOTALS_READY = 1;
export const TOTALS_RESERVED = 2;
export const TOTALS_DELAYED = 3;
export const TOTALS_BURIED = 4;
export const TOTALS_JOB_TIMEOUTS = 5;
export const TOTALS_BINLOG_OLDEST = 6; //   its oldest segment's index (0: no file yet)
export const TOTALS_BINLOG_CURRENT = 7; //  its current segment's index (0: no log)
export const TOTALS_BINLOG_WRITTEN = 8;
export const TOTALS_BINLOG_MIGRATED = 9;
export const TOTALS_FIELDS = 10;
// OP_STATS_TUBE: one tube's figures on its shard (stats-tube's numbers, in its order).
export const TUBE_URGENT = 0;
export const TUBE_READY = 1;
export const TUBE_RESERVED = 2;
export const TUBE_DELAYED = 3;
export const TUBE_BURIED = 4;
export const TUBE_TOTAL_JOBS = 5;
export const TUBE_CMD_DELETE = 6;
export const TUBE_CMD_PAUSE = 7;
export const TUBE_PAUSE = 8; //             the pause's length (s), 0 when not paused
export const TUBE_PAUSE_LEFT = 9; //        seconds left of it
export const TUBE_WAITING = 10; //           reserves waiting on it: over its shard alone, and over several shards (OP_FAN_WAIT)
export const TUBE_FIELDS = 11;

// workq replies:
//   OP_WQ_ADD          R_OK a = 1 ready / 2 scheduled, b = queue
//   OP_WQ_LEASE        R_JOB a = queue, b = 1 if that queue has more ready jobs, c = TTR (ms), id; payload 16 bytes UUID + body; or R_NONE
//   OP_WQ_PEEK         R_BEST a = queue, b = priority (u32 of the int32), id; payload f64 scheduleKey, f64 createdMs; or R_NONE
//   OP_WQ_COMPLETE/FAIL R_OK a = WQ_DONE_OK / WQ_DONE_NOT_FOUND / WQ_DONE_DUPLICATE
//   OP_WQ_DELETE       R_OK a = 1 deleted / 0 not found
//   OP_WQ_RESULT       R_JOB a = state, b = 1 success / 0, id; payload the result (the job is completed or failed);
//                      R_OK a = state (there, no result yet); R_NONE (gone)
//   OP_WQ_RUN_END      like OP_WQ_RESULT when a result is there; R_OK a = 4 (leased) with f64 TTR deadline @24
//                      (the job stays); otherwise the job is deleted and R_NONE
//   OP_WQ_LENS         R_NUMS a = 2*count: ready, scheduled per queue
//   OP_WQ_INSPECT_JOB  R_WQ_JOBS a = 1 (or R_NONE); OP_WQ_INSPECT_JOBS R_WQ_JOBS a = count
//   OP_WQ_QUEUE_NAME, OP_WQ_RESTORE  R_OK
// A reply whose change could not be logged has byte REPLY_FLAG_UNLOGGED set, as for beanstalk.
export const R_WQ_JOBS = 7; //  a = count; payload count x (f64[WQ_INFO_FIELDS], 16 bytes UUID, payload)
export const WQ_DONE_OK = 0;
export const WQ_DONE_NOT_FOUND = 1;
export const WQ_DONE_DUPLICATE = 2;

// Events, shard -> main (unsolicited: they do not consume a FIFO entry).
/** Byte 5 of a reply: the change is made in memory but the write-ahead log could not store it. */
export const REPLY_FLAG_UNLOGGED = 5;

export const E_TIMED_OUT = 65; // conn, a = tube, b = reserves, id: a reservation ran out of time; the job waits for OP_EXPIRE

export const E_WQ_READY = 66; //  a = workq queue that gained ready jobs by the clock (schedule time, TTR requeue)
export const E_WQ_DONE = 67; //   id: a workq job got its result by the clock (attempts used up at a TTR end)
export const E_WQ_GONE = 68; //   id, a = 1 if it was evicted unprocessed: a workq job's TTL ended and it was removed
export const E_RESERVED = 69; //  conn, then as R_JOB: conn's parked reserve got this job
export const E_WAIT_END = 70; //  conn, a = END_*: conn's parked reserve ended without a job
export const E_DEFERRED = 71; //  conn; payload: the reply record to conn's next request answered R_DEFERRED
/** How a reserve ended without a job (R_NONE / E_WAIT_END a). */
export const END_TIMED_OUT = 1;
export const END_DEADLINE_SOON = 2;
/** OP_RESERVE_WAIT c: a plain `reserve` (no timeout). */
export const RESERVE_FOREVER = 1;
/** beanstalkd's SAFETY_MARGIN: a waiting reserve ends DEADLINE_SOON this long before a held job's TTR ends. */
export const DEADLINE_SOON_MS = 1000;

export function isEvent(kind: number): boolean {
  return kind >= 64;
}

// ---- Reading replies and events by name (main thread). Fields by reply, as the shards write
// them (see the tables above); every reader takes the buffer and the record's offset. ----

/** R_* or E_*. */
export const replyKind = (b: Buffer, at: number): number => b[at + 4];
/** The change was made but could not be logged. */
export const replyUnlogged = (b: Buffer, at: number): boolean => b[at + REPLY_FLAG_UNLOGGED] !== 0;
/** The end of the record (its payload included). */
export const recordEnd = (b: Buffer, at: number): number => at + u32le(b, at);
/** The job id (or value) of a reply or event. */
export const replyId = (b: Buffer, at: number): number => f64le(b, at + 24);
/** f64 number `i` of the payload (R_NUMS; a touch's R_OK: 0 = the new deadline). */
export const payloadF64 = (b: Buffer, at: number, i: number): number => f64le(b, at + HEADER_BYTES + i * 8);
/** The payload's start. */
export const payloadAt = (at: number): number => at + HEADER_BYTES;

/** R_OK: the result (a job's new state, a count, a workq done code). */
export const okResult = (b: Buffer, at: number): number => u32le(b, at + 12);
/** R_OK: the tube (or workq queue) the change was in. */
export const okTube = (b: Buffer, at: number): number => u32le(b, at + 16);

/** R_JOB (beanstalk): the job's tube. */
export const jobTube = (b: Buffer, at: number): number => u32le(b, at + 12);
/** R_JOB (a reserve, a lease): the tubes (queues) asked still hold ready jobs. */
export const jobMore = (b: Buffer, at: number): boolean => u32le(b, at + 16) !== 0;
/** R_JOB (beanstalk): the reservation's TTR deadline (ms; 0 for a peek). */
export const jobDeadline = (b: Buffer, at: number): number => f64le(b, at + HEADER_BYTES);
/** R_JOB to OP_RESERVE_JOB: the state the job was taken from (1 ready, 3 delayed, 4 buried). */
export const jobFromState = (b: Buffer, at: number): number => u32le(b, at + 8);
/** R_JOB to OP_RESERVE_JOB: a delayed job's delay left when taken (seconds, rounded up). */
export const jobDelayLeft = (b: Buffer, at: number): number => u32le(b, at + 20);
/** R_JOB (beanstalk): where the body starts (it ends at recordEnd). */
export const jobBodyAt = (at: number): number => at + HEADER_BYTES + 8;

/** R_BEST (beanstalk): the candidate's pri (its id: replyId). */
export const bestPri = (b: Buffer, at: number): number => u32le(b, at + 16);
/** R_BEST or R_NONE to OP_PEEK_BEST: where the shard read the peek (its stamp), if the reply says. */
export const peekStamp = (b: Buffer, at: number): number | undefined =>
  u32le(b, at) >= HEADER_BYTES + 8 ? f64le(b, at + HEADER_BYTES) : undefined;
/** OP_FAN_WAIT over `count` tubes: the stamp its first OP_PEEK_BEST got there, if the park carries it. */
export const fanWaitStamp = (b: Buffer, at: number, count: number): number | undefined =>
  u32le(b, at) >= HEADER_BYTES + count * 4 + 8 ? f64le(b, at + HEADER_BYTES + count * 4) : undefined;
/** R_BEST (workq): the candidate's priority, schedule key, creation time. */
export const wqBestPriority = (b: Buffer, at: number): number => i32le(b, at + 16);
export const wqBestScheduleKey = (b: Buffer, at: number): number => f64le(b, at + HEADER_BYTES);
export const wqBestCreated = (b: Buffer, at: number): number => f64le(b, at + HEADER_BYTES + 8);

/** R_NONE to OP_RESERVE_WAIT, E_WAIT_END: how the reserve ended (END_*). */
export const reserveEnd = (b: Buffer, at: number): number => u32le(b, at + 12);
/** E_DEFERRED: where the reply record it carries starts. */
export const deferredAt = (at: number): number => at + HEADER_BYTES;

/** R_JOB to a workq lease: the queue, the job's TTR (ms), its UUID's and payload's start. */
export const wqJobQueue = (b: Buffer, at: number): number => u32le(b, at + 12);
export const wqJobTtr = (b: Buffer, at: number): number => u32le(b, at + 20);
export const wqJobUuidAt = (at: number): number => at + HEADER_BYTES;
export const wqJobPayloadAt = (at: number): number => at + HEADER_BYTES + 16;
/** R_JOB with a workq result: whether the job succeeded (the result is the payload). */
export const wqResultSuccess = (b: Buffer, at: number): boolean => u32le(b, at + 16) !== 0;
/** R_JOB_LIST / R_IDS: how many items follow; whether more remain after them. */
export const listCount = (b: Buffer, at: number): number => u32le(b, at + 12);
export const listMore = (b: Buffer, at: number): boolean => u32le(b, at + 16) !== 0;
/** R_IDS: the tube, and id `i`. */
export const idsTube = (b: Buffer, at: number): number => u32le(b, at + 20);
export const idsAt = (b: Buffer, at: number, i: number): number => f64le(b, at + HEADER_BYTES + i * 8);

/** One R_JOB_LIST item (read off the hot path, so an object each). */
export interface ListedJob {
  readonly fields: Float64Array;
  readonly preview: Buffer;
}
/** R_JOB_LIST's items, in order (the previews are copies). */
export function readJobList(b: Buffer, at: number): ListedJob[] {
  const n = listCount(b, at);
  const items: ListedJob[] = [];
  let p = at + HEADER_BYTES;
  for (let i = 0; i < n; i++) {
    const fields = new Float64Array(LIST_FIELDS);
    for (let k = 0; k < LIST_FIELDS; k++) fields[k] = f64le(b, p + k * 8);
    p += LIST_FIELDS * 8;
    const len = fields[LIST_PREVIEW_LEN];
    items.push({ fields, preview: Buffer.from(b.subarray(p, p + len)) });
    p += len;
  }
  return items;
}

/** R_WQ_JOBS: how many jobs follow. */
export const wqJobsCount = (b: Buffer, at: number): number => u32le(b, at + 12);

/** Events: the connection (E_TIMED_OUT), the tube or queue (E_TIMED_OUT, E_WQ_READY),
 *  the reservation's reserves count (E_TIMED_OUT), whether a gone workq job was evicted (E_WQ_GONE). */
export const eventConn = (b: Buffer, at: number): number => u32le(b, at + 8);
export const eventTube = (b: Buffer, at: number): number => u32le(b, at + 12);
export const eventReserves = (b: Buffer, at: number): number => u32le(b, at + 16);
export const eventEvicted = (b: Buffer, at: number): boolean => u32le(b, at + 12) !== 0;

/**
 * A record's list of u32 ids (the tubes of a reserve, the queues of a lease), read into one array
 * kept for the next record: no array per request.
 */
export class IdList {
  private ids: Int32Array;

  constructor(initial = 16) {
    this.ids = new Int32Array(initial);
  }

  /** The `count` ids from byte `from` of `buf`; valid until the next read. */
  read(buf: Uint8Array, from: number, count: number): Int32Array {
    if (count > this.ids.length) this.ids = new Int32Array(count * 2);
    const ids = this.ids;
    for (let i = 0; i < count; i++) ids[i] = u32le(buf, from + i * 4);
    return ids;
  }
}

/**
 * Appends records into one growing Buffer: one per shard per event-loop turn on the main thread,
 * one per batch on a shard. The bytes are then copied into the ring in as few writes as fit.
 */
export class RecordWriter {
  /** The records (read it, don't replace it: `view` is over the same bytes). */
  buf: Buffer;
  len = 0;
  // Header fields go through a DataView: TurboFan makes each set one store, where Buffer's
  // writeUInt32LE checks its range and stores byte by byte (1.5% of the serving thread's user
  // time at 20,000 jobs/s, one header per request and per reply).
  private view: DataView;

  constructor(initialBytes = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(initialBytes);
    this.view = viewOf(this.buf);
  }

  private ensure(extra: number): void {
    const need = this.len + extra;
    if (need <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < need) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.len);
    this.buf = next;
    this.view = viewOf(next);
  }

  /** Writes a header; returns its offset so a payload can follow. */
  header(op: number, payloadBytes: number, conn: number, a: number, b: number, c: number, id: number): number {
    this.ensure(HEADER_BYTES + payloadBytes);
    const v = this.view;
    const at = this.len;
    v.setUint32(at, HEADER_BYTES + payloadBytes, true);
    v.setUint32(at + 4, op, true); // op in the low byte, the rest zero
    v.setUint32(at + 8, conn >>> 0, true);
    v.setUint32(at + 12, a >>> 0, true);
    v.setUint32(at + 16, b >>> 0, true);
    v.setUint32(at + 20, c >>> 0, true);
    v.setFloat64(at + 24, id, true);
    this.len = at + HEADER_BYTES;
    return at;
  }

  u32(v: number): void {
    this.ensure(4);
    this.view.setUint32(this.len, v >>> 0, true);
    this.len += 4;
  }

  f64(v: number): void {
    this.ensure(8);
    this.view.setFloat64(this.len, v, true);
    this.len += 8;
  }

  bytes(src: Uint8Array, start: number, end: number): void {
    const n = end - start;
    this.ensure(n);
    copyBytes(this.buf, this.len, src, start, end);
    this.len += n;
  }

  /**
   * Makes the record written at `at` (with no payload of its own) an envelope of everything
   * appended after it: its length becomes the bytes from `at` to the end.
   */
  closeEnvelope(at: number): void {
    this.view.setUint32(at, this.len - at, true);
  }

  reset(): void {
    this.len = 0;
  }
}

function viewOf(b: Buffer): DataView {
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}

/**
 * Reassembles records from the byte stream a Ring delivers (a record may arrive in pieces when
 * it straddles a partial write). `next()` returns the offset of the next whole record in `buf`, or
 * -1 when more bytes are needed.
 */
export class RecordReader {
  buf: Buffer;
  start = 0;
  end = 0;

  constructor(initialBytes = 256 * 1024) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  /** Space to read into: compacts consumed bytes away and grows for a large pending record. */
  prepare(minFree: number): void {
    if (this.start > 0) {
      if (this.end > this.start) this.buf.copy(this.buf, 0, this.start, this.end);
      this.end -= this.start;
      this.start = 0;
    }
    let want = this.end + minFree;
    if (this.end >= 4) {
      const recLen = u32le(this.buf, 0);
      if (recLen > want) want = recLen;
    }
    if (want > this.buf.length) {
      let size = this.buf.length * 2;
      while (size < want) size *= 2;
      const next = Buffer.allocUnsafe(size);
      this.buf.copy(next, 0, 0, this.end);
      this.buf = next;
    }
  }

  /** The offset of the next whole record without taking it, or -1 when more bytes are needed. */
  peek(): number {
    const avail = this.end - this.start;
    if (avail < HEADER_BYTES || avail < u32le(this.buf, this.start)) return -1;
    return this.start;
  }

  next(): number {
    const at = this.peek();
    if (at !== -1) this.start += u32le(this.buf, at);
    return at;
  }
}
