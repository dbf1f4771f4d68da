// The two ways a connection is served (src/net/listener.ts): from its bare TCP handle
// (src/net/raw.ts, the usual one) and as a net.Socket (where Node differs, or with
// SHARDSTALK_RAW_SOCKETS=0). The same exchanges through both, with the same replies: a pipeline,
// a body larger than the shared read buffer's share of one read and than the socket takes at
// once, a client that stops reading (backpressure), a half-close behind a waiting reserve, quit.

import { afterEach, describe, expect, it } from 'vitest';
import { rawConnections, sharedBufferSockets } from '../../src/net/listener.ts';
import { useRawHandles } from '../../src/net/raw.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { waitUntil } from '../support/harness.ts';

const servers: RunningServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  useRawHandles(true);
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.close();
});

async function exchanges(port: number, s: RunningServer): Promise<string[]> {
  const out: string[] = [];
  const c = await connect(port);
  clients.push(c);
  // A pipeline.
  await c.send('use t\r\nwatch t\r\nput 5 0 60 3\r\nabc\r\nput 1 0 60 2\r\nxy\r\nreserve\r\nstats-tube t\r\n');
  for (let i = 0; i < 5; i++) out.push(await c.readReply());
  const stats = await c.readReply();
  out.push(/current-jobs-ready: 1\n/.test(stats) && /current-jobs-reserved: 1\n/.test(stats) ? 'stats ok' : stats);
  // A body of 60,000 bytes, in and out.
  const big = Buffer.alloc(60_000, 0x61);
  await c.send(Buffer.concat([Buffer.from('put 0 0 60 60000\r\n'), big, Buffer.from('\r\n')]));
  const inserted = await c.readReply();
  out.push(inserted.replace(/\d+/, 'N'));
  const id = inserted.slice(9, -2);
  const found = await c.request(`peek ${id}`);
  out.push(found.length === `FOUND ${id} 60000\r\n`.length + 60_002 ? 'big body ok' : `big body: ${found.length}`);
  // A client that stops reading: 300 peeks of the big body (18 MB) pile up, then it reads them all.
  const reader = await connect(port);
  clients.push(reader);
  reader.socket.pause();
  await reader.send(`peek ${id}\r\n`.repeat(300));
  await new Promise((r) => setTimeout(r, 200));
  reader.socket.resume();
  let got = 0;
  for (let i = 0; i < 300; i++) if ((await reader.readReply(10_000)).length === `FOUND ${id} 60000\r\n`.length + 60_002) got++;
  out.push(`peeks read after a pause: ${got}`);
  // A half-close behind a reserve that waits: TIMED_OUT, then the connection closes.
  const w = await connect(port);
  clients.push(w);
  await w.send('watch empty\r\nignore default\r\nreserve\r\n');
  out.push(await w.readReply(), await w.readReply());
  await waitUntil('the reserve waits', () => s.beanstalk.waiting === 1);
  w.socket.end();
  out.push(await w.readReply(), String(await w.isClosed()));
  // quit
  out.push(await c.request('delete 9999'), String((await c.send('quit\r\n'), await c.isClosed())));
  return out;
}

describe('connections served from their bare handle and as net.Sockets answer alike', () => {
  it('the same exchanges, the same replies, each through its own path', async () => {
    const results: string[][] = [];
    for (const raw of [true, false]) {
      useRawHandles(raw);
      const s = await startServer({ port: 0, shards: 2, logLevel: 'silent', workq: null });
      servers.push(s);
      const rawBefore = rawConnections;
      const socketBefore = sharedBufferSockets;
      results.push(await exchanges(s.port, s));
      // Each path took every connection of its run (3 of them).
      expect([rawConnections - rawBefore, sharedBufferSockets - socketBefore]).toEqual(raw ? [3, 0] : [0, 3]);
    }
    expect(results[0]).toEqual([
      'USING t\r\n', 'WATCHING 2\r\n', 'INSERTED 1\r\n', 'INSERTED 2\r\n', 'RESERVED 2 2\r\nxy\r\n', 'stats ok',
      'INSERTED N\r\n', 'big body ok', 'peeks read after a pause: 300',
      'WATCHING 2\r\n', 'WATCHING 1\r\n', 'TIMED_OUT\r\n', 'true',
      'NOT_FOUND\r\n', 'true',
    ]);
    expect(results[1]).toEqual(results[0]);
  }, 60_000);
});
