// --busy-poll-us: after a read, the connections' thread keeps polling its sockets for a while
// instead of sleeping in the kernel (src/route/router.ts), and sleeps again once reads stop, so an
// idle server costs no CPU; between turns that read nothing it waits a little on the CPU
// (--busy-poll-spin-us). What polling gains is measured in bench/ (cycle-c.ts), not here.

import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { BUSY_POLL_LONG_US_DEFAULT, BUSY_POLL_SPIN_US_DEFAULT, BUSY_POLL_SPIN_US_MAX, BUSY_POLL_US_DEFAULT, BUSY_POLL_US_MAX } from '../../src/route/router.ts';
import { busyPollByDefault, startServer, type RunningServer } from '../../src/server.ts';
import { LONG_WINDOW_PREEMPTIONS, POLL_PERIOD_MS } from '../../src/shared/pollwindow.ts';
import { Preemptions } from '../../src/shared/preempted.ts';
import { connect, type Client } from '../support/client.ts';
import { waitUntil } from '../support/harness.ts';

const servers: RunningServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.close();
});

/**
 * A server and a client. Its thread is this test's, whose cores other tests' threads share: unless
 * a test asks, the long window does not heed preemptions (busyPollLongPreemptions Infinity).
 */
async function serve(busyPollUs?: number, busyPollSpinUs?: number, busyPollLongUs?: number, busyPollLongPreemptions = Infinity): Promise<{ s: RunningServer; c: Client }> {
  const s = await startServer({ port: 0, shards: 1, logLevel: 'silent', workq: null, busyPollUs, busyPollSpinUs, busyPollLongUs, busyPollLongPreemptions });
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

it('a polling thread waits between turns that read nothing (by default, or given --busy-poll-spin-us); with 0 it never does; replies as ever', async () => {
  expect(BUSY_POLL_SPIN_US_DEFAULT).toBeGreaterThan(0);
  for (const spinUs of [BUSY_POLL_SPIN_US_MAX, undefined, 0]) {
    const { s, c } = await serve(BUSY_POLL_US_MAX, spinUs);
    expect(await c.request('use t')).toBe('USING t\r\n');
    // The window (10 ms) passes without a read: the thread waited between its idle turns, or not.
    await waitUntil('the thread sleeps again', () => !s.router.busyPolling);
    if ((spinUs ?? BUSY_POLL_SPIN_US_DEFAULT) === 0) expect(s.router.busySpins).toBe(0);
    else expect(s.router.busySpins).toBeGreaterThan(0);
    // The waits stay within the window: the poll ended, and the next read starts it again.
    expect(s.router.busyPolls).toBe(1);
    expect(await c.request('put 0 0 10 2\r\nhi')).toBe('INSERTED 1\r\n');
    expect(s.router.busyPolls).toBe(2);
    expect(await c.request('watch t')).toBe('WATCHING 2\r\n');
    expect(await c.request('reserve-with-timeout 0')).toBe('RESERVED 1 2\r\nhi\r\n');
  }
});

it('the long window holds while reads keep coming within the short one, and not after a silence; --busy-poll-long-us 0 never', async () => {
  expect(BUSY_POLL_LONG_US_DEFAULT).toBeGreaterThan(BUSY_POLL_US_DEFAULT);
  // A short window of 5 ms: the client's round trips come well within it, so polling without
  // pause would cost nothing more (src/shared/pollwindow.ts); the choice is made per period.
  const { s, c } = await serve(5_000, undefined, 8_000);
  expect(s.router.busyPollWindowMs).toBe(5);
  const until = performance.now() + 3 * POLL_PERIOD_MS;
  while (performance.now() < until) expect(await c.request('use t')).toBe('USING t\r\n');
  expect(s.router.busyPollWindowMs).toBe(8);
  // Silent for longer than a period: the next read finds the short window would have slept.
  await waitUntil('the thread sleeps again', () => !s.router.busyPolling);
  await new Promise((r) => setTimeout(r, 2 * POLL_PERIOD_MS));
  expect(await c.request('use t')).toBe('USING t\r\n');
  expect(s.router.busyPollWindowMs).toBe(5);

  const never = await serve(5_000, undefined, 0);
  const end = performance.now() + 3 * POLL_PERIOD_MS;
  while (performance.now() < end) expect(await never.c.request('use t')).toBe('USING t\r\n');
  expect(never.s.router.busyPollWindowMs).toBe(5);
});

// The long window only while no other task wants the thread's core (src/shared/pollwindow.ts):
// here the thread serving the connections (this test's own) shares one CPU with a process that,
// like a client beside the server, sleeps a little and works a little, again and again, so the
// kernel preempts the thread whenever it wakes; the short window holds however close the reads come.
it.runIf(process.platform === 'linux')('a thread whose core other tasks keep wanting holds the short window', async () => {
  const probe = Preemptions.open();
  expect(probe, '/proc/thread-self/status').not.toBeNull();
  probe?.close();
  const tid = fs.readlinkSync('/proc/thread-self').split('/').pop() as string;
  const mask = execFileSync('taskset', ['-p', tid], { encoding: 'utf8' }).trim().split(' ').pop() as string;
  // The first CPU this thread may run on ("pid N's current affinity list: 0-1,4").
  const cpu = /\d+/.exec(execFileSync('taskset', ['-cp', tid], { encoding: 'utf8' }).split(':').pop() as string)?.[0] ?? '0';
  const busy = 'const a = new Int32Array(new SharedArrayBuffer(4)); for (;;) { Atomics.wait(a, 0, 0, 0.2); const t = performance.now(); while (performance.now() - t < 0.1); }';
  const neighbour = spawn('taskset', ['-c', cpu, process.execPath, '-e', busy], { stdio: 'ignore' });
  try {
    execFileSync('taskset', ['-p', '-c', cpu, tid], { stdio: 'ignore' });
    const { s, c } = await serve(5_000, undefined, 8_000, LONG_WINDOW_PREEMPTIONS);
    const until = performance.now() + 5 * POLL_PERIOD_MS;
    while (performance.now() < until) expect(await c.request('use t')).toBe('USING t\r\n');
    expect(s.router.busyPollWantedPeriods).toBeGreaterThan(0);
    expect(s.router.busyPollWindowMs).toBe(5);
  } finally {
    execFileSync('taskset', ['-p', mask, tid], { stdio: 'ignore' });
    neighbour.kill('SIGKILL');
  }
  // The control: heeding no preemptions, the same reads give a fresh server's thread the long
  // window (they come close enough; only the preemptions kept it short above).
  const { s, c } = await serve(5_000, undefined, 8_000);
  const until = performance.now() + 3 * POLL_PERIOD_MS;
  while (performance.now() < until) expect(await c.request('use t')).toBe('USING t\r\n');
  expect(s.router.busyPollWindowMs).toBe(8);
});

it('by default only threads that can have a core to themselves poll', () => {
  // The thread serving connections always; shard threads with a core each besides the main thread's.
  expect(busyPollByDefault(2, 0, 0)).toEqual({ main: true, shards: true, sites: true });
  expect(busyPollByDefault(2, 1, 0).shards).toBe(false);
  expect(busyPollByDefault(16, 14, 0).shards).toBe(true);
  expect(busyPollByDefault(16, 15, 0).shards).toBe(false);
  // Connection threads (one per shard) with more cores than threads.
  expect(busyPollByDefault(2, 0, 2).sites).toBe(false);
  expect(busyPollByDefault(16, 0, 15).sites).toBe(true);
});

it.each([false, true])('every thread polling (given explicitly), connection threads %s: jobs on every shard, delays and timeouts as ever', async (connectionThreads) => {
  const s = await startServer({ port: 0, shards: 3, connectionThreads, logLevel: 'silent', workq: null, busyPollUs: BUSY_POLL_US_MAX });
  servers.push(s);
  const c = await connect(s.port);
  clients.push(c);
  const tubes = ['a', 'b', 'c', 'd', 'e', 'f'];
  for (const t of tubes) {
    expect(await c.request(`use ${t}`)).toBe(`USING ${t}\r\n`);
    expect(await c.request(`put 0 0 10 1\r\n${t}`)).toMatch(/^INSERTED \d+\r\n$/);
    expect(await c.request(`watch ${t}`)).toMatch(/^WATCHING \d+\r\n$/);
  }
  for (let i = 0; i < tubes.length; i++) {
    const r = await c.request('reserve-with-timeout 0');
    expect(r).toMatch(/^RESERVED \d+ 1\r\n[a-f]\r\n$/);
    expect(await c.request(`delete ${/^RESERVED (\d+)/.exec(r)![1]}`)).toBe('DELETED\r\n');
  }
  // A delayed job becomes ready, and a waiting reserve gets it, while the threads poll.
  expect(await c.request('put 0 1 10 5\r\nlater')).toMatch(/^INSERTED \d+\r\n$/);
  expect(await c.request('reserve-with-timeout 5', 10_000)).toMatch(/^RESERVED \d+ 5\r\nlater\r\n$/);
  expect(await c.request('reserve-with-timeout 1', 10_000)).toBe('TIMED_OUT\r\n');
});
