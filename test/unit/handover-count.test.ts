// With connection threads, stats' current-connections and total-connections add up rows that
// different threads write (ServerCounters): the main thread accepts each connection, a site
// (connection thread) serves it from the handover on. A connection must count once at every
// moment, the handover included: the site may take it up, and answer its first line (a `stats`
// say), before the main thread's call that handed it over has returned. Here the sites run on this
// thread, each with its own counters row as a connection thread has, and take a connection up
// inside the call that hands it to them: that worst order, every time.

import net from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { makeLogger } from '../../src/log.ts';
import { Placement } from '../../src/net/placement.ts';
import { SiteConnections } from '../../src/net/site.ts';
import { listenConnectionThreads, siteRow, type Sites } from '../../src/net/threads.ts';
import { BeanstalkServer, ServerCounters } from '../../src/proto/beanstalk/server.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { waitUntil } from '../support/harness.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
  vi.restoreAllMocks();
});

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => resolve(c));
    c.on('error', reject);
    cleanups.push(() => void c.destroy());
  });
}

/** Sends `data` on `c` and resolves with the first CRLF-ended line that comes back. */
function ask(c: net.Socket, data: string): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const on = (d: Buffer): void => {
      got += d.toString('latin1');
      const i = got.indexOf('\r\n');
      if (i >= 0) {
        c.off('data', on);
        resolve(got.slice(0, i));
      }
    };
    c.on('data', on);
    c.write(data);
  });
}

interface Setup {
  s: RunningServer;
  port: number;
  /** [when, current, total] at each handover, just before the site takes the connection and just after. */
  counts: [string, number, number][];
  /** The sites' servers (rows siteRow(0) and siteRow(1)). */
  siteServers: BeanstalkServer[];
  /** Set: the next handovers throw (no thread can take a connection). */
  refuse: boolean;
}

/** A server (its router, its counters) and a beanstalk port with connection threads on it whose two sites serve on this thread. */
async function setup(): Promise<Setup> {
  const s = await startServer({ port: 0, shards: 2, logLevel: 'silent', workq: null });
  cleanups.push(() => s.close());
  const log = makeLogger('silent');
  // A site's server on the router here (a connection thread has its own), writing its own row.
  const siteServers = [0, 1].map((site) => new BeanstalkServer(s.router, ServerCounters.attach(s.beanstalk.counters.shared, siteRow(site))));
  const sites = siteServers.map((b) => new SiteConnections(b, log));
  cleanups.push(() => {
    for (const site of sites) site.destroyAll();
  });
  const counts: [string, number, number][] = [];
  const seen = (when: string): void => void counts.push([when, s.beanstalk.connections, s.beanstalk.totalConnections]);
  let next = 0;
  const st: Setup = { s, port: 0, counts, siteServers, refuse: false };
  const fake: Sites = {
    count: 2,
    handTo(site, handle, first) {
      if (st.refuse) throw new Error('closing');
      seen('handed');
      sites[site].take({ handle, first });
      seen('taken');
    },
    hand(socket) {
      if (st.refuse) throw new Error('closing');
      seen('handed');
      sites[next++ % 2].take({ socket });
      seen('taken');
    },
  };
  const server = await listenConnectionThreads('127.0.0.1', 0, fake, s.beanstalk, 2);
  // Not waiting for its callback: net.Server counts a socket served from its bare handle here
  // (SiteConnections drops the net.Socket) as open for ever; it stops listening at once.
  cleanups.push(() => void server.close());
  st.port = (server.address() as net.AddressInfo).port;
  return st;
}

const placedOrNot = [
  ['placed by its first line', true],
  ['handed in turn as it is accepted (no placement)', false],
] as const;

describe('a connection handed to a connection thread counts once', () => {
  it.each(placedOrNot)('%s: at the handover, once taken up, and after its close', async (_, placed) => {
    if (!placed) vi.spyOn(Placement, 'available').mockReturnValue(false);
    expect(Placement.available()).toBe(placed);
    const { s, port, counts, siteServers } = await setup();
    const n = 4;
    const open: net.Socket[] = [];
    for (let i = 1; i <= n; i++) {
      const c = await connect(port);
      open.push(c);
      expect(await ask(c, i % 2 === 0 ? 'use a\r\n' : 'watch b\r\n')).toMatch(/^(USING a|WATCHING 2)$/);
      expect([s.beanstalk.connections, s.beanstalk.totalConnections]).toEqual([i, i]);
      // Each thread's own count of what it serves: the sites have them all, the main thread none.
      expect(s.beanstalk.servedBy(0)).toBe(0);
      expect(s.beanstalk.servedBy(siteRow(0)) + s.beanstalk.servedBy(siteRow(1))).toBe(i);
    }
    // Inside each handover, before and after the site took the connection up: i open, i so far.
    expect(counts).toEqual(Array.from({ length: n }, (_, k) => [['handed', k + 1, k + 1], ['taken', k + 1, k + 1]]).flat());
    for (const c of open) c.destroy();
    await waitUntil('every connection closed', () => s.beanstalk.connections === 0);
    expect(s.beanstalk.totalConnections).toBe(n);
    // Closed by the sites (placement's load reads this), none by the main thread.
    expect(s.beanstalk.closedBy(siteRow(0)) + s.beanstalk.closedBy(siteRow(1))).toBe(n);
    expect(s.beanstalk.closedBy(0)).toBe(0);
    expect(s.beanstalk.servedBy(siteRow(0)) + s.beanstalk.servedBy(siteRow(1))).toBe(0);
    // The reclaim's work: the main thread accepted each; a site took each over, read a command, closed it.
    expect(s.beanstalk.workDone()).toBe(n);
    expect(siteServers[0].workDone() + siteServers[1].workDone()).toBe(3 * n);
  });

  it.each(placedOrNot)('%s: no thread can take it, it ends counted by the main thread alone', async (_, placed) => {
    if (!placed) vi.spyOn(Placement, 'available').mockReturnValue(false);
    const st = await setup();
    const { s, port } = st;
    st.refuse = true;
    const c = await connect(port);
    const gone = new Promise<void>((resolve) => c.on('close', () => resolve()));
    c.on('error', () => {});
    c.write('use a\r\n');
    await gone;
    expect([s.beanstalk.connections, s.beanstalk.totalConnections]).toEqual([0, 1]);
    expect([s.beanstalk.servedBy(0), s.beanstalk.closedBy(0)]).toEqual([0, 1]);
    expect(st.counts).toEqual([]);
  });
});

describe('a connection that leaves before its first line', () => {
  it('is counted and uncounted by the main thread, and no site hears of it', async () => {
    const { s, port, counts } = await setup();
    const c = await connect(port);
    await waitUntil('held by the main thread', () => s.beanstalk.servedBy(0) === 1);
    expect([s.beanstalk.connections, s.beanstalk.totalConnections]).toEqual([1, 1]);
    c.end('use a'); // half a line, then gone
    await waitUntil('closed by the main thread', () => s.beanstalk.servedBy(0) === 0);
    expect([s.beanstalk.connections, s.beanstalk.totalConnections]).toEqual([0, 1]);
    expect(s.beanstalk.closedBy(0)).toBe(1);
    expect(counts).toEqual([]);
  });
});
