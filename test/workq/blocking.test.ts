// workq over real sockets: the blocking commands across connections and shards.
//   run     blocks until a worker (another connection) completes or fails the job;
//   result  blocks until another connection completes or fails the job;
//   lease   over names on different shards, picking by priority across them, and waiting until
//           an add on another connection wakes it.
// Every case runs with 1 and 4 shards; with 4, names are picked on distinct shards.
// Timeouts: a -TIMEOUT must not come before its timeout, and must come within LATE_MS after it.
//
// Nothing here sleeps to let the server catch up: a test that needs a command taken in first
// waits until the server shows it (the job in `inspect job`, a lease waiting on its queue, a
// result waiter, the connection count in `inspect server`), however slow the machine.
// `expectNothing(ms)` is an assertion (no reply may come in that window), and each comes after
// the server is seen to hold the command, so it cannot pass just because the server was slow.

import { describe, expect, it } from 'vitest';
import { shardOf } from '../../src/route/hash.ts';
import {
  addCmd, completeCmd, EARLY_SLACK_MS, failCmd, LATE_MS, leaseReply, leasesWaiting, namesOnShards, NOT_FOUND, OK,
  resultReply, resultWaiters, runCmd, scheduleCmd, SHARD_COUNTS, sleep, STEP_MS, eventually, TIMEOUT, uuid, uuids, wqFixture, wqTime,
  type WqClient, type WqServer,
} from '../support/workq.ts';

/** How long to wait for the server to show a state before failing (ms): slow machines only wait longer. */
const STATE_WAIT_MS = 10_000;

/** Poll until `probe` holds (every 5 ms), failing after STATE_WAIT_MS. */
async function until(what: string, probe: () => boolean | Promise<boolean>): Promise<void> {
  await eventually(what, async () => probe(), STATE_WAIT_MS, 5);
}

/** Wait until `c` sees job `id` (the add or run that makes it has been taken in). */
async function jobExists(c: WqClient, id: string): Promise<void> {
  await until(`job ${id} exists`, async () => (await c.inspectJob(id)) !== null);
}

/** Wait until exactly `n` run/result commands wait for a result. */
async function resultWaitersAre(server: WqServer, n: number): Promise<void> {
  await until(`${n} run/result waiter(s)`, () => resultWaiters(server) === n);
}

/** Wait until exactly `n` leases wait on queue `name`. */
async function leasesWaitingAre(server: WqServer, name: string, n: number): Promise<void> {
  await until(`${n} lease(s) waiting on ${name}`, () => leasesWaiting(server, name) === n);
}

/** Send `text`, expect `reply`, and return the ms it took. */
async function timed(c: WqClient, text: string, reply: string, timeoutMs = 3000): Promise<number> {
  const t0 = performance.now();
  await c.want(text, reply, timeoutMs);
  return performance.now() - t0;
}

