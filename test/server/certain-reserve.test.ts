// Reserves sent without holding the parser (ReadyCounts says a job is certainly ready) must
// never find nothing: seeded random pipelines of every command that adds or removes ready jobs,
// over several connections and tubes, then the server's own count of misses must be 0. The
// byte-exact behaviour of such pipelines against beanstalkd is in test/protocol/reserve.test.ts
// and the conformance sessions; this is the stress test of the counting.

import { afterEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { mulberry32 } from '../support/prng.ts';
import { waitUntil } from '../support/harness.ts';

const servers: RunningServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.close();
});

const TUBES = ['a', 'b', 'c'];

async function session(port: number, seed: number, rounds: number): Promise<number> {
  const rand = mulberry32(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const c = await connect(port);
  clients.push(c);
  const held: number[] = [];
  const putIds: number[] = []; // jobs this session put: deleting one it does not hold likely takes a ready job
  let reserved = 0;
  const someJob = (): number => (putIds.length > 0 && rand() < 0.8 ? pick(putIds) : 1 + Math.floor(rand() * 300));
  // Mostly one watched tube (the case that may skip the wait), sometimes two.
  let cur = pick(TUBES);
  let extra: string | null = null;
  await c.send(`watch ${cur}\r\nignore default\r\n`);
  await c.readReply();
  await c.readReply();
  for (let round = 0; round < rounds; round++) {
    // A pipelined batch of commands, then every reply.
    const cmds: string[] = [];
    for (let i = 0; i < 12; i++) {
      const r = rand();
      if (r < 0.3) {
        const delay = rand() < 0.85 ? 0 : 1;
        const tube = rand() < 0.7 ? cur : pick(TUBES);
        cmds.push(`use ${tube}\r\nput ${Math.floor(rand() * 3)} ${delay} 1 1\r\nx`);
      } else if (r < 0.6) {
        cmds.push('reserve-with-timeout 0');
      } else if (r < 0.68 && held.length > 0) {
        cmds.push(`delete ${held.pop()}`);
      } else if (r < 0.73 && held.length > 0) {
        cmds.push(`release ${held.pop()} 0 ${rand() < 0.7 ? 0 : 1}`);
      } else if (r < 0.76 && held.length > 0) {
        cmds.push(`bury ${held.pop()} 0`);
      } else if (r < 0.79) {
        cmds.push(`use ${pick(TUBES)}\r\nkick ${1 + Math.floor(rand() * 3)}`);
      } else if (r < 0.84) {
        // Somebody else's job, or nobody's: may take a ready job the main thread cannot place.
        cmds.push(`delete ${someJob()}`);
      } else if (r < 0.87) {
        cmds.push(`reserve-job ${someJob()}`);
      } else if (r < 0.9) {
        cmds.push(`kick-job ${someJob()}`);
      } else if (r < 0.94) {
        const next = pick(TUBES);
        cmds.push(`watch ${next}\r\nignore ${cur}`);
        if (next !== cur) {
          if (extra === next) extra = null;
          cur = next;
        }
      } else if (r < 0.96) {
        if (extra === null) {
          extra = pick(TUBES.filter((t) => t !== cur));
          cmds.push(`watch ${extra}`);
        } else {
          cmds.push(`ignore ${extra}`);
          extra = null;
        }
      } else {
        cmds.push(`pause-tube ${pick(TUBES)} ${rand() < 0.6 ? 0 : 1}`);
      }
    }
    // Lines joined by \r\n inside one entry (use + put, watch + ignore) get one reply each.
    const expected = cmds.reduce((n, cmd) => n + (cmd.startsWith('use ') || cmd.startsWith('watch ') && cmd.includes('ignore') ? 2 : 1), 0);
    await c.send(cmds.join('\r\n') + '\r\n');
    for (let i = 0; i < expected; i++) {
      const reply = await c.readReply(5000);
      const m = /^RESERVED (\d+) /.exec(reply);
      if (m) {
        held.push(Number(m[1]));
        reserved++;
      }
      const ins = /^INSERTED (\d+)/.exec(reply);
      if (ins) {
        putIds.push(Number(ins[1]));
        if (putIds.length > 20) putIds.shift();
      }
    }
  }
  return reserved;
}

describe.each([1, 4])('certain reserves, %i shard(s)', (shards) => {
  it.each([false, true])('never miss under random pipelines of every ready-changing command (seeded; shards stalled at random: %s)', async (stall) => {
    const server = await startServer({ port: 0, shards, logLevel: 'silent' });
    servers.push(server);
    const seed = Number(process.env.SEED ?? 20261122);
    // Stalls: every millisecond one shard's requests are held or let go, at random (seeded), so
    // requests and answers of different connections interleave in ways an idle machine rarely
    // shows. This found the late-addition hole of ReadyCounts' rule 4 in under 100 seeds.
    const rand = mulberry32(seed ^ 0x5eed);
    const stalls = stall
      ? setInterval(() => server.router.pool.holdRequests(Math.floor(rand() * shards), rand() < 0.5), 1)
      : null;
    try {
      const got = await Promise.all([0, 1, 2, 3].map((k) => session(server.port, seed + k, 60)));
      expect(got.reduce((a, b) => a + b, 0), 'the sessions reserved jobs at all').toBeGreaterThan(50);
    } finally {
      if (stalls !== null) clearInterval(stalls);
      for (let s = 0; s < shards; s++) server.router.pool.holdRequests(s, false);
    }
    expect(server.beanstalk.certainMisses, `seed ${seed}`).toBe(0);
  }, 60_000);
});

describe.each([1, 4])('certain reserves, %i shard(s): what makes a count wrong', (shards) => {
  async function setup() {
    const server = await startServer({ port: 0, shards, logLevel: 'silent' });
    servers.push(server);
    const [a, b] = [await connect(server.port), await connect(server.port)];
    clients.push(a, b);
    expect(await a.request('watch t')).toBe('WATCHING 2\r\n');
    expect(await a.request('ignore default')).toBe('WATCHING 1\r\n');
    expect(await b.request('use t')).toBe('USING t\r\n');
    return { server, a, b };
  }

  it('a ready job deleted by id by another connection is not reserved as certain', async () => {
    const { server, a, b } = await setup();
    expect(await b.request('put 0 0 60 1\r\nx')).toBe('INSERTED 1\r\n');
    expect(await b.request('delete 1')).toBe('DELETED\r\n');
    expect(await a.request('reserve-with-timeout 0')).toBe('TIMED_OUT\r\n');
    expect(server.beanstalk.certainMisses).toBe(0);
  });

  it('a ready job taken by reserve-job is not reserved as certain', async () => {
    const { server, a, b } = await setup();
    expect(await b.request('put 0 0 60 1\r\nx')).toBe('INSERTED 1\r\n');
    expect(await b.request('reserve-job 1')).toBe('RESERVED 1 1\r\nx\r\n');
    expect(await a.request('reserve-with-timeout 0')).toBe('TIMED_OUT\r\n');
    expect(server.beanstalk.certainMisses).toBe(0);
  });

  it('a pipelined cycle on one connection: every reserve certain, every reply in order', async () => {
    const { server, a } = await setup();
    await a.send('use t\r\n' + 'put 0 0 60 1\r\nx\r\nreserve-with-timeout 0\r\n'.repeat(50));
    expect(await a.readReply()).toBe('USING t\r\n');
    for (let i = 1; i <= 50; i++) {
      expect(await a.readReply()).toBe(`INSERTED ${i}\r\n`);
      expect(await a.readReply()).toBe(`RESERVED ${i} 1\r\nx\r\n`);
    }
    expect(server.beanstalk.certainMisses).toBe(0);
  });

  it('a reserve sent as certain that finds nothing after all is carried on as an ordinary reserve', async () => {
    const { server, a, b } = await setup();
    // Make the count lie (only a bug could): tube t claims a ready job it does not have.
    const t = server.router.tubes.find('t');
    expect(t).toBeDefined();
    server.router.readyCounts.add(t!, 1);
    // A plain reserve waits rather than answering TIMED_OUT, and gets the next job put.
    await a.send('reserve\r\n');
    await waitFor(() => server.beanstalk.certainMisses === 1 && server.router.waitingCount === 1);
    expect(await b.request('put 0 0 60 1\r\ny')).toBe('INSERTED 1\r\n');
    expect(await a.readReply()).toBe('RESERVED 1 1\r\ny\r\n');
    // A reserve with a timeout times out by its own timeout, not at once; what follows it is
    // answered after it.
    server.router.readyCounts.add(t!, 1);
    await a.send('reserve-with-timeout 1\r\nlist-tube-used\r\n');
    await waitFor(() => server.beanstalk.certainMisses === 2 && server.router.waitingCount === 1);
    expect(await a.readReply()).toBe('TIMED_OUT\r\n');
    expect(await a.readReply()).toBe('USING default\r\n');
  });
});

/** Polls `cond` until it holds (the server's own state), failing after `ms`. */
async function waitFor(cond: () => boolean, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe.each([1, 4])('certain reserves, provoked races, %i shard(s)', (shards) => {
  it('a late addition does not count a job an unheld delete took (kick, then delete of the kicked job from another connection)', async () => {
    const server = await startServer({ port: 0, shards, logLevel: 'silent' });
    servers.push(server);
    const [a, b, c] = [await connect(server.port), await connect(server.port), await connect(server.port)];
    clients.push(a, b, c);
    expect(await a.request('use t')).toBe('USING t\r\n');
    expect(await a.request('watch t')).toBe('WATCHING 2\r\n');
    expect(await a.request('put 0 0 60 1\r\nx')).toBe('INSERTED 1\r\n');
    expect(await a.request('reserve-with-timeout 0')).toBe('RESERVED 1 1\r\nx\r\n');
    expect(await a.request('bury 1 0')).toBe('BURIED\r\n');
    expect(await c.request('watch t')).toBe('WATCHING 2\r\n');
    expect(await c.request('ignore default')).toBe('WATCHING 1\r\n');
    const shard = server.router.tubes.find('t')!.shard;
    const pending = () => server.router.pool.links[shard].pending.length;
    // Both requests reach the shard in one batch, the kick first: the kick makes job 1 ready,
    // the delete (b does not hold it) takes it. The kick's answer is read first.
    server.router.pool.holdRequests(shard, true);
    await a.send('kick 1\r\n');
    await waitUntil('the kick is queued for the shard', () => pending() === 1);
    await b.send('delete 1\r\n');
    await waitUntil('the delete is queued behind it', () => pending() === 2);
    server.router.pool.holdRequests(shard, false);
    expect(await a.readReply()).toBe('KICKED 1\r\n');
    expect(await b.readReply()).toBe('DELETED\r\n');
    // Nothing is ready: a reserve must not be sent as certain (it would find nothing).
    expect(await c.request('reserve-with-timeout 0')).toBe('TIMED_OUT\r\n');
    expect(server.beanstalk.certainMisses).toBe(0);
  });
});
