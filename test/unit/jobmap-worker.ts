// The worker side of jobmap-threads.test.ts: run as a worker (workerData.kind === 'jobmap-worker'),
// it attaches to a JobShardMap or JobIds made on the main thread, waits for the start signal (so all
// workers hammer the map at once), does its part and posts a JobMapWorkerResult.
//
// 'map' mode: thread t of n owns the ids page*PAGE_IDS + (j*n + t) for j < idsPerPage, page after
// page, so every page in use holds ids of every thread, set and deleted by different threads at the
// same time. It keeps a window of live ids (deleting one of its 8 oldest once the window is full),
// sometimes overwrites a live id's shard, and checks as it goes: its own ids read back their shard
// while live and -1 once deleted; any other thread's id reads -1 or one of the two shards that
// thread may give it (never anything else: a page slot freed and reused under a cached lookup would
// show up as some other page's byte). Now and then it sets a straggler: an id in a page a few behind,
// most likely dropped since and its slot reused, which this thread may still have cached. At the
// end it deletes what it still holds.
//
// 'ids' mode: takes `count` ids from JobIds and sends them back.

import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { JobShardMap, PAGE_IDS, type JobShardMapShared } from '../../src/route/jobmap.ts';
import { JobIds, type JobIdsShared } from '../../src/shared/jobids.ts';
import { mulberry32u32 } from '../support/prng.ts';

/** The shard an id gets first, and the one an overwrite gives it (0..254 each, never equal). */
export function shardA(id: number): number {
  return (Math.imul(id | 0, 0x9e3779b1) >>> 24) % 255;
}
export function shardB(id: number): number {
  return (shardA(id) + 1 + ((id >>> 3) % 200)) % 255;
}

/** Id `j` of page `page` for thread `t` of `n`. */
export function idOf(page: number, j: number, t: number, n: number, firstPage: number): number {
  return (firstPage + page) * PAGE_IDS + j * n + t + 1;
}

export interface JobMapWorkerData {
  kind: 'jobmap-worker';
  mode: 'map' | 'ids';
  start: SharedArrayBuffer; // Int32 [0]: 0 until the main thread says go; [1]: workers ready; [2 + t]: thread t's page
  map?: JobShardMapShared;
  ids?: JobIdsShared;
  thread: number;
  threads: number;
  seed: number;
  firstPage: number;
  pages: number; // pages each thread walks through
  idsPerPage: number; // of this thread, per page
  window: number; // live ids per thread at most
  count: number; // ids mode: ids to take
}

export interface JobMapWorkerResult {
  sets: number;
  deletes: number;
  gets: number;
  foreignHits: number; // other threads' ids seen live
  ids?: Float64Array;
}

function fail(msg: string): never {
  throw new Error(`jobmap worker: ${msg}`);
}

function runMap(d: JobMapWorkerData): JobMapWorkerResult {
  const map = JobShardMap.attach(d.map!);
  const rand = mulberry32u32(d.seed);
  const n = d.threads;
  const t = d.thread;
  const live: number[] = []; // own live ids
  const liveSet = new Set<number>();
  const over = new Set<number>(); // own live ids overwritten to shardB
  const res: JobMapWorkerResult = { sets: 0, deletes: 0, gets: 0, foreignHits: 0 };
  const expectOwn = (id: number, want: number, what: string): void => {
    res.gets++;
    const got = map.get(id);
    if (got !== want) fail(`thread ${t}: get(${id}) = ${got} ${what}, expected ${want}`);
  };
  const deleteAt = (i: number): void => {
    const id = live.splice(i, 1)[0]!;
    liveSet.delete(id);
    map.delete(id);
    over.delete(id);
    res.deletes++;
    expectOwn(id, -1, 'after delete');
  };
  const progress = new Int32Array(d.start);
  for (let page = 0; page < d.pages; page++) {
    // Keep within a page of the slowest thread, so that the threads share pages (on a machine with
    // fewer cores than threads, one would otherwise run ahead on pages of its own).
    Atomics.store(progress, 2 + t, page);
    Atomics.notify(progress, 2 + t);
    for (let o = 0; o < n; o++) {
      while (Atomics.load(progress, 2 + o) < page - 1) Atomics.wait(progress, 2 + o, Atomics.load(progress, 2 + o), 1);
    }
    for (let j = 0; j < d.idsPerPage; j++) {
      const id = idOf(page, j, t, n, d.firstPage);
      map.set(id, shardA(id));
      res.sets++;
      live.push(id);
      liveSet.add(id);
      expectOwn(id, shardA(id), 'just set');
      const r = rand();
      if ((r & 7) === 0) {
        // Overwrite a live id's shard.
        const o = live[(r >>> 8) % live.length]!;
        map.set(o, shardB(o));
        over.add(o);
        res.sets++;
        expectOwn(o, shardB(o), 'overwritten');
      }
      if (((r >>> 3) & 3) === 0) {
        const o = live[(r >>> 5) % live.length]!;
        expectOwn(o, over.has(o) ? shardB(o) : shardA(o), 'while live');
      }
      if (((r >>> 20) & 31) === 0 && page >= 3) {
        // A straggler: an id in a page a few behind (most likely dropped since, its slot reused),
        // the way a slow connection's put lands after the queue moved on. Offsets past the
        // thread's ordinary ids, so no one else uses them.
        const sid = idOf(page - 1 - ((r >>> 25) % 3), d.idsPerPage + ((r >>> 9) & 63), t, n, d.firstPage);
        if (!liveSet.has(sid)) {
          map.set(sid, shardA(sid));
          res.sets++;
          live.push(sid);
          liveSet.add(sid);
          expectOwn(sid, shardA(sid), 'straggler just set');
        }
      }
      // Another thread's id near ours (same page, maybe the previous one): -1 or its shard.
      const ot = (t + 1 + (r % (n - 1))) % n;
      const op = Math.max(0, page - ((r >>> 12) & 1));
      const oid = idOf(op, (r >>> 13) % d.idsPerPage, ot, n, d.firstPage);
      const got = map.get(oid);
      res.gets++;
      if (got !== -1) {
        if (got !== shardA(oid) && got !== shardB(oid)) fail(`thread ${t}: get(${oid}) of thread ${ot} = ${got}, not -1, ${shardA(oid)} or ${shardB(oid)}`);
        res.foreignHits++;
      }
      // An id past everyone's: never set.
      if (map.get(idOf(d.pages + 1, j, t, n, d.firstPage)) !== -1) fail(`thread ${t}: an id never set reads set`);
      // Delete one of the 8 oldest: mostly in order, but not quite.
      while (live.length > d.window) deleteAt((r >>> 16) & 7);
    }
  }
  Atomics.store(progress, 2 + t, d.pages + 1);
  Atomics.notify(progress, 2 + t);
  while (live.length > 0) deleteAt(live.length - 1);
  return res;
}

function runIds(d: JobMapWorkerData): JobMapWorkerResult {
  const ids = JobIds.attach(d.ids!);
  const out = new Float64Array(d.count);
  for (let i = 0; i < d.count; i++) out[i] = ids.next();
  return { sets: 0, deletes: 0, gets: 0, foreignHits: 0, ids: out };
}

if (!isMainThread && (workerData as { kind?: unknown } | null)?.kind === 'jobmap-worker') {
  const d = workerData as JobMapWorkerData;
  const start = new Int32Array(d.start);
  Atomics.add(start, 1, 1); // ready
  Atomics.wait(start, 0, 0);
  const res = d.mode === 'map' ? runMap(d) : runIds(d);
  parentPort!.postMessage(res, res.ids ? [res.ids.buffer as ArrayBuffer] : []);
}
