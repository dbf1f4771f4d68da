// A server each test starts for itself (its own options, test hooks on its router), and the
// clients it opens on it: all closed after each test.

import { afterEach } from 'vitest';
import { startServer, type RunningServer, type ServerOptions } from '../../src/server.ts';
import { connect, type Client } from './client.ts';
import { waitUntil } from './harness.ts';

export interface PerTest {
  /** Starts this test's server. */
  start(opts: ServerOptions): Promise<RunningServer>;
  /** A client of the running server, closed after the test. */
  open(): Promise<Client>;
}

/** Call at the top of a test file (it registers the afterEach that closes everything). */
export function perTestServer(): PerTest {
  let server: RunningServer | null = null;
  const clients: Client[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.destroy();
    await server?.close();
    server = null;
  });
  return {
    async start(opts) {
      server = await startServer(opts);
      return server;
    },
    async open() {
      if (server === null) throw new Error('perTestServer: open() before start()');
      const c = await connect(server.port);
      clients.push(c);
      return c;
    },
  };
}

/** The number a `stats` / `stats-tube` reply gives for `key`. */
export function statNumber(reply: string, key: string): number {
  const m = new RegExp(`\\n${key}: (\\d+)`).exec(reply);
  if (m === null) throw new Error(`no ${key} in ${reply}`);
  return Number(m[1]);
}

/**
 * A worker waiting over tubes `a` and `b` (on two shards; `default` ignored), parked in both
 * shards: `reserve` is sent, and `m` watches each tube's `current-waiting` until it counts it.
 */
export async function parkedOver(t: PerTest, a: string, b: string, reserve = 'reserve'): Promise<{ w: Client; m: Client }> {
  const w = await t.open();
  const m = await t.open();
  await w.ask(`watch ${a}`, 'WATCHING 2\r\n');
  await w.ask(`watch ${b}`, 'WATCHING 3\r\n');
  await w.ask('ignore default', 'WATCHING 2\r\n');
  await w.send(`${reserve}\r\n`);
  await untilParked(m, [a, b]);
  return { w, m };
}

/** Waits until, as `m` sees it, one reserve waits in each tube of `tubes` (each in its shard). */
export async function untilParked(m: Client, tubes: string[]): Promise<void> {
  for (const tube of tubes) {
    await waitUntil(`parked in ${tube}'s shard`, async () => statNumber(await m.request(`stats-tube ${tube}`), 'current-waiting') === 1);
  }
}
