// Restart recovery: jobs in every state, over several tubes, survive a clean close and a SIGKILL,
// and come back into a different shard count exactly as the log described them (README
// "Durability"): reserved → ready, delayed keep their absolute deadline, buried stay buried,
// counters kept, deleted stay deleted, ids continue after the largest id ever logged.

import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { waitUntil } from '../support/harness.ts';
import {
  cleanedAfterEach, jobOf, makeDir, nodeBin, parseList, putId, REPO, scan, serverArgs, sleep, spawnServer, statsJob, walFiles,
} from './support.ts';

const { dirs, servers, clients } = cleanedAfterEach();

function newDir(): string {
  const d = makeDir('restart');
  dirs.push(d);
  return d;
}

async function start(dir: string, shards: number, extra: { binlogSegmentBytes?: number; maxJobSize?: number } = {}): Promise<RunningServer> {
  const s = await startServer({ port: 0, shards, logLevel: 'silent', binlogDir: dir, fsyncMs: 0, ...extra });
  servers.push(s);
  return s;
}

async function stop(s: RunningServer): Promise<void> {
  servers.splice(servers.indexOf(s), 1);
  await s.close();
}

async function client(port: number): Promise<Client> {
  const c = await connect(port);
  clients.push(c);
  return c;
}

async function ok(c: Client, line: string, want: string): Promise<void> {
  expect(await c.request(line), line).toBe(want);
}

type Ids = Record<string, number>;

/**
 * Builds jobs in every state through a producer `c` and a worker `w`. Returns the ids by name and
 * the delayed jobs' time-left right after they were set.
 */
async function scenario(c: Client, w: Client): Promise<{ ids: Ids; timeLeft: Record<string, number> }> {
  const ids: Ids = {};
  await ok(c, 'use alpha', 'USING alpha\r\n');
  ids.r100 = await putId(c, 'ready pri 100', 100);
  ids.r5 = await putId(c, 'ready pri 5', 5);
  ids.r100b = await putId(c, 'ready pri 100 again', 100);
  ids.rmax = await putId(c, 'ready pri max', 4294967295);
  await ok(c, 'use beta', 'USING beta\r\n');
  ids.delayed = await putId(c, 'delayed 30 s', 1, 30);
  ids.buried = await putId(c, 'buried after reserve', 20);
  expect(jobOf(await w.request(`reserve-job ${ids.buried}`))?.id).toBe(ids.buried);
  await ok(w, `bury ${ids.buried} 7`, 'BURIED\r\n');
  ids.relDelay = await putId(c, 'released with delay', 20);
  expect(jobOf(await w.request(`reserve-job ${ids.relDelay}`))?.id).toBe(ids.relDelay);
  await ok(w, `release ${ids.relDelay} 9 20`, 'RELEASED\r\n');
  await ok(c, 'use gamma', 'USING gamma\r\n');
  ids.reserved = await putId(c, 'reserved at the end', 30);
  expect(jobOf(await w.request(`reserve-job ${ids.reserved}`))?.id).toBe(ids.reserved);
  ids.kicked = await putId(c, 'buried then kicked', 40);
  expect(jobOf(await w.request(`reserve-job ${ids.kicked}`))?.id).toBe(ids.kicked);
  await ok(w, `bury ${ids.kicked} 41`, 'BURIED\r\n');
  await ok(w, `kick-job ${ids.kicked}`, 'KICKED\r\n');
  ids.released = await putId(c, 'released with new pri', 50);
  expect(jobOf(await w.request(`reserve-job ${ids.released}`))?.id).toBe(ids.released);
  await ok(w, `release ${ids.released} 3 0`, 'RELEASED\r\n');
  await ok(c, 'use epsilon', 'USING epsilon\r\n');
  ids.kickedDelayed = await putId(c, 'delayed then kicked', 60, 100);
  await ok(c, 'kick 5', 'KICKED 1\r\n');
  // Deleted jobs, the last of them with the largest id of all.
  await ok(c, 'use delta', 'USING delta\r\n');
  ids.gone1 = await putId(c, 'deleted ready');
  await ok(c, `delete ${ids.gone1}`, 'DELETED\r\n');
  ids.gone2 = await putId(c, 'deleted while reserved');
  expect(jobOf(await w.request(`reserve-job ${ids.gone2}`))?.id).toBe(ids.gone2);
  await ok(w, `delete ${ids.gone2}`, 'DELETED\r\n');
  ids.gone3 = await putId(c, 'deleted last');
  await ok(c, `delete ${ids.gone3}`, 'DELETED\r\n');
  const timeLeft: Record<string, number> = {};
  for (const k of ['delayed', 'relDelay']) timeLeft[k] = Number((await statsJob(c, ids[k]))!['time-left']);
  return { ids, timeLeft };
}

