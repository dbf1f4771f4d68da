// The admin actions of the JSON API (#14), on the main thread: each is one request to a shard
// through the same queues as the protocol's commands, applied by the shard as the command it
// mirrors (a clear deletes as `delete` does, logged with -b), and its answer is applied to the
// routing layer as the session applies that command's answer (Router.deleted for every id a
// shard deleted; a job made ready goes to the reserves waiting in its shard there). Nothing here
// runs per protocol command.

import { tubeStatsEntries, type StatsEntry } from '../proto/beanstalk/stats.ts';
import type { Router } from '../route/router.ts';
import type { ReplyTarget } from '../route/shards.ts';
import type { Tube } from '../route/tubes.ts';
import {
  CLEAR_JOBS_MAX, idsAt, idsTube, jobBodyAt, jobDelayLeft, jobFromState, jobTube, LIST_ID, LIST_JOBS_MAX, LIST_KEY, LIST_PRI,
  listCount, listMore, OP_BURY, OP_CLEAR_TUBE, OP_DELETE, OP_KICK, OP_KICK_JOB, OP_LIST_JOBS, OP_PAUSE_TUBE, OP_PUT, OP_PUT_BURIED,
  OP_RELEASE, OP_RESERVE_JOB, mayMakeReady, OP_STATS_JOB, OP_STATS_TUBE, okResult, okTube, payloadF64, R_IDS, R_JOB, R_JOB_LIST,
  R_NUMS, R_OK, readJobList, recordEnd, replyId, replyKind, replyUnlogged, type ListedJob,
} from '../shared/records.ts';

/** Job states as the engine numbers them (workers/engine/engine.ts), by the API's names. */
export const STATES = { ready: 1, reserved: 2, delayed: 3, buried: 4 } as const;
export type StateName = keyof typeof STATES;
export const STATE_NAMES: Record<number, StateName> = { 1: 'ready', 2: 'reserved', 3: 'delayed', 4: 'buried' };
/** The states a clear may delete, as OP_CLEAR_TUBE's bits (reserved jobs are never cleared). */
export const CLEAR_BITS: Record<string, number> = { ready: 1, delayed: 2, buried: 4 };

/**
 * The answer to one request, read while the reply record is at hand. `ready`: the request may
 * make a job ready (a kick, a put...): it comes after such steps sent to other shards before it,
 * for a reserve waiting over several shards (ShardPool.readyStep).
 */
function ask<T>(router: Router, shard: number, read: (buf: Buffer, at: number) => T, send: (w: ReturnType<Router['pool']['request']>) => void, ready = false): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const target: ReplyTarget = {
      onShardReply(_shard, _kind, _seq, buf, at) {
        try {
          resolve(read(buf, at));
        } catch (err) {
          reject(err as Error);
        }
      },
    };
    if (ready) router.pool.readyStep(shard);
    send(router.pool.request(shard, 0, target, 0));
  });
}

/** stats-tube's figures of `t`, as its YAML reply would show them now. */
export function tubeStats(router: Router, t: Tube): Promise<StatsEntry[] | null> {
  return ask(router, t.shard, (buf, at) => (replyKind(buf, at) === R_NUMS ? tubeStatsEntries(t, buf, at) : null),
    (w) => w.header(OP_STATS_TUBE, 0, 0, t.id, 0, 0, 0));
}

export interface JobPage {
  readonly jobs: ListedJob[];
  /** More jobs follow the last one (ask again with its cursor). */
  readonly more: boolean;
}

/** One page of `t`'s jobs in `state` after the cursor (cursorId 0: from the start); limit <= LIST_JOBS_MAX. */
export function listJobs(router: Router, t: Tube, state: number, cursorKey: number, cursorId: number, limit: number): Promise<JobPage> {
  return ask(router, t.shard, (buf, at) => {
    if (replyKind(buf, at) !== R_JOB_LIST) throw new Error('unexpected reply to a job listing');
    return listCount(buf, at) === 0 ? { jobs: [], more: false } : { jobs: readJobList(buf, at), more: listMore(buf, at) };
  }, (w) => {
    w.header(OP_LIST_JOBS, 8, 0, t.id, state, Math.min(limit, LIST_JOBS_MAX), cursorId);
    w.f64(cursorKey);
  });
}

export interface ClearPage {
  readonly ids: number[];
  /** Jobs remain in the states asked. */
  readonly remain: boolean;
  /** The deletions happened but the log could not store them (disk full): they are not acknowledged. */
  readonly unlogged: boolean;
}

/**
 * Deletes up to `max` (<= CLEAR_JOBS_MAX) jobs of `t` in the states `mask` (CLEAR_BITS), as
 * `delete` deletes them; the routing layer forgets each id (job map, tube counts).
 */