describe('namesOnShards', () => {
  it('with 4 shards, gives names on 4 distinct shards', () => {
    const names = namesOnShards('x', 4, 4);
    expect(new Set(names.map((n) => shardOf(n, 4))).size).toBe(4);
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): run', (shards) => {
  it('blocks until a worker on another connection completes the job, then the job is gone', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [r, w] = await f.conns(2);
    const id = uuid();
    await r!.send(runCmd(id, 'rq', 5000, 10000, 'ping'));
    await resultWaitersAre(f.server, 1);
    await r!.expectNothing(150);
    await w!.ask('lease rq 2000', leaseReply(id, 'rq', 5000, 'ping'));
    // A run job has no TTL: the server shows ttl 0.
    expect(await w!.inspectJob(id)).toMatchObject({ state: 4, attempts: 1, ttl: 0, ttr: 5000, name: 'rq' });
    await r!.expectNothing(50);
    await w!.want(completeCmd(id, 'pong\r\n'), OK);
    await r!.expect(resultReply(id, true, 'pong\r\n'));
    await w!.ask(`inspect job ${id}`, NOT_FOUND);
    await w!.ask(`result ${id} 0`, NOT_FOUND);
    // The id is free again, and the run connection goes on.
    await r!.want(addCmd(id, 'rq', 1000, 60000, 'again'), OK);
  });

  it('a worker that fails the job gives the run success 0 and its result', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [r, w] = await f.conns(2);
    const id = uuid();
    await r!.send(runCmd(id, 'rq', 5000, 10000, 'ping'));
    await w!.ask('lease rq 2000', leaseReply(id, 'rq', 5000, 'ping'));
    await w!.want(failCmd(id, 'oops'), OK);
    await r!.expect(resultReply(id, false, 'oops'));
    await w!.ask(`inspect job ${id}`, NOT_FOUND);
  });

  it('a run job may be completed without being leased', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [r, w] = await f.conns(2);
    const id = uuid();
    await r!.send(runCmd(id, 'rq', 5000, 10000, 'ping'));
    // Wait until the job exists, then complete it from another connection.
    await jobExists(w!, id);
    expect(await w!.inspectJob(id)).toMatchObject({ state: 0, ttr: 5000, name: 'rq', payload: 'ping' });
    await w!.want(completeCmd(id, 'direct'), OK);
    await r!.expect(resultReply(id, true, 'direct'));
  });

  it('a waiting worker lease is woken by the run', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [r, w] = await f.conns(2);
    const id = uuid();
    await w!.send('lease rq 5000\r\n');
    await leasesWaitingAre(f.server, 'rq', 1);
    await w!.expectNothing(100);
    await r!.send(runCmd(id, 'rq', 5000, 10000, 'wake'));
    await w!.expect(leaseReply(id, 'rq', 5000, 'wake'));
    await w!.want(completeCmd(id, 'ok'), OK);
    await r!.expect(resultReply(id, true, 'ok'));
  });

  it('-priority: the run job is leased before lower-priority jobs', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [r, w] = await f.conns(2);
    const [low, hi] = uuids(2);
    await w!.want(addCmd(low!, 'rq', 5000, 60000, 'low', { priority: 5 }), OK);
    await r!.send(runCmd(hi!, 'rq', 5000, 10000, 'hi', 6));
    await jobExists(w!, hi!);
    expect(await w!.inspectJob(hi!)).toMatchObject({ priority: 6 });
    await w!.ask('lease rq 0', leaseReply(hi!, 'rq', 5000, 'hi'));
    await w!.ask('lease rq 0', leaseReply(low!, 'rq', 5000, 'low'));
    await w!.want(completeCmd(hi!, 'x'), OK);
    await r!.expect(resultReply(hi!, true, 'x'));
  });

  it('-TIMEOUT when no worker leases it within the wait timeout; the job is deleted', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [r, w] = await f.conns(2);
    const id = uuid();
    const ms = await timed(r!, runCmd(id, 'rq', 5000, 200, 'nobody'), TIMEOUT, 200 + LATE_MS);
    expect(ms).toBeGreaterThanOrEqual(200 - EARLY_SLACK_MS);
    await w!.ask(`inspect job ${id}`, NOT_FOUND);
    await w!.ask('lease rq 0', TIMEOUT);
    await w!.ask('inspect queue rq', `+OK 1\r\nrq 2\r\nready-len 0\r\nscheduled-len 0\r\n`);
    await r!.want(addCmd(id, 'rq', 1000, 60000, 'reuse'), OK);
  });

  it('wait timeout 0 with no worker: -TIMEOUT at once', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await timed(c, runCmd(id, 'rq', 5000, 0, 'x'), TIMEOUT, LATE_MS);
    await c.ask(`inspect job ${id}`, NOT_FOUND);
  });

  it('leased when the wait timeout passes: still waits, and gets a result that comes before the TTR end', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [r, w] = await f.conns(2);
    const id = uuid();
    await r!.send(runCmd(id, 'rq', 5000, STEP_MS, 'slow'));
    await w!.ask('lease rq 2000', leaseReply(id, 'rq', 5000, 'slow'));
    // A deliberate wait: time must pass (past the wait timeout) while the job is leased.
    await sleep(STEP_MS + 200);
    await r!.expectNothing(0);
    await w!.want(completeCmd(id, 'late but in time'), OK);
    await r!.expect(resultReply(id, true, 'late but in time'));
    await w!.ask(`inspect job ${id}`, NOT_FOUND);
  });

  it('leased when the wait timeout passes and never finished: -TIMEOUT at the TTR end, the job is gone', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [r, w] = await f.conns(2);
    const id = uuid();
    // The lease comes within the wait timeout (STEP_MS); the TTR ends after the wait timeout.
    const ttr = 2 * STEP_MS;
    await r!.send(runCmd(id, 'rq', ttr, STEP_MS, 'stuck'));
    // The TTR counts from the lease, which starts after t0 whatever the load.
    const t0 = performance.now();
    await w!.ask('lease rq 2000', leaseReply(id, 'rq', ttr, 'stuck'));
    await r!.expect(TIMEOUT, ttr + LATE_MS);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(ttr - EARLY_SLACK_MS);
    await w!.ask(`inspect job ${id}`, NOT_FOUND);
    await w!.want(completeCmd(id, 'too late'), NOT_FOUND);
    await w!.ask('lease rq 0', TIMEOUT);
  });

  it('the run connection takes further commands after its reply (pipelined behind the run)', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [r, w] = await f.conns(2);
    const id = uuid();
    const other = uuid();
    await r!.send(runCmd(id, 'rq', 5000, 10000, 'p') + addCmd(other, 'other', 1000, 60000, 'o') + 'inspect queue other\r\n');
    // The run has been taken in (it waits for its result) before we look for the add behind it.
    await resultWaitersAre(f.server, 1);
    await r!.expectNothing(100);
    // The add behind the blocked run has not been executed yet.
    await w!.ask(`inspect job ${other}`, NOT_FOUND);
    await w!.ask('lease rq 2000', leaseReply(id, 'rq', 5000, 'p'));
    await w!.want(completeCmd(id, 'done'), OK);
    await r!.expect(resultReply(id, true, 'done') + OK + `+OK 1\r\nother 2\r\nready-len 1\r\nscheduled-len 0\r\n`);
  });

  it('several runs on different names (shards) are each answered by their own worker result', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const names = namesOnShards('run', 4, shards);
    const runners = await f.conns(names.length);
    const w = await f.conn();
    const ids = uuids(names.length);
    for (let i = 0; i < names.length; i++) await runners[i]!.send(runCmd(ids[i]!, names[i]!, 5000, 10000, `p${i}`));
    await resultWaitersAre(f.server, names.length);
    // Complete in reverse order.
    for (let i = names.length - 1; i >= 0; i--) {
      await w.ask(`lease ${names[i]} 2000`, leaseReply(ids[i]!, names[i]!, 5000, `p${i}`));
      await w.want(completeCmd(ids[i]!, `r${i}`), OK);
      await runners[i]!.expect(resultReply(ids[i]!, true, `r${i}`));
    }
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): result', (shards) => {
  it('woken by a complete from another connection', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [a, b] = await f.conns(2);
    const id = uuid();
    await b!.want(addCmd(id, 'q', 60000, 60000, 'x'), OK);
    await a!.send(`result ${id} 10000\r\n`);
    await resultWaitersAre(f.server, 1);
    await a!.expectNothing(150);
    await b!.ask('lease q 0', leaseReply(id, 'q', 60000, 'x'));
    await a!.expectNothing(50);
    await b!.want(completeCmd(id, 'answer'), OK);
    await a!.expect(resultReply(id, true, 'answer'));
    // The result stays for later readers (until the TTL).
    await b!.ask(`result ${id} 0`, resultReply(id, true, 'answer'));
    expect(await b!.inspectJob(id)).toMatchObject({ state: 1 });
  });

  it('woken by a fail from another connection, on a job never leased', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [a, b] = await f.conns(2);
    const id = uuid();
    await b!.want(addCmd(id, 'q', 60000, 60000, 'x'), OK);
    await a!.send(`result ${id} 10000\r\n`);
    await resultWaitersAre(f.server, 1);
    await a!.expectNothing(100);
    await b!.want(failCmd(id, 'no'), OK);
    await a!.expect(resultReply(id, false, 'no'));
  });

  it('-TIMEOUT when nothing finishes the job in time; the job is untouched', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'q', 60000, 60000, 'x'), OK);
    const ms = await timed(c, `result ${id} 250\r\n`, TIMEOUT, 250 + LATE_MS);
    expect(ms).toBeGreaterThanOrEqual(250 - EARLY_SLACK_MS);
    await timed(c, `result ${id} 0\r\n`, TIMEOUT, LATE_MS);
    expect(await c.inspectJob(id)).toMatchObject({ state: 0, attempts: 0 });
    await c.ask('lease q 0', leaseReply(id, 'q', 60000, 'x'));
  });

  it('on a leased job: waits for the worker', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [a, b] = await f.conns(2);
    const id = uuid();
    await b!.want(addCmd(id, 'q', 60000, 60000, 'x'), OK);
    await b!.ask('lease q 0', leaseReply(id, 'q', 60000, 'x'));
    await a!.send(`result ${id} 10000\r\n`);
    await resultWaitersAre(f.server, 1);
    await a!.expectNothing(100);
    await b!.want(completeCmd(id, 'fine'), OK);
    await a!.expect(resultReply(id, true, 'fine'));
  });

  it('on a scheduled job: woken by its completion', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [a, b] = await f.conns(2);
    const id = uuid();
    await b!.want(scheduleCmd(id, 'q', 60000, 60000, wqTime(Date.now() + 60000), 'x'), OK);
    await a!.send(`result ${id} 10000\r\n`);
    await resultWaitersAre(f.server, 1);
    await a!.expectNothing(100);
    await b!.want(completeCmd(id, 'early'), OK);
    await a!.expect(resultReply(id, true, 'early'));
  });

  it('results of jobs on different names (shards) each wake their own waiter', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const names = namesOnShards('res', 4, shards);
    const waiters = await f.conns(names.length);
    const w = await f.conn();
    const ids = uuids(names.length);
    for (let i = 0; i < names.length; i++) await w.want(addCmd(ids[i]!, names[i]!, 60000, 60000, `p${i}`), OK);
    for (let i = 0; i < names.length; i++) await waiters[i]!.send(`result ${ids[i]} 10000\r\n`);
    await resultWaitersAre(f.server, names.length);
    for (const i of [2, 0, 3, 1]) {
      await w.want((i % 2 === 0 ? completeCmd : failCmd)(ids[i]!, `r${i}`), OK);
      await waiters[i]!.expect(resultReply(ids[i]!, i % 2 === 0, `r${i}`));
    }
    for (const c of waiters) await c.expectNothing(0);
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): lease across names and shards', (shards) => {
  it('picks the highest priority across names on different shards', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const names = namesOnShards('pri', 4, shards);
    // Priorities interleave across the names; no two jobs share a priority.
    const jobs: Array<{ id: string; name: string; pri: number; body: string }> = [];
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < names.length; i++) {
        const pri = ((i * 7 + round * 5) % 12) * 10 - 50 + round;
        const body = `${names[i]}/${round}`;
        const id = uuid();
        jobs.push({ id, name: names[i]!, pri, body });
        await c.want(addCmd(id, names[i]!, 60000, 60000, body, { priority: pri }), OK);
      }
    }
    expect(new Set(jobs.map((j) => j.pri)).size).toBe(jobs.length);
    jobs.sort((x, y) => y.pri - x.pri);
    for (const j of jobs) await c.ask(`lease ${names.join(' ')} 0`, leaseReply(j.id, j.name, 60000, j.body));
    await c.ask(`lease ${names.join(' ')} 0`, TIMEOUT);
  });

  it('only the named queues are leased from', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [a, b, x] = namesOnShards('only', 3, shards);
    const [ia, ib, ix] = uuids(3);
    await c.want(addCmd(ix!, x!, 60000, 60000, 'x', { priority: 100 }), OK);
    await c.want(addCmd(ia!, a!, 60000, 60000, 'a', { priority: 1 }), OK);
    await c.want(addCmd(ib!, b!, 60000, 60000, 'b', { priority: 2 }), OK);
    await c.ask(`lease ${a} ${b} 0`, leaseReply(ib!, b!, 60000, 'b'));
    await c.ask(`lease ${a} ${b} 0`, leaseReply(ia!, a!, 60000, 'a'));
    await c.ask(`lease ${a} ${b} 0`, TIMEOUT);
    await c.ask(`lease ${x} 0`, leaseReply(ix!, x!, 60000, 'x'));
  });

  it('a waiting lease over names on different shards is woken by an add to any of them', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [w, p] = await f.conns(2);
    const names = namesOnShards('wake', 4, shards);
    const others = namesOnShards('notme', 1, shards);
    for (const target of [2, 0, 3, 1]) {
      await w!.send(`lease ${names.join(' ')} 5000\r\n`);
      for (const name of names) await leasesWaitingAre(f.server, name, 1);
      await w!.expectNothing(100);
      // An add to a name the lease does not cover does not wake it.
      await p!.want(addCmd(uuid(), others[0]!, 60000, 60000, 'not for you'), OK);
      await w!.expectNothing(50);
      const id = uuid();
      await p!.want(addCmd(id, names[target]!, 60000, 60000, `to ${target}`), OK);
      await w!.expect(leaseReply(id, names[target]!, 60000, `to ${target}`));
    }
  });

  it('a waiting lease times out with -TIMEOUT, not before its timeout', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const names = namesOnShards('to', 4, shards);
    const ms = await timed(c, `lease ${names.join(' ')} 300\r\n`, TIMEOUT, 300 + LATE_MS);
    expect(ms).toBeGreaterThanOrEqual(300 - EARLY_SLACK_MS);
    // A job added after the timeout is still there for the next lease.
    const id = uuid();
    await c.want(addCmd(id, names[1]!, 60000, 60000, 'after'), OK);
    await c.ask(`lease ${names.join(' ')} 0`, leaseReply(id, names[1]!, 60000, 'after'));
  });

  it('two waiting leasers: each add wakes exactly one of them', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [w1, w2, p] = await f.conns(3);
    const [a, b] = namesOnShards('two', 2, shards);
    await w1!.send(`lease ${a} ${b} 5000\r\n`);
    await w2!.send(`lease ${b} ${a} 5000\r\n`);
    await leasesWaitingAre(f.server, a!, 2);
    await leasesWaitingAre(f.server, b!, 2);
    const [i1, i2] = uuids(2);
    await p!.want(addCmd(i1!, a!, 60000, 60000, 'one'), OK);
    const one = leaseReply(i1!, a!, 60000, 'one');
    await until('a leaser served', () => w1!.buffered.length + w2!.buffered.length >= one.length);
    // The other leaser is still waiting on both names: it got nothing (and will get nothing more for this add).
    await leasesWaitingAre(f.server, a!, 1);
    await leasesWaitingAre(f.server, b!, 1);
    const got1 = w1!.buffered + w2!.buffered;
    expect(got1).toBe(leaseReply(i1!, a!, 60000, 'one'));
    const first = w1!.buffered !== '' ? w1! : w2!;
    const second = first === w1 ? w2! : w1!;
    await first.expect(leaseReply(i1!, a!, 60000, 'one'));
    await p!.want(addCmd(i2!, b!, 60000, 60000, 'two'), OK);
    await second.expect(leaseReply(i2!, b!, 60000, 'two'));
    await first.expectNothing(50);
    // Both jobs are leased exactly once.
    expect(await p!.inspectJob(i1!)).toMatchObject({ state: 4, attempts: 1 });
    expect(await p!.inspectJob(i2!)).toMatchObject({ state: 4, attempts: 1 });
  });

  it('three waiting leasers, three adds: each leaser gets exactly one job', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const ws = await f.conns(3);
    const p = await f.conn();
    for (let i = 0; i < ws.length; i++) {
      await ws[i]!.send('lease order 5000\r\n');
      await leasesWaitingAre(f.server, 'order', i + 1);
    }
    const ids = uuids(3);
    // Added one by one: whoever gets each job, no leaser gets two and all three are served.
    for (let i = 0; i < 3; i++) await p.want(addCmd(ids[i]!, 'order', 60000, 60000, `j${i}`), OK);
    const got = await Promise.all(ws.map((w) => w.readReply(3000)));
    expect(got.slice().sort()).toEqual(ids.map((id, i) => leaseReply(id, 'order', 60000, `j${i}`)).sort());
  });

  it('a lease still waiting when its connection closes does not lose the job', async (ctx) => {
    // workq server: a lease blocked in its handler does not notice its connection closing, so
    // it may still take the next job (leased to nobody) and the TTR end then requeues it. Either
    // way the job must come back: ready at once, or requeued at its TTR end.
    const f = await wqFixture(shards, ctx);
    const [w, p] = await f.conns(2);
    await w!.send('lease gone 5000\r\n');
    await leasesWaitingAre(f.server, 'gone', 1);
    w!.destroy();
    // Wait until the server has seen w's end (its waiting lease may stay until its timeout, as
    // the comment above says; the add below must come after the close, not before it).
    await until('the server has seen the connection end', () =>
      (f.server.router.workq.queue('gone')?.waiting.all ?? []).every((a) => {
        const s = a.client as unknown as { closed: boolean; halfClosed: boolean };
        return s.closed || s.halfClosed;
      }));
    const id = uuid();
    await p!.want(addCmd(id, 'gone', 300, 60000, 'kept'), OK);
    await p!.ask('lease gone 5000', leaseReply(id, 'gone', 300, 'kept'), 300 + LATE_MS);
    expect((await p!.inspectJob(id))?.state).toBe(4);
  });
});