const BODIES: Record<string, string> = {
  r100: 'ready pri 100', r5: 'ready pri 5', r100b: 'ready pri 100 again', rmax: 'ready pri max',
  delayed: 'delayed 30 s', buried: 'buried after reserve', relDelay: 'released with delay',
  reserved: 'reserved at the end', kicked: 'buried then kicked', released: 'released with new pri',
  kickedDelayed: 'delayed then kicked',
};

/** What stats-job must say after a restart (fields not named are not checked). */
const EXPECTED: Record<string, Record<string, string>> = {
  r100: { tube: 'alpha', state: 'ready', pri: '100', reserves: '0', releases: '0', buries: '0', kicks: '0' },
  r5: { tube: 'alpha', state: 'ready', pri: '5', reserves: '0', releases: '0', buries: '0', kicks: '0' },
  r100b: { tube: 'alpha', state: 'ready', pri: '100', reserves: '0', releases: '0', buries: '0', kicks: '0' },
  rmax: { tube: 'alpha', state: 'ready', pri: '4294967295', reserves: '0', releases: '0', buries: '0', kicks: '0' },
  delayed: { tube: 'beta', state: 'delayed', pri: '1', delay: '30', reserves: '0', releases: '0', buries: '0', kicks: '0' },
  buried: { tube: 'beta', state: 'buried', pri: '7', reserves: '1', releases: '0', buries: '1', kicks: '0' },
  relDelay: { tube: 'beta', state: 'delayed', pri: '9', delay: '20', reserves: '1', releases: '1', buries: '0', kicks: '0' },
  // beanstalkd logs nothing for a reserve: the reserver is gone, the job is ready again.
  reserved: { tube: 'gamma', state: 'ready', pri: '30', releases: '0', buries: '0', kicks: '0' },
  kicked: { tube: 'gamma', state: 'ready', pri: '41', reserves: '1', releases: '0', buries: '1', kicks: '1' },
  released: { tube: 'gamma', state: 'ready', pri: '3', reserves: '1', releases: '1', buries: '0', kicks: '0' },
  kickedDelayed: { tube: 'epsilon', state: 'ready', pri: '60', reserves: '0', releases: '0', buries: '0', kicks: '1' },
};

