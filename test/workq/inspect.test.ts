// workq over real sockets: inspect server | queues | queue | jobs | scheduled-jobs | job.
// Paging (cursor offset, limit), ordering, and queues that live on different shards.
// Every case runs with 1 and 4 shards.

import { describe, expect, it } from 'vitest';
import {
  addCmd, completeCmd, eventually, failCmd, inspectQueueReply, JOB_KEYS, leaseReply, namesOnShards, NOT_FOUND, OK,
  OK_0, parseInspect, parseShownTime, queueBlock, runCmd, scheduleCmd, SHARD_COUNTS, TIMEOUT, uuid, uuids,
  wqFixture, wqTime, wqTimeShown,
} from '../support/workq.ts';

describe.each(SHARD_COUNTS)('workq, %i shard(s): inspect server', (shards) => {
  it('`+OK 1`, `server 2` (one short, as the server writes it), then three keys', async (ctx) => {
    const before = Date.now();
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const s = await c.inspectServer();
    expect(s.raw).toBe(`+OK 1\r\nserver 2\r\nactive-clients 1\r\nevicted-jobs 0\r\nstarted ${s.started}\r\n`);
    const started = parseShownTime(s.started);
    expect(started).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(started).toBeLessThanOrEqual(Date.now());
    // `started` does not move.
    expect((await c.inspectServer()).started).toBe(s.started);
  });

  it('active-clients follows the connections', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    expect((await c.inspectServer()).activeClients).toBe(1);
    const more = await f.conns(3);
    await eventually('4 clients', async () => (await c.inspectServer()).activeClients === 4);
    await more[0]!.close();
    more[1]!.destroy();
    await eventually('2 clients', async () => (await c.inspectServer()).activeClients === 2);
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): inspect queues and queue', (shards) => {
  it('no queues at first: `+OK 0`; unknown queue: -NOT-FOUND', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    await c.ask('inspect queues 0 10', OK_0);
    await c.ask('inspect queue nothing', NOT_FOUND);
  });

  it('queues are made by add, schedule, run and lease, listed in byte order, and never removed', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const ids = uuids(4);
    await c.want(addCmd(ids[0]!, 'b-add', 60000, 60000, 'x'), OK);
    await c.want(scheduleCmd(ids[1]!, 'a-sched', 60000, 60000, wqTime(Date.now() + 60000), 'x'), OK);
    await c.want(runCmd(ids[2]!, 'c-run', 60000, 0, 'x'), TIMEOUT);
    await c.ask('lease d-lease 0', TIMEOUT);
    await c.ask('inspect queues 0 10',
      '+OK 4\r\n' + queueBlock('a-sched', 0, 1) + queueBlock('b-add', 1, 0) + queueBlock('c-run', 0, 0) +
        queueBlock('d-lease', 0, 0));
    await c.ask('inspect queue c-run', inspectQueueReply('c-run', 0, 0));
    await c.ask('inspect queue d-lease', inspectQueueReply('d-lease', 0, 0));
    // Emptied queues stay.
    await c.ask(`delete ${ids[0]}`, OK);
    await c.ask(`delete ${ids[1]}`, OK);
    await c.ask('inspect queues 0 10',
      '+OK 4\r\n' + queueBlock('a-sched', 0, 0) + queueBlock('b-add', 0, 0) + queueBlock('c-run', 0, 0) +
        queueBlock('d-lease', 0, 0));
  });

  it('inspect queue counts ready and scheduled jobs, not leased or finished ones', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const ids = uuids(6);
    for (let i = 0; i < 4; i++) await c.want(addCmd(ids[i]!, 'cnt', 60000, 60000, `j${i}`), OK);
    await c.want(scheduleCmd(ids[4]!, 'cnt', 60000, 60000, wqTime(Date.now() + 60000), 's'), OK);
    await c.want(scheduleCmd(ids[5]!, 'cnt', 60000, 60000, wqTime(Date.now() + 90000), 's'), OK);
    await c.ask('inspect queue cnt', inspectQueueReply('cnt', 4, 2));
    await c.ask('lease cnt 0', leaseReply(ids[0]!, 'cnt', 60000, 'j0'));
    await c.want(completeCmd(ids[1]!, 'r'), OK);
    await c.want(failCmd(ids[2]!, 'r'), OK);
    await c.ask('inspect queue cnt', inspectQueueReply('cnt', 1, 2));
  });

  it('lists many queues across shards sorted by bytes, and pages through them', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    // Byte order: '-' < '.' < digits < upper case < '_' < lower case.
    const names = ['b', 'Z', '_x', 'a.b', 'a-b', 'a_b', '0', 'a', 'B9', 'ab', 'a0', 'zz'];
    const ready = new Map<string, number>();
    for (let i = 0; i < names.length; i++) {
      const n = names[i]!;
      ready.set(n, i % 3);
      for (let k = 0; k < i % 3; k++) await c.want(addCmd(uuid(), n, 60000, 60000, 'x'), OK);
      if (i % 3 === 0) await c.ask(`lease ${n} 0`, TIMEOUT); // creates it empty
    }
    const sorted = names.slice().sort(); // ASCII: UTF-16 code unit order is byte order
    expect(sorted.slice(0, 4)).toEqual(['0', 'B9', 'Z', '_x']);
    const block = (n: string): string => queueBlock(n, ready.get(n)!, 0);
    await c.ask('inspect queues 0 100', `+OK ${sorted.length}\r\n${sorted.map(block).join('')}`);
    for (let offset = 0; offset <= sorted.length + 1; offset++) {
      for (const limit of [1, 2, 5]) {
        const page = sorted.slice(offset, offset + limit);
        await c.ask(`inspect queues ${offset} ${limit}`, `+OK ${page.length}\r\n${page.map(block).join('')}`);
      }
    }
    await c.ask('inspect queues 4294967295 100', OK_0);
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): inspect jobs', (shards) => {
  it('-NOT-FOUND for an unknown queue; `+OK 0` for an empty one', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    await c.ask('inspect jobs nothing 0 10', NOT_FOUND);
    await c.ask('inspect scheduled-jobs nothing 0 10', NOT_FOUND);
    await c.ask('lease empty 0', TIMEOUT);
    await c.ask('inspect jobs empty 0 10', OK_0);
    await c.ask('inspect scheduled-jobs empty 0 10', OK_0);
  });

  it('lists the ready jobs in lease order (priority, then FIFO) with every key, and pages', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const pris = [0, 5, 0, -3, 5, 9, 0, 5];
    const jobs = pris.map((pri, i) => ({ id: uuid(), pri, body: `j${i}\r\n` }));
    for (const j of jobs) await c.want(addCmd(j.id, 'ij', 1000, 60000, j.body, { priority: j.pri, maxAttempts: 4 }), OK);
    const order = jobs.slice().sort((a, b) => b.pri - a.pri); // stable: FIFO within a priority
    const all = await c.inspectJobs('jobs', 'ij', 0, 100);
    expect(all.map((j) => j.id)).toEqual(order.map((j) => j.id));
    for (const [i, j] of all.entries()) {
      expect(j).toMatchObject({
        keyCount: 12, name: 'ij', ttr: 1000, ttl: 60000, payload: order[i]!.body, payloadSize: 4, maxAttempts: 4,
        attempts: 0, maxFails: 0, fails: 0, priority: order[i]!.pri, state: 0, time: null,
      });
      expect(j.keyOrder).toEqual(JOB_KEYS);
    }
    for (let offset = 0; offset <= jobs.length + 1; offset++) {
      for (const limit of [1, 3, 100]) {
        const page = await c.inspectJobs('jobs', 'ij', offset, limit);
        expect(page.map((j) => j.id)).toEqual(order.slice(offset, offset + limit).map((j) => j.id));
      }
    }
    await c.ask('inspect jobs ij 8 10', OK_0);
    await c.ask('inspect jobs ij 4294967295 100', OK_0);
    // Inspecting does not take anything: the leases come in the listed order.
    for (const j of order) await c.ask('lease ij 0', leaseReply(j.id, 'ij', 1000, j.body));
  });

  it('leased, finished and scheduled jobs are not listed', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const ids = uuids(5);
    for (let i = 0; i < 4; i++) await c.want(addCmd(ids[i]!, 'ij', 60000, 60000, `j${i}`), OK);
    await c.want(scheduleCmd(ids[4]!, 'ij', 60000, 60000, wqTime(Date.now() + 60000), 's'), OK);
    await c.ask('lease ij 0', leaseReply(ids[0]!, 'ij', 60000, 'j0'));
    await c.want(completeCmd(ids[1]!, 'r'), OK);
    await c.want(failCmd(ids[2]!, 'r'), OK);
    const listed = await c.inspectJobs('jobs', 'ij', 0, 100);
    expect(listed.map((j) => j.id)).toEqual([ids[3]]);
  });

  it('limit 100 at most: 105 jobs take two pages', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const ids = uuids(105);
    await c.send(ids.map((id, i) => addCmd(id, 'big', 60000, 60000, String(i))).join(''));
    await c.expect(OK.repeat(ids.length));
    const p1 = await c.inspectJobs('jobs', 'big', 0, 100);
    const p2 = await c.inspectJobs('jobs', 'big', 100, 100);
    expect(p1.length).toBe(100);
    expect(p2.map((j) => j.payload)).toEqual(['100', '101', '102', '103', '104']);
    expect([...p1, ...p2].map((j) => j.id)).toEqual(ids);
  });

  it('jobs of other queues (on other shards) do not show', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const names = namesOnShards('iq', 3, shards);
    const ids = uuids(3);
    for (let i = 0; i < 3; i++) await c.want(addCmd(ids[i]!, names[i]!, 60000, 60000, `x${i}`), OK);
    for (let i = 0; i < 3; i++) {
      expect((await c.inspectJobs('jobs', names[i]!, 0, 10)).map((j) => j.id)).toEqual([ids[i]]);
    }
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): inspect scheduled-jobs', (shards) => {
  it('lists scheduled jobs with their time (13 keys) and pages', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const base = Date.now() + 3600_000;
    // Times one hour and more ahead, one second apart; priority falls as time grows, so the
    // order is the same whether the list is kept by time or by priority first.
    const jobs = Array.from({ length: 6 }, (_, i) => ({ id: uuid(), at: base + i * 1000, pri: 10 - i, body: `s${i}` }));
    for (const j of [jobs[3]!, jobs[0]!, jobs[5]!, jobs[1]!, jobs[4]!, jobs[2]!]) {
      await c.want(scheduleCmd(j.id, 'sj', 1000, 60000, wqTime(j.at), j.body, { priority: j.pri }), OK);
    }
    const all = await c.inspectJobs('scheduled-jobs', 'sj', 0, 100);
    expect(all.map((j) => j.id)).toEqual(jobs.map((j) => j.id));
    for (const [i, j] of all.entries()) {
      expect(j).toMatchObject({ keyCount: 13, name: 'sj', state: 0, attempts: 0, priority: jobs[i]!.pri, time: wqTimeShown(jobs[i]!.at) });
      expect(j.keyOrder).toEqual([...JOB_KEYS, 'time']);
    }
    for (let offset = 0; offset <= jobs.length; offset++) {
      for (const limit of [1, 4]) {
        const page = await c.inspectJobs('scheduled-jobs', 'sj', offset, limit);
        expect(page.map((j) => j.id)).toEqual(jobs.slice(offset, offset + limit).map((j) => j.id));
      }
    }
    await c.ask('inspect jobs sj 0 100', OK_0);
    await c.ask('inspect queue sj', inspectQueueReply('sj', 0, 6));
  });

  it('the exact bytes of a scheduled job block', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    const at = Date.UTC(2099, 0, 2, 3, 4, 5, 678);
    await c.want(scheduleCmd(id, 'sj', 1500, 70000, wqTime(at), 'a\r\nb', { priority: -1, maxAttempts: 2, maxFails: 1 }), OK);
    const raw = await c.request('inspect scheduled-jobs sj 0 1');
    const created = /\r\ncreated (\S+)\r\ntime /.exec(raw)?.[1];
    expect(created).toBeDefined();
    expect(raw).toBe(
      `+OK 1\r\n${id} 13\r\nname sj\r\nttr 1500\r\nttl 70000\r\npayload-size 4\r\npayload a\r\nb\r\n` +
        `max-attempts 2\r\nattempts 0\r\nmax-fails 1\r\nfails 0\r\npriority -1\r\nstate 0\r\ncreated ${created}\r\n` +
        'time 2099-01-02T03:04:05Z\r\n',
    );
    expect(parseInspect(raw)[0]!.keys.find(([k]) => k === 'payload')?.[1]).toBe('a\r\nb');
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): inspect job', (shards) => {
  it('follows a job through its states: new 0, leased 4, completed 1', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'st', 60000, 60000, 'x'), OK);
    expect(await c.inspectJob(id)).toMatchObject({ state: 0, attempts: 0 });
    await c.ask('lease st 0', leaseReply(id, 'st', 60000, 'x'));
    expect(await c.inspectJob(id)).toMatchObject({ state: 4, attempts: 1 });
    await c.want(completeCmd(id, 'r'), OK);
    expect(await c.inspectJob(id)).toMatchObject({ state: 1, attempts: 1 });
  });

  it('ids on several shards are each found', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const names = namesOnShards('ijs', 4, shards);
    const ids = uuids(4);
    for (let i = 0; i < 4; i++) await c.want(addCmd(ids[i]!, names[i]!, 60000, 60000, `p${i}`), OK);
    for (let i = 0; i < 4; i++) expect(await c.inspectJob(ids[i]!)).toMatchObject({ id: ids[i], name: names[i], payload: `p${i}` });
  });
});
