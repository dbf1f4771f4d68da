// Deadlines past what setTimeout takes (2^31 - 1 ms, 24.8 days; src/shared/timer.ts). beanstalkd
// takes an int for reserve-with-timeout and a u32 for delay; a timer armed that far would be cut to
// 1 ms by Node (with a TimeoutOverflowWarning) and wake every millisecond. Armed for at most the
// longest delay, it stays quiet and the wait still ends when it should.

import { afterEach, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { waitUntil } from '../support/harness.ts';
import { namesOnShards } from '../support/workq.ts';

const servers: RunningServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.close();
});

it('a reserve-with-timeout of 2147483647 s over two shards, and a job delayed 4294967295 s, arm no overflowing timer', async () => {
  const warnings: string[] = [];
  const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  try {
    const s = await startServer({ port: 0, shards: 2, logLevel: 'silent', workq: null });
    servers.push(s);
    const [a, b] = namesOnShards('far', 2, 2);
    const c = await connect(s.port);
    clients.push(c);
    expect(await c.request(`use ${a}`)).toBe(`USING ${a}\r\n`);
    expect(await c.request('put 0 4294967295 60 1\r\nx')).toMatch(/^INSERTED \d+\r\n$/);
    const w = await connect(s.port);
    clients.push(w);
    expect(await w.request(`watch ${a}`)).toBe('WATCHING 2\r\n');
    expect(await w.request(`watch ${b}`)).toBe('WATCHING 3\r\n');
    expect(await w.request('ignore default')).toBe('WATCHING 2\r\n');
    await w.send('reserve-with-timeout 2147483647\r\n'); // beanstalkd reads an int: the longest timeout that is not "forever"
    await waitUntil('the reserve waits', () => s.beanstalk.waiting === 1);
    await new Promise((r) => setTimeout(r, 100));
    expect(warnings).toEqual([]);
    // The wait still ends with a job when one comes.
    expect(await c.request(`use ${b}`)).toBe(`USING ${b}\r\n`);
    const put = await c.request('put 0 0 60 1\r\ny');
    expect(await w.readReply()).toBe(`RESERVED ${put.slice(9, -2)} 1\r\ny\r\n`);
  } finally {
    process.off('warning', onWarning);
  }
});
