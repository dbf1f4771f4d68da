// The JSON API on the HTTP port (#14, src/ops/api.ts): tubes and their stats-tube figures, a
// tube's jobs by state page after page with safe body previews, the state-changing actions
// (kick, pause, clear, delete and kick a job) and their access rules (POST only, the token,
// JSON only, Origin), and a large clear that leaves another connection's cycle answered.

import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { OneShard } from '../../src/route/jobmap.ts';
import type { Client } from '../support/client.ts';
import { apiHeaders, clientFor, inLayouts, LAYOUTS, request, type HttpAnswer } from './support.ts';
import { putForId } from '../support/harness.ts';

const TOKEN = 'test-token-0123456789abcdef';

const { start, inLayout } = inLayouts(TOKEN);
const client = clientFor;

interface Req {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Send the token (Authorization: Bearer) and Content-Type: application/json. */
  auth?: boolean;
}

function call(port: number, path: string, r: Req = {}): Promise<HttpAnswer> {
  const headers = { ...(r.auth ? apiHeaders(TOKEN) : {}), ...r.headers };
  return request(port, path, r.method ?? 'GET', { headers, body: r.body });
}

const post = (port: number, path: string, body: unknown, extra: Req = {}): Promise<HttpAnswer> =>
  call(port, path, { method: 'POST', auth: true, body: JSON.stringify(body), ...extra });

async function yamlOf(c: Client, line: string): Promise<Record<string, string>> {
  const r = await c.request(line);
  const out: Record<string, string> = {};
  for (const l of r.split('\n')) {
    const m = /^([a-z-]+): "?([^"\r]*)"?\r?$/.exec(l);
    if (m) out[m[1]] = m[2];
  }
  return out;
}

