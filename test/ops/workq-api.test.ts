// The JSON API's workq views (#14, src/ops/workq-api.ts): workq queues with their ready and
// scheduled lengths, a queue's jobs paged by offset with safe payload previews, a job's delete
// (then gone over the protocol), the access rules and errors, and 404 when workq is off.

import { describe, expect, it, type TestContext } from 'vitest';
import { startServer, type RunningServer, type ServerOptions } from '../../src/server.ts';
import { apiHeaders, request, type HttpAnswer } from './support.ts';
import { addCmd, namesOnShards, NOT_FOUND, OK, scheduleCmd, uuid, wqConnect, wqTime, type WqClient } from '../support/workq.ts';

const TOKEN = 'test-token-workq-0123456789';
const SHARDS = 4;

async function start(ctx: TestContext, opts: ServerOptions = {}): Promise<RunningServer> {
  const srv = await startServer({
    host: '127.0.0.1', port: 0, shards: SHARDS, logLevel: 'silent', http: { host: '127.0.0.1', port: 0 }, httpToken: TOKEN,
    workq: { host: '127.0.0.1', port: 0 }, ...opts,
  });
  ctx.onTestFinished(() => srv.close());
  return srv;
}

async function wq(ctx: TestContext, srv: RunningServer): Promise<WqClient> {
  const c = await wqConnect(srv.workqPort as number);
  ctx.onTestFinished(() => c.destroy());
  return c;
}

/** Status and JSON only (the tests compare them whole). */
async function call(port: number, path: string, method = 'GET', auth = false): Promise<Pick<HttpAnswer, 'status' | 'json'>> {
  const a = await request(port, path, method, { headers: auth ? apiHeaders(TOKEN) : {}, body: method === 'POST' ? '{}' : undefined });
  return { status: a.status, json: a.json };
}