export function clearPage(router: Router, t: Tube, mask: number, max = CLEAR_JOBS_MAX): Promise<ClearPage> {
  return ask(router, t.shard, (buf, at) => {
    if (replyKind(buf, at) !== R_IDS) throw new Error('unexpected reply to a clear');
    const n = listCount(buf, at);
    const tube = idsTube(buf, at);
    const ids: number[] = [];
    for (let i = 0; i < n; i++) {
      const id = idsAt(buf, at, i);
      ids.push(id);
      router.deleted(id, tube);
    }
    return { ids, remain: listMore(buf, at), unlogged: replyUnlogged(buf, at) };
  }, (w) => w.header(OP_CLEAR_TUBE, 0, 0, t.id, mask, Math.min(max, CLEAR_JOBS_MAX), 0));
}

export interface ClearResult {
  readonly deleted: number;
  /** Some deletions could not be logged. */
  readonly unlogged: boolean;
}

/**
 * Clears tube `name` in the states `mask`, a page (CLEAR_JOBS_MAX jobs) per shard request: the
 * requests of other connections queued meanwhile are applied between two pages. Stops when none
 * remain (jobs put meanwhile in those states are cleared too, as long as they keep coming before
 * the end) or the tube has gone.
 */
export async function clearTube(router: Router, name: string, mask: number): Promise<ClearResult> {
  let deleted = 0;
  let unlogged = false;
  for (;;) {
    const t = router.tubes.find(name);
    if (t === undefined) break;
    const page = await clearPage(router, t, mask);
    deleted += page.ids.length;
    unlogged ||= page.unlogged;
    if (!page.remain) break;
  }
  return { deleted, unlogged };
}

/** kick <count> on `t`: buried jobs first, else delayed ones. */
export function kickTube(router: Router, t: Tube, count: number): Promise<{ kicked: number; unlogged: boolean }> {
  return ask(router, t.shard, (buf, at) => {
    return { kicked: okResult(buf, at), unlogged: replyUnlogged(buf, at) };
  }, (w) => w.header(OP_KICK, 0, 0, t.id, count, 0, 0), true);
}

/** pause-tube `t` for `seconds`, counted from now (as the session sends it). */
export function pauseTube(router: Router, t: Tube, seconds: number): Promise<void> {
  return ask(router, t.shard, () => undefined, (w) => w.header(OP_PAUSE_TUBE, 0, 0, t.id, seconds, 0, Date.now()), true);
}

export type JobAnswer = 'done' | 'not_found' | 'unlogged';

/** delete <id>, as from a connection that holds no job: a reserved job is not found (as for any other connection). */
export function deleteJob(router: Router, id: number): Promise<JobAnswer> {
  const shard = router.jobMap.get(id);
  if (shard < 0) return Promise.resolve('not_found');
  return ask(router, shard, (buf, at): JobAnswer => {
    if (replyKind(buf, at) !== R_OK) return 'not_found';
    router.deleted(replyId(buf, at), okTube(buf, at));
    return replyUnlogged(buf, at) ? 'unlogged' : 'done';
  }, (w) => w.header(OP_DELETE, 0, 0, 0, 0, 0, id));
}

/** kick-job <id>: a buried or delayed job becomes ready. */
export function kickJob(router: Router, id: number): Promise<JobAnswer> {
  const shard = router.jobMap.get(id);
  if (shard < 0) return Promise.resolve('not_found');
  return ask(router, shard, (buf, at): JobAnswer => {
    if (replyKind(buf, at) !== R_OK) return 'not_found';
    return replyUnlogged(buf, at) ? 'unlogged' : 'done';
  }, (w) => w.header(OP_KICK_JOB, 0, 0, 0, 0, 0, id), true);
}


// ---- moving jobs to another tube ----
//
// beanstalk has no move: a moved job is a new job of the target tube (a new id; the same priority,
// TTR and body; the same state: a delayed job keeps the delay it had left, rounded up to whole
// seconds, and a buried one is put buried, OP_PUT_BURIED) and the original is deleted. Exact under concurrency, one job at a time (a page's jobs in parallel):
//  1. reserve-job <id> by the API's own connection id: the job is ours alone, or (reserved by a
//     worker meanwhile, or gone) it is skipped. The shard says which state it took it from
//     and a delayed job's delay left; stats-job (which nobody can change while we hold it) gives
//     the priority and TTR.
//  2. put the copy in the target tube as a session's put does (id, job map, tube counts; buried
//     at once if the original was), and wait for the shard's answer (with -b: logged).
//  3. delete the original, which we hold.
// A job taken from a state that was not asked (it changed between the listing and step 1) is put
// back as it was (released with its delay, or buried). A TTR running out while we hold a job
// leaves it ours (the holder below keeps it; see Router.onEvent), so step 3 always finds it.

