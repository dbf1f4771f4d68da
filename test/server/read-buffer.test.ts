// Every socket reads into one buffer shared by all connections (src/net/listener.ts), so bytes a
// connection holds unparsed (behind a blocking reserve, a body split across reads) must be its
// own copy by the time another connection's read overwrites that buffer.

import { afterEach, expect, it } from 'vitest';
import { rawConnections } from '../../src/net/listener.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { waitUntil } from '../support/harness.ts';

const servers: RunningServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.close();
});

it('this Node serves accepted connections from their bare handle, reading into the shared buffer (src/net/raw.ts)', async () => {
  const s = await startServer({ port: 0, shards: 1, logLevel: 'silent', workq: null });
  servers.push(s);
  const before = rawConnections;
  const c = await connect(s.port);
  clients.push(c);
  expect(await c.request('use t')).toBe('USING t\r\n');
  expect(rawConnections).toBe(before + 1);
});

it('bytes held behind a blocking reserve and a split body survive other connections reading', async () => {
  const s = await startServer({ port: 0, shards: 2, logLevel: 'silent', workq: null });
  servers.push(s);
  const a = await connect(s.port);
  const b = await connect(s.port);
  clients.push(a, b);
  // a: a reserve that blocks (the rest of this read is held unparsed), then puts, the last one's
  // body cut short.
  await a.send('reserve\r\n' + 'put 0 0 60 5\r\naaaaa\r\n'.repeat(3) + 'put 0 0 60 10\r\naaaaa');
  // The server has read a's bytes once its reserve waits (the rest of the read is held behind it).
  await waitUntil('a\'s reserve waits', () => s.beanstalk.waiting === 1);
  // b: reads of the same shape and length, different bytes, through the same buffer.
  for (let i = 0; i < 20; i++) {
    await b.send('put 0 0 60 5\r\nbbbbb\r\n');
    expect(await b.readReply()).toMatch(/^INSERTED \d+\r\n$/);
  }
  expect(await a.readReply()).toBe('RESERVED 1 5\r\nbbbbb\r\n');
  const ids: number[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await a.readReply();
    expect(r).toMatch(/^INSERTED \d+\r\n$/);
    ids.push(Number(r.slice(9, -2)));
  }
  await b.send('put 0 0 60 5\r\nbbbbb\r\n');
  expect(await b.readReply()).toMatch(/^INSERTED \d+\r\n$/);
  await a.send('AAAAA\r\n');
  const last = await a.readReply();
  expect(last).toMatch(/^INSERTED \d+\r\n$/);
  for (const id of ids) expect(await b.request(`peek ${id}`)).toBe(`FOUND ${id} 5\r\naaaaa\r\n`);
  const lastId = Number(last.slice(9, -2));
  expect(await b.request(`peek ${lastId}`)).toBe(`FOUND ${lastId} 10\r\naaaaaAAAAA\r\n`);
});