/** Everything the restarted server must show; `elapsedMs` since the time-left was read. */
async function checkRecovered(port: number, ids: Ids, timeLeft: Record<string, number>, elapsedMs: number): Promise<void> {
  const c = await client(port);
  for (const [name, want] of Object.entries(EXPECTED)) {
    const got = await statsJob(c, ids[name]);
    expect(got, `job "${name}" (${ids[name]}) after restart`).not.toBeNull();
    const picked: Record<string, string> = {};
    for (const k of Object.keys(want)) picked[k] = got![k];
    expect(picked, `stats-job of "${name}" (${ids[name]})`).toEqual(want);
    const found = jobOf(await c.request(`peek ${ids[name]}`));
    expect(found?.body, `body of "${name}"`).toBe(BODIES[name]);
  }
  // The delayed jobs' deadlines are absolute: their time-left went on running while it was down.
  for (const name of ['delayed', 'relDelay']) {
    const left = Number((await statsJob(c, ids[name]))!['time-left']);
    expect(left, `time-left of "${name}" (was ${timeLeft[name]} ${elapsedMs} ms ago)`).toBeLessThanOrEqual(
      timeLeft[name] - Math.floor(elapsedMs / 1000));
    expect(left).toBeGreaterThanOrEqual(timeLeft[name] - Math.ceil(elapsedMs / 1000) - 1);
  }
  for (const name of ['gone1', 'gone2', 'gone3']) {
    expect(await c.request(`peek ${ids[name]}`), `deleted job "${name}"`).toBe('NOT_FOUND\r\n');
  }
  // Tubes with jobs exist again; the one whose jobs were all deleted does not.
  expect(parseList(await c.request('list-tubes')).sort()).toEqual(['alpha', 'beta', 'default', 'epsilon', 'gamma']);
  // Peeks and reserve order.
  await ok(c, 'use beta', 'USING beta\r\n');
  expect(jobOf(await c.request('peek-buried'))?.id).toBe(ids.buried);
  expect(jobOf(await c.request('peek-delayed'))?.id).toBe(ids.relDelay); // 20 s before 30 s
  expect(await c.request('peek-ready')).toBe('NOT_FOUND\r\n');
  const w = await client(port);
  await ok(w, 'watch alpha', 'WATCHING 2\r\n');
  await ok(w, 'ignore default', 'WATCHING 1\r\n');
  const order: number[] = [];
  for (let i = 0; i < 4; i++) order.push(jobOf(await w.request('reserve-with-timeout 0'))!.id);
  expect(order).toEqual([ids.r5, ids.r100, ids.r100b, ids.rmax]);
  await ok(w, 'watch gamma', 'WATCHING 2\r\n');
  await ok(w, 'ignore alpha', 'WATCHING 1\r\n');
  const gamma: number[] = [];
  for (let i = 0; i < 3; i++) gamma.push(jobOf(await w.request('reserve-with-timeout 0'))!.id);
  expect(gamma).toEqual([ids.released, ids.reserved, ids.kicked]);
  expect(await w.request('reserve-with-timeout 0')).toBe('TIMED_OUT\r\n');
  // The next id follows the largest one ever handed out (a deleted job's).
  await ok(c, 'use default', 'USING default\r\n');
  expect(await putId(c, 'after restart')).toBe(ids.gone3 + 1);
}

describe('restart recovery', () => {
  it('close, then restart with another shard count (3 → 2): every job as it was', async () => {
    const dir = newDir();
    const a = await start(dir, 3);
    const { ids, timeLeft } = await scenario(await client(a.port), await client(a.port));
    const t0 = Date.now();
    await stop(a);
    expect(fs.existsSync(join(dir, 'lock')), 'a clean close removes the lock').toBe(false);
    await sleep(1100); // deliberate: down over a second, which the delayed jobs' time-left must show
    const b = await start(dir, 2);
    await checkRecovered(b.port, ids, timeLeft, Date.now() - t0);
    // The old generation is gone, the new one holds the jobs on the new shard layout.
    const files = walFiles(dir);
    expect(new Set(files.map((f) => f.generation)).size).toBe(1);
    expect(Math.max(...files.map((f) => f.shard))).toBeLessThan(2);
  });

  it('SIGKILL of a child server, then restart in-process with another shard count (3 → 1)', async () => {
    const dir = newDir();
    const child = await spawnServer({ dir, shards: 3 });
    try {
      const c = await connect(child.port);
      const w = await connect(child.port);
      const { ids, timeLeft } = await scenario(c, w);
      const t0 = Date.now();
      await child.kill(); // -f 0: everything acknowledged is on disk; the lock stays behind
      c.destroy();
      w.destroy();
      expect(fs.existsSync(join(dir, 'lock')), 'a crash leaves the lock file').toBe(true);
      await sleep(1100); // deliberate: down over a second, which the delayed jobs' time-left must show
      const b = await start(dir, 1);
      await checkRecovered(b.port, ids, timeLeft, Date.now() - t0);
    } finally {
      await child.kill();
    }
  });

  it('stats-job file names the segment holding the job; reserved jobs come back ready after two restarts', async () => {
    const dir = newDir();
    let s = await start(dir, 2, { binlogSegmentBytes: 4096 });
    let c = await client(s.port);
    const ids: number[] = [];
    for (let i = 0; i < 12; i++) ids.push(await putId(c, `job ${i} `.padEnd(1000, '.')));
    const files = new Set<string>();
    for (const id of ids) files.add((await statsJob(c, id))!.file);
    expect([...files].every((f) => Number(f) >= 1)).toBe(true);
    expect(files.size, 'with 4 KiB segments, 12 KB of jobs span several segments').toBeGreaterThan(1);
    expect(jobOf(await c.request('reserve'))?.id).toBe(ids[0]);
    await stop(s);
    for (const shards of [4, 1]) {
      s = await start(dir, shards, { binlogSegmentBytes: 4096 });
      c = await client(s.port);
      for (let i = 0; i < ids.length; i++) {
        const st = await statsJob(c, ids[i]);
        expect(st?.state, `job ${ids[i]} with ${shards} shards`).toBe('ready');
        expect(jobOf(await c.request(`peek ${ids[i]}`))?.body).toBe(`job ${i} `.padEnd(1000, '.'));
      }
      await stop(s);
    }
  });
});

