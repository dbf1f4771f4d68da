// Moving jobs to another tube from the JSON API (#14, POST /api/tubes/:name/move, src/ops/admin.ts
// moveTube): a moved job is a new job of the target tube with the same priority, TTR and body (a
// delayed one keeps its delay left, a buried one stays buried), the original is gone; between
// shards and within one; jobs a worker reserves during the move stay the worker's and are never
// moved or duplicated; a TTR running out while the move holds a job leaves it with the move; with
// -b a move survives a restart, and one made while the log fails (500) is on disk once it writes
// again; the POST rules (token, JSON, Origin) and the 400s.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, type TestContext } from 'vitest';
import { shardOf } from '../../src/route/hash.ts';
import type { Router } from '../../src/route/router.ts';
import { OP_DELETE, OP_RESERVE_JOB, R_JOB, R_OK, replyKind } from '../../src/shared/records.ts';
import { startServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { apiHeaders, clientFor, inLayouts, LAYOUTS, request, type HttpAnswer } from './support.ts';
import { putForId, sleep } from '../support/harness.ts';

const TOKEN = 'move-token-0123456789abcdef';

const { start, inLayout } = inLayouts(TOKEN);
const client = clientFor;

function tmpDir(ctx: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shardstalk-move-'));
  ctx.onTestFinished(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function post(port: number, urlPath: string, body: unknown, headers: Record<string, string> = apiHeaders(TOKEN)): Promise<HttpAnswer> {
  return request(port, urlPath, 'POST', { headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

async function yaml(c: Client, line: string): Promise<Record<string, string>> {
  const r = await c.request(line);
  if (!r.startsWith('OK ')) throw new Error(`${line}: ${r}`);
  const out: Record<string, string> = {};
  for (const l of r.split('\n')) {
    const m = /^([a-z-]+): "?([^"\r]*)"?\r?$/.exec(l);
    if (m) out[m[1]] = m[2];
  }
  return out;
}

/** Ids of a tube's jobs in `state`, through the API's listing. */
async function idsIn(port: number, tube: string, state: string): Promise<number[]> {
  const ids: number[] = [];
  let cursor = '';
  for (;;) {
    const a = await request(port, `/api/tubes/${tube}/jobs?state=${state}&limit=1000&cursor=${cursor}`);
    if (a.status === 404) return ids;
    ids.push(...a.json.jobs.map((j: { id: number }) => j.id));
    if (a.json.next === null) return ids;
    cursor = encodeURIComponent(a.json.next);
  }
}

/** Two tube names on different shards of 2, and two on the same. */
function names(): { a: string; other: string; same: string } {
  const a = 'src-0';
  let other = '';
  let same = '';
  for (let i = 0; other === '' || same === ''; i++) {
    const n = `dst-${i}`;
    if (shardOf(n, 2) !== shardOf(a, 2)) other ||= n;
    else same ||= n;
  }
  return { a, other, same };
}

describe.each(LAYOUTS)('JSON API: move jobs to another tube (%o)', (l) => {
  inLayout(l);
  for (const where of ['another shard', 'the same shard'] as const) {
    it(`moves ready, delayed and buried jobs to a tube on ${where}: bodies, priorities, TTRs kept; originals gone`, async (ctx) => {
      const srv = await start(ctx, { shards: 2 });
      const port = srv.httpPort!;
      const { a, other, same } = names();
      const to = where === 'another shard' ? other : same;
      expect(shardOf(to, 2) === shardOf(a, 2)).toBe(where === 'the same shard');
      const c = await client(ctx, srv.port);
      await c.request(`use ${a}`);
      await c.request(`watch ${a}`);
      await c.request('ignore default');
      const ready = [await putForId(c, 'r1', 5, 0, 30), await putForId(c, 'r2', 1, 0, 40)];
      const delayed = await putForId(c, 'later', 7, 100, 50);
      const toBury = await putForId(c, 'b1', 0, 0, 70);
      expect(await c.request(`reserve-job ${toBury}`)).toBe(`RESERVED ${toBury} 2\r\nb1\r\n`);
      expect(await c.request(`bury ${toBury} 9`)).toBe('BURIED\r\n');

      const totalBefore = Number((await yaml(c, 'stats'))['total-jobs']);
      const r = await post(port, `/api/tubes/${a}/move`, { to, states: ['ready', 'delayed', 'buried'] });
      expect(r.status, r.body).toBe(200);
      expect(r.json).toEqual({ tube: a, to, moved: 4 });
      // Each copy is a new job, as a put makes: stats total-jobs counts it.
      expect(Number((await yaml(c, 'stats'))['total-jobs'])).toBe(totalBefore + 4);
      for (const id of [...ready, delayed, toBury]) expect(await c.request(`stats-job ${id}`)).toBe('NOT_FOUND\r\n');

      const want = new Map([
        ['r1', { pri: '5', ttr: '30', state: 'ready' }], ['r2', { pri: '1', ttr: '40', state: 'ready' }],
        ['later', { pri: '7', ttr: '50', state: 'delayed' }], ['b1', { pri: '9', ttr: '70', state: 'buried' }],
      ]);
      const got = new Map<string, Record<string, string>>();
      for (const state of ['ready', 'delayed', 'buried']) {
        for (const id of await idsIn(port, to, state)) {
          expect(id).toBeGreaterThan(toBury); // new ids
          const body = /^FOUND \d+ \d+\r\n(.*)\r\n$/.exec(await c.request(`peek ${id}`))![1];
          got.set(body, await yaml(c, `stats-job ${id}`));
        }
      }
      expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
      for (const [body, w] of want) {
        const s = got.get(body)!;
        expect({ pri: s.pri, ttr: s.ttr, state: s.state, tube: s.tube }, body).toEqual({ ...w, tube: to });
      }
      // The delay left is kept (rounded up to whole seconds).
      expect(Number(got.get('later')!['time-left'])).toBeGreaterThan(90);
      expect(Number(got.get('later')!['time-left'])).toBeLessThanOrEqual(100);
      const src = await yaml(c, `stats-tube ${a}`);
      expect([src['current-jobs-ready'], src['current-jobs-delayed'], src['current-jobs-buried'], src['current-jobs-reserved']]).toEqual(['0', '0', '0', '0']);
      const dst = await yaml(c, `stats-tube ${to}`);
      expect([dst['current-jobs-ready'], dst['current-jobs-delayed'], dst['current-jobs-buried'], dst['current-jobs-reserved']]).toEqual(['2', '1', '1', '0']);
      // The moved ready jobs are reservable from the target, in priority order.
      const w = await client(ctx, srv.port);
      await w.request(`watch ${to}`);
      await w.request('ignore default');
      expect(await w.request('reserve-with-timeout 1')).toMatch(/^RESERVED \d+ 2\r\nr2\r\n$/);
      expect(await w.request('reserve-with-timeout 1')).toMatch(/^RESERVED \d+ 2\r\nr1\r\n$/);
    });
  }

  it('moves only the states asked, up to max; reserved jobs stay with their worker', async (ctx) => {
    const srv = await start(ctx, { shards: 2 });
    const port = srv.httpPort!;
    const c = await client(ctx, srv.port);
    const w = await client(ctx, srv.port);
    await c.request('use q');
    const ids: number[] = [];
    for (let i = 0; i < 10; i++) ids.push(await putForId(c, `j${i}`, i));
    const buried = await putForId(c, 'b', 0);
    expect(await c.request(`reserve-job ${buried}`)).toMatch(/^RESERVED/);
    expect(await c.request(`bury ${buried} 0`)).toBe('BURIED\r\n');
    expect(await w.request(`reserve-job ${ids[0]}`)).toMatch(/^RESERVED/);
    const r = await post(port, '/api/tubes/q/move', { to: 'q2', states: ['ready'], max: 4 });
    expect(r.json).toEqual({ tube: 'q', to: 'q2', moved: 4 });
    expect((await yaml(c, 'stats-tube q2'))['current-jobs-ready']).toBe('4');
    // The four most urgent ready ones (the reserved one is not ready).
    for (const id of ids.slice(1, 5)) expect(await c.request(`stats-job ${id}`)).toBe('NOT_FOUND\r\n');
    const all = await post(port, '/api/tubes/q/move', { to: 'q2', states: ['ready', 'delayed'] });
    expect(all.json.moved).toBe(5);
    const q = await yaml(c, 'stats-tube q');
    expect([q['current-jobs-ready'], q['current-jobs-buried'], q['current-jobs-reserved'], q['current-jobs-urgent']]).toEqual(['0', '1', '1', '0']);
    expect((await yaml(c, `stats-job ${ids[0]}`)).state).toBe('reserved');
    expect(await w.request(`delete ${ids[0]}`)).toBe('DELETED\r\n');
    expect((await post(port, '/api/tubes/q/move', { to: 'q2', states: ['reserved'] })).status).toBe(400);
  });

  for (const logged of [false, true]) it(`jobs reserved by workers during a move stay theirs: every job ends moved or held, none twice${logged ? ' (-b)' : ''}`, async (ctx) => {
    const srv = await start(ctx, logged ? { shards: 2, binlogDir: tmpDir(ctx) } : { shards: 2 });
    const port = srv.httpPort!;
    const { a, other } = names();
    const c = await client(ctx, srv.port);
    await c.request(`use ${a}`);
    const N = 3000;
    let cmds = '';
    for (let i = 0; i < N; i++) cmds += `put 0 0 60 ${String(i).length}\r\n${i}\r\n`;
    await c.send(cmds);
    for (let i = 0; i < N; i++) expect(await c.readReply()).toMatch(/^INSERTED/);
    const w = await client(ctx, srv.port);
    await w.request(`watch ${a}`);
    await w.request('ignore default');
    const held = new Map<string, number>();
    let stop = false;
    const worker = (async () => {
      while (!stop) {
        const r = await w.request('reserve-with-timeout 0');
        const m = /^RESERVED (\d+) \d+\r\n(.*)\r\n$/.exec(r);
        if (m === null) break; // TIMED_OUT: nothing ready any more
        held.set(m[2], Number(m[1]));
      }
    })();
    const moving = post(port, `/api/tubes/${a}/move`, { to: other, states: ['ready'] });
    const r = await moving;
    stop = true;
    await worker;
    expect(r.status, r.body).toBe(200);
    const moved = r.json.moved as number;
    expect(moved + held.size).toBe(N);
    expect(held.size).toBeGreaterThan(0);
    expect(moved).toBeGreaterThan(0);
    // The worker still holds each job it got, in the source tube.
    for (const id of [...held.values()].slice(0, 50)) {
      const s = await yaml(c, `stats-job ${id}`);
      expect([s.state, s.tube]).toEqual(['reserved', a]);
    }
    const src = await yaml(c, `stats-tube ${a}`);
    expect([src['current-jobs-ready'], src['current-jobs-reserved']]).toEqual(['0', String(held.size)]);
    const dst = await yaml(c, `stats-tube ${other}`);
    expect(dst['current-jobs-ready']).toBe(String(moved));
    // Every body once: the moved ones in the target, the held ones with the worker.
    const bodies = new Set(held.keys());
    for (const id of await idsIn(port, other, 'ready')) {
      const body = /^FOUND \d+ \d+\r\n(.*)\r\n$/.exec(await c.request(`peek ${id}`))![1];
      expect(bodies.has(body), body).toBe(false);
      bodies.add(body);
    }
    expect(bodies.size).toBe(N);
  });

  it('with -b a move survives a restart: the moved jobs in the target, none in the source', async (ctx) => {
    const dir = tmpDir(ctx);
    const { a, other } = names();
    const first = await startServer({
      host: '127.0.0.1', port: 0, logLevel: 'silent', http: { host: '127.0.0.1', port: 0 }, httpToken: TOKEN, shards: 2, binlogDir: dir,
    });
    let closed = false;
    ctx.onTestFinished(async () => {
      if (!closed) await first.close();
    });
    const c = await connect(first.port);
    await c.request(`use ${a}`);
    for (let i = 0; i < 5; i++) await putForId(c, `m${i}`, i, i === 4 ? 300 : 0, 60 + i);
    const mb = await putForId(c, 'm5', 5, 0, 65);
    expect(await c.request(`reserve-job ${mb}`)).toMatch(/^RESERVED/);
    expect(await c.request(`bury ${mb} 5`)).toBe('BURIED\r\n');
    // Held by a worker: not moved; back in the source, ready, after the restart.
    const keep = await putForId(c, 'stays', 0);
    expect(await c.request(`reserve-job ${keep}`)).toMatch(/^RESERVED/);
    const r = await post(first.httpPort!, `/api/tubes/${a}/move`, { to: other, states: ['ready', 'delayed', 'buried'] });
    expect(r.json).toEqual({ tube: a, to: other, moved: 6 });
    c.destroy();
    await first.close();
    closed = true;

    const srv = await start(ctx, { shards: 2, binlogDir: dir });
    const d = await client(ctx, srv.port);
    const src = await yaml(d, `stats-tube ${a}`);
    expect([src['current-jobs-ready'], src['current-jobs-delayed'], src['current-jobs-buried']]).toEqual(['1', '0', '0']);
    const dst = await yaml(d, `stats-tube ${other}`);
    expect([dst['current-jobs-ready'], dst['current-jobs-delayed'], dst['current-jobs-buried']]).toEqual(['4', '1', '1']);
    const bodies: string[] = [];
    for (const state of ['ready', 'delayed', 'buried']) {
      for (const id of await idsIn(srv.httpPort!, other, state)) {
        const body = /^FOUND \d+ \d+\r\n(.*)\r\n$/.exec(await d.request(`peek ${id}`))![1];
        const s = await yaml(d, `stats-job ${id}`);
        const i = Number(body.slice(1));
        expect([s.pri, s.ttr, s.state], body).toEqual([String(i), String(60 + i), i === 4 ? 'delayed' : i === 5 ? 'buried' : 'ready']);
        bodies.push(body);
      }
    }
    expect(bodies.sort()).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5']);
    expect(await idsIn(srv.httpPort!, a, 'ready')).toEqual([keep]);
    for (const id of [mb]) expect(await d.request(`stats-job ${id}`)).toBe('NOT_FOUND\r\n');
  });

  it('a job whose TTR runs out while a holder keeps it (the move) stays that holder\'s; otherwise it goes back to ready', async (ctx) => {
    const srv = await start(ctx, { shards: 2 });
    const router: Router = srv.router;
    const c = await client(ctx, srv.port);
    await c.request('use t');
    const kept = await putForId(c, 'kept', 0, 0, 1);
    const other = await putForId(c, 'other', 0, 0, 1);
    const ask = (op: number, conn: number, id: number): Promise<number> => new Promise((resolve) => {
      router.pool.request(router.jobMap.get(id), 0, { onShardReply: (_s, _k, _q, buf, at) => resolve(replyKind(buf, at)) }, 0)
        .header(op, 0, conn, 0, 0, 0, id);
      router.flushSoon();
    });
    const keeper = router.newConnId();
    router.conns.set(keeper, { jobExpired: () => true });
    const plain = router.newConnId();
    router.conns.set(plain, { jobExpired: () => undefined });
    expect(await ask(OP_RESERVE_JOB, keeper, kept)).toBe(R_JOB);
    expect(await ask(OP_RESERVE_JOB, plain, other)).toBe(R_JOB);
    await sleep(1600);
    expect((await yaml(c, `stats-job ${kept}`)).state).toBe('reserved');
    expect((await yaml(c, `stats-job ${other}`)).state).toBe('ready');
    expect(await c.request(`delete ${kept}`)).toBe('NOT_FOUND\r\n'); // nobody else can have it
    expect(await ask(OP_DELETE, keeper, kept)).toBe(R_OK);
    router.deleted(kept, router.tubes.find('t')!.id);
    expect(await c.request(`stats-job ${kept}`)).toBe('NOT_FOUND\r\n');
  });

  it('with -b and the log failing: 500 and the move undone (copies deleted, originals back), and a restart after the log recovers has the originals, no copy', async (ctx) => {
    const dir = tmpDir(ctx);
    const { a, other } = names();
    const faults = new SharedArrayBuffer(4);
    const first = await startServer({
      host: '127.0.0.1', port: 0, logLevel: 'silent', http: { host: '127.0.0.1', port: 0 }, httpToken: TOKEN, shards: 2, binlogDir: dir,
      fsyncMs: 0, walFaults: faults,
    });
    let closed = false;
    ctx.onTestFinished(async () => {
      if (!closed) await first.close();
    });
    const c = await connect(first.port);
    await c.request(`use ${a}`);
    for (let i = 0; i < 3; i++) await putForId(c, `f${i}`, i);
    Atomics.store(new Int32Array(faults), 0, 1_000_000_000);
    const r = await post(first.httpPort!, `/api/tubes/${a}/move`, { to: other, states: ['ready'] });
    expect(r.status, r.body).toBe(500);
    // The copies could not be logged while the originals are on disk: the move is undone (the
    // copies deleted, the originals given back), so a crash before the log recovers loses nothing.
    expect(r.json.error).toMatch(/^moved 0, but not every change could be logged/);
    const src = await yaml(c, `stats-tube ${a}`);
    expect(src['current-jobs-ready']).toBe('3');
    expect(await c.request(`stats-tube ${other}`)).toMatch(/^(NOT_FOUND\r\n|OK \d+\r\n[^]*current-jobs-ready: 0\n)/);
    Atomics.store(new Int32Array(faults), 0, 0);
    // The log retries: a put goes through once it writes again (the queued records before it).
    await c.request(`use ${other}`);
    const deadline = Date.now() + 5000;
    while (!/^INSERTED/.test(await c.request('put 0 0 60 1\r\nz'))) {
      expect(Date.now()).toBeLessThan(deadline);
      await sleep(50);
    }
    c.destroy();
    await first.close();
    closed = true;
    const srv = await start(ctx, { shards: 2, binlogDir: dir });
    const d = await client(ctx, srv.port);
    // After the log wrote again and a restart: the originals where they were, no copy, and z.
    expect((await yaml(d, `stats-tube ${other}`))['current-jobs-ready']).toBe('1');
    expect((await yaml(d, `stats-tube ${a}`))['current-jobs-ready']).toBe('3');
  });

  it('needs the token, JSON and the same origin; 400 for a bad or the same target', async (ctx) => {
    const srv = await start(ctx);
    const port = srv.httpPort!;
    const c = await client(ctx, srv.port);
    await c.request('use q');
    await putForId(c, 'x');
    const body = { to: 'q2', states: ['ready'] };
    expect((await post(port, '/api/tubes/q/move', body, { 'Content-Type': 'application/json' })).status).toBe(401);
    expect((await post(port, '/api/tubes/q/move', body, { Authorization: 'Bearer wrong', 'Content-Type': 'application/json' })).status).toBe(401);
    expect((await post(port, '/api/tubes/q/move', body, { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'text/plain' })).status).toBe(415);
    expect((await post(port, '/api/tubes/q/move', body, {
      Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json', Origin: 'http://evil.example',
    })).status).toBe(403);
    for (const bad of [{ to: 'q', states: ['ready'] }, { to: '-x', states: ['ready'] }, { to: '', states: ['ready'] }, { to: 'a b', states: ['ready'] },
      { to: 'x'.repeat(201), states: ['ready'] }, { to: 7, states: ['ready'] }, { to: 'q2' }, { to: 'q2', states: ['nope'] },
      { to: 'q2', states: ['ready'], max: 0 }]) {
      expect((await post(port, '/api/tubes/q/move', bad)).status, JSON.stringify(bad)).toBe(400);
    }
    expect((await post(port, '/api/tubes/none/move', body)).status).toBe(404);
    expect((await yaml(c, 'stats-tube q'))['current-jobs-ready']).toBe('1');
    expect(await c.request('list-tubes')).not.toMatch(/q2/);
    const ok = await post(port, '/api/tubes/q/move', { to: 'x'.repeat(200), states: ['ready'] });
    expect(ok.json.moved).toBe(1);
  });
});
