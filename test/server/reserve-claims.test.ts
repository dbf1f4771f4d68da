// A reserve over tubes on two shards waits in both, with a claim (src/shared/claims.ts): the
// shard that has a job for it and the connection's own thread (its timeout) race for it, and
// exactly one wins. Both orders are provoked here on purpose: a shard's requests are held
// (ShardPool.holdRequests) so the timeout comes first; or the shard's replies are held
// (holdReplies) while it claims the wait and the timeout passes, so the shard comes first.
// Either way the client hears one answer, and the job is where that answer says.

import { describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import type { Session } from '../../src/proto/beanstalk/session.ts';
import { shardOf } from '../../src/route/hash.ts';
import type { Client } from '../support/client.ts';
import { waitUntil } from '../support/harness.ts';
import { parkedOver, perTestServer, statNumber as stat } from '../support/per-test.ts';

const t = perTestServer();

const SHARDS = 4;
const HERE = 'left'; // shard 0: runs on the connections' thread
const AWAY = 'right'; // shard 1: a thread of its own, whose requests the test holds

/** A worker waiting over `left` and `right` (two shards), reserve-with-timeout 1; and its session. */
async function waitingOverTwo(s: RunningServer): Promise<{ w: Client; m: Client; session: Session }> {
  expect([shardOf(HERE, SHARDS), shardOf(AWAY, SHARDS)]).toEqual([0, 1]);
  const { w, m } = await parkedOver(t, HERE, AWAY, 'reserve-with-timeout 1');
  const session = [...s.beanstalk.sessions.values()].find((x) => (x as Session).reserveAttempt?.waiting === true) as Session;
  expect(session).toBeDefined();
  return { w, m, session };
}

describe('a reserve waiting over two shards: its timeout and a shard race for it', () => {
  it('the timeout first: TIMED_OUT, and the job its shard then has stays ready', async () => {
    const s = await t.start({ port: 0, shards: SHARDS, logLevel: 'silent', workq: null });
    const { w, m } = await waitingOverTwo(s);
    const p = await t.open();
    s.router.pool.holdRequests(1, true);
    await p.ask(`use ${AWAY}`, `USING ${AWAY}\r\n`);
    await p.ask('put 0 0 60 3\r\njob', 'INSERTED 1\r\n'); // answered early; held before its shard
    await w.expect('TIMED_OUT\r\n', 3000);
    s.router.pool.holdRequests(1, false);
    const st = await m.request(`stats-tube ${AWAY}`);
    expect(stat(st, 'current-jobs-ready')).toBe(1);
    expect(stat(st, 'current-waiting')).toBe(0);
    await w.expectNothing(200); // the shard lost the claim: no RESERVED after TIMED_OUT
    await m.ask(`use ${AWAY}`, `USING ${AWAY}\r\n`);
    await m.ask('peek-ready', 'FOUND 1 3\r\njob\r\n');
  });

  it('the shard first, then the timeout: RESERVED, and nothing else', async () => {
    const s = await t.start({ port: 0, shards: SHARDS, logLevel: 'silent', workq: null });
    const { w, m, session } = await waitingOverTwo(s);
    const a = session.reserveAttempt!;
    const claims = s.router.claims!;
    const p = await t.open();
    s.router.pool.holdRequests(1, true);
    s.router.pool.holdReplies(1, true);
    await p.ask(`use ${AWAY}`, `USING ${AWAY}\r\n`);
    await p.ask('put 0 0 60 3\r\njob', 'INSERTED 1\r\n');
    // The put reaches its shard, which claims the wait and reserves the job for it; its word of
    // that waits unread while the timeout comes and goes on this thread.
    s.router.pool.holdRequests(1, false);
    await waitUntil('the shard claimed the wait', () => !claims.isOpen(a.slot, a.ticket));
    await waitUntil('the timeout has passed', () => Date.now() >= a.deadlineMs + 50);
    await new Promise((r) => setTimeout(r, 50));
    await w.expectNothing(100); // no TIMED_OUT: the wait was no longer the timeout's to end
    s.router.pool.holdReplies(1, false);
    await w.expect('RESERVED 1 3\r\njob\r\n', 3000);
    await w.expectNothing(300);
    const st = await m.request(`stats-tube ${AWAY}`);
    expect(stat(st, 'current-jobs-reserved')).toBe(1);
    expect(stat(st, 'current-waiting')).toBe(0);
    await w.ask('delete 1', 'DELETED\r\n');
  });
});