describe('restart edge cases', () => {
  it('SIGKILL during the start-up rewrite, again and again: the next start still has every job', async () => {
    const dir = newDir();
    const first = await spawnServer({ dir, shards: 3 });
    const N = 1500;
    try {
      const c = await connect(first.port);
      let cmds = '';
      for (let i = 0; i < N; i++) {
        const body = `job ${i} `.padEnd(300, String.fromCharCode(65 + (i % 26)));
        cmds += `use t${i % 7}\r\nput ${i % 50} ${i === 8 ? 3600 : 0} 60 ${body.length}\r\n${body}\r\n`;
      }
      await c.send(cmds);
      for (let i = 0; i < 2 * N; i++) await c.readReply();
      cmds = '';
      for (let id = 1; id <= N; id += 3) cmds += `delete ${id}\r\n`;
      for (let id = 3; id <= N; id += 9) cmds += `reserve-job ${id}\r\nbury ${id} 3\r\n`;
      await c.send(cmds);
      for (let id = 1; id <= N; id += 3) expect(await c.readReply()).toBe('DELETED\r\n');
      for (let id = 3; id <= N; id += 9) {
        expect(jobOf(await c.readReply())?.id).toBe(id);
        expect(await c.readReply()).toBe('BURIED\r\n');
      }
      c.destroy();
    } finally {
      await first.kill();
    }
    // The truth, read back by a clean start (which also proves that one works).
    let s = await start(dir, 3);
    let c = await client(s.port);
    const truth = await scan(c, N);
    await stop(s);
    expect(truth.size).toBe(N - Math.ceil(N / 3));

    // Kill each start as soon as it has begun writing its new generation.
    let caughtMidway = 0;
    for (const shards of [1, 4, 2, 3, 1]) {
      const before = Math.max(...walFiles(dir).map((f) => f.generation));
      const p = spawn(nodeBin(), serverArgs({ dir, shards }), { stdio: 'ignore', cwd: REPO });
      const exited = new Promise((r) => p.once('exit', r));
      const deadline = Date.now() + 15_000;
      while (Date.now() < deadline && p.exitCode === null) {
        if (walFiles(dir).some((f) => f.generation > before && f.size > 0)) break;
        await sleep(1);
      }
      p.kill('SIGKILL');
      await exited;
      if (new Set(walFiles(dir).map((f) => f.generation)).size > 1) caughtMidway++;
    }
    expect(caughtMidway, 'at least one kill left two generations on disk').toBeGreaterThan(0);

    s = await start(dir, 2);
    c = await client(s.port);
    const after = await scan(c, N);
    expect([...after.keys()]).toEqual([...truth.keys()]);
    for (const [id, want] of truth) expect(after.get(id), `job ${id}`).toEqual(want);
  });

  it('longest tube name, empty, binary and largest bodies, a record bigger than a segment', async () => {
    const dir = newDir();
    const tube = 'A-z0+9/;.$_()'.repeat(16).slice(0, 200);
    expect(tube.length).toBe(200);
    const bodies = [
      '',
      Array.from({ length: 256 }, (_, i) => String.fromCharCode(i)).join('') + '\r\n\r\nput 0 0 1 1\r\n',
      'x'.repeat(65535),
    ];
    const child = await spawnServer({ dir, shards: 2, segmentBytes: 4096 });
    const ids: number[] = [];
    try {
      const c = await connect(child.port);
      expect(await c.request(`use ${tube}`)).toBe(`USING ${tube}\r\n`);
      for (const b of bodies) ids.push(await putId(c, b, 7));
      c.destroy();
    } finally {
      await child.kill();
    }
    for (const shards of [3, 1]) {
      const s = await start(dir, shards, { binlogSegmentBytes: 4096 });
      const c = await client(s.port);
      for (let i = 0; i < ids.length; i++) {
        const st = await statsJob(c, ids[i]);
        expect([st?.tube, st?.pri, st?.state]).toEqual([tube, '7', 'ready']);
        expect(jobOf(await c.request(`peek ${ids[i]}`))?.body).toBe(bodies[i]);
      }
      expect(parseList(await c.request('list-tubes'))).toContain(tube);
      await stop(s);
    }
  });
});

