// A tube cleared a page at a time (#14's clear, src/ops/admin.ts) with -b: every deletion is
// logged as `delete` logs it, so after a restart the cleared jobs stay gone, the jobs it left
// (reserved ones, other states, other tubes) come back, and the routing layer forgot every id.

import { describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.ts';
import { CLEAR_BITS, clearPage, clearTube } from '../../src/ops/admin.ts';
import { CLEAR_JOBS_MAX } from '../../src/shared/records.ts';
import { connect, type Client } from '../support/client.ts';
import { cleanedAfterEach, jobOf, makeDir, parseYaml, putId, scan } from './support.ts';

const { dirs, servers, clients } = cleanedAfterEach();

async function start(dir: string, shards: number): Promise<RunningServer> {
  const s = await startServer({ port: 0, shards, logLevel: 'silent', binlogDir: dir, fsyncMs: 0 });
  servers.push(s);
  return s;
}

async function client(port: number): Promise<Client> {
  const c = await connect(port);
  clients.push(c);
  return c;
}

async function tubeCount(c: Client, tube: string, key: string): Promise<number> {
  const r = await c.request(`stats-tube ${tube}`);
  return r === 'NOT_FOUND\r\n' ? 0 : Number(parseYaml(r)[key]);
}

describe('clearing a tube with -b', () => {
  for (const shards of [1, 3]) {
    it(`cleared jobs stay gone after a restart (${shards} shard${shards > 1 ? 's' : ''})`, async () => {
      const dir = makeDir('clear');
      dirs.push(dir);
      const srv = await start(dir, shards);
      const c = await client(srv.port);
      const w = await client(srv.port);
      await c.request('use big');
      // More than one page of ready jobs, delayed and buried ones, one reserved, and another tube.
      const n = CLEAR_JOBS_MAX + 500;
      let cmds = '';
      for (let i = 0; i < n; i++) cmds += `put ${i % 3} 0 60 3\r\nabc\r\n`;
      await c.send(cmds);
      const ids: number[] = [];
      for (let i = 0; i < n; i++) ids.push(Number(/^INSERTED (\d+)/.exec(await c.readReply(30_000))![1]));
      const delayed = await putId(c, 'delayed', 0, 100);
      const buried = await putId(c, 'buried');
      expect(jobOf(await w.request(`reserve-job ${buried}`))?.id).toBe(buried);
      expect(await w.request(`bury ${buried} 0`)).toBe('BURIED\r\n');
      const reserved = await putId(c, 'reserved');
      expect(jobOf(await w.request(`reserve-job ${reserved}`))?.id).toBe(reserved);
      await c.request('use keep');
      const kept = await putId(c, 'kept');

      // The first page alone: at most CLEAR_JOBS_MAX, all its ids forgotten by the job map.
      const t = srv.router.tubes.find('big')!;
      const first = await clearPage(srv.router, t, CLEAR_BITS.ready | CLEAR_BITS.delayed | CLEAR_BITS.buried);
      expect(first.ids.length).toBe(CLEAR_JOBS_MAX);
      expect(first.remain).toBe(true);
      // The job map forgot them (with one shard the router keeps nothing per job: OneShard).
      const mapped = shards > 1 ? first.ids : [];
      for (const id of mapped) expect(srv.router.jobMap.get(id)).toBe(-1);
      const rest = await clearTube(srv.router, 'big', CLEAR_BITS.ready | CLEAR_BITS.delayed | CLEAR_BITS.buried);
      expect(rest).toEqual({ deleted: n + 2 - CLEAR_JOBS_MAX, unlogged: false });
      if (shards > 1) for (const id of [...ids, delayed, buried]) expect(srv.router.jobMap.get(id), `job ${id}`).toBe(-1);
      expect(srv.router.tubes.find('big')!.jobs).toBe(1); // the reserved job
      expect(await tubeCount(c, 'big', 'current-jobs-ready')).toBe(0);
      expect(await tubeCount(c, 'big', 'current-jobs-reserved')).toBe(1);
      expect(await tubeCount(c, 'big', 'cmd-delete')).toBe(n + 2);
      expect(await c.request(`peek ${ids[0]}`)).toBe('NOT_FOUND\r\n');
      expect(await c.request(`delete ${ids[5]}`)).toBe('NOT_FOUND\r\n');
      const maxId = reserved > kept ? reserved : kept;

      servers.splice(servers.indexOf(srv), 1);
      await srv.close();
      const again = await start(dir, shards === 1 ? 2 : 1);
      const r = await client(again.port);
      const found = await scan(r, maxId);
      expect([...found.keys()].sort((a, b) => a - b)).toEqual([reserved, kept].sort((a, b) => a - b));
      expect(found.get(reserved)).toMatchObject({ state: 'ready', tube: 'big', body: 'reserved' });
      expect(found.get(kept)).toMatchObject({ state: 'ready', tube: 'keep', body: 'kept' });
      // Ids go on after the largest ever handed out.
      expect(await putId(r, 'after')).toBeGreaterThan(maxId);
    }, 60_000);
  }
});
