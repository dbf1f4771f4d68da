// The start-up sequence the server is meant to follow, end to end: lock, recover (a crash left a
// torn tail), open the next generation — here with another shard count — rewrite every job into
// it, sync, remove the old generations, go on logging; a second restart sees the same jobs.

import { afterEach, beforeEach, expect, it } from 'vitest';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import {
  fullRecordBytes, listSegments, lockDir, recover, removeGenerationsBefore, STATE_BURIED, STATE_READY,
  STATE_RESERVED, Wal, type RecoveredJob, type WalWarning,
} from '../../workers/wal/index.ts';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(join(os.tmpdir(), 'wal-restart-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

const shardOf = (tube: string, shards: number) => tube.charCodeAt(0) % shards;

/** One server run: recovers, rewrites into a new generation over `shards` shards, returns the
 *  open Wals and the jobs with their fullSeq. */
function start(shards: number, warnings: WalWarning[]) {
  const lock = lockDir(dir);
  const rec = recover(dir, { onWarning: (w) => warnings.push(w) });
  const generation = rec.maxGeneration + 1;
  const wals = Array.from({ length: shards }, (_, shard) =>
    new Wal({ dir, shard, generation, sync: { everyMs: 50 }, segmentBytesMax: 4096 }));
  const fullSeq = new Map<number, number>();
  const now = 1_700_000_100_000;
  for (const j of rec.jobs.values()) {
    const wal = wals[shardOf(j.tube, shards)];
    const state = j.state === STATE_RESERVED ? STATE_READY : j.state; // as beanstalkd: the reserver is gone
    fullSeq.set(j.id, wal.appendFull(j.id, j.tube, j.pri, j.delaySec, j.ttrSec, state, j.deadlineMs, j.createdMs,
      j.reserves, j.timeouts, j.releases, j.buries, j.kicks, j.body, 0, j.body.length));
    if (wal.pendingBytes > 2048) wal.commit(now); // keep batches bounded
  }
  for (const wal of wals) wal.sync(now); // the rewrite is durable on every shard...
  removeGenerationsBefore(dir, generation); // ...before the old generations go
  return { lock, wals, fullSeq, nextId: rec.maxId + 1, jobs: rec.jobs, generation };
}

it('recovers, rewrites into a new generation with another shard count, and goes on', () => {
  const warnings: WalWarning[] = [];
  // Run 1: 2 shards, jobs put, some buried, some deleted; then a crash mid-write.
  let run = start(2, warnings);
  expect(run.generation).toBe(1);
  const tubes = ['a', 'b', 'c', 'd', 'e'];
  const bodies = new Map<number, Uint8Array>();
  let now = 1_700_000_000_000;
  for (let id = run.nextId; id < 200; id++) {
    const tube = tubes[id % tubes.length];
    const body = new TextEncoder().encode(`job ${id}\r\n\0`.repeat(1 + (id % 9)));
    bodies.set(id, body);
    const wal = run.wals[shardOf(tube, 2)];
    const seq = wal.appendFull(id, tube, id % 50, 0, 60, STATE_READY, 0, now, 0, 0, 0, 0, 0, body, 0, body.length);
    run.fullSeq.set(id, seq);
    if (id % 3 === 0) wal.appendUpdate(id, seq, STATE_BURIED, 7, 0, 0, 1, 0, 0, 1, 0);
    if (id % 5 === 0) wal.appendDelete(id, seq, fullRecordBytes(tube.length, body.length));
    if (id % 10 === 0) for (const w of run.wals) w.commit(now += 7);
  }
  for (const w of run.wals) w.commit(now);
  // The crash: the lock stays (its pid is ours, so drop it as a dead process's would be), and the
  // last write of shard 1 was torn.
  run.lock.unlock();
  const last = listSegments(dir).filter((s) => s.shard === 1).at(-1)!;
  fs.appendFileSync(last.path, Buffer.from([60, 0, 0, 0, 1, 2, 3, 4, 1, 9]));

  const expected = (id: number): Partial<RecoveredJob> | undefined =>
    id % 5 === 0 ? undefined : { id, tube: tubes[id % tubes.length], state: id % 3 === 0 ? STATE_BURIED : STATE_READY, body: bodies.get(id) };

  // Run 2: 3 shards.
  run = start(3, warnings);
  expect(warnings.map((w) => [w.kind, w.path])).toEqual([['torn-tail', last.path]]);
  expect(run.generation).toBe(2);
  expect(run.nextId).toBe(200);
  expect(listSegments(dir).every((s) => s.generation === 2)).toBe(true);
  expect(new Set(listSegments(dir).map((s) => s.shard))).toEqual(new Set([0, 1, 2]));
  for (let id = 1; id < 200; id++) {
    const e = expected(id);
    if (e) expect(run.jobs.get(id)).toMatchObject(e);
    else expect(run.jobs.has(id)).toBe(false);
  }
  // Work goes on in generation 2: delete every job of tube 'a', then shut down cleanly.
  for (const j of run.jobs.values()) {
    if (j.tube !== 'a') continue;
    run.wals[shardOf('a', 3)].appendDelete(j.id, run.fullSeq.get(j.id)!, fullRecordBytes(1, j.body.length));
  }
  for (const w of run.wals) {
    w.commit(now);
    w.removeDeadSegments();
    w.close();
  }
  run.lock.unlock();

  // Run 3: back to 1 shard.
  warnings.length = 0;
  run = start(1, warnings);
  expect(warnings).toEqual([]);
  expect(run.generation).toBe(3);
  for (let id = 1; id < 200; id++) {
    const e = tubes[id % tubes.length] === 'a' ? undefined : expected(id);
    if (e) expect(run.jobs.get(id)).toMatchObject(e);
    else expect(run.jobs.has(id)).toBe(false);
  }
  for (const w of run.wals) w.close();
  run.lock.unlock();
});
