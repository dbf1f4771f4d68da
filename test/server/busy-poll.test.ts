// --busy-poll-us: after a read, the connections' thread keeps polling its sockets for a while
// instead of sleeping in the kernel (src/route/router.ts), and sleeps again once reads stop, so an
// idle server costs no CPU. What polling gains is measured in bench/ (cycle-c.ts), not here.

import { afterEach, expect, it } from 'vitest';
import { BUSY_POLL_US_DEFAULT, BUSY_POLL_US_MAX } from '../../src/route/router.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { waitUntil } from '../support/harness.ts';

const servers: RunningServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.close();
});

async function serve(busyPollUs?: number): Promise<{ s: RunningServer; c: Client }> {
  const s = await startServer({ port: 0, shards: 1, logLevel: 'silent', workq: null, busyPollUs });
  servers.push(s);
  const c = await connect(s.port);
  clients.push(c);
  return { s, c };
}

it('a read starts the polling; it ends once no read came for the window, and the next read starts it again', async () => {
  const { s, c } = await serve(BUSY_POLL_US_MAX);
  expect(s.router.busyPolls).toBe(0);
  expect(await c.request('use t')).toBe('USING t\r\n');
  expect(s.router.busyPolls).toBe(1);
  await waitUntil('the thread sleeps again', () => !s.router.busyPolling);
  expect(await c.request('put 0 0 10 2\r\nhi')).toBe('INSERTED 1\r\n');
  expect(s.router.busyPolls).toBe(2);
  await waitUntil('the thread sleeps again', () => !s.router.busyPolling);
  // Replies and jobs are as ever.
  expect(await c.request('watch t')).toBe('WATCHING 2\r\n');
  expect(await c.request('reserve-with-timeout 0')).toBe('RESERVED 1 2\r\nhi\r\n');
});

it('the default polls (BUSY_POLL_US_DEFAULT); 0 never does', async () => {
  expect(BUSY_POLL_US_DEFAULT).toBeGreaterThan(0);
  const on = await serve();
  expect(await on.c.request('use t')).toBe('USING t\r\n');
  expect(on.s.router.busyPolls).toBeGreaterThan(0);
  const off = await serve(0);
  for (let i = 0; i < 20; i++) expect(await off.c.request('use t')).toBe('USING t\r\n');
  expect(off.s.router.busyPolls).toBe(0);
  expect(off.s.router.busyPolling).toBe(false);
});
