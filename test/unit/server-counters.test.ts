// The server-wide counters in shared memory (ServerCounters): a row per thread, each thread
// writing its own, readers adding up every row; drain mode as one shared word. A second row
// written by hand (as another thread serving connections would) shows in `stats`, in
// current-waiting, and in /metrics and /readyz.

import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { CMD_COUNT, CMD_PUT, CMD_STATS } from '../../src/proto/beanstalk/commands.ts';
import {
  ROW_CONNECTIONS, ROW_FAN_WAITING, ROW_PARKED, ROW_PRODUCERS, ROW_SERVING, ROW_TOTAL_CONNECTIONS, ROW_TOTAL_JOBS, ROW_WORKERS,
  ServerCounters,
} from '../../src/proto/beanstalk/server.ts';
import { startServer, type RunningServer } from '../../src/server.ts';
import { connect, type Client } from '../support/client.ts';
import { waitUntil } from '../support/harness.ts';

describe('ServerCounters', () => {
  it('sums every row; each thread writes its own; cmdCounts is a view of the row', () => {
    const main = ServerCounters.create(4);
    expect(main.thread).toBe(0);
    expect(main.threads).toBe(4);
    const t2 = ServerCounters.attach(main.shared, 2);
    main.cmdCounts[CMD_PUT]++;
    main.cmdCounts[CMD_PUT]++;
    t2.cmdCounts[CMD_PUT] += 5;
    expect(main.row[CMD_PUT]).toBe(2);
    expect(main.sum(CMD_PUT)).toBe(7);
    expect(t2.sum(CMD_PUT)).toBe(7);
    main.row[ROW_PRODUCERS] = 1;
    t2.row[ROW_PRODUCERS] = 3;
    main.rowOf(3)[ROW_PRODUCERS] = 10;
    expect(main.sum(ROW_PRODUCERS)).toBe(14);
    expect(main.sum(ROW_WORKERS)).toBe(0);
    expect(t2.rowOf(0)[ROW_PRODUCERS]).toBe(1);
    // Rows do not overlap: every field of every row apart.
    const fields = [CMD_PUT, CMD_COUNT - 1, ROW_TOTAL_JOBS, ROW_PRODUCERS, ROW_WORKERS, ROW_TOTAL_CONNECTIONS, ROW_CONNECTIONS, ROW_PARKED, ROW_FAN_WAITING, ROW_SERVING];
    const c = ServerCounters.create(3);
    for (let r = 0; r < 3; r++) for (const [i, f] of fields.entries()) c.rowOf(r)[f] = (r + 1) * 100 + i;
    for (const [i, f] of fields.entries()) expect(c.sum(f)).toBe(600 + 3 * i);
  });

  it('draining is one word every thread sees', () => {
    const main = ServerCounters.create(2);
    const other = ServerCounters.attach(main.shared, 1);
    expect(other.draining).toBe(false);
    main.draining = true;
    expect(other.draining).toBe(true);
    other.draining = false;
    expect(main.draining).toBe(false);
  });

  it('is sized for 64 threads by default and refuses rows out of range', () => {
    const c = ServerCounters.create();
    expect(c.threads).toBe(ServerCounters.MAX_THREADS);
    expect(ServerCounters.attach(c.shared, 63).thread).toBe(63);
    expect(() => ServerCounters.attach(c.shared, 64)).toThrow(RangeError);
    expect(() => ServerCounters.create(65)).toThrow(RangeError);
    expect(() => ServerCounters.attach(new SharedArrayBuffer(10), 0)).toThrow(TypeError);
  });
});

const servers: RunningServer[] = [];
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const s of servers.splice(0)) await s.close();
});

function statsOf(reply: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const line of reply.split('\n')) {
    const i = line.indexOf(': ');
    if (i > 0) m.set(line.slice(0, i), line.slice(i + 2));
  }
  return m;
}

function get(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    }).on('error', reject);
  });
}

describe('stats and /metrics add up every thread\'s row', () => {
  it('a second row written by hand is summed into stats', async () => {
    const s = await startServer({ port: 0, shards: 2, logLevel: 'silent', workq: null, http: { host: '127.0.0.1', port: 0 } });
    servers.push(s);
    const a = await connect(s.port);
    const b = await connect(s.port);
    clients.push(a, b);
    expect(await a.request('put 0 0 10 1\r\nx')).toMatch(/^INSERTED/);
    expect(await b.request('reserve-with-timeout 0')).toMatch(/^RESERVED/);
    await b.send('reserve\r\n'); // waits (in its shard)
    await waitUntil('b waits', () => s.beanstalk.waiting === 1);

    // This thread's row alone.
    const counters = s.beanstalk.counters;
    expect(counters.row[CMD_PUT]).toBe(1);
    expect(counters.row[ROW_CONNECTIONS]).toBe(2);
    let st = statsOf(await a.request('stats'));
    expect(st.get('cmd-put')).toBe('1');
    expect(st.get('cmd-stats')).toBe('1');
    expect(st.get('total-jobs')).toBe('1');
    expect(st.get('current-connections')).toBe('2');
    expect(st.get('total-connections')).toBe('2');
    expect(st.get('current-producers')).toBe('1');
    expect(st.get('current-workers')).toBe('1');
    expect(st.get('current-waiting')).toBe('1');
    expect(st.get('draining')).toBe('false');

    // Another thread's row, written by hand.
    const r1 = counters.rowOf(1);
    r1[CMD_PUT] = 40;
    r1[CMD_STATS] = 2;
    r1[ROW_TOTAL_JOBS] = 41;
    r1[ROW_CONNECTIONS] = 3;
    r1[ROW_TOTAL_CONNECTIONS] = 7;
    r1[ROW_PRODUCERS] = 2;
    r1[ROW_WORKERS] = 5;
    r1[ROW_PARKED] = 4;
    r1[ROW_FAN_WAITING] = 1;
    ServerCounters.attach(counters.shared, 63).draining = true;
    st = statsOf(await a.request('stats'));
    expect(st.get('cmd-put')).toBe('41');
    expect(st.get('cmd-stats')).toBe('4');
    expect(st.get('total-jobs')).toBe('42');
    expect(st.get('current-connections')).toBe('5');
    expect(st.get('total-connections')).toBe('9');
    expect(st.get('current-producers')).toBe('3');
    expect(st.get('current-workers')).toBe('6');
    expect(st.get('current-waiting')).toBe('6');
    expect(st.get('draining')).toBe('true');
    expect(await a.request('put 0 0 10 1\r\nx')).toBe('DRAINING\r\n');

    // The HTTP side reads the same sums.
    const port = s.httpPort!;
    const metrics = (await get(port, '/metrics')).body;
    expect(metrics).toMatch(/^beanstalkd_cmd_put_total 42$/m);
    expect(metrics).toMatch(/^beanstalkd_current_connections_count 5$/m);
    expect(metrics).toMatch(/^beanstalkd_current_waiting_count 6$/m);
    expect(metrics).toMatch(/^beanstalkd_draining 1$/m);
    expect((await get(port, '/readyz')).status).toBe(503);
    counters.draining = false;
    expect((await get(port, '/readyz')).status).toBe(200);
    r1.fill(0);

    // This thread's own counts go back down as its connections go.
    b.destroy();
    await waitUntil('b is gone', () => counters.row[ROW_CONNECTIONS] === 1 && s.beanstalk.waiting === 0);
    st = statsOf(await a.request('stats'));
    expect(st.get('current-connections')).toBe('1');
    expect(st.get('current-workers')).toBe('0');
    expect(st.get('current-waiting')).toBe('0');
    expect(st.get('total-connections')).toBe('2');
  });
});
