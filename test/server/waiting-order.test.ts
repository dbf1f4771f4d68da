// A reserve over tubes on several shards asks each shard first (a peek) and parks in them only
// once all have answered that nothing is ready: one round trip after the server read it. A
// reserve over one shard's tubes read in that time parks at once. beanstalkd orders a tube's
// waiting reserves by when it read them (each joins the set as it is read), so the reserve read
// first must keep its place: each park carries where its shard read the reserve's first question
// (ShardCore's stamp) and goes ahead of the waiters read after it (workers/waits.ts). Here the
// second shard's requests are held, so the round trip lasts as long as the test likes, and the
// one-shard reserve parks in between on purpose. The same steps against beanstalkd give the
// expected answer.

import { describe, expect, it } from 'vitest';
import { shardOf } from '../../src/route/hash.ts';
import type { Session } from '../../src/proto/beanstalk/session.ts';
import { connect, type Client } from '../support/client.ts';
import { statsWhen, waitUntil } from '../support/harness.ts';
import { perTestServer } from '../support/per-test.ts';
import { referenceTarget } from '../support/servers.ts';

const t = perTestServer();

const SHARDS = 4;
const HERE = 'left'; // shard 0: runs on the connections' thread
const AWAY = 'right'; // shard 1: a thread of its own, whose requests the test holds

/** wa watches both tubes, wb only `left` (neither `default`). */
async function workers(wa: Client, wb: Client): Promise<void> {
  await wa.ask(`watch ${HERE}`, 'WATCHING 2\r\n');
  await wa.ask(`watch ${AWAY}`, 'WATCHING 3\r\n');
  await wa.ask('ignore default', 'WATCHING 2\r\n');
  await wb.ask(`watch ${HERE}`, 'WATCHING 2\r\n');
  await wb.ask('ignore default', 'WATCHING 1\r\n');
}

/** Two jobs on `left`: the first to the reserve read first (wa), the next to wb. */
async function putTwo(p: Client, wa: Client, wb: Client): Promise<void> {
  await p.ask(`use ${HERE}`, `USING ${HERE}\r\n`);
  await p.ask('put 0 0 60 3\r\none', 'INSERTED 1\r\n');
  await wa.expect('RESERVED 1 3\r\none\r\n');
  await wb.expectNothing(100);
  await p.ask('put 0 0 60 3\r\ntwo', 'INSERTED 2\r\n');
  await wb.expect('RESERVED 2 3\r\ntwo\r\n');
}

describe('a reserve over two shards keeps its place among the waiting ones', () => {
  it('beanstalkd: the reserve read first gets the first job', async () => {
    const srv = await referenceTarget().start();
    const clients: Client[] = [];
    try {
      const [wa, wb, p, m] = await Promise.all([0, 1, 2, 3].map(async () => {
        const c = await connect(srv.port);
        clients.push(c);
        return c;
      }));
      await workers(wa, wb);
      await wa.send('reserve\r\n');
      await statsWhen(m, 'wa waits', (s) => s['current-waiting'] === '1', ['current-waiting']);
      await wb.send('reserve\r\n');
      await statsWhen(m, 'wb waits', (s) => s['current-waiting'] === '2', ['current-waiting']);
      await putTwo(p, wa, wb);
    } finally {
      for (const c of clients) c.destroy();
      await srv.close();
    }
  });

  it('shardstalk: a one-shard reserve read while it asked the other shard parks behind it', async () => {
    expect([shardOf(HERE, SHARDS), shardOf(AWAY, SHARDS)]).toEqual([0, 1]);
    const s = await t.start({ port: 0, shards: SHARDS, logLevel: 'silent', workq: null });
    const [wa, wb, p] = [await t.open(), await t.open(), await t.open()];
    await workers(wa, wb);
    s.router.pool.holdRequests(1, true);
    await wa.send('reserve\r\n');
    // wa's reserve is read and asking: its peek at `left` applied, the one at `right` held.
    await waitUntil('wa asks', () => [...s.beanstalk.sessions.values()].some((x) => (x as Session).reserveAttempt?.attempting === true));
    await wb.send('reserve\r\n');
    await waitUntil('wb parks', () => s.beanstalk.waiting === 1);
    s.router.pool.holdRequests(1, false);
    await waitUntil('wa parks', () => s.beanstalk.waiting === 2);
    await putTwo(p, wa, wb);
  });
});
