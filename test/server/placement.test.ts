// Connection threads place each connection by its first line (src/net/placement.ts): the thread
// of the tube it uses or watches, unless that thread already serves PLACEMENT_SLACK more
// connections than the least busy one. The main thread holds a connection until that line (and
// counts it from its accept); what it read is the serving thread's first read, so no reply changes.

import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { chooseSite, firstTube, PLACEMENT_SLACK, PLACEMENT_SNIFF_BYTES } from '../../src/net/placement.ts';
import { siteRow } from '../../src/net/threads.ts';
import { shardOf } from '../../src/route/hash.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { waitUntil } from '../support/harness.ts';

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

describe('the first line names the tube', () => {
  it.each([
    ['use a\r\n', 'a'],
    ['watch jobs.mail-1\r\n', 'jobs.mail-1'],
    ['use a\r\nput 0 0 60 1\r\nx\r\n', 'a'],
    ['put 0 0 60 1\r\n', 'default'],
    ['stats\r\n', 'default'],
    ['use \r\n', 'default'], // no name
    ['use -a\r\n', 'default'], // beanstalkd refuses a name that starts with '-'
    ['use a b\r\n', 'default'], // not a name then CRLF
    ['use a\n', 'default'], // beanstalkd needs CRLF
    ['use ' + 'x'.repeat(201) + '\r\n', 'default'], // over 200 bytes
    ['use ' + 'x'.repeat(200) + '\r\n', 'x'.repeat(200)],
    ['usex a\r\n', 'default'],
  ])('%j -> %s', (line, tube) => {
    expect(firstTube(b(line), b(line).length)).toBe(tube);
  });
});

describe('choosing the thread', () => {
  it('takes the tube\'s thread unless it serves PLACEMENT_SLACK more connections than the least busy one', () => {
    const loads = [10, 10 + PLACEMENT_SLACK - 1, 10];
    expect(chooseSite(1, (s) => loads[s], 3)).toBe(1);
    loads[1] = 10 + PLACEMENT_SLACK;
    expect(chooseSite(1, (s) => loads[s], 3)).toBe(0);
    loads[0] = 11;
    expect(chooseSite(1, (s) => loads[s], 3)).toBe(2);
  });
});

let server: RunningServer | null = null;
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await server?.close();
  server = null;
});

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => resolve(c));
    c.on('error', reject);
    sockets.push(c);
  });
}

/** Sends `data` on `c` and resolves with what comes back once it holds `lines` CRLF-ended lines. */
function ask(c: net.Socket, data: string, lines: number): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const on = (d: Buffer): void => {
      got += d.toString('latin1');
      if (got.split('\r\n').length > lines) {
        c.off('data', on);
        resolve(got);
      }
    };
    c.on('data', on);
    c.write(data);
  });
}

/** One `stats` key, asked on a connection of its own. */
async function statsOf(port: number, key: string): Promise<number> {
  const c = await connect(port);
  const body = await new Promise<string>((resolve) => {
    let got = '';
    c.on('data', (d) => {
      got += d.toString('latin1');
      const m = /^OK (\d+)\r\n/.exec(got);
      if (m !== null && got.length >= m[0].length + Number(m[1]) + 2) resolve(got);
    });
    c.write('stats\r\n');
  });
  c.destroy();
  return Number(new RegExp(`\\n${key}: (\\d+)`).exec(body)![1]);
}