describe('JSON API: reading', () => {
  it('GET /api/tubes and /api/tubes/:name give stats-tube figures; 404 and 405', async (ctx) => {
    const srv = await start(ctx);
    const port = srv.httpPort!;
    const c = await client(ctx, srv.port);
    await c.request('use emails');
    await putForId(c, 'a', 5);
    await putForId(c, 'b', 2000, 30);
    const all = await call(port, '/api/tubes');
    expect(all.status).toBe(200);
    expect(all.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(all.json.tubes.map((t: { name: string }) => t.name)).toEqual(['default', 'emails']);
    const one = await call(port, '/api/tubes/emails');
    expect(one.status).toBe(200);
    const want = await yamlOf(c, 'stats-tube emails');
    expect(one.json.name).toBe('emails');
    for (const [k, v] of Object.entries(want)) expect(String(one.json.stats[k]), k).toBe(v);
    expect(one.json.stats['current-jobs-ready']).toBe(1);
    expect(one.json.stats['current-jobs-delayed']).toBe(1);
    expect(all.json.tubes[1].stats['current-jobs-urgent']).toBe(1);
    expect((await call(port, '/api/tubes/nope')).status).toBe(404);
    expect((await call(port, '/api/nothing')).status).toBe(404);
    expect((await call(port, '/api/jobs/1/kick')).status).toBe(405); // a GET on a POST endpoint
    const p = await call(port, '/api/tubes', { method: 'POST', auth: true });
    expect(p.status).toBe(405);
    expect(p.headers.allow).toBe('GET');
    expect((await call(port, '/api/tubes/a%zz')).status).toBe(400);
  });

  it('lists jobs by state a page at a time, with previews safe for binary bodies', async (ctx) => {
    const srv = await start(ctx, { shards: 2 });
    const port = srv.httpPort!;
    const c = await client(ctx, srv.port);
    const w = await client(ctx, srv.port);
    await c.request('use q');
    await w.request('watch q');
    const ready: { id: number; pri: number }[] = [];
    for (let i = 0; i < 25; i++) {
      const pri = (i * 7) % 5;
      ready.push({ id: await putForId(c, `job ${i}`, pri), pri });
    }
    const long = 'x'.repeat(100);
    const longId = await putForId(c, long, 9);
    ready.push({ id: longId, pri: 9 });
    const binary = await c.request('put 9 0 60 3\r\n\x00\xff\x01');
    const binId = Number(/INSERTED (\d+)/.exec(binary)![1]);
    ready.push({ id: binId, pri: 9 });
    const delayedA = await putForId(c, 'later', 0, 50);
    const delayedB = await putForId(c, 'sooner', 0, 20);
    ready.sort((a, b) => a.pri - b.pri || a.id - b.id);
    // Reserve the most urgent two, bury one of them.
    const r1 = Number(/RESERVED (\d+)/.exec(await w.request('reserve'))![1]);
    const r2 = Number(/RESERVED (\d+)/.exec(await w.request('reserve'))![1]);
    expect([r1, r2]).toEqual([ready[0].id, ready[1].id]);
    expect(await w.request(`bury ${r2} 3`)).toBe('BURIED\r\n');
    const left = ready.slice(2).map((j) => j.id);

    const seen: number[] = [];
    let cursor: string | null = '';
    let pages = 0;
    while (cursor !== null) {
      const a = await call(port, `/api/tubes/q/jobs?state=ready&limit=4&cursor=${encodeURIComponent(cursor)}`);
      expect(a.status, a.body).toBe(200);
      expect(a.json.jobs.length).toBeLessThanOrEqual(4);
      seen.push(...a.json.jobs.map((j: { id: number }) => j.id));
      cursor = a.json.next;
      pages++;
    }
    expect(seen).toEqual(left);
    expect(pages).toBe(Math.ceil(left.length / 4));
    const page = (await call(port, '/api/tubes/q/jobs?limit=1000')).json; // state defaults to ready
    const byId = new Map(page.jobs.map((j: { id: number }) => [j.id, j]));
    expect(byId.get(longId)).toMatchObject({ state: 'ready', pri: 9, ttr: 60, 'body-bytes': 100, preview: { encoding: 'text', data: 'x'.repeat(64), truncated: true } });
    expect(byId.get(binId)).toMatchObject({ 'body-bytes': 3, preview: { encoding: 'base64', data: Buffer.from([0, 255, 1]).toString('base64'), truncated: false } });
    expect(page.next).toBeNull();
    const delayed = (await call(port, '/api/tubes/q/jobs?state=delayed')).json.jobs;
    expect(delayed.map((j: { id: number }) => j.id)).toEqual([delayedB, delayedA]);
    expect(delayed[0]).toMatchObject({ state: 'delayed', delay: 20 });
    expect(delayed[0]['time-left']).toBeGreaterThan(15);
    const reserved = (await call(port, '/api/tubes/q/jobs?state=reserved')).json.jobs;
    expect(reserved.map((j: { id: number }) => j.id)).toEqual([r1]);
    expect(reserved[0]).toMatchObject({ state: 'reserved', reserves: 1 });
    const buried = (await call(port, '/api/tubes/q/jobs?state=buried')).json.jobs;
    expect(buried).toMatchObject([{ id: r2, state: 'buried', pri: 3, buries: 1 }]);
    for (const bad of ['state=nope', 'limit=0', 'limit=1001', 'limit=x', 'cursor=abc', 'cursor=1_0']) {
      expect((await call(port, `/api/tubes/q/jobs?${bad}`)).status, bad).toBe(400);
    }
    expect((await call(port, '/api/tubes/none/jobs')).status).toBe(404);
  });

  it('a token given is never logged', async (ctx) => {
    const lines: string[] = [];
    const logger = pino({ level: 'trace' }, { write: (line: string) => void lines.push(line) });
    await start(ctx, { logger });
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.filter((l) => l.includes(TOKEN))).toEqual([]);
  });

  it('GETs need the token when the port is not on loopback', async (ctx) => {
    const srv = await start(ctx, { http: { host: '0.0.0.0', port: 0 } });
    const port = srv.httpPort!;
    expect((await call(port, '/api/tubes')).status).toBe(401);
    expect((await call(port, '/api/tubes', { headers: { Authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await call(port, '/api/tubes', { headers: { Authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    expect((await call(port, '/healthz')).status).toBe(200); // the probes stay open
  });

  it('makes a token when none is given, and logs it once at info level', async (ctx) => {
    const lines: { level: number; msg: string; token?: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const srv = await start(ctx, { httpToken: undefined, logger });
    const token = srv.httpToken!;
    expect(token.length).toBeGreaterThanOrEqual(24);
    expect(token).not.toBe(TOKEN);
    const told = lines.filter((l) => l.token !== undefined);
    expect(told).toMatchObject([{ level: 30, token }]);
    expect(lines.filter((l) => JSON.stringify(l).includes(token)).length).toBe(1);
    const c = await client(ctx, srv.port);
    await c.request('use t');
    await putForId(c, 'x');
    const headers = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' };
    expect((await call(srv.httpPort!, '/api/tubes/t/pause', { method: 'POST', headers, body: '{"seconds":1}' })).status).toBe(200);
    expect((await post(srv.httpPort!, '/api/tubes/t/pause', { seconds: 1 })).status).toBe(401); // TOKEN is not it
  });
});

describe.each(LAYOUTS)('JSON API: actions (%o)', (l) => {
  inLayout(l);
  it('kick, pause, clear, delete and kick a job; 400 and 404', async (ctx) => {
    const srv = await start(ctx);
    const port = srv.httpPort!;
    const c = await client(ctx, srv.port);
    const w = await client(ctx, srv.port);
    await c.request('use work');
    await w.request('watch work');
    await w.request('ignore default');
    const ids: number[] = [];
    for (let i = 0; i < 4; i++) ids.push(await putForId(c, `j${i}`));
    for (const id of ids) {
      expect(await w.request(`reserve-job ${id}`)).toMatch(/^RESERVED/);
      expect(await w.request(`bury ${id} 0`)).toBe('BURIED\r\n');
    }
    expect(await post(port, '/api/tubes/work/kick', { count: 2 })).toMatchObject({ status: 200, json: { tube: 'work', kicked: 2 } });
    expect((await yamlOf(c, 'stats-tube work'))['current-jobs-buried']).toBe('2');
    // kick-job of a buried job, then of a ready one (404), then of a job that does not exist (404).
    expect(await post(port, `/api/jobs/${ids[3]}/kick`, {})).toMatchObject({ status: 200, json: { id: ids[3], kicked: true } });
    expect((await post(port, `/api/jobs/${ids[3]}/kick`, {})).status).toBe(404);
    expect((await post(port, '/api/jobs/999999/kick', {})).status).toBe(404);
    // A reserved job cannot be deleted from here (its connection holds it).
    expect(await w.request(`reserve-job ${ids[0]}`)).toMatch(/^RESERVED/);
    expect((await post(port, `/api/jobs/${ids[0]}/delete`, {})).status).toBe(404);
    expect(await post(port, `/api/jobs/${ids[1]}/delete`, {})).toMatchObject({ status: 200, json: { id: ids[1], deleted: true } });
    expect(await c.request(`peek ${ids[1]}`)).toBe('NOT_FOUND\r\n');
    if (!(srv.router.jobMap instanceof OneShard)) expect(srv.router.jobMap.get(ids[1])).toBe(-1); // forgotten by the job map (one shard keeps none)
    // Pause: reserves skip the tube.
    expect(await post(port, '/api/tubes/work/pause', { seconds: 60 })).toMatchObject({ status: 200, json: { paused: 60 } });
    const st = await yamlOf(c, 'stats-tube work');
    expect([st.pause, st['cmd-pause-tube']]).toEqual(['60', '1']);
    expect(await w.request('reserve-with-timeout 0')).toBe('TIMED_OUT\r\n');
    expect((await post(port, '/api/tubes/work/pause', { seconds: 0 })).status).toBe(200);
    // Clear: the states asked only; reserved never.
    expect(await post(port, '/api/tubes/work/clear', { states: ['buried'] })).toMatchObject({ status: 200, json: { deleted: 1 } });
    expect(await post(port, '/api/tubes/work/clear', { states: ['ready', 'delayed', 'buried'] })).toMatchObject({ status: 200, json: { deleted: 1 } });
    expect((await yamlOf(c, 'stats-tube work'))['current-jobs-reserved']).toBe('1');
    expect((await post(port, '/api/tubes/work/clear', { states: ['reserved'] })).status).toBe(400);
    // Bad requests.
    for (const [path, body] of [
      ['/api/tubes/work/kick', {}], ['/api/tubes/work/kick', { count: -1 }], ['/api/tubes/work/kick', { count: 1.5 }],
      ['/api/tubes/work/pause', { seconds: 'x' }], ['/api/tubes/work/clear', { states: [] }], ['/api/tubes/work/clear', { states: ['nope'] }],
      ['/api/jobs/abc/delete', {}], ['/api/jobs/0/delete', {}],
    ] as const) {
      expect((await post(port, path, body)).status, `${path} ${JSON.stringify(body)}`).toBe(400);
    }
    expect((await call(port, '/api/tubes/work/kick', { method: 'POST', auth: true, body: '{nope' })).status).toBe(400);
    expect((await call(port, '/api/tubes/work/kick', { method: 'POST', auth: true, body: '[1]' })).status).toBe(400);
    expect((await post(port, '/api/tubes/none/kick', { count: 1 })).status).toBe(404);
    expect((await post(port, '/api/tubes/none/clear', { states: ['ready'] })).status).toBe(404);
  });

  it('refuses state changes without the token (401), cross-origin (403), as a form (415), or by GET (405)', async (ctx) => {
    const srv = await start(ctx);
    const port = srv.httpPort!;
    const c = await client(ctx, srv.port);
    await c.request('use t');
    const id = await putForId(c, 'keep me');
    const path = `/api/jobs/${id}/delete`;
    const none = await call(port, path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' });
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toBe('Bearer');
    expect((await call(port, path, { method: 'POST', headers: { Authorization: 'Bearer nope', 'Content-Type': 'application/json' }, body: '{}' })).status).toBe(401);
    expect((await call(port, path, { method: 'POST', headers: { Authorization: `bearer${TOKEN}`, 'Content-Type': 'application/json' } })).status).toBe(401);
    // A form post, even with the token (a browser would send no token; this checks the type alone).
    expect((await call(port, path, { method: 'POST', headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'a=1' })).status).toBe(415);
    expect((await call(port, path, { method: 'POST', headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'text/plain' }, body: '{}' })).status).toBe(415);
    expect((await call(port, path, { method: 'POST', headers: { Authorization: `Bearer ${TOKEN}` } })).status).toBe(415);
    // Another origin, even with everything else right.
    for (const origin of ['http://evil.example', 'null', `http://127.0.0.1:${port + 1}`]) {
      expect((await post(port, path, {}, { headers: { Origin: origin } })).status, origin).toBe(403);
    }
    expect((await call(port, path)).status).toBe(405);
    expect((await call(port, path, { method: 'PUT', auth: true })).status).toBe(405);
    expect(await c.request(`peek ${id}`)).toMatch(/^FOUND/); // nothing of the above deleted it
    // The same origin is fine.
    expect((await post(port, path, {}, { headers: { Origin: `http://127.0.0.1:${port}` } })).status).toBe(200);
    expect(await c.request(`peek ${id}`)).toBe('NOT_FOUND\r\n');
  });

  it('a clear of 50,000 jobs leaves another connection answered while it runs', async (ctx) => {
    const srv = await start(ctx, { shards: 1 });
    const port = srv.httpPort!;
    const filler = await client(ctx, srv.port);
    await filler.request('use big');
    const N = 50_000;
    const CHUNK = 5_000;
    for (let i = 0; i < N; i += CHUNK) {
      let cmds = '';
      for (let k = 0; k < CHUNK; k++) cmds += 'put 0 0 60 5\r\nhello\r\n';
      await filler.send(cmds);
      for (let k = 0; k < CHUNK; k++) expect(await filler.readReply(30_000)).toMatch(/^INSERTED/);
    }
    expect(srv.router.tubes.find('big')!.jobs).toBe(N);

    // Another connection's put / reserve / delete cycle on another tube (same shard: one shard).
    const cyc = await client(ctx, srv.port);
    await cyc.request('use cycle');
    await cyc.request('watch cycle');
    await cyc.request('ignore default');
    let replies = 0;
    let stop = false;
    // The big tube's job count (the routing layer's) whenever the cycle got an answer: a value
    // strictly between 0 and N means an answer came between two pages of the clear.
    const big = srv.router.tubes.find('big')!;
    const seenJobs: number[] = [];
    const answered = (): void => {
      replies++;
      seenJobs.push(big.jobs);
    };
    const cycle = (async () => {
      while (!stop) {
        const id = await putForId(cyc, 'c');
        answered();
        expect(await cyc.request('reserve-with-timeout 5')).toMatch(new RegExp(`^RESERVED ${id} `));
        answered();
        expect(await cyc.request(`delete ${id}`)).toBe('DELETED\r\n');
        answered();
      }
    })();
    while (replies < 3) await new Promise((r) => setTimeout(r, 1));
    const before = replies;
    const cleared = await post(port, '/api/tubes/big/clear', { states: ['ready'] });
    const during = replies - before;
    stop = true;
    await cycle;
    expect(cleared).toMatchObject({ status: 200, json: { tube: 'big', deleted: N } });
    expect(during, 'replies to the other connection while the clear ran').toBeGreaterThan(0);
    const mid = seenJobs.filter((n) => n > 0 && n < N);
    expect(mid.length, `answers between two pages of the clear (big's job counts seen: ${[...new Set(seenJobs)].join(' ')})`).toBeGreaterThan(0);
    // The routing layer forgot every cleared job (the tube, empty and unused, may be gone).
    expect(srv.router.tubes.find('big')?.jobs ?? 0).toBe(0);
    // (With one shard the router keeps nothing per job: OneShard; the shard answers for each id.)
    expect(srv.router.jobMap).toBeInstanceOf(OneShard);
    expect(await cyc.request('peek 1')).toBe('NOT_FOUND\r\n');
    expect(await cyc.request(`peek ${N}`)).toBe('NOT_FOUND\r\n');
    const st = await yamlOf(cyc, 'stats');
    expect(st['current-jobs-ready']).toBe('0');
  }, 120_000);
});