/** The API's connection id for moves, per router. */
const moverConns = new WeakMap<Router, number>();

function moverConn(router: Router): number {
  let conn = moverConns.get(router);
  if (conn === undefined) {
    conn = router.newConnId();
    moverConns.set(router, conn);
    // Every job a move takes, it deletes or gives back itself.
    router.conns.set(conn, { jobExpired: () => true });
  }
  return conn;
}

// Tubes a move runs on are kept (not freed, their ids not reused) until it ends: each move holds a
// 'pinned' reference to its two tubes (the tube table counts them, as it counts the default
// tube's pin), and gives them back at the end, when a tube left with no reference is freed.

/** The states a move may take, as CLEAR_BITS; by the engine's state numbers. */
const STATE_BITS: Record<number, number> = { 1: 1, 3: 2, 4: 4 };

interface Taken {
  readonly tube: number;
  readonly from: number;
  readonly delaySec: number;
  readonly body: Buffer;
}

function reserveJobAs(router: Router, conn: number, id: number): Promise<Taken | null> {
  const shard = router.jobMap.get(id);
  if (shard < 0) return Promise.resolve(null);
  return ask(router, shard, (buf, at): Taken | null => {
    if (replyKind(buf, at) !== R_JOB) return null;
    return {
      tube: jobTube(buf, at), from: jobFromState(buf, at), delaySec: jobDelayLeft(buf, at),
      body: Buffer.from(buf.subarray(jobBodyAt(at), recordEnd(buf, at))),
    };
  }, (w) => w.header(OP_RESERVE_JOB, 0, conn, 0, 0, 0, id));
}

/** stats-job's priority and TTR. */
function priTtr(router: Router, shard: number, id: number): Promise<{ pri: number; ttr: number } | null> {
  return ask(router, shard, (buf, at) => (replyKind(buf, at) === R_NUMS ? { pri: payloadF64(buf, at, 3), ttr: payloadF64(buf, at, 6) } : null),
    (w) => w.header(OP_STATS_JOB, 0, 0, 0, 0, 0, id));
}

/** Gives a job the move holds back, in the state it was taken from. */
function giveBack(router: Router, conn: number, shard: number, id: number, taken: Taken, pri: number): Promise<boolean> {
  if (taken.from === 4) {
    return ask(router, shard, (buf, at) => replyKind(buf, at) === R_OK, (w) => w.header(OP_BURY, 0, conn, 0, pri, 0, id));
  }
  const delaySec = taken.from === 3 ? taken.delaySec : 0;
  return ask(router, shard, (buf, at) => replyKind(buf, at) === R_OK, (w) => w.header(OP_RELEASE, 0, conn, 0, pri, delaySec, id), mayMakeReady(OP_RELEASE, delaySec));
}

/** put into `t`, as a session's put: answered by the shard (with -b, once logged). Whether it was logged, and the new id. */
async function putCopy(router: Router, conn: number, t: Tube, buried: boolean, pri: number, delaySec: number, ttr: number, body: Buffer): Promise<{ logged: boolean; id: number }> {
  const id = router.ids.next();
  router.tubes.retain(t, 'jobs'); // the move holds a pin on t
  router.jobMap.set(id, t.shard);
  const op = buried ? OP_PUT_BURIED : OP_PUT;
  const delay = buried ? 0 : delaySec;
  const answered = ask(router, t.shard, (buf, at) => !replyUnlogged(buf, at), (w) => {
    w.header(op, 4 + body.length, conn, t.id, pri, delay, id);
    w.u32(ttr);
    w.bytes(body, 0, body.length);
  }, mayMakeReady(op, delay));
  return { logged: await answered, id };
}

/** delete of a job `conn` does not hold (a ready copy a worker may have taken): whether it was deleted. */
function deleteUnheld(router: Router, conn: number, shard: number, id: number): Promise<boolean> {
  return ask(router, shard, (buf, at) => {
    if (replyKind(buf, at) !== R_OK) return false;
    router.deleted(id, okTube(buf, at));
    return true;
  }, (w) => w.header(OP_DELETE, 0, conn, 0, 0, 0, id));
}

