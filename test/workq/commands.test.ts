// workq over real sockets: add, lease, complete, fail, delete, their success replies and the
// NOT-FOUND / Duplicate replies that depend on state. Every case runs with 1 and 4 shards.
// Expected behaviour is the workq 0.2 server's (github.com/iamduo/workq), which wins over the spec.

import { describe, expect, it } from 'vitest';
import {
  addCmd, completeCmd, E_DUP_JOB, E_DUP_RESULT, failCmd, inspectQueueReply, JOB_KEYS, leaseReply, namesOnShards,
  NOT_FOUND, OK, parseShownTime, resultReply, runCmd, scheduleCmd, SHARD_COUNTS, TIMEOUT, uuid, uuids, wqFixture, wqTime,
} from '../support/workq.ts';

describe.each(SHARD_COUNTS)('workq, %i shard(s): add and inspect job', (shards) => {
  it('add stores the job as given; inspect job shows it with 12 keys in the server order', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    const payload = 'a\r\nb\x00c\xff\r\n';
    const before = Date.now();
    await c.want(addCmd(id, 'ping', 1000, 60000, payload, { priority: -5, maxAttempts: 3, maxFails: 2 }), OK);
    const j = await c.inspectJob(id);
    expect(j).toMatchObject({
      id, keyCount: 12, name: 'ping', ttr: 1000, ttl: 60000, payloadSize: payload.length, payload,
      maxAttempts: 3, attempts: 0, maxFails: 2, fails: 0, priority: -5, state: 0, time: null,
    });
    expect(j!.keyOrder).toEqual(JOB_KEYS);
    const created = parseShownTime(j!.created);
    expect(created).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(created).toBeLessThanOrEqual(Date.now());
  });

  it('defaults: priority 0, max-attempts 0, max-fails 0', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    // A TTL long enough that the job cannot expire between the add and the inspect, however slow the
    // machine (a 10 ms TTL once did, in CI).
    await c.want(addCmd(id, 'q', 5, 600000, 'x'), OK);
    expect(await c.inspectJob(id)).toMatchObject({ priority: 0, maxAttempts: 0, maxFails: 0, state: 0, ttr: 5, ttl: 600000 });
  });

  it('the exact inspect job bytes of a fresh job', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'ping', 1000, 600000, 'ping', { priority: 7 }), OK);
    const raw = await c.request(`inspect job ${id}`);
    const created = /\r\ncreated (\S+)\r\n$/.exec(raw)?.[1];
    expect(created).toBeDefined();
    expect(raw).toBe(
      `+OK 1\r\n${id} 12\r\nname ping\r\nttr 1000\r\nttl 600000\r\npayload-size 4\r\npayload ping\r\n` +
        `max-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\npriority 7\r\nstate 0\r\ncreated ${created}\r\n`,
    );
  });

  it('an id given in upper case is the same job and is echoed in lower case', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    const upper = id.toUpperCase();
    await c.want(addCmd(upper, 'q', 1000, 60000, 'x'), OK);
    expect((await c.inspectJob(upper))?.id).toBe(id);
    await c.want(addCmd(id, 'q', 1000, 60000, 'y'), E_DUP_JOB);
    await c.ask('lease q 0', leaseReply(id, 'q', 1000, 'x'));
    await c.want(completeCmd(upper, 'done'), OK);
    await c.ask(`result ${upper} 0`, resultReply(id, true, 'done'));
  });

  it('creates the queue: inspect queue counts the ready job', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    await c.ask('inspect queue fresh', NOT_FOUND);
    await c.want(addCmd(uuid(), 'fresh', 1000, 60000, 'x'), OK);
    await c.ask('inspect queue fresh', inspectQueueReply('fresh', 1, 0));
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): duplicate ids', (shards) => {
  it('an id already held is a duplicate for add, schedule and run, whatever the name (and shard)', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [a, b] = namesOnShards('dup', 2, shards);
    const id = uuid();
    await c.want(addCmd(id, a!, 1000, 60000, 'first'), OK);
    await c.want(addCmd(id, a!, 1000, 60000, 'again'), E_DUP_JOB);
    await c.want(addCmd(id, b!, 1000, 60000, 'other name'), E_DUP_JOB);
    await c.want(scheduleCmd(id, b!, 1000, 60000, wqTime(Date.now() + 60000), 'sched'), E_DUP_JOB);
    // run answers the duplicate at once instead of blocking.
    await c.want(runCmd(id, b!, 1000, 5000, 'run'), E_DUP_JOB);
    // The first job is untouched, and nothing went to the other name.
    expect(await c.inspectJob(id)).toMatchObject({ name: a, payload: 'first', state: 0 });
    await c.ask(`lease ${b} 0`, TIMEOUT);
    await c.ask(`inspect queue ${a}`, inspectQueueReply(a!, 1, 0));
  });

  it('the id stays held in every state until the job is gone, then it is free again', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'q', 1000, 60000, 'x'), OK);
    await c.ask('lease q 0', leaseReply(id, 'q', 1000, 'x'));
    await c.want(addCmd(id, 'q', 1000, 60000, 'x'), E_DUP_JOB); // leased
    await c.want(completeCmd(id, 'r'), OK);
    await c.want(addCmd(id, 'q', 1000, 60000, 'x'), E_DUP_JOB); // completed, result kept
    await c.ask(`delete ${id}`, OK);
    await c.want(addCmd(id, 'q', 1000, 60000, 'again'), OK);
    await c.ask('lease q 0', leaseReply(id, 'q', 1000, 'again'));
  });

  it('scheduled and failed jobs hold their ids too', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [s, x] = uuids(2);
    await c.want(scheduleCmd(s!, 'q', 1000, 60000, wqTime(Date.now() + 60000), 'later'), OK);
    await c.want(addCmd(s!, 'q', 1000, 60000, 'x'), E_DUP_JOB);
    await c.want(addCmd(x!, 'q', 1000, 60000, 'x'), OK);
    await c.want(failCmd(x!, 'bad'), OK);
    await c.want(addCmd(x!, 'q', 1000, 60000, 'x'), E_DUP_JOB);
    await c.want(runCmd(x!, 'q', 1000, 1000, 'x'), E_DUP_JOB);
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): lease', (shards) => {
  it('higher priority first, FIFO within a priority, then -TIMEOUT', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const jobs: Array<[number, string]> = [
      [5, 'a'], [1, 'b'], [5, 'c'], [0, 'd'], [2147483647, 'e'], [-2147483648, 'f'], [1, 'g'], [0, 'h'], [5, 'i'],
    ];
    const ids = new Map<string, string>();
    for (const [pri, body] of jobs) {
      const id = uuid();
      ids.set(body, id);
      await c.want(addCmd(id, 'q', 1000, 60000, body, { priority: pri }), OK);
    }
    for (const body of ['e', 'a', 'c', 'i', 'b', 'g', 'd', 'h', 'f']) {
      await c.ask('lease q 0', leaseReply(ids.get(body)!, 'q', 1000, body));
    }
    await c.ask('lease q 0', TIMEOUT);
  });

  it('FIFO holds for many jobs of one priority', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const ids = uuids(50);
    // Pipelined: all adds in one write.
    await c.send(ids.map((id, i) => addCmd(id, 'fifo', 1000, 60000, `job${i}`)).join(''));
    await c.expect(OK.repeat(ids.length));
    for (let i = 0; i < ids.length; i++) await c.ask('lease fifo 0', leaseReply(ids[i]!, 'fifo', 1000, `job${i}`));
  });

  it('lease marks the job leased (state 4) and counts the attempt', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'q', 60000, 60000, 'x'), OK);
    await c.ask('lease q 0', leaseReply(id, 'q', 60000, 'x'));
    expect(await c.inspectJob(id)).toMatchObject({ state: 4, attempts: 1 });
    await c.ask('inspect queue q', inspectQueueReply('q', 0, 0));
    await c.ask('lease q 0', TIMEOUT);
  });

  it('lease over several names takes from whichever has a job; the reply names its queue', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [a, b, d] = namesOnShards('ln', 3, shards);
    const id = uuid();
    await c.want(addCmd(id, b!, 1000, 60000, 'in b'), OK);
    await c.ask(`lease ${a} ${b} ${d} 0`, leaseReply(id, b!, 1000, 'in b'));
    await c.ask(`lease ${a} ${b} ${d} 0`, TIMEOUT);
  });

  it('a name given twice in one lease is harmless', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'q', 1000, 60000, 'x'), OK);
    await c.ask('lease q q 0', leaseReply(id, 'q', 1000, 'x'));
    await c.ask('lease q q 0', TIMEOUT);
  });

  it('a lease is not bound to its connection: closing the leaser does not requeue, another connection completes', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [w, o] = await f.conns(2);
    const id = uuid();
    await o!.want(addCmd(id, 'q', 60000, 60000, 'x'), OK);
    await w!.ask('lease q 0', leaseReply(id, 'q', 60000, 'x'));
    await w!.close();
    await o!.ask('lease q 200', TIMEOUT);
    expect(await o!.inspectJob(id)).toMatchObject({ state: 4, attempts: 1 });
    await o!.want(completeCmd(id, 'by o'), OK);
    await o!.ask(`result ${id} 0`, resultReply(id, true, 'by o'));
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): complete and fail', (shards) => {
  it('complete: +OK, state 1, the result is kept; a second complete or fail is a duplicate result', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'q', 60000, 60000, 'x'), OK);
    await c.ask('lease q 0', leaseReply(id, 'q', 60000, 'x'));
    const result = 'r\r\nesult\x00\xff';
    await c.want(completeCmd(id, result), OK);
    expect(await c.inspectJob(id)).toMatchObject({ state: 1, attempts: 1, fails: 0 });
    await c.ask(`result ${id} 0`, resultReply(id, true, result));
    await c.ask(`result ${id} 1000`, resultReply(id, true, result)); // at once, not after the timeout
    await c.want(completeCmd(id, 'again'), E_DUP_RESULT);
    await c.want(failCmd(id, 'again'), E_DUP_RESULT);
    await c.ask(`result ${id} 0`, resultReply(id, true, result));
    await c.ask('lease q 0', TIMEOUT);
    await c.ask('inspect queue q', inspectQueueReply('q', 0, 0));
  });

  it('fail: +OK, state 2, success 0; not requeued (fails stays 0, max-fails only shown)', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'q', 60000, 60000, 'x', { maxFails: 3, maxAttempts: 5 }), OK);
    await c.ask('lease q 0', leaseReply(id, 'q', 60000, 'x'));
    await c.want(failCmd(id, 'boom'), OK);
    expect(await c.inspectJob(id)).toMatchObject({ state: 2, attempts: 1, fails: 0, maxFails: 3 });
    await c.ask(`result ${id} 0`, resultReply(id, false, 'boom'));
    await c.ask('lease q 100', TIMEOUT);
    await c.ask('inspect queue q', inspectQueueReply('q', 0, 0));
    await c.want(failCmd(id, 'again'), E_DUP_RESULT);
    await c.want(completeCmd(id, 'again'), E_DUP_RESULT);
    await c.ask(`result ${id} 0`, resultReply(id, false, 'boom'));
  });

  it('complete and fail work on a job never leased, which then leaves its queue', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [a, b, d] = uuids(3);
    await c.want(addCmd(a!, 'q', 60000, 60000, 'a', { priority: 3 }), OK);
    await c.want(addCmd(b!, 'q', 60000, 60000, 'b', { priority: 2 }), OK);
    await c.want(addCmd(d!, 'q', 60000, 60000, 'd', { priority: 1 }), OK);
    await c.want(completeCmd(a!, 'ra'), OK);
    await c.want(failCmd(b!, 'rb'), OK);
    await c.ask('inspect queue q', inspectQueueReply('q', 1, 0));
    expect(await c.inspectJob(a!)).toMatchObject({ state: 1, attempts: 0 });
    expect(await c.inspectJob(b!)).toMatchObject({ state: 2, attempts: 0 });
    await c.ask('lease q 0', leaseReply(d!, 'q', 60000, 'd'));
    await c.ask('lease q 0', TIMEOUT);
    await c.ask(`result ${a} 0`, resultReply(a!, true, 'ra'));
    await c.ask(`result ${b} 0`, resultReply(b!, false, 'rb'));
  });

  it('complete works on a scheduled job not yet due', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(scheduleCmd(id, 'q', 1000, 60000, wqTime(Date.now() + 60000), 'later'), OK);
    await c.want(completeCmd(id, 'early'), OK);
    await c.ask('inspect queue q', inspectQueueReply('q', 0, 0));
    await c.ask(`result ${id} 0`, resultReply(id, true, 'early'));
  });

  it('empty payloads and results', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'q', 60000, 60000, ''), OK);
    expect(await c.inspectJob(id)).toMatchObject({ payloadSize: 0, payload: '' });
    await c.ask('lease q 0', `+OK 1\r\n${id} q 60000 0\r\n\r\n`);
    await c.want(completeCmd(id, ''), OK);
    await c.ask(`result ${id} 0`, `+OK 1\r\n${id} 1 0\r\n\r\n`);
  });

  it('unknown ids: complete, fail, result, delete and inspect job answer -NOT-FOUND', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(completeCmd(id, 'r'), NOT_FOUND);
    await c.want(failCmd(id, 'r'), NOT_FOUND);
    const t0 = performance.now();
    await c.ask(`result ${id} 5000`, NOT_FOUND); // at once, no wait
    expect(performance.now() - t0).toBeLessThan(2500);
    await c.ask(`delete ${id}`, NOT_FOUND);
    await c.ask(`inspect job ${id}`, NOT_FOUND);
    // Still unknown: none of these created it.
    await c.want(addCmd(id, 'q', 1000, 60000, 'x'), OK);
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): delete', (shards) => {
  it('deletes a job in any state; a second delete is -NOT-FOUND', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [ready, leased, done, failed, sched] = uuids(5);
    await c.want(addCmd(leased!, 'q', 60000, 60000, 'leased', { priority: 9 }), OK);
    await c.ask('lease q 0', leaseReply(leased!, 'q', 60000, 'leased'));
    await c.want(addCmd(ready!, 'q', 60000, 60000, 'ready'), OK);
    await c.want(addCmd(done!, 'q', 60000, 60000, 'done'), OK);
    await c.want(completeCmd(done!, 'r'), OK);
    await c.want(addCmd(failed!, 'q', 60000, 60000, 'failed'), OK);
    await c.want(failCmd(failed!, 'r'), OK);
    await c.want(scheduleCmd(sched!, 'q', 60000, 60000, wqTime(Date.now() + 60000), 'sched'), OK);
    await c.ask('inspect queue q', inspectQueueReply('q', 1, 1));
    for (const id of [ready, leased, done, failed, sched]) {
      await c.ask(`delete ${id}`, OK);
      await c.ask(`inspect job ${id}`, NOT_FOUND);
      await c.ask(`delete ${id}`, NOT_FOUND);
    }
    await c.ask('inspect queue q', inspectQueueReply('q', 0, 0));
    await c.ask('lease q 0', TIMEOUT);
    await c.ask(`result ${done} 0`, NOT_FOUND);
    await c.want(completeCmd(leased!, 'late'), NOT_FOUND);
    await c.want(failCmd(leased!, 'late'), NOT_FOUND);
  });

  it('deleting one job leaves the others in order', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const ids = uuids(4);
    for (let i = 0; i < ids.length; i++) await c.want(addCmd(ids[i]!, 'q', 60000, 60000, `j${i}`), OK);
    await c.ask(`delete ${ids[1]}`, OK);
    for (const i of [0, 2, 3]) await c.ask('lease q 0', leaseReply(ids[i]!, 'q', 60000, `j${i}`));
    await c.ask('lease q 0', TIMEOUT);
  });

  it('a delete of a non-v4 UUID is +OK (the server swallows the controller\'s Invalid ID)', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    await c.ask('delete 6ba7b810-9dad-11d1-80b4-00c04fd430c4', OK);
  });
});
