// Replies sent before the shard has the request (in memory: DELETED / RELEASED / BURIED of a held
// job) and the main thread's view of a pause must hold however long a request waits on its way
// to the shard. The shard's ring is held (ShardPool.holdRequests) well past the job's TTR or the
// pause's end while the shard's clock runs on; nothing may contradict what the client was told.

import { afterEach, describe, expect, it } from 'vitest';
import type { Session } from '../../src/proto/beanstalk/session.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';

const servers: RunningServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.close();
});

async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function setup(shards: number) {
  const server = await startServer({ port: 0, shards, logLevel: 'silent' });
  servers.push(server);
  const open = async (): Promise<Client> => {
    const c = await connect(server.port);
    clients.push(c);
    for (const line of ['use t', 'watch t', 'ignore default']) await c.request(line);
    return c;
  };
  const holding = (id: number): boolean => [...server.beanstalk.sessions.values()].some((s) => (s as Session).held.has(id));
  const shardOfT = (): number => server.router.tubes.find('t')!.shard;
  return { server, open, shardOfT, holding };
}

describe.each([1, 4])('early replies with a stalled ring, %i shard(s)', (shards) => {
  it.each([
    ['delete', 'DELETED', 'NOT_FOUND\r\n'],
    ['release', 'RELEASED', /^OK \d+\r\n[^]*state: delayed\n/],
    ['bury', 'BURIED', /^OK \d+\r\n[^]*state: buried\n/],
  ] as const)('%s of a held job answered %s stays true when the request reaches the shard after the TTR', async (cmd, word, statsJob) => {
    const { server, open, shardOfT, holding } = await setup(shards);
    const [a, c, d] = [await open(), await open(), await open()];
    const shard = shardOfT();
    expect(await a.request('put 0 0 1 1\r\nx')).toBe('INSERTED 1\r\n');
    expect(await a.request('put 5 0 1 1\r\ny')).toBe('INSERTED 2\r\n');
    expect(await a.request('reserve')).toBe('RESERVED 1 1\r\nx\r\n');
    // d holds job 2 from a moment later: once the main thread hears that d's TTR ended, a's has
    // ended in the shard too (the shard's timers fire in deadline order).
    expect(await d.request('reserve')).toBe('RESERVED 2 1\r\ny\r\n');
    server.router.pool.holdRequests(shard, true);
    // Another worker's reserve goes out first: it reaches the shard before a's command.
    await c.send('reserve-with-timeout 5\r\n');
    await until(() => server.router.pool.links[shard].writer.len > 0, "c's reserve is queued for the shard");
    const line = cmd === 'delete' ? 'delete 1' : cmd === 'release' ? 'release 1 0 60' : 'bury 1 0';
    expect(await a.request(line)).toBe(`${word}\r\n`);
    // The shard's clock runs on: the TTRs end there and the main thread hears of it.
    await until(() => !holding(2), 'the TTRs have ended in the shard');
    server.router.pool.holdRequests(shard, false);
    // c gets job 2 (released by its TTR), never job 1, although job 1 comes first by priority.
    expect(await c.readReply(5000)).toBe('RESERVED 2 1\r\ny\r\n');
    const st = await a.request('stats-job 1');
    if (typeof statsJob === 'string') expect(st).toBe(statsJob);
    else expect(st).toMatch(statsJob);
    if (cmd !== 'delete') expect(st).toMatch(/timeouts: 1\n/);
  });

  it('a pause judged over by the main thread is over in the shard however late the pause arrived', async () => {
    const { server, open, shardOfT } = await setup(shards);
    const a = await open();
    const shard = shardOfT();
    expect(await a.request('put 0 0 60 1\r\nx')).toBe('INSERTED 1\r\n');
    server.router.pool.holdRequests(shard, true);
    const sentBy = Date.now() + 1000; // the pause ends by then
    await a.send('pause-tube t 1\r\n');
    await until(() => server.router.pool.links[shard].writer.len > 0, 'the pause is sent');
    // Time passing is the point here: past the pause's end (and the one-second margin main
    // used to add) while the pause itself still waits on its way to the shard.
    await until(() => Date.now() > sentBy + 1500, 'the pause is long over', 10_000);
    await a.send('reserve\r\n');
    await until(() => server.router.pool.links[shard].writer.len > 0 && a.buffered === '', 'the reserve is queued');
    server.router.pool.holdRequests(shard, false);
    expect(await a.readReply(5000)).toBe('PAUSED\r\n');
    expect(await a.readReply(5000)).toBe('RESERVED 1 1\r\nx\r\n');
  });
});