/** delete of a job `conn` holds. Whether it was logged; throws if the shard did not find it. */
function deleteHeld(router: Router, conn: number, shard: number, id: number): Promise<boolean> {
  return ask(router, shard, (buf, at) => {
    if (replyKind(buf, at) !== R_OK) throw new Error(`job ${id}, held by the move, was not found to delete`);
    router.deleted(id, okTube(buf, at));
    return !replyUnlogged(buf, at);
  }, (w) => w.header(OP_DELETE, 0, conn, 0, 0, 0, id));
}

type MoveOne = 'moved' | 'skipped' | 'moved-unlogged' | 'undone';

async function moveOne(router: Router, conn: number, src: Tube, dst: Tube, mask: number, id: number, listedPri: number, created: () => void): Promise<MoveOne> {
  const shard = router.jobMap.get(id);
  const taken = await reserveJobAs(router, conn, id);
  if (taken === null) return 'skipped';
  let pt: { pri: number; ttr: number } | null = null;
  let putSent = false;
  try {
    pt = await priTtr(router, shard, id);
    if (pt === null) throw new Error(`job ${id}, held by the move, has no stats`);
    if (taken.tube !== src.id || (mask & (STATE_BITS[taken.from] ?? 0)) === 0) {
      await giveBack(router, conn, shard, id, taken, pt.pri);
      return 'skipped';
    }
    putSent = true;
    const copy = await putCopy(router, conn, dst, taken.from === STATES.buried, pt.pri, taken.from === STATES.delayed ? taken.delaySec : 0, pt.ttr, taken.body);
    created(); // a new job, as a put makes (stats total-jobs)
    if (!copy.logged) {
      // The copy is not on disk (the log is failing) while the original is: deleting the original
      // now could lose the job in a crash before the log recovers. Undo instead: the copy goes
      // (its put and delete records reach the log together, in order), the original goes back.
      // Should a worker have taken the copy already, both stay: a job done twice, never lost.
      await deleteUnheld(router, conn, dst.shard, copy.id);
      putSent = false;
      await giveBack(router, conn, shard, id, taken, pt.pri);
      return 'undone';
    }
    const delLogged = await deleteHeld(router, conn, shard, id);
    return delLogged ? 'moved' : 'moved-unlogged';
  } catch (err) {
    // Nothing of ours stays held: once the copy is sent the original goes, else it goes back.
    if (putSent) await deleteHeld(router, conn, shard, id).catch(() => undefined);
    else await giveBack(router, conn, shard, id, taken, pt?.pri ?? listedPri).catch(() => undefined);
    throw err;
  }
}

export interface MoveResult {
  readonly moved: number;
  /** Some changes could not be logged. */
  readonly unlogged: boolean;
}

/**
 * Moves up to `max` jobs of tube `from` in the states `mask` (CLEAR_BITS) to tube `to` (ready
 * jobs first, then delayed, then buried, each in its listing order), a listing page
 * (LIST_JOBS_MAX jobs) at a time so other requests interleave. Jobs reserved by a connection are
 * never moved.
 */
export async function moveTube(router: Router, from: string, to: string, mask: number, max: number, created: () => void = () => {}): Promise<MoveResult> {
  const src = router.tubes.find(from);
  if (src === undefined || max <= 0) return { moved: 0, unlogged: false };
  const conn = moverConn(router);
  router.tubes.retain(src, 'pinned'); // found live just now, in this same turn
  const dst = router.tubes.acquire(to, 'pinned');
  let moved = 0;
  let unlogged = false;
  try {
    for (const state of [STATES.ready, STATES.delayed, STATES.buried]) {
      if ((mask & STATE_BITS[state]) === 0) continue;
      let key = 0;
      let cursor = 0;
      while (moved < max) {
        const page = await listJobs(router, src, state, key, cursor, Math.min(LIST_JOBS_MAX, max - moved));
        // Every job of the page settled before the next page (or an error) goes on.
        const out = await Promise.allSettled(page.jobs.map((j) => moveOne(router, conn, src, dst, mask, j.fields[LIST_ID], j.fields[LIST_PRI], created)));
        let failed: unknown = null;
        for (const r of out) {
          if (r.status === 'rejected') failed ??= r.reason;
          else if (r.value === 'moved' || r.value === 'moved-unlogged') moved++;
          if (r.status === 'fulfilled' && (r.value === 'moved-unlogged' || r.value === 'undone')) unlogged = true;
        }
        if (failed !== null) throw new Error(`moved ${moved}, then: ${(failed as Error).message}`);
        const last = page.jobs[page.jobs.length - 1];
        if (!page.more || last === undefined) break;
        key = last.fields[LIST_KEY];
        cursor = last.fields[LIST_ID];
      }
    }
  } finally {
    router.tubes.release(src, 'pinned');
    router.tubes.release(dst, 'pinned');
  }
  return { moved, unlogged };
}
