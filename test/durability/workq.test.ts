// workq jobs with -b: every acknowledged add, lease, result and delete survives a clean restart
// and a SIGKILL, into a different shard count; run jobs are not logged (nobody waits for them
// after a restart); log space stays bounded under workq churn.

import { describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.ts';
import {
  addCmd, completeCmd, failCmd, leaseReply, NOT_FOUND, OK, resultReply, runCmd, scheduleCmd, uuid, wqConnect,
  wqTime, type WqClient,
} from '../support/workq.ts';
import { cleanedAfterEach, makeDir, spawnServer, walBytes } from './support.ts';

const { dirs, servers, clients } = cleanedAfterEach();

function newDir(): string {
  const d = makeDir('workq-wal');
  dirs.push(d);
  return d;
}

async function start(dir: string, shards: number, segmentBytes?: number): Promise<RunningServer> {
  const s = await startServer({
    port: 0, shards, logLevel: 'silent', binlogDir: dir, fsyncMs: 0, binlogSegmentBytes: segmentBytes,
    workq: { host: '127.0.0.1', port: 0 },
  });
  servers.push(s);
  return s;
}

async function stop(s: RunningServer): Promise<void> {
  servers.splice(servers.indexOf(s), 1);
  await s.close();
}

async function conn(s: RunningServer): Promise<WqClient> {
  const c = await wqConnect(s.workqPort as number);
  clients.push(c);
  return c;
}

describe('workq with -b', () => {
  it('jobs in every state come back after a restart, into another shard count', async () => {
    const dir = newDir();
    let s = await start(dir, 1);
    let c = await conn(s);
    const [fresh, leased, done, failed, sched, deleted] = [uuid(), uuid(), uuid(), uuid(), uuid(), uuid()];
    await c.want(addCmd(fresh, 'a', 60000, 60000, 'fresh', { priority: 7, maxAttempts: 3, maxFails: 2 }), OK);
    await c.want(addCmd(leased, 'b', 60000, 60000, 'leased'), OK);
    await c.want('lease b 0\r\n', leaseReply(leased, 'b', 60000, 'leased'));
    await c.want(addCmd(done, 'c', 60000, 60000, 'done'), OK);
    await c.want(completeCmd(done, 'the result\r\nwith CRLF'), OK);
    await c.want(addCmd(failed, 'c', 60000, 60000, 'failed'), OK);
    await c.want(failCmd(failed, 'boom'), OK);
    const at = Date.now() + 3_600_000;
    await c.want(scheduleCmd(sched, 'd', 60000, 60000, wqTime(at), 'later'), OK);
    await c.want(addCmd(deleted, 'a', 60000, 60000, 'gone'), OK);
    await c.want(`delete ${deleted}\r\n`, OK);
    const inspectAll = async (cl: WqClient) => {
      const out = [];
      for (const id of [fresh, leased, done, failed, sched]) out.push(await cl.inspectJob(id));
      return out;
    };
    const before = await inspectAll(c);
    await stop(s);

    s = await start(dir, 4);
    c = await conn(s);
    const after = await inspectAll(c);
    expect(after).toEqual(before);
    expect(await c.inspectJob(deleted)).toBeNull();
    await c.want(`result ${done} 0\r\n`, resultReply(done, true, 'the result\r\nwith CRLF'));
    await c.want(`result ${failed} 0\r\n`, resultReply(failed, false, 'boom'));
    // The lease taken before the restart still holds: nobody else gets the job, its worker can finish it.
    await c.want('lease b 0\r\n', '-TIMEOUT\r\n');
    await c.want(completeCmd(leased, 'finished after the restart'), OK);
    await c.want('lease a 0\r\n', leaseReply(fresh, 'a', 60000, 'fresh'));
    expect(await c.inspectJob(fresh)).toMatchObject({ attempts: 1, state: 4, maxAttempts: 3, maxFails: 2, priority: 7 });
    // Ids of the log are held: a duplicate is refused; a deleted id is free.
    await c.want(addCmd(done, 'c', 1000, 1000, 'x'), '-CLIENT-ERROR Duplicate job\r\n');
    await c.want(addCmd(deleted, 'a', 1000, 60000, 'again'), OK);
  });

  it('a run job is not logged', async () => {
    const dir = newDir();
    let s = await start(dir, 2);
    let c = await conn(s);
    const id = uuid();
    await c.send(runCmd(id, 'r', 1000, 60000, 'run me'));
    const w = await conn(s);
    await w.want('lease r 5000\r\n', leaseReply(id, 'r', 1000, 'run me'));
    clients.splice(clients.indexOf(c), 1);
    c.destroy();
    await stop(s);
    s = await start(dir, 2);
    c = await conn(s);
    expect(await c.inspectJob(id)).toBeNull();
    await c.want('inspect queue r\r\n', NOT_FOUND);
  });

  it('acknowledged adds, results and deletes survive SIGKILL (-f 0)', async () => {
    const dir = newDir();
    const child = await spawnServer({ dir, shards: 2, workq: true });
    const c = await wqConnect(child.workqPort);
    clients.push(c);
    const ids = Array.from({ length: 60 }, () => uuid());
    // Pipelined: every +OK that arrives before the kill must hold after it.
    await c.send(ids.map((id) => addCmd(id, `k${id.charCodeAt(0) % 3}`, 60000, 60000, `p-${id}`)).join(''));
    for (let i = 0; i < ids.length; i++) expect(await c.readReply()).toBe(OK);
    await c.want(completeCmd(ids[0]!, 'r0'), OK);
    await c.want(`delete ${ids[1]}\r\n`, OK);
    await child.kill();
    const s = await start(dir, 3);
    const d = await conn(s);
    for (const id of ids.slice(2)) expect((await d.inspectJob(id))?.payload).toBe(`p-${id}`);
    await d.want(`result ${ids[0]} 0\r\n`, resultReply(ids[0]!, true, 'r0'));
    expect(await d.inspectJob(ids[1]!)).toBeNull();
  });

  it('log space stays bounded while workq jobs churn', async () => {
    const dir = newDir();
    const s = await start(dir, 1, 16 * 1024);
    const c = await conn(s);
    const keep = uuid();
    await c.want(addCmd(keep, 'keep', 60000, 60000, 'long-lived'), OK);
    const payload = 'x'.repeat(500);
    let peak = 0;
    for (let round = 0; round < 400; round++) {
      const id = uuid();
      await c.want(addCmd(id, 'churn', 60000, 60000, payload), OK);
      await c.want('lease churn 0\r\n', leaseReply(id, 'churn', 60000, payload));
      await c.want(completeCmd(id, 'ok'), OK);
      await c.want(`delete ${id}\r\n`, OK);
      if (round % 50 === 49) peak = Math.max(peak, walBytes(dir));
    }
    // 400 rounds wrote well over 400 KiB; what stays is a few segments.
    expect(peak).toBeLessThan(8 * 16 * 1024);
    expect((await c.inspectJob(keep))?.payload).toBe('long-lived');
  });
});
