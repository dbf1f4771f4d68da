// Bounded disk use (beanstalkd issues #599 and #622: one long-lived buried job there pins every
// binlog file written after it). With 64 KiB segments: a few jobs buried early and left there,
// thousands of short-lived jobs put, reserved and deleted, delayed jobs released with a delay
// over and over. The .wal files must stay within a small multiple of the live data, old segments
// must go (binlog-oldest-index advances), and after a restart every long-lived job is intact.

import { describe, expect, it } from 'vitest';
import { startServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import {
  cleanedAfterEach, fullRecordBytes, jobOf, makeDir, putId, sleep, stats, statsJob, tubePerShard, walBytes, walFiles,
} from './support.ts';

const SEGMENT = 65536;
const SHARDS = 2;
const RUN_MS = 4000;
const BATCH = 32;
const CHURN_BODY = 500;
const KEEP = 5;
const KEEP_BODY = 2000;
const SLOW = 20;

const { dirs, servers } = cleanedAfterEach();

/** Put BATCH jobs, then reserve-job + delete each, all pipelined; returns the bytes of FULL records. */
async function churn(c: Client, tube: string, until: () => boolean, counts: { jobs: number; bytes: number }): Promise<void> {
  const body = 'c'.repeat(CHURN_BODY);
  const put = `put 100 0 60 ${CHURN_BODY}\r\n${body}\r\n`.repeat(BATCH);
  while (!until()) {
    await c.send(put);
    const ids: number[] = [];
    for (let i = 0; i < BATCH; i++) {
      const r = await c.readReply(10_000);
      const m = /^INSERTED (\d+)\r\n$/.exec(r);
      if (!m) throw new Error(`churn put: ${r}`);
      ids.push(Number(m[1]));
    }
    await c.send(ids.map((id) => `reserve-job ${id}\r\ndelete ${id}\r\n`).join(''));
    for (const id of ids) {
      const r = await c.readReply(10_000);
      if (jobOf(r)?.id !== id) throw new Error(`churn reserve-job ${id}: ${r.slice(0, 40)}`);
      const d = await c.readReply(10_000);
      if (d !== 'DELETED\r\n') throw new Error(`churn delete ${id}: ${d}`);
    }
    counts.jobs += BATCH;
    counts.bytes += BATCH * fullRecordBytes(tube, CHURN_BODY);
  }
}

/** Reserve the delayed jobs as they come ready and release each with a delay again. */
async function cycleDelayed(c: Client, until: () => boolean, counts: { releases: number }): Promise<void> {
  while (!until()) {
    const r = await c.request('reserve-with-timeout 1', 10_000);
    if (r === 'TIMED_OUT\r\n') continue;
    const j = jobOf(r);
    if (j === null) throw new Error(`slow reserve: ${r}`);
    const rel = await c.request(`release ${j.id} 50 1`);
    if (rel !== 'RELEASED\r\n') throw new Error(`slow release: ${rel}`);
    counts.releases++;
  }
}

describe('bounded disk use', () => {
  it('buried and delayed jobs do not pin old segments; disk stays within a small multiple of live data', async () => {
    const dir = makeDir('space');
    dirs.push(dir);
    const server = await startServer({
      port: 0, shards: SHARDS, logLevel: 'silent', binlogDir: dir, fsyncMs: 50, binlogSegmentBytes: SEGMENT,
    });
    servers.push(server);
    const admin = await connect(server.port);

    // Long-lived: buried early, left there.
    await admin.request('use keep');
    const keep = new Map<number, string>();
    for (let i = 0; i < KEEP; i++) {
      const body = `keep ${i} `.padEnd(KEEP_BODY, 'k');
      const id = await putId(admin, body, 10);
      expect(jobOf(await admin.request(`reserve-job ${id}`))?.id).toBe(id);
      expect(await admin.request(`bury ${id} 10`)).toBe('BURIED\r\n');
      keep.set(id, body);
    }
    // Delayed, released with a delay over and over.
    await admin.request('use slow');
    const slow = new Map<number, string>();
    for (let i = 0; i < SLOW; i++) {
      const body = `slow ${i} `.padEnd(100, 's');
      slow.set(await putId(admin, body, 50, 1), body);
    }
    const firstStats = await stats(admin);

    const live = KEEP * fullRecordBytes('keep', KEEP_BODY) + SLOW * fullRecordBytes('slow', 100);
    const churnTubes = tubePerShard(SHARDS, 'churn');
    const churnLiveMax = churnTubes.reduce((n, t) => n + BATCH * fullRecordBytes(t, CHURN_BODY), 0);
    // Per shard the log promises at most 4 × its live bytes + 3 segments, a segment overshooting
    // by at most one batch: over every shard, allow 4 × all live bytes + 4 segments per shard.
    const bound = 4 * (live + churnLiveMax) + SHARDS * 4 * SEGMENT;

    const deadline = Date.now() + RUN_MS;
    const until = () => Date.now() >= deadline;
    const counts = { jobs: 0, bytes: 0, releases: 0 };
    const samples: number[] = [];
    const sampler = (async () => {
      while (!until()) {
        samples.push(walBytes(dir));
        await sleep(100);
      }
    })();
    const workers = await Promise.all([...churnTubes.map(() => connect(server.port)), connect(server.port)]);
    for (let i = 0; i < churnTubes.length; i++) await workers[i].request(`use ${churnTubes[i]}`);
    const slowWorker = workers[churnTubes.length];
    await slowWorker.request('watch slow');
    await slowWorker.request('ignore default');
    await Promise.all([
      ...churnTubes.map((t, i) => churn(workers[i], t, until, counts)),
      cycleDelayed(slowWorker, until, counts),
      sampler,
    ]);
    samples.push(walBytes(dir));
    const lastStats = await stats(admin);

    const peak = Math.max(...samples);
    const summary = `peak ${peak} B, bound ${bound} B, ${counts.jobs} short-lived jobs (${counts.bytes} B of FULL records), ` +
      `${counts.releases} delayed releases, segments now ${walFiles(dir).map((f) => f.name).join(' ')}`;
    // The run wrote far more than the bound: without deleting and compacting segments it would exceed it.
    expect(counts.bytes, summary).toBeGreaterThan(3 * bound);
    expect(counts.releases, summary).toBeGreaterThan(SLOW);
    expect(peak, summary).toBeLessThanOrEqual(bound);
    expect(Number(lastStats['binlog-oldest-index']), summary).toBeGreaterThan(Number(firstStats['binlog-oldest-index']));
    expect(Number(lastStats['binlog-records-migrated']), 'the buried jobs were moved forward').toBeGreaterThan(0);
    expect(lastStats['binlog-max-size']).toBe(String(SEGMENT));
    for (const id of keep.keys()) {
      const file = Number((await statsJob(admin, id))!.file);
      expect(file, `buried job ${id} lives in a recent segment`).toBeGreaterThan(1);
    }
    for (const c of [...workers, admin]) c.destroy();
    await server.close();
    servers.length = 0;

    // Everything long-lived survived the compaction: restart (another shard count) and look.
    const again = await startServer({ port: 0, shards: 3, logLevel: 'silent', binlogDir: dir, fsyncMs: 50, binlogSegmentBytes: SEGMENT });
    servers.push(again);
    const c = await connect(again.port);
    for (const [id, body] of keep) {
      const st = (await statsJob(c, id))!;
      expect([st.state, st.pri, st.reserves, st.buries], `buried job ${id}`).toEqual(['buried', '10', '1', '1']);
      expect(jobOf(await c.request(`peek ${id}`))?.body).toBe(body);
    }
    for (const [id, body] of slow) {
      const st = await statsJob(c, id);
      expect(st?.tube, `delayed job ${id}`).toBe('slow');
      expect(['delayed', 'ready']).toContain(st!.state);
      expect(jobOf(await c.request(`peek ${id}`))?.body).toBe(body);
    }
    const s = await stats(c);
    expect(Number(s['current-jobs-buried']) + Number(s['current-jobs-delayed']) + Number(s['current-jobs-ready'])).toBe(KEEP + SLOW);
    expect(walBytes(dir), 'a fresh generation holds the live jobs only').toBeLessThan(2 * live + SHARDS * SEGMENT);
    c.destroy();
  });

  // Regression (fixed in 3379816). binlog-oldest-index was the minimum over the shards, and a
  // shard that had written nothing reported segment 1 (which has no file). With fewer busy tubes
  // than shards (the default shard count is cores - 1) it stayed 1 forever: the number meant to
  // show that old segments go away (#599, #622) never moved.
  it('binlog-oldest-index names the oldest segment on disk, also while some shards are idle', async () => {
    const dir = makeDir('oldest');
    dirs.push(dir);
    const server = await startServer({ port: 0, shards: 4, logLevel: 'silent', binlogDir: dir, fsyncMs: 0, binlogSegmentBytes: 4096 });
    servers.push(server);
    const c = await connect(server.port);
    const body = 'o'.repeat(300);
    for (let round = 0; round < 10; round++) {
      await c.send(`put 0 0 60 ${body.length}\r\n${body}\r\n`.repeat(20));
      const ids: number[] = [];
      for (let i = 0; i < 20; i++) ids.push(Number(/^INSERTED (\d+)/.exec(await c.readReply())![1]));
      await c.send(ids.map((id) => `delete ${id}\r\n`).join(''));
      for (let i = 0; i < 20; i++) expect(await c.readReply()).toBe('DELETED\r\n');
    }
    const st = await stats(c);
    const files = walFiles(dir);
    const oldestOnDisk = Math.min(...files.map((f) => f.seq));
    expect(oldestOnDisk, 'segments were deleted').toBeGreaterThan(1);
    expect(Number(st['binlog-oldest-index']), `files on disk: ${files.map((f) => f.name).join(' ')}`).toBe(oldestOnDisk);
    c.destroy();
  });
});
