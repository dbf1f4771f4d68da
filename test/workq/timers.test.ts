// workq over real sockets: the timers. TTR expiry (requeue as pending, or failed once
// -max-attempts is reached), TTL eviction of jobs and of results with the `evicted-jobs` count,
// and scheduled jobs waking up. Every case runs with 1 and 4 shards.
//
// Timings are short. An effect must never come before its time (allowing EARLY_SLACK_MS of clock
// granularity) and may come up to LATE_MS after it. A timer that a later check needs still ahead
// is at least STEP_MS, however slow the machine running the test.

import { describe, expect, it } from 'vitest';
import {
  addCmd, completeCmd, EARLY_SLACK_MS, E_DUP_RESULT, eventually, failCmd, inspectQueueReply, LATE_MS, leaseReply,
  namesOnShards, NOT_FOUND, OK, OK_0, resultReply, scheduleCmd, SHARD_COUNTS, sleep, STEP_MS, TIMEOUT, uuid, uuids,
  wqFixture, wqTime, wqTimeShown, type WqClient,
} from '../support/workq.ts';

/** Poll until the job is in `state` (null: gone); returns ms since `t0` at the first sight. */
async function untilState(c: WqClient, id: string, state: number | null, t0: number, within: number): Promise<number> {
  await eventually(`job ${id} in state ${state}`, async () => (await c.jobState(id)) === state, within, 10);
  return performance.now() - t0;
}