describe('JSON API: workq queues', () => {
  it('lists every queue with its ready and scheduled lengths, on several shards', async (ctx) => {
    const srv = await start(ctx);
    const c = await wq(ctx, srv);
    const hp = srv.httpPort as number;
    expect((await call(hp, '/api/workq/queues')).json).toEqual({ queues: [] });
    const [a, b] = namesOnShards('q', 2, SHARDS);
    for (let i = 0; i < 3; i++) await c.want(addCmd(uuid(), a, 5000, 60000, `job ${i}`), OK);
    const later = wqTime(Date.now() + 3_600_000);
    for (let i = 0; i < 2; i++) await c.want(scheduleCmd(uuid(), b, 5000, 7_200_000, later, 's'), OK);
    await c.want(addCmd(uuid(), b, 5000, 60000, 'r'), OK);
    const r = await call(hp, '/api/workq/queues');
    expect(r.status).toBe(200);
    expect(r.json.queues).toEqual([{ name: a, ready: 3, scheduled: 0 }, { name: b, ready: 1, scheduled: 2 }].sort((x, y) => (x.name < y.name ? -1 : 1)));
    expect((await call(hp, `/api/workq/queues/${b}`)).json).toEqual({ name: b, ready: 1, scheduled: 2 });
  });

  it('pages a queue\'s ready and scheduled jobs by offset, with previews safe for binary', async (ctx) => {
    const srv = await start(ctx);
    const c = await wq(ctx, srv);
    const hp = srv.httpPort as number;
    const ids = [uuid(), uuid(), uuid(), uuid(), uuid()];
    // Priority high first: ids[4] (pri 4) leads.
    for (let i = 0; i < 4; i++) await c.want(addCmd(ids[i], 'pg', 1500, 90000, `text ${i}`, { priority: i, maxAttempts: 3 }), OK);
    await c.want(addCmd(ids[4], 'pg', 1500, 90000, '\x00\x01\xffbinary', { priority: 4 }), OK);
    const p1 = await call(hp, '/api/workq/queues/pg/jobs?state=ready&limit=2');
    expect(p1.status).toBe(200);
    expect(p1.json.next).toBe('2');
    expect(p1.json.jobs.map((j: { id: string }) => j.id)).toEqual([ids[4], ids[3]]);
    const bin = p1.json.jobs[0];
    expect(bin.preview).toEqual({ encoding: 'base64', data: Buffer.from('\x00\x01\xffbinary', 'latin1').toString('base64'), truncated: false });
    const t = p1.json.jobs[1];
    expect(t).toMatchObject({ queue: 'pg', state: 'new', priority: 3, attempts: 0, 'max-attempts': 3, ttr: 1500, ttl: 90000, time: null, 'payload-size': 6 });
    expect(t.preview).toEqual({ encoding: 'text', data: 'text 3', truncated: false });
    expect(Math.abs(Date.parse(t.created) - Date.now())).toBeLessThan(60_000);
    const p2 = await call(hp, '/api/workq/queues/pg/jobs?limit=2&cursor=2');
    expect(p2.json.jobs.map((j: { id: string }) => j.id)).toEqual([ids[2], ids[1]]);
    expect(p2.json.next).toBe('4');
    const p3 = await call(hp, '/api/workq/queues/pg/jobs?limit=2&cursor=4');
    expect(p3.json.jobs.map((j: { id: string }) => j.id)).toEqual([ids[0]]);
    expect(p3.json.next).toBe(null);
    // A long payload: a preview of its first bytes, truncated.
    const long = 'x'.repeat(1000);
    await c.want(scheduleCmd(uuid(), 'pg', 1000, 7_200_000, wqTime(Date.now() + 3_600_000), long), OK);
    const s = await call(hp, '/api/workq/queues/pg/jobs?state=scheduled');
    expect(s.json.state).toBe('scheduled');
    expect(s.json.jobs).toHaveLength(1);
    expect(s.json.jobs[0]['payload-size']).toBe(1000);
    expect(s.json.jobs[0].preview.truncated).toBe(true);
    expect(s.json.jobs[0].preview.data.length).toBeLessThan(1000);
    expect(typeof s.json.jobs[0].time).toBe('string');
  });

  it('deletes a job as workq\'s delete does: then inspect job is NOT-FOUND', async (ctx) => {
    const srv = await start(ctx);
    const c = await wq(ctx, srv);
    const hp = srv.httpPort as number;
    const id = uuid();
    await c.want(addCmd(id, 'del', 1000, 60000, 'bye'), OK);
    expect((await call(hp, `/api/workq/jobs/${id}/delete`, 'POST')).status).toBe(401);
    expect((await call(hp, `/api/workq/jobs/${id}/delete`, 'GET', true)).status).toBe(405);
    expect((await call(hp, '/api/workq/jobs/not-a-uuid/delete', 'POST', true)).status).toBe(400);
    expect((await call(hp, `/api/workq/jobs/${uuid()}/delete`, 'POST', true)).status).toBe(404);
    const r = await call(hp, `/api/workq/jobs/${id.toUpperCase()}/delete`, 'POST', true);
    expect(r).toEqual({ status: 200, json: { id, deleted: true } });
    await c.want(`inspect job ${id}\r\n`, NOT_FOUND);
    expect((await call(hp, '/api/workq/queues/del')).json).toEqual({ name: 'del', ready: 0, scheduled: 0 });
    expect((await call(hp, `/api/workq/jobs/${id}/delete`, 'POST', true)).status).toBe(404);
  });

  it('answers 404 for an unknown queue, 400 for a bad name, state, limit or cursor', async (ctx) => {
    const srv = await start(ctx);
    const c = await wq(ctx, srv);
    const hp = srv.httpPort as number;
    await c.want(addCmd(uuid(), 'known', 1000, 60000, 'x'), OK);
    expect((await call(hp, '/api/workq/queues/nope')).status).toBe(404);
    expect((await call(hp, '/api/workq/queues/nope/jobs')).status).toBe(404);
    expect((await call(hp, '/api/workq/queues/bad%20name/jobs')).status).toBe(400);
    expect((await call(hp, '/api/workq/queues/known/jobs?state=buried')).status).toBe(400);
    expect((await call(hp, '/api/workq/queues/known/jobs?limit=0')).status).toBe(400);
    expect((await call(hp, '/api/workq/queues/known/jobs?limit=101')).status).toBe(400);
    expect((await call(hp, '/api/workq/queues/known/jobs?cursor=x')).status).toBe(400);
    expect((await call(hp, '/api/workq/other')).status).toBe(404);
    expect((await call(hp, '/api/workq/queues', 'POST', true)).status).toBe(405);
  });

  it('answers 404 "workq is off" when the server has no workq listener', async (ctx) => {
    const srv = await start(ctx, { workq: null });
    const r = await call(srv.httpPort as number, '/api/workq/queues');
    expect(r.status).toBe(404);
    expect(r.json.error).toMatch(/workq is off/);
    expect((await call(srv.httpPort as number, `/api/workq/jobs/${uuid()}/delete`, 'POST', true)).status).toBe(404);
  });
});