describe('connection threads place connections by their first line', () => {
  // Four tubes, two on each of the two shards (FNV-1a of the name).
  const onShard = (shard: number): string[] => ['a', 'b', 'c', 'd', 'e', 'f'].filter((t) => shardOf(t, 2) === shard).slice(0, 2);

  it('serves a connection on the thread of the tube its first line uses or watches', async () => {
    const s = (server = await startServer({ port: 0, shards: 2, connectionThreads: true, logLevel: 'silent', workq: null }));
    const load = (site: number): number => s.beanstalk.servedBy(siteRow(site));
    for (const shard of [0, 1]) {
      for (const [i, tube] of onShard(shard).entries()) {
        const before = [load(0), load(1)];
        const c = await connect(s.port);
        const first = i === 0 ? `use ${tube}\r\n` : `watch ${tube}\r\n`;
        expect(await ask(c, first, 1)).toBe(i === 0 ? `USING ${tube}\r\n` : 'WATCHING 2\r\n');
        expect(load(shard) - before[shard]).toBe(1);
        expect(load(1 - shard) - before[1 - shard]).toBe(0);
      }
    }
  });

  it('waits for the whole first line when it comes in pieces', async () => {
    const s = (server = await startServer({ port: 0, shards: 2, connectionThreads: true, logLevel: 'silent', workq: null }));
    const [tube] = onShard(1);
    const c = await connect(s.port);
    c.write('us');
    await waitUntil('held by the main thread', () => s.beanstalk.servedBy(0) === 1);
    await new Promise((r) => setTimeout(r, 20));
    c.write(`e ${tube}`);
    await new Promise((r) => setTimeout(r, 20));
    expect(s.beanstalk.servedBy(0)).toBe(1); // still no CRLF: still on the main thread
    expect(await ask(c, '\r\nlist-tube-used\r\n', 2)).toBe(`USING ${tube}\r\nUSING ${tube}\r\n`);
    expect(s.beanstalk.servedBy(siteRow(1))).toBe(1);
    expect(s.beanstalk.servedBy(0)).toBe(0);
  });

  it('keeps the replies: a whole session in the first read, a long first line, any first command', async () => {
    const placed = (server = await startServer({ port: 0, shards: 2, connectionThreads: true, logLevel: 'silent', workq: null }));
    const plain = await startServer({ port: 0, shards: 2, logLevel: 'silent', workq: null });
    try {
      const sessions: [string, number][] = [
        ['use a\r\nput 0 0 60 3\r\nabc\r\nwatch a\r\nreserve-with-timeout 0\r\n', 4],
        ['watch b\r\nignore default\r\nput 0 0 60 1\r\nx\r\nlist-tubes-watched\r\n', 4],
        ['x'.repeat(PLACEMENT_SNIFF_BYTES + 10) + '\r\nlist-tube-used\r\n', 2],
        ['stats-tube default\r\n', 1],
        ['use \r\nlist-tube-used\r\n', 2],
      ];
      for (const [data, lines] of sessions) {
        const ids = (r: string): string => r.replace(/RESERVED \d+/g, 'RESERVED n').replace(/INSERTED \d+/g, 'INSERTED n').replace(/^OK \d+\r\n[\s\S]*$/, 'OK');
        const a = await ask(await connect(placed.port), data, lines);
        const p = await ask(await connect(plain.port), data, lines);
        expect(ids(a)).toBe(ids(p));
      }
    } finally {
      await plain.close();
    }
  });

  it('counts a connection that has said nothing yet, and one that leaves before its first line', async () => {
    const s = (server = await startServer({ port: 0, shards: 2, connectionThreads: true, logLevel: 'silent', workq: null }));
    // A stats connection the client has closed counts until its thread reads the end (as in
    // beanstalkd): each count below waits for the threads to have closed the earlier ones.
    const threadsIdle = (): boolean => s.beanstalk.servedBy(siteRow(0)) + s.beanstalk.servedBy(siteRow(1)) === 0;
    const before = await statsOf(s.port, 'total-connections');
    await waitUntil('the stats connection closed', threadsIdle);
    const quiet = await connect(s.port);
    await waitUntil('held by the main thread', () => s.beanstalk.servedBy(0) === 1);
    expect(await statsOf(s.port, 'current-connections')).toBe(2); // the quiet one and the asking one
    await waitUntil('the stats connection closed', threadsIdle);
    expect(await statsOf(s.port, 'total-connections')).toBe(before + 3);
    await waitUntil('the stats connection closed', threadsIdle);
    quiet.write('use a'); // half a line, then gone
    quiet.end();
    await waitUntil('closed by the main thread', () => s.beanstalk.servedBy(0) === 0);
    expect(await statsOf(s.port, 'current-connections')).toBe(1);
    await waitUntil('the stats connection closed', threadsIdle);
    expect(await statsOf(s.port, 'total-connections')).toBe(before + 5);
  });

  it('says one server id and uptime in stats, whichever thread serves the connection', async () => {
    const s = (server = await startServer({ port: 0, shards: 2, connectionThreads: true, logLevel: 'silent', workq: null }));
    // Started a second later than the server: a thread's own clock would show in the uptime.
    await new Promise((r) => setTimeout(r, 1100));
    const said: { id: string; uptime: string }[] = [];
    for (const shard of [0, 1]) {
      const [tube] = onShard(shard);
      const before = s.beanstalk.servedBy(siteRow(shard));
      const c = await connect(s.port);
      const got = await new Promise<string>((resolve) => {
        let buf = '';
        c.on('data', (d) => {
          buf += d.toString('latin1');
          const m = /\r\nOK (\d+)\r\n/.exec(buf);
          if (m !== null && buf.length >= (m.index as number) + m[0].length + Number(m[1]) + 2) resolve(buf);
        });
        c.write(`use ${tube}\r\nstats\r\n`);
      });
      expect(s.beanstalk.servedBy(siteRow(shard)) - before).toBe(1); // served by that shard's thread
      said.push({ id: /\nid: (\S+)\n/.exec(got)![1], uptime: /\nuptime: (\d+)\n/.exec(got)![1] });
    }
    expect(said[0].id).toBe(s.beanstalk.instanceId);
    expect(said[1].id).toBe(s.beanstalk.instanceId);
    expect(Number(said[0].uptime)).toBeGreaterThanOrEqual(1);
    expect(Number(said[1].uptime)).toBeGreaterThanOrEqual(1);
  });

  it.each([
    ['one after another', false],
    ['all at once (the threads open them later than they are handed)', true],
  ])('one hot tube does not put every connection on one thread: connections made %s', async (_, atOnce) => {
    const s = (server = await startServer({ port: 0, shards: 2, connectionThreads: true, logLevel: 'silent', workq: null }));
    const [tube] = onShard(0);
    const n = 3 * PLACEMENT_SLACK;
    const open = async (): Promise<void> => expect(await ask(await connect(s.port), `use ${tube}\r\n`, 1)).toBe(`USING ${tube}\r\n`);
    if (atOnce) await Promise.all(Array.from({ length: n }, open));
    else for (let i = 0; i < n; i++) await open();
    const loads = [s.beanstalk.servedBy(siteRow(0)), s.beanstalk.servedBy(siteRow(1))];
    expect(loads[0] + loads[1]).toBe(n);
    expect(loads[0] - loads[1]).toBeGreaterThanOrEqual(PLACEMENT_SLACK - 1);
    expect(loads[0] - loads[1]).toBeLessThanOrEqual(PLACEMENT_SLACK);
  });
});