describe.each(SHARD_COUNTS)('workq, %i shard(s): TTR', (shards) => {
  it('at the TTR end a leased job is requeued as pending (state 3) and can be leased again', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    const ttr = STEP_MS;
    await c.want(addCmd(id, 'q', ttr, 60000, 'x'), OK);
    // t0 before the lease: the TTR starts after it, however late the reply is read under load.
    const t0 = performance.now();
    await c.ask('lease q 0', leaseReply(id, 'q', ttr, 'x'));
    expect(await c.inspectJob(id)).toMatchObject({ state: 4, attempts: 1 });
    const ms = await untilState(c, id, 3, t0, ttr + LATE_MS);
    expect(ms).toBeGreaterThanOrEqual(ttr - EARLY_SLACK_MS);
    expect(await c.inspectJob(id)).toMatchObject({ state: 3, attempts: 1 });
    await c.ask('inspect queue q', inspectQueueReply('q', 1, 0));
    const listed = await c.inspectJobs('jobs', 'q', 0, 10);
    expect(listed.map((j) => [j.id, j.state])).toEqual([[id, 3]]);
    await c.ask('lease q 0', leaseReply(id, 'q', ttr, 'x'));
    expect(await c.inspectJob(id)).toMatchObject({ state: 4, attempts: 2 });
    await c.want(completeCmd(id, 'second time'), OK);
    await c.ask(`result ${id} 0`, resultReply(id, true, 'second time'));
  });

  it('the requeue wakes a lease waiting on another connection, not before the TTR end', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [a, b] = await f.conns(2);
    const [name] = namesOnShards('ttr', 1, shards);
    const id = uuid();
    const ttr = STEP_MS;
    await a!.want(addCmd(id, name!, ttr, 60000, 'again'), OK);
    const t0 = performance.now();
    await a!.ask(`lease ${name} 0`, leaseReply(id, name!, ttr, 'again'));
    await b!.send(`lease ${name} 5000\r\n`);
    await b!.expect(leaseReply(id, name!, ttr, 'again'), ttr + LATE_MS);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(ttr - EARLY_SLACK_MS);
    expect(await b!.inspectJob(id)).toMatchObject({ state: 4, attempts: 2 });
  });

  it('a requeued job keeps its place by priority', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [hi, lo] = uuids(2);
    await c.want(addCmd(hi!, 'q', STEP_MS, 60000, 'hi', { priority: 10 }), OK);
    await c.want(addCmd(lo!, 'q', 60000, 60000, 'lo', { priority: 1 }), OK);
    await c.ask('lease q 0', leaseReply(hi!, 'q', STEP_MS, 'hi'));
    await untilState(c, hi!, 3, performance.now(), STEP_MS + LATE_MS);
    await c.ask('lease q 0', leaseReply(hi!, 'q', STEP_MS, 'hi'));
    await c.ask('lease q 0', leaseReply(lo!, 'q', 60000, 'lo'));
  });

  it('complete, fail and delete stop the TTR timer', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [done, failed, deleted] = uuids(3);
    for (const id of [done, failed, deleted]) {
      await c.want(addCmd(id!, 'q', 150, 60000, 'x'), OK);
      await c.ask('lease q 0', leaseReply(id!, 'q', 150, 'x'));
    }
    await c.want(completeCmd(done!, 'ok'), OK);
    await c.want(failCmd(failed!, 'bad'), OK);
    await c.ask(`delete ${deleted}`, OK);
    await sleep(500);
    await c.ask('lease q 0', TIMEOUT);
    await c.ask('inspect queue q', inspectQueueReply('q', 0, 0));
    expect(await c.inspectJob(done!)).toMatchObject({ state: 1, attempts: 1 });
    expect(await c.inspectJob(failed!)).toMatchObject({ state: 2, attempts: 1 });
    await c.ask(`inspect job ${deleted}`, NOT_FOUND);
    await c.ask(`result ${done} 0`, resultReply(done!, true, 'ok'));
    await c.ask(`result ${failed} 0`, resultReply(failed!, false, 'bad'));
  });

  it('a job completed after its TTR requeued it leaves the queue', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'q', 150, 60000, 'x'), OK);
    await c.ask('lease q 0', leaseReply(id, 'q', 150, 'x'));
    await untilState(c, id, 3, performance.now(), 150 + LATE_MS);
    await c.want(completeCmd(id, 'late'), OK);
    await c.ask('inspect queue q', inspectQueueReply('q', 0, 0));
    await c.ask('lease q 0', TIMEOUT);
    await c.ask(`result ${id} 0`, resultReply(id, true, 'late'));
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): -max-attempts', (shards) => {
  it('-max-attempts=1: the first TTR end fails the job (state 2) with an empty result', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'q', 150, 60000, 'x', { maxAttempts: 1 }), OK);
    await c.ask('lease q 0', leaseReply(id, 'q', 150, 'x'));
    const t0 = performance.now();
    await untilState(c, id, 2, t0, 150 + LATE_MS);
    expect(await c.inspectJob(id)).toMatchObject({ state: 2, attempts: 1, maxAttempts: 1, fails: 0 });
    await c.ask(`result ${id} 0`, resultReply(id, false, ''));
    await c.ask('lease q 100', TIMEOUT);
    await c.ask('inspect queue q', inspectQueueReply('q', 0, 0));
    await c.want(completeCmd(id, 'too late'), E_DUP_RESULT);
    await c.want(failCmd(id, 'too late'), E_DUP_RESULT);
  });

  it('-max-attempts=2: requeued once, failed at the second TTR end; a waiting result is woken by it', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [w, r] = await f.conns(2);
    const id = uuid();
    const ttr = STEP_MS;
    await w!.want(addCmd(id, 'q', ttr, 60000, 'x', { maxAttempts: 2 }), OK);
    await r!.send(`result ${id} 10000\r\n`);
    // Measured from before the first lease: whatever the load, the first lease starts after t0,
    // its TTR ends ttr later, the second lease starts after that and fails ttr later again.
    const t0 = performance.now();
    await w!.ask('lease q 0', leaseReply(id, 'q', ttr, 'x'));
    // The second lease waits for the requeue.
    await w!.ask('lease q 5000', leaseReply(id, 'q', ttr, 'x'), ttr + LATE_MS);
    expect(await w!.inspectJob(id)).toMatchObject({ state: 4, attempts: 2 });
    await r!.expectNothing(0);
    await r!.expect(resultReply(id, false, ''), ttr + LATE_MS);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(2 * ttr - EARLY_SLACK_MS);
    expect(await w!.inspectJob(id)).toMatchObject({ state: 2, attempts: 2, maxAttempts: 2 });
    await w!.ask('lease q 100', TIMEOUT);
  });

  it('without -max-attempts a job is requeued again and again', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(addCmd(id, 'q', STEP_MS, 60000, 'x'), OK);
    for (let attempt = 1; attempt <= 3; attempt++) {
      await c.ask('lease q 5000', leaseReply(id, 'q', STEP_MS, 'x'), STEP_MS + LATE_MS);
      expect(await c.inspectJob(id)).toMatchObject({ state: 4, attempts: attempt });
    }
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): TTL', (shards) => {
  it('evicts a job that is never processed, counted in evicted-jobs; its id is free again', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    expect((await c.inspectServer()).evictedJobs).toBe(0);
    const id = uuid();
    const t0 = performance.now();
    await c.want(addCmd(id, 'q', 60000, STEP_MS, 'x'), OK);
    expect(await c.jobState(id)).toBe(0);
    const ms = await untilState(c, id, null, t0, STEP_MS + LATE_MS);
    expect(ms).toBeGreaterThanOrEqual(STEP_MS - EARLY_SLACK_MS);
    await c.ask('inspect queue q', inspectQueueReply('q', 0, 0));
    await c.ask('lease q 0', TIMEOUT);
    await c.ask(`result ${id} 0`, NOT_FOUND);
    await c.want(completeCmd(id, 'r'), NOT_FOUND);
    expect((await c.inspectServer()).evictedJobs).toBe(1);
    await c.want(addCmd(id, 'q', 60000, 60000, 'again'), OK);
  });

  it('evicts a leased job and a requeued one (both counted)', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [leased, pending] = uuids(2);
    const t0 = performance.now();
    // Both leases come within STEP_MS of the adds; the pending job's TTR ends before its TTL.
    const ttr = STEP_MS / 2;
    await c.want(addCmd(leased!, 'q', 60000, STEP_MS, 'leased', { priority: 2 }), OK);
    await c.want(addCmd(pending!, 'q', ttr, 2 * STEP_MS, 'pending', { priority: 1 }), OK);
    await c.ask('lease q 0', leaseReply(leased!, 'q', 60000, 'leased'));
    await c.ask('lease q 0', leaseReply(pending!, 'q', ttr, 'pending'));
    await untilState(c, pending!, 3, t0, STEP_MS + ttr + LATE_MS);
    const ms1 = await untilState(c, leased!, null, t0, STEP_MS + LATE_MS);
    expect(ms1).toBeGreaterThanOrEqual(STEP_MS - EARLY_SLACK_MS);
    const ms2 = await untilState(c, pending!, null, t0, 2 * STEP_MS + LATE_MS);
    expect(ms2).toBeGreaterThanOrEqual(2 * STEP_MS - EARLY_SLACK_MS);
    await c.want(completeCmd(leased!, 'late'), NOT_FOUND);
    await c.ask('inspect queue q', inspectQueueReply('q', 0, 0));
    await c.ask('lease q 0', TIMEOUT);
    expect((await c.inspectServer()).evictedJobs).toBe(2);
  });

  it('keeps a result until the TTL ends, then removes it; processed jobs are not counted as evicted', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const [done, failed] = uuids(2);
    const t0 = performance.now();
    await c.want(addCmd(done!, 'q', 60000, STEP_MS, 'x'), OK);
    await c.want(addCmd(failed!, 'q', 60000, STEP_MS, 'y'), OK);
    await c.want(completeCmd(done!, 'kept'), OK);
    await c.want(failCmd(failed!, 'kept too'), OK);
    await c.ask(`result ${done} 0`, resultReply(done!, true, 'kept'));
    await c.ask(`result ${failed} 0`, resultReply(failed!, false, 'kept too'));
    await eventually('results removed', async () => (await c.request(`result ${done} 0`)) === NOT_FOUND, STEP_MS + LATE_MS, 10);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(STEP_MS - EARLY_SLACK_MS);
    await eventually('results removed', async () => (await c.request(`result ${failed} 0`)) === NOT_FOUND, LATE_MS, 10);
    await c.ask(`inspect job ${done}`, NOT_FOUND);
    await c.ask(`inspect job ${failed}`, NOT_FOUND);
    await c.want(completeCmd(done!, 'again'), NOT_FOUND);
    expect((await c.inspectServer()).evictedJobs).toBe(0);
  });

  it('evicted-jobs counts only jobs removed before being completed or failed', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const names = namesOnShards('ev', 4, shards);
    const ids = uuids(6);
    // Evicted unprocessed: ids 0, 1, 2 (on different names/shards). Processed: 3, 4. Deleted: 5.
    for (let i = 0; i < 6; i++) await c.want(addCmd(ids[i]!, names[i % 4]!, 60000, STEP_MS, `j${i}`), OK);
    await c.want(completeCmd(ids[3]!, 'r'), OK);
    await c.want(failCmd(ids[4]!, 'r'), OK);
    await c.ask(`delete ${ids[5]}`, OK);
    await c.ask(`lease ${names[1]} 0`, leaseReply(ids[1]!, names[1]!, 60000, 'j1'));
    for (const id of ids) await untilState(c, id, null, performance.now(), STEP_MS + LATE_MS);
    expect((await c.inspectServer()).evictedJobs).toBe(3);
  });

  it('a job evicted while a result waits for it: the waiter is not answered with a result', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [a, b] = await f.conns(2);
    const id = uuid();
    await b!.want(addCmd(id, 'q', 60000, 200, 'x'), OK);
    await a!.send(`result ${id} 1000\r\n`);
    const reply = await a!.readReply(1000 + LATE_MS);
    // The server's waiter only ever gets a result or its timeout; a NOT-FOUND at eviction is
    // acceptable too, but never a result.
    expect([TIMEOUT, NOT_FOUND]).toContain(reply);
    await b!.ask(`inspect job ${id}`, NOT_FOUND);
  });
});

