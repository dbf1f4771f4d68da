// The admin actions of the JSON API (#14), on the main thread: each is one request to a shard
// through the same queues as the protocol's commands, applied by the shard as the command it
// mirrors (a clear deletes as `delete` does, logged with -b), and its answer is applied to the
// routing layer as the session applies that command's answer (Router.deleted for every id a
// shard deleted, Router.readied for what a kick made ready, ReadyCounts as for a delete of an
// unheld job). Nothing here runs per protocol command.

import { tubeStatsEntries, type StatsEntry } from '../proto/beanstalk/stats.ts';
import type { Router } from '../route/router.ts';
import type { ReplyTarget } from '../route/shards.ts';
import type { Tube } from '../route/tubes.ts';
import {
  CLEAR_JOBS_MAX, idsAt, idsTube, LIST_JOBS_MAX, listCount, listMore, OP_CLEAR_TUBE, OP_DELETE, OP_KICK, OP_KICK_JOB,
  OP_LIST_JOBS, OP_PAUSE_TUBE, OP_STATS_TUBE, okResult, okTube, R_IDS, R_JOB_LIST, R_NUMS, R_OK, readJobList,
  replyId, replyKind, replyUnlogged, type ListedJob,
} from '../shared/records.ts';

/** Job states as the engine numbers them (workers/engine/engine.ts), by the API's names. */
export const STATES = { ready: 1, reserved: 2, delayed: 3, buried: 4 } as const;
export type StateName = keyof typeof STATES;
export const STATE_NAMES: Record<number, StateName> = { 1: 'ready', 2: 'reserved', 3: 'delayed', 4: 'buried' };
/** The states a clear may delete, as OP_CLEAR_TUBE's bits (reserved jobs are never cleared). */
export const CLEAR_BITS: Record<string, number> = { ready: 1, delayed: 2, buried: 4 };

/** The answer to one request, read while the reply record is at hand. */
function ask<T>(router: Router, shard: number, read: (buf: Buffer, at: number) => T, send: (w: ReturnType<Router['pool']['request']>) => void): Promise<T> {
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
  // It may take ready jobs of the shard the main thread cannot place (ReadyCounts' rule 3).
  router.readyCounts.anyTaker(t.shard);
  return ask(router, t.shard, (buf, at) => {
    router.readyCounts.anyTakerDone(t.shard);
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
    const n = okResult(buf, at);
    if (n > 0) router.readied(okTube(buf, at), n);
    return { kicked: n, unlogged: replyUnlogged(buf, at) };
  }, (w) => w.header(OP_KICK, 0, 0, t.id, count, 0, 0));
}

/** pause-tube `t` for `seconds`, counted from now (as the session sends it). */
export function pauseTube(router: Router, t: Tube, seconds: number): Promise<void> {
  const now = Date.now();
  t.pausedUntilMs = now + seconds * 1000;
  return ask(router, t.shard, () => undefined, (w) => w.header(OP_PAUSE_TUBE, 0, 0, t.id, seconds, 0, now));
}

export type JobAnswer = 'done' | 'not_found' | 'unlogged';

/** delete <id>, as from a connection that holds no job: a reserved job is not found (as for any other connection). */
export function deleteJob(router: Router, id: number): Promise<JobAnswer> {
  const shard = router.jobMap.get(id);
  if (shard < 0) return Promise.resolve('not_found');
  router.readyCounts.anyTaker(shard);
  return ask(router, shard, (buf, at): JobAnswer => {
    router.readyCounts.anyTakerDone(shard);
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
    router.readied(okTube(buf, at), 1);
    return replyUnlogged(buf, at) ? 'unlogged' : 'done';
  }, (w) => w.header(OP_KICK_JOB, 0, 0, 0, 0, 0, id));
}
