// The JSON API's workq views (#14): workq queues with their ready and scheduled lengths, a
// queue's ready or scheduled jobs a page at a time (as `inspect jobs` / `inspect
// scheduled-jobs` page them: offset and limit), and a job's delete (as workq's `delete`). Every
// request goes to the shards through WorkqRouter's inspect requests and decoders, the ones the
// workq session uses. Routed by src/ops/api.ts, which applies the access rules (POST, token,
// JSON, Origin) before these run. When the server has no workq listener, WorkqRouter still
// exists (empty) but these endpoints answer 404 "workq is off".

import type { Router } from '../route/router.ts';
import type { ReplyTarget } from '../route/shards.ts';
import { WorkqRouter, type WqQueue } from '../route/workq.ts';
import { type InspectedJob } from '../proto/workq/replies.ts';
import { INSPECT_LIMIT_MAX, NAME_BYTES_MAX } from '../proto/workq/validate.ts';
import { LIST_PREVIEW_BYTES, okResult, R_OK, replyKind, replyUnlogged } from '../shared/records.ts';
import { ApiError, preview } from './api-errors.ts';

/** Job states as workers/engine/workq-store.ts numbers them (what `inspect job` shows as `state`). */
export const WQ_STATE_NAMES: Record<number, string> = { 0: 'new', 1: 'completed', 2: 'failed', 3: 'pending', 4: 'leased' };

const NAME_RE = new RegExp(`^[A-Za-z0-9_.-]{1,${NAME_BYTES_MAX}}$`);
const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** One workq endpoint, matched from the path; run once the access rules passed. */
export interface WorkqEndpoint {
  readonly post: boolean;
  run(router: Router, q: URLSearchParams): Promise<{ status: number; body: unknown }>;
}

/** The endpoint for `parts` (the path after /api, parts[0] === 'workq'), else 404. */
export function workqEndpoint(parts: readonly string[]): WorkqEndpoint {
  const n = parts.length;
  if (parts[1] === 'queues' && n === 2) return { post: false, run: (r) => queues(on(r)) };
  if (parts[1] === 'queues' && n === 3 && parts[2] !== '') return { post: false, run: (r) => queueOne(on(r), parts[2]) };
  if (parts[1] === 'queues' && n === 4 && parts[3] === 'jobs') return { post: false, run: (r, q) => jobs(on(r), parts[2], q) };
  if (parts[1] === 'jobs' && n === 4 && parts[3] === 'delete') return { post: true, run: (r) => deleteJob(on(r), parts[2]) };
  throw new ApiError(404, 'no such endpoint');
}

function on(router: Router): WorkqRouter {
  if (!router.workq.serving) throw new ApiError(404, 'workq is off (this server has no workq listener)');
  return router.workq;
}

/** A reply target that settles one promise once `left` replies came. */
function gather<T>(left: number, each: (shard: number, buf: Buffer, at: number) => void, done: () => T): { target: ReplyTarget; promise: Promise<T> } {
  let resolve!: (v: T) => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const target: ReplyTarget = {
    onShardReply(shard, _kind, _seq, buf, at) {
      try {
        each(shard, buf, at);
        if (--left === 0) resolve(done());
      } catch (err) {
        reject(err as Error);
      }
    },
  };
  return { target, promise };
}

/** Ready and scheduled lengths of `names` (queues that exist), as `inspect queues` gets them. */
function lengths(wq: WorkqRouter, names: string[]): Promise<{ name: string; ready: number; scheduled: number }[]> {
  if (names.length === 0) return Promise.resolve([]);
  const lens = new Float64Array(names.length * 2);
  let byShard = new Map<number, number[]>();
  const shards = new Set(names.map((name) => (wq.queue(name) as WqQueue).shard)).size;
  const g = gather(shards, (shard, buf, at) => WorkqRouter.readLens(buf, at, byShard.get(shard) ?? [], lens),
    () => names.map((name, i) => ({ name, ready: lens[i * 2], scheduled: lens[i * 2 + 1] })));
  byShard = wq.requestLens(names, g.target, 0, 0);
  return g.promise;
}

async function queues(wq: WorkqRouter): Promise<{ status: number; body: unknown }> {
  return { status: 200, body: { queues: await lengths(wq, wq.sortedNames()) } };
}