describe.each(SHARD_COUNTS)('workq, %i shard(s): schedule', (shards) => {
  it('a scheduled job sits in the scheduled list until its time, then is leased', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    const at = Date.now() + STEP_MS;
    await c.want(scheduleCmd(id, 'sq', 1000, 60000, wqTime(at), 'due', { priority: 3 }), OK);
    await c.ask('inspect queue sq', inspectQueueReply('sq', 0, 1));
    await c.ask('inspect jobs sq 0 10', OK_0);
    const [s] = await c.inspectJobs('scheduled-jobs', 'sq', 0, 10);
    expect(s).toMatchObject({ id, keyCount: 13, state: 0, priority: 3, payload: 'due', time: wqTimeShown(at), ttl: 60000 });
    expect(s!.keyOrder.at(-1)).toBe('time');
    expect(await c.inspectJob(id)).toMatchObject({ keyCount: 13, time: wqTimeShown(at) });
    await c.ask('lease sq 0', TIMEOUT);
    await c.ask('lease sq 5000', leaseReply(id, 'sq', 1000, 'due'), STEP_MS + LATE_MS);
    expect(Date.now()).toBeGreaterThanOrEqual(at - EARLY_SLACK_MS);
    await c.ask('inspect queue sq', inspectQueueReply('sq', 0, 0));
    expect(await c.inspectJob(id)).toMatchObject({ state: 4, attempts: 1, time: wqTimeShown(at) });
  });

  it('a due job moves to the ready list (inspect jobs shows it with its time)', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    const at = Date.now() + 300;
    await c.want(scheduleCmd(id, 'sq', 1000, 60000, wqTime(at), 'x'), OK);
    await eventually('job ready', async () => (await c.request('inspect queue sq')) === inspectQueueReply('sq', 1, 0), 300 + LATE_MS, 10);
    expect(Date.now()).toBeGreaterThanOrEqual(at - EARLY_SLACK_MS);
    const [j] = await c.inspectJobs('jobs', 'sq', 0, 10);
    expect(j).toMatchObject({ id, keyCount: 13, state: 0, time: wqTimeShown(at) });
    await c.ask('inspect scheduled-jobs sq 0 10', OK_0);
  });

  it('wakes a lease waiting over names on different shards', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const [w, p] = await f.conns(2);
    const names = namesOnShards('sw', 4, shards);
    const id = uuid();
    const at = Date.now() + 400;
    await p!.want(scheduleCmd(id, names[2]!, 1000, 60000, wqTime(at), 'wake up'), OK);
    await w!.send(`lease ${names.join(' ')} 5000\r\n`);
    await w!.expect(leaseReply(id, names[2]!, 1000, 'wake up'), 400 + LATE_MS);
    expect(Date.now()).toBeGreaterThanOrEqual(at - EARLY_SLACK_MS);
  });

  it('jobs due together are leased by priority', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const ids = uuids(3);
    const at = Date.now() + 300;
    await c.want(scheduleCmd(ids[0]!, 'sq', 1000, 60000, wqTime(at), 'p1', { priority: 1 }), OK);
    await c.want(scheduleCmd(ids[1]!, 'sq', 1000, 60000, wqTime(at), 'p9', { priority: 9 }), OK);
    await c.want(scheduleCmd(ids[2]!, 'sq', 1000, 60000, wqTime(at), 'p5', { priority: 5 }), OK);
    await eventually('all due', async () => (await c.request('inspect queue sq')) === inspectQueueReply('sq', 3, 0), 300 + LATE_MS, 10);
    await c.ask('lease sq 0', leaseReply(ids[1]!, 'sq', 1000, 'p9'));
    await c.ask('lease sq 0', leaseReply(ids[2]!, 'sq', 1000, 'p5'));
    await c.ask('lease sq 0', leaseReply(ids[0]!, 'sq', 1000, 'p1'));
  });

  it('a time already past (with the TTL still ahead) makes the job ready at once', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(scheduleCmd(id, 'sq', 1000, 60000, wqTime(Date.now() - 5000), 'now'), OK);
    await c.ask('lease sq 2000', leaseReply(id, 'sq', 1000, 'now'));
  });

  it('a scheduled job deleted before its time never shows up', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    await c.want(scheduleCmd(id, 'sq', 1000, 60000, wqTime(Date.now() + 200), 'x'), OK);
    await c.ask(`delete ${id}`, OK);
    await c.ask('inspect queue sq', inspectQueueReply('sq', 0, 0));
    await c.ask('lease sq 500', TIMEOUT, 500 + LATE_MS);
  });

  it('the TTL of a scheduled job counts from its schedule time', async (ctx) => {
    const f = await wqFixture(shards, ctx);
    const c = await f.conn();
    const id = uuid();
    const t0 = performance.now();
    const at = Date.now() + 2 * STEP_MS;
    // Counted from creation the TTL would end at +2 steps; from the schedule time, at +4 steps. The
    // check at +3 steps has a step on either side.
    await c.want(scheduleCmd(id, 'sq', 60000, 2 * STEP_MS, wqTime(at), 'x'), OK);
    await sleep(Math.max(0, at + STEP_MS - Date.now()));
    expect(await c.jobState(id)).toBe(0);
    const ms = await untilState(c, id, null, t0, 4 * STEP_MS + LATE_MS);
    expect(ms).toBeGreaterThanOrEqual(4 * STEP_MS - 20);
    expect((await c.inspectServer()).evictedJobs).toBe(1);
  });
});
