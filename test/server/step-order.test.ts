// Steps that make jobs ready on different shards take effect in the order the server read them,
// as far as a reserve waiting over several shards can tell (src/shared/order.ts). beanstalkd
// applies commands one at a time, so after a put to tube a and then a put to tube b, a worker
// waiting on both gets the a job; shards run in parallel, so b's shard could get there first.
// Each case here makes the wrong order happen for sure without the ordering: the first shard's
// requests are held (ShardPool.holdRequests) or, for the shard on the connections' thread, it
// applies its requests before the other shards' are even in their rings.

import { describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.ts';
import { shardOf } from '../../src/route/hash.ts';
import type { Client } from '../support/client.ts';
import { waitUntil } from '../support/harness.ts';
import { parkedOver, perTestServer, untilParked, statNumber as stat } from '../support/per-test.ts';
import { kickTube } from '../../src/ops/admin.ts';

const t = perTestServer();

const SHARDS = 4;
const HERE = 'left'; // shard 0: runs on the connections' thread
const AWAY = 'right'; // shard 1: a thread of its own
const THIRD = 'ta'; // shard 2: a thread of its own

async function start(): Promise<RunningServer> {
  expect([shardOf(HERE, SHARDS), shardOf(AWAY, SHARDS), shardOf(THIRD, SHARDS)]).toEqual([0, 1, 2]);
  return t.start({ port: 0, shards: SHARDS, logLevel: 'silent', workq: null });
}

/** A worker waiting over tubes `a` and `b` (on two shards), parked in both. */
async function waitingOver(a: string, b: string): Promise<Client> {
  return (await parkedOver(t, a, b)).w;
}

describe('steps on several shards, in the order they were read', () => {
  it('two puts in one read, the first one held before its shard: the waiting worker gets the first', async () => {
    const s = await start();
    const w = await waitingOver(AWAY, THIRD);
    const p = await t.open();
    s.router.pool.holdRequests(1, true);
    await p.send(`use ${AWAY}\r\nput 0 0 60 1\r\nA\r\nuse ${THIRD}\r\nput 0 0 60 1\r\nB\r\n`);
    await p.expect(`USING ${AWAY}\r\nINSERTED 1\r\nUSING ${THIRD}\r\nINSERTED 2\r\n`);
    // The second put is in its shard, which waits for the first one's: nothing for the worker yet.
    await w.expectNothing(150);
    s.router.pool.holdRequests(1, false);
    await w.expect('RESERVED 1 1\r\nA\r\n', 3000);
    const m = await t.open();
    await m.ask(`use ${THIRD}`, `USING ${THIRD}\r\n`);
    await m.ask('peek-ready', 'FOUND 2 1\r\nB\r\n');
    expect(stat(await m.request(`stats-tube ${THIRD}`), 'current-waiting')).toBe(0);
  });

  it('a put, then a put for the shard on the connections\' thread: the worker gets the first', async () => {
    await start();
    const w = await waitingOver(AWAY, HERE);
    const p = await t.open();
    // The shard here applies its put as soon as the turn's requests are handed over, before
    // the other shard has read the first put from its ring.
    await p.send(`use ${AWAY}\r\nput 0 0 60 1\r\nA\r\nuse ${HERE}\r\nput 0 0 60 1\r\nB\r\n`);
    await p.expect(`USING ${AWAY}\r\nINSERTED 1\r\nUSING ${HERE}\r\nINSERTED 2\r\n`);
    await w.expect('RESERVED 1 1\r\nA\r\n', 3000);
    const m = await t.open();
    await m.ask(`use ${HERE}`, `USING ${HERE}\r\n`);
    await m.ask('peek-ready', 'FOUND 2 1\r\nB\r\n');
  });

  it('a put answered early, then another client\'s put: the worker gets the first', async () => {
    const s = await start();
    const w = await waitingOver(AWAY, THIRD);
    const p = await t.open();
    const q = await t.open();
    await q.ask(`use ${THIRD}`, `USING ${THIRD}\r\n`);
    await p.ask(`use ${AWAY}`, `USING ${AWAY}\r\n`);
    s.router.pool.holdRequests(1, true);
    await p.ask('put 0 0 60 1\r\nA', 'INSERTED 1\r\n'); // told before its shard has it
    await q.ask('put 0 0 60 1\r\nB', 'INSERTED 2\r\n');
    await w.expectNothing(150);
    s.router.pool.holdRequests(1, false);
    await w.expect('RESERVED 1 1\r\nA\r\n', 3000);
  });

  it('a release and a kick on other shards come after it too', async () => {
    const s = await start();
    const c = await t.open();
    await c.ask(`use ${AWAY}`, `USING ${AWAY}\r\n`);
    await c.ask('put 5 0 60 1\r\nA', 'INSERTED 1\r\n');
    await c.ask(`use ${THIRD}`, `USING ${THIRD}\r\n`);
    await c.ask('put 5 0 60 1\r\nB', 'INSERTED 2\r\n');
    await c.ask('peek-ready', 'FOUND 2 1\r\nB\r\n');
    await c.ask('reserve-job 2', 'RESERVED 2 1\r\nB\r\n');
    await c.ask('bury 2 5', 'BURIED\r\n');
    await c.ask('reserve-job 1', 'RESERVED 1 1\r\nA\r\n');
    const w = await waitingOver(AWAY, THIRD);
    s.router.pool.holdRequests(1, true);
    await c.send('release 1 5 0\r\nkick 1\r\n');
    await c.expect('RELEASED\r\n'); // answered early; the kick's shard waits for the release's
    await w.expectNothing(150);
    s.router.pool.holdRequests(1, false);
    await c.expect('KICKED 1\r\n', 3000);
    await w.expect('RESERVED 1 1\r\nA\r\n', 3000);
  });

  it('a job made ready while a reserve over two shards is about to park: no other shard serves it behind that job\'s back', async () => {
    const s = await start();
    const w = await t.open();
    await w.ask(`watch ${AWAY}`, 'WATCHING 2\r\n');
    await w.ask(`watch ${THIRD}`, 'WATCHING 3\r\n');
    await w.ask('ignore default', 'WATCHING 2\r\n');
    const p = await t.open();
    await p.ask(`use ${AWAY}`, `USING ${AWAY}\r\n`);
    // The reserve asks both shards for their best job; AWAY's shard gets the question late, with a
    // put right behind it, so it answers "none" and then has job A ready.
    s.router.pool.holdRequests(1, true);
    await w.send('reserve\r\n');
    await p.ask('put 1 0 60 1\r\nA', 'INSERTED 1\r\n');
    const pool = s.router.pool;
    pool.holdRequests(1, false);
    pool.holdRequests(1, true); // ...and the reserve's parks, sent once both said "none", wait here for AWAY's
    await waitUntil('parked in the other shard', async () => {
      const m = await t.open();
      const st = await m.request(`stats-tube ${THIRD}`);
      m.destroy();
      return stat(st, 'current-waiting') === 1;
    });
    // A less urgent job for the other shard: it must not go to the reserve while A waits for it.
    await p.ask(`use ${THIRD}`, `USING ${THIRD}\r\n`);
    await p.ask('put 5 0 60 1\r\nB', 'INSERTED 2\r\n');
    await w.expectNothing(150);
    pool.holdRequests(1, false);
    await w.expect('RESERVED 1 1\r\nA\r\n', 3000);
    const m = await t.open();
    await m.ask(`use ${THIRD}`, `USING ${THIRD}\r\n`);
    await m.ask('peek-ready', 'FOUND 2 1\r\nB\r\n');
  });

  it('a kick from the JSON API comes before a put read after it', async () => {
    const s = await start();
    const c = await t.open();
    await c.ask(`use ${AWAY}`, `USING ${AWAY}\r\n`);
    await c.ask('put 5 0 60 1\r\nA', 'INSERTED 1\r\n');
    await c.ask('reserve-job 1', 'RESERVED 1 1\r\nA\r\n');
    await c.ask('bury 1 5', 'BURIED\r\n');
    const w = await waitingOver(AWAY, THIRD);
    s.router.pool.holdRequests(1, true);
    const kicked = kickTube(s.router, s.router.tubes.find(AWAY)!, 1);
    await c.ask(`use ${THIRD}`, `USING ${THIRD}\r\n`);
    await c.ask('put 5 0 60 1\r\nB', 'INSERTED 2\r\n');
    await w.expectNothing(150);
    s.router.pool.holdRequests(1, false);
    expect((await kicked).kicked).toBe(1);
    await w.expect('RESERVED 1 1\r\nA\r\n', 3000);
  });

  it('a closing worker\'s jobs on two shards go back in the order it reserved them', async () => {
    const s = await start();
    const c = await t.open();
    await c.ask(`use ${AWAY}`, `USING ${AWAY}\r\n`);
    await c.ask('put 1 0 60 2\r\nj1', 'INSERTED 1\r\n');
    await c.ask(`use ${THIRD}`, `USING ${THIRD}\r\n`);
    await c.ask('put 2 0 60 2\r\nj2', 'INSERTED 2\r\n');
    await c.ask(`watch ${AWAY}`, 'WATCHING 2\r\n');
    await c.ask(`watch ${THIRD}`, 'WATCHING 3\r\n');
    await c.ask('reserve', 'RESERVED 1 2\r\nj1\r\n');
    await c.ask('reserve', 'RESERVED 2 2\r\nj2\r\n');
    const w = await waitingOver(AWAY, THIRD);
    s.router.pool.holdRequests(1, true);
    c.destroy();
    await w.expectNothing(150);
    s.router.pool.holdRequests(1, false);
    await w.expect('RESERVED 1 2\r\nj1\r\n', 3000);
    const m = await t.open();
    await m.ask(`use ${THIRD}`, `USING ${THIRD}\r\n`);
    await m.ask('peek-ready', 'FOUND 2 2\r\nj2\r\n');
  });

  // Nothing held: the race as it comes, many times over, both orders of the two tubes.
  it.each([
    ['two shard threads', AWAY, THIRD, false],
    ['a shard thread and the shard here', AWAY, HERE, false],
    ['connections on a thread per shard (src/shared/sequence.ts)', AWAY, THIRD, true],
  ])('two puts in one read, round after round (%s): the waiting worker always gets the first', async (_name, a, b, connectionThreads) => {
    if (connectionThreads) await t.start({ port: 0, shards: SHARDS, logLevel: 'silent', workq: null, connectionThreads: true });
    else await start();
    const w = await waitingOver(a, b);
    const p = await t.open();
    const m = await t.open();
    const ROUNDS = 150;
    for (let round = 0; round < ROUNDS; round++) {
      const [first, second] = round % 2 === 0 ? [a, b] : [b, a];
      const id = 2 * round + 1;
      await p.send(`use ${first}\r\nput 0 0 60 1\r\nF\r\nuse ${second}\r\nput 0 0 60 1\r\nS\r\n`);
      await p.expect(`USING ${first}\r\nINSERTED ${id}\r\nUSING ${second}\r\nINSERTED ${id + 1}\r\n`);
      await w.expect(`RESERVED ${id} 1\r\nF\r\n`, 3000);
      await w.ask(`delete ${id}`, 'DELETED\r\n');
      await m.ask(`delete ${id + 1}`, 'DELETED\r\n');
      await w.send('reserve\r\n');
      await untilParked(m, [a, b]);
    }
  });

  it('connections on a thread per shard: a worker waiting over two shards gets each put, round after round (each put waits for the other shard\'s frontier)', async () => {
    // Every put finds the worker parked in both shards, so the put's shard waits for the other
    // shard to publish how far it has got, and rings it for that. A ring that came while that
    // shard was busy, and was not looked at again before it slept, left the put waiting until
    // some other request woke the thread (seen within a few hundred rounds).
    await t.start({ port: 0, shards: 2, logLevel: 'silent', workq: null, connectionThreads: true });
    const [a, b] = ['ta', 'tb'];
    expect([shardOf(a, 2), shardOf(b, 2)]).toEqual([0, 1]);
    const w = await t.open();
    await w.ask(`watch ${a}`, 'WATCHING 2\r\n');
    await w.ask(`watch ${b}`, 'WATCHING 3\r\n');
    const p = await t.open();
    await p.ask(`use ${a}`, `USING ${a}\r\n`);
    for (let round = 1; round <= 1000; round++) {
      await w.send('reserve\r\n');
      await new Promise((r) => setTimeout(r, 1)); // it parks meanwhile (mostly)
      await p.ask('put 0 0 60 1\r\nx', `INSERTED ${round}\r\n`);
      await w.expect(`RESERVED ${round} 1\r\nx\r\n`, 3000);
      await w.ask(`delete ${round}`, 'DELETED\r\n');
    }
  });

  it('a shard where no worker waits over several shards does not wait', async () => {
    const s = await start();
    // Someone waits over two other shards (the one here and tb's), so the steps are ordered...
    await waitingOver(HERE, 'tb');
    expect(shardOf('tb', SHARDS)).toBe(3);
    // ...but THIRD's shard has only a worker waiting on THIRD alone.
    const w = await t.open();
    await w.ask(`watch ${THIRD}`, 'WATCHING 2\r\n');
    await w.send('reserve\r\n');
    const m = await t.open();
    await waitUntil('parked', async () => stat(await m.request(`stats-tube ${THIRD}`), 'current-waiting') === 1);
    const p = await t.open();
    s.router.pool.holdRequests(1, true);
    await p.send(`use ${AWAY}\r\nput 0 0 60 1\r\nA\r\nuse ${THIRD}\r\nput 0 0 60 1\r\nB\r\n`);
    // It does not wait for AWAY's put, held: nothing there could change what its put does.
    await w.expect('RESERVED 2 1\r\nB\r\n', 3000);
    s.router.pool.holdRequests(1, false);
  });

  it('with nobody waiting over several shards, no step is ordered at all', async () => {
    const s = await start();
    const p = await t.open();
    await p.send(`use ${AWAY}\r\nput 0 0 60 1\r\nA\r\nuse ${THIRD}\r\nput 0 0 60 1\r\nB\r\n`);
    await p.expect(`USING ${AWAY}\r\nINSERTED 1\r\nUSING ${THIRD}\r\nINSERTED 2\r\n`);
    expect(s.router.pool.afterRecords).toBe(0);
    // With someone waiting over two shards, the same two puts go in order (the first one held
    // before its shard, so it is not applied yet when the second is sent).
    await waitingOver(HERE, 'tb');
    s.router.pool.holdRequests(1, true);
    await p.send(`use ${AWAY}\r\nput 0 0 60 1\r\nA\r\nuse ${THIRD}\r\nput 0 0 60 1\r\nB\r\n`);
    await p.expect(`USING ${AWAY}\r\nINSERTED 3\r\nUSING ${THIRD}\r\nINSERTED 4\r\n`);
    // At least the second put's (the first one's too if a park was still on its way to its shard:
    // the worker counts as waiting from the moment its parks are sent).
    expect(s.router.pool.afterRecords).toBeGreaterThanOrEqual(1);
    s.router.pool.holdRequests(1, false);
  });
});