function findQueue(wq: WorkqRouter, name: string): WqQueue {
  if (!NAME_RE.test(name)) throw new ApiError(400, 'a workq queue name is 1 to 255 of A-Z a-z 0-9 _ . -');
  const q = wq.queue(name);
  if (q === undefined) throw new ApiError(404, 'no such workq queue');
  return q;
}

async function queueOne(wq: WorkqRouter, name: string): Promise<{ status: number; body: unknown }> {
  const q = findQueue(wq, name);
  const [one] = await lengths(wq, [q.name]);
  return { status: 200, body: one };
}

function isoTime(ms: number): string | null {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

function jobJson(j: InspectedJob): Record<string, unknown> {
  const payload = Buffer.from(j.payload.buffer, j.payload.byteOffset, Math.min(j.payload.length, LIST_PREVIEW_BYTES));
  return {
    id: j.idText,
    queue: j.name,
    state: WQ_STATE_NAMES[j.state] ?? 'unknown',
    priority: j.priority,
    attempts: j.attempts,
    'max-attempts': j.maxAttempts,
    fails: j.fails,
    'max-fails': j.maxFails,
    ttr: j.ttrMs,
    ttl: j.ttlMs,
    created: isoTime(j.createdMs),
    time: j.scheduleMs === null ? null : isoTime(j.scheduleMs),
    'payload-size': j.payload.length,
    // A copy: the payload is a view into the shard's reply buffer.
    preview: preview(Buffer.from(payload), j.payload.length),
  };
}

async function jobs(wq: WorkqRouter, name: string, params: URLSearchParams): Promise<{ status: number; body: unknown }> {
  const q = findQueue(wq, name);
  const state = params.get('state') ?? 'ready';
  if (state !== 'ready' && state !== 'scheduled') throw new ApiError(400, 'state must be ready or scheduled');
  const limitText = params.get('limit');
  const limit = limitText === null ? INSPECT_LIMIT_MAX : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > INSPECT_LIMIT_MAX) throw new ApiError(400, `limit must be an integer from 1 to ${INSPECT_LIMIT_MAX}`);
  const cursor = params.get('cursor');
  let offset = 0;
  if (cursor !== null && cursor !== '') {
    offset = /^[0-9]+$/.test(cursor) ? Number(cursor) : NaN;
    if (!Number.isInteger(offset) || offset > 0xffffffff) throw new ApiError(400, 'malformed cursor (an offset)');
  }
  // One more than the page, to know whether another follows.
  let page: Record<string, unknown>[] = [];
  const g = gather(1, (_shard, buf, at) => {
    page = (wq.readJobs(buf, at) ?? []).map(jobJson);
  }, () => page);
  wq.requestJobs(q, state === 'scheduled', offset, limit + 1, g.target, 0, 0);
  await g.promise;
  const more = page.length > limit;
  return {
    status: 200,
    body: { queue: q.name, state, jobs: page.slice(0, limit), next: more ? String(offset + limit) : null },
  };
}

async function deleteJob(wq: WorkqRouter, idText: string): Promise<{ status: number; body: unknown }> {
  if (!UUID_RE.test(idText)) throw new ApiError(400, 'a workq job id is a UUID (8-4-4-4-12 hex digits)');
  const uuid = Buffer.from(idText.replace(/-/g, ''), 'hex');
  const i = wq.uuids.lookup(uuid);
  if (i === -1) throw new ApiError(404, 'no such workq job');
  let r: 'deleted' | 'not_found' | 'unlogged' = 'not_found';
  const g = gather(1, (_shard, buf, at) => {
    if (replyKind(buf, at) !== R_OK || okResult(buf, at) !== 1) r = 'not_found';
    else r = replyUnlogged(buf, at) ? 'unlogged' : 'deleted';
  }, () => r);
  wq.deleteJob(uuid, wq.uuids.idAt(i), wq.uuids.shardAt(i), g.target);
  const out = await g.promise;
  if (out === 'not_found') throw new ApiError(404, 'no such workq job');
  if (out === 'unlogged') throw new ApiError(500, 'deleted, but the change could not be logged');
  return { status: 200, body: { id: idText.toLowerCase(), deleted: true } };
}
