// Log write errors (disk full, EIO), injected with the walFaults hook: a change that could not be
// logged is never acknowledged (put → OUT_OF_MEMORY; delete, release, bury, kick, kick-job →
// INTERNAL_ERROR), connections and read-only commands go on, the log retries, replies are normal
// once writes work again, and a restart loses no job that was acknowledged.

import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { startServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { cleanedAfterEach, jobOf, makeDir, nodeBin, put, putId, REPO, sleep, stats, statsJob, tubePerShard, walFiles } from './support.ts';

const { dirs, servers, clients } = cleanedAfterEach();

async function client(port: number): Promise<Client> {
  const c = await connect(port);
  clients.push(c);
  return c;
}

/** Waits until a put goes through again (the shard retries a failed write every ~100 ms). */
async function putWhenWritable(c: Client, body: string): Promise<number> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const r = await put(c, body);
    const m = /^INSERTED (\d+)$/.exec(r);
    if (m) return Number(m[1]);
    expect(r).toBe('OUT_OF_MEMORY');
    if (Date.now() > deadline) throw new Error('the log did not recover within 5 s after the fault cleared');
    await sleep(50);
  }
}

describe('log write errors', () => {
  it('failing writes: no success is acknowledged, everyone keeps being served, and it recovers', async () => {
    const dir = makeDir('faults');
    dirs.push(dir);
    const faults = new SharedArrayBuffer(4);
    const ctrl = new Int32Array(faults);
    const server = await startServer({ port: 0, shards: 2, logLevel: 'silent', binlogDir: dir, fsyncMs: 0, walFaults: faults });
    servers.push(server);
    const [t0, t1] = tubePerShard(2, 'wf');
    const p = await client(server.port);
    const w = await client(server.port);
    const other = await client(server.port);

    // Acknowledged before the disk fills up: id → body (deleted ones removed).
    const acked = new Map<number, string>();
    const track = async (tube: string, body: string) => {
      await p.request(`use ${tube}`);
      const id = await putId(p, body);
      acked.set(id, body);
      return id;
    };
    const toDelete = await track(t0, 'delete me');
    const toRelease = await track(t0, 'release me');
    const toBury = await track(t1, 'bury me');
    const buried1 = await track(t1, 'buried for kick');
    const buried2 = await track(t1, 'buried for kick-job');
    const untouched = await track(t0, 'untouched');
    for (const id of [toDelete, toRelease, toBury, buried1, buried2]) {
      expect(jobOf(await w.request(`reserve-job ${id}`))?.id).toBe(id);
    }
    expect(await w.request(`bury ${buried1} 5`)).toBe('BURIED\r\n');
    expect(await w.request(`bury ${buried2} 6`)).toBe('BURIED\r\n');
    const writtenBefore = Number((await stats(other))['binlog-records-written']);

    // The disk is full: every log write fails until cleared.
    Atomics.store(ctrl, 0, 1_000_000_000);
    const refusedPuts: string[] = [];
    for (const tube of [t0, t1]) {
      expect(await p.request(`use ${tube}`)).toBe(`USING ${tube}\r\n`);
      for (let i = 0; i < 3; i++) {
        const body = `refused ${tube} ${i}`;
        refusedPuts.push(body);
        expect(await put(p, body), `put while the log cannot be written (${tube})`).toBe('OUT_OF_MEMORY');
      }
    }
    // Pipelined too: several puts in one batch, all refused.
    const pipelined = Array.from({ length: 5 }, (_, i) => `pipelined ${i}`);
    refusedPuts.push(...pipelined);
    await p.send(pipelined.map((b) => `put 0 0 60 ${b.length}\r\n${b}\r\n`).join(''));
    for (let i = 0; i < pipelined.length; i++) expect(await p.readReply()).toBe('OUT_OF_MEMORY\r\n');
    expect(await w.request(`delete ${toDelete}`)).toBe('INTERNAL_ERROR\r\n');
    expect(await w.request(`release ${toRelease} 9 0`)).toBe('INTERNAL_ERROR\r\n');
    expect(await w.request(`bury ${toBury} 9`)).toBe('INTERNAL_ERROR\r\n');
    expect(await p.request(`use ${t1}`)).toBe(`USING ${t1}\r\n`);
    expect(await w.request(`kick-job ${buried2}`)).toBe('INTERNAL_ERROR\r\n');
    expect(await p.request('kick 1')).toBe('INTERNAL_ERROR\r\n');
    // Nothing to log, nothing refused: a kick of nothing, reads, tube commands, other connections.
    expect(await p.request(`use ${t0}`)).toBe(`USING ${t0}\r\n`);
    expect(await p.request('kick 10')).toBe('KICKED 0\r\n');
    expect(jobOf(await other.request(`peek ${untouched}`))?.body).toBe('untouched');
    expect((await statsJob(other, untouched))?.state).toBe('ready');
    expect(await other.request('list-tube-used')).toBe('USING default\r\n');
    expect(await other.request(`watch ${t0}`)).toBe('WATCHING 2\r\n');
    expect((await stats(other))['current-connections']).toBe('3');
    expect(p.serverClosed || w.serverClosed || other.serverClosed, 'no connection was closed').toBe(false);

    // Space again: replies are normal.
    Atomics.store(ctrl, 0, 0);
    const after = await putWhenWritable(p, 'after the fault');
    acked.set(after, 'after the fault');
    expect(jobOf(await w.request(`reserve-job ${after}`))?.id).toBe(after);
    expect(await w.request(`delete ${after}`)).toBe('DELETED\r\n');
    acked.delete(after);
    const last = await putId(p, 'last');
    acked.set(last, 'last');
    expect(jobOf(await w.request(`reserve-job ${untouched}`))?.id).toBe(untouched);
    expect(await w.request(`release ${untouched} 3 0`)).toBe('RELEASED\r\n');
    expect(Number((await stats(other))['binlog-records-written'])).toBeGreaterThan(writtenBefore);

    // A restart loses no acknowledged job; a refused put may exist (it happened in memory), but
    // only with the body it was sent with.
    for (const c of clients.splice(0)) c.destroy();
    await server.close();
    servers.length = 0;
    const again = await startServer({ port: 0, shards: 3, logLevel: 'silent', binlogDir: dir, fsyncMs: 0 });
    servers.push(again);
    const c = await client(again.port);
    // The delete answered INTERNAL_ERROR happened in memory and was logged once the disk had room.
    acked.delete(toDelete);
    for (const [id, body] of acked) {
      expect(jobOf(await c.request(`peek ${id}`))?.body, `acknowledged job ${id} after the restart`).toBe(body);
    }
    expect((await statsJob(c, untouched))?.pri).toBe('3');
    const all = new Set([...acked.values(), ...refusedPuts, 'delete me']);
    for (let id = 1; id <= last; id++) {
      const j = jobOf(await c.request(`peek ${id}`));
      if (j !== null) expect(all.has(j.body), `job ${id} body ${JSON.stringify(j.body)}`).toBe(true);
    }
  });

  it('a single failed write: that batch is refused, the next one succeeds and carries it', async () => {
    const dir = makeDir('faults1');
    dirs.push(dir);
    const faults = new SharedArrayBuffer(4);
    const server = await startServer({ port: 0, shards: 1, logLevel: 'silent', binlogDir: dir, fsyncMs: 0, walFaults: faults });
    servers.push(server);
    const c = await client(server.port);
    const a = await putId(c, 'before');
    Atomics.store(new Int32Array(faults), 0, 1);
    expect(await put(c, 'refused')).toBe('OUT_OF_MEMORY');
    const b = await putWhenWritable(c, 'after');
    expect(b).toBeGreaterThan(a + 1); // the refused put used an id
    expect(Atomics.load(new Int32Array(faults), 0)).toBe(0);
    for (const cl of clients.splice(0)) cl.destroy();
    await server.close();
    servers.length = 0;
    const again = await startServer({ port: 0, shards: 1, logLevel: 'silent', binlogDir: dir, fsyncMs: 0 });
    servers.push(again);
    const d = await client(again.port);
    expect(jobOf(await d.request(`peek ${a}`))?.body).toBe('before');
    expect(jobOf(await d.request(`peek ${b}`))?.body).toBe('after');
    const refused = await d.request(`peek ${a + 1}`);
    if (refused !== 'NOT_FOUND\r\n') expect(jobOf(refused)?.body).toBe('refused');
  });

  it('a start on a full disk fails and loses nothing: the next start has every job', async () => {
    const dir = makeDir('faults-start');
    dirs.push(dir);
    const s = await startServer({ port: 0, shards: 2, logLevel: 'silent', binlogDir: dir, fsyncMs: 0 });
    const c = await connect(s.port);
    const ids = [await putId(c, 'one'), await putId(c, 'two')];
    c.destroy();
    await s.close();
    // In a child process: the start-up rewrite cannot be written.
    const script = `
      const { startServer } = await import(${JSON.stringify(new URL('../../src/server.ts', import.meta.url).href)});
      const faults = new SharedArrayBuffer(4);
      Atomics.store(new Int32Array(faults), 0, 1e9);
      await startServer({ port: 0, shards: 2, logLevel: 'silent', binlogDir: ${JSON.stringify(dir)}, fsyncMs: 0, walFaults: faults });
      console.log('LISTENING');`;
    const child = spawn(nodeBin(), ['--input-type=module', '-e', script], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d));
    child.stderr!.on('data', (d: Buffer) => (out += d));
    const exit = await Promise.race([
      new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))),
      sleep(10_000).then(() => 'timeout' as const),
    ]);
    if (exit === 'timeout') child.kill('SIGKILL');
    expect(exit, `a start that cannot write its log must not hang or serve; output: ${out}`).not.toBe('timeout');
    expect(exit).not.toBe(0);
    expect(out).not.toContain('LISTENING');
    expect(walFiles(dir).some((f) => f.generation === 1), 'the old generation is kept').toBe(true);
    const again = await startServer({ port: 0, shards: 1, logLevel: 'silent', binlogDir: dir, fsyncMs: 0 });
    servers.push(again);
    const d = await client(again.port);
    expect(jobOf(await d.request(`peek ${ids[0]}`))?.body).toBe('one');
    expect(jobOf(await d.request(`peek ${ids[1]}`))?.body).toBe('two');
    expect(await putId(d, 'three')).toBe(ids[1] + 1);
  });
});