// Regression (fixed in 3379816). A put whose record is larger than the 8 MiB shard ring (possible
// with -z above 8 MiB) never reached the shard: with -b it was never answered and the connection
// hung (without -b it was answered INSERTED at once, and the next command on that shard hung).
describe('jobs larger than the shard ring', () => {
  it('a 9 MB job (-z 16 MiB) is answered INSERTED and survives a restart', { timeout: 30_000 }, async () => {
    const dir = newDir();
    const size = 9_000_000;
    const body = 'j'.repeat(size);
    let s = await start(dir, 1, { maxJobSize: 16 * 1024 * 1024 });
    let c = await client(s.port);
    expect(await c.request(`put 0 0 60 ${size}\r\n${body}`, 8000)).toBe('INSERTED 1\r\n');
    await stop(s);
    s = await start(dir, 1, { maxJobSize: 16 * 1024 * 1024 });
    c = await client(s.port);
    expect(jobOf(await c.request('peek 1', 8000))?.body.length).toBe(size);
  });
});

// Regression (fixed in 3379816 with ID_MARK records). The new generation written at start holds
// only the live jobs, and a segment whose jobs are all gone is deleted; nothing else recorded the
// largest id, so once no record of the newest (deleted) job was left, the next start handed out its
// id again. beanstalkd, on the same steps, answers INSERTED 3 in the first case.
describe('job ids after restart', () => {
  it('continue after the largest id ever logged, also after a second restart', async () => {
    const dir = newDir();
    let s = await start(dir, 2);
    let c = await client(s.port);
    expect(await putId(c, 'A')).toBe(1);
    expect(await putId(c, 'B')).toBe(2);
    await ok(c, 'delete 2', 'DELETED\r\n');
    await stop(s);
    s = await start(dir, 2); // rewrites job 1 only into a new generation, drops the old one
    await stop(s);
    s = await start(dir, 2);
    c = await client(s.port);
    expect(await putId(c, 'C'), 'id 2 was handed out (and deleted) before: it must not come back').toBe(3);
  });

  it('continue after the largest id ever logged when every segment was removed as dead', async () => {
    const dir = newDir();
    // A put+delete pair whose DELETE fills the 4 KiB segment: the writer moves on to a segment it
    // has not created yet, and the full one holds nothing live, so it is deleted.
    let s = await start(dir, 1, { binlogSegmentBytes: 4096 });
    let c = await client(s.port);
    const body = 'x'.repeat(4096 - 17 - 78 + 1); // FULL 78 + body, then DELETE 17: 4097 bytes
    expect(await putId(c, body)).toBe(1);
    expect(walFiles(dir).map((f) => f.seq), 'the put is in the first segment').toContain(1);
    await ok(c, 'delete 1', 'DELETED\r\n');
    // The shard removes the full first segment once the DELETE is written (the next one starts
    // with the largest id so far, and holds no job).
    await waitUntil('the first segment is removed as dead', () => walFiles(dir).every((f) => f.seq !== 1), () => walFiles(dir).map((f) => f.name).join(' '));
    await stop(s);
    s = await start(dir, 1, { binlogSegmentBytes: 4096 });
    c = await client(s.port);
    expect(await putId(c, 'next'), 'id 1 was handed out before: it must not come back').toBe(2);
  });
});
