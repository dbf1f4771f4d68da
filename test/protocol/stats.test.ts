// stats, stats-job, stats-tube: exact key lists (in beanstalkd's order), the values that are
// deterministic, and patterns for the rest.

import os from 'node:os';
import { describe, expect, it } from 'vitest';
import type { Client } from '../support/client.ts';
import { fixture, parseYamlDict, putCmd, sleep, statsWhen } from '../support/harness.ts';
import { targets } from '../support/servers.ts';

const STATS_KEYS = [
  'current-jobs-urgent', 'current-jobs-ready', 'current-jobs-reserved', 'current-jobs-delayed',
  'current-jobs-buried', 'cmd-put', 'cmd-peek', 'cmd-peek-ready', 'cmd-peek-delayed',
  'cmd-peek-buried', 'cmd-reserve', 'cmd-reserve-with-timeout', 'cmd-delete', 'cmd-release',
  'cmd-use', 'cmd-watch', 'cmd-ignore', 'cmd-bury', 'cmd-kick', 'cmd-touch', 'cmd-stats',
  'cmd-stats-job', 'cmd-stats-tube', 'cmd-list-tubes', 'cmd-list-tube-used',
  'cmd-list-tubes-watched', 'cmd-pause-tube', 'job-timeouts', 'total-jobs', 'max-job-size',
  'current-tubes', 'current-connections', 'current-producers', 'current-workers',
  'current-waiting', 'total-connections', 'pid', 'version', 'rusage-utime', 'rusage-stime',
  'uptime', 'binlog-oldest-index', 'binlog-current-index', 'binlog-records-migrated',
  'binlog-records-written', 'binlog-max-size', 'draining', 'id', 'hostname', 'os', 'platform',
];

/** Values that vary between runs or servers, checked by pattern only. */
const STATS_PATTERNS: Record<string, RegExp> = {
  pid: /^\d+$/,
  version: /^"[^"\s]+"$/, // beanstalkd prints it quoted: version: "1.12"
  'rusage-utime': /^\d+\.\d{6}$/,
  'rusage-stime': /^\d+\.\d{6}$/,
  uptime: /^\d+$/,
  id: /^[0-9a-f]{16}$/, // 8 random bytes in hex
};

const STATS_JOB_KEYS = [
  'id', 'tube', 'state', 'pri', 'age', 'delay', 'ttr', 'time-left', 'file', 'reserves',
  'timeouts', 'releases', 'buries', 'kicks',
];

const STATS_TUBE_KEYS = [
  'name', 'current-jobs-urgent', 'current-jobs-ready', 'current-jobs-reserved',
  'current-jobs-delayed', 'current-jobs-buried', 'total-jobs', 'current-using',
  'current-watching', 'current-waiting', 'cmd-delete', 'cmd-pause-tube', 'pause',
  'pause-time-left',
];

async function statsOf(c: Client, cmd = 'stats'): Promise<Record<string, string>> {
  return Object.fromEntries(parseYamlDict(await c.request(cmd)));
}

describe.each(targets())('$name: stats', (target) => {
  it('a fresh server: exact keys in order, deterministic values exact', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    const pairs = parseYamlDict(await c.request('stats'));
    expect(pairs.map(([k]) => k)).toEqual(STATS_KEYS);
    const s = Object.fromEntries(pairs);
    const want: Record<string, string> = Object.fromEntries(STATS_KEYS.map((k) => [k, '0']));
    Object.assign(want, {
      'cmd-stats': '1',
      'max-job-size': '65535',
      'current-tubes': '1',
      'current-connections': '1',
      'total-connections': '1',
      'binlog-max-size': '10485760', // beanstalkd's default even without -b
      draining: 'false',
      // uname(2) fields: nodename, version, machine
      hostname: os.hostname(),
      os: os.version(),
      platform: os.machine(),
    });
    for (const k of STATS_KEYS) {
      const pattern = STATS_PATTERNS[k];
      if (pattern) expect(s[k], k).toMatch(pattern);
      else expect(s[k], k).toBe(want[k]);
    }
    expect(Number(s.uptime)).toBeLessThan(5);
  });

  it('the stats reply is framed exactly: OK <n>, n bytes of YAML, CRLF', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send('stats\r\n');
    const line = await c.readLine();
    const m = /^OK (\d+)\r\n$/.exec(line);
    expect(m).not.toBeNull();
    const body = (await c.readBytes(Number(m![1]) + 2)).toString('latin1');
    expect(body.startsWith('---\ncurrent-jobs-urgent: 0\n')).toBe(true);
    expect(body.endsWith('\n\r\n')).toBe(true);
    await c.expectNothing(50);
  });

  it('counters after some traffic', async (ctx) => {
    const f = await fixture(target, ctx);
    const [p, w, idle] = await f.conns(3);
    await p!.ask('use s', 'USING s\r\n');
    await p!.send(putCmd('u', 1023) + putCmd('n', 1024) + putCmd('d', 0, 100) + putCmd('b', 5));
    await p!.expect('INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\nINSERTED 4\r\n');
    await w!.ask('watch s', 'WATCHING 2\r\n');
    await w!.ask('reserve-job 4', 'RESERVED 4 1\r\nb\r\n');
    await w!.ask('bury 4 5', 'BURIED\r\n');
    await w!.ask('reserve', 'RESERVED 1 1\r\nu\r\n');
    await idle!.ask('list-tube-used', 'USING default\r\n');
    const s = await statsOf(idle!);
    expect(s).toMatchObject({
      'current-jobs-urgent': '0', // 1023 is reserved; 1024 is not urgent
      'current-jobs-ready': '1',
      'current-jobs-reserved': '1',
      'current-jobs-delayed': '1',
      'current-jobs-buried': '1',
      'cmd-put': '4',
      'cmd-reserve': '1',
      'cmd-use': '1',
      'cmd-watch': '1',
      'cmd-bury': '1',
      'cmd-stats': '1',
      'cmd-list-tube-used': '1',
      'total-jobs': '4',
      'current-tubes': '2',
      'current-connections': '3',
      'current-producers': '1',
      'current-workers': '1',
      'current-waiting': '0',
      'total-connections': '3',
    });
    await w!.ask('release 1 1023 0', 'RELEASED\r\n');
    expect((await statsOf(idle!))['current-jobs-urgent']).toBe('1');
    // a waiting worker
    await w!.ask('ignore default', 'WATCHING 1\r\n');
    await w!.ask('reserve', 'RESERVED 1 1\r\nu\r\n');
    await w!.ask('reserve', 'RESERVED 2 1\r\nn\r\n');
    await w!.send('reserve\r\n');
    let s2 = await statsWhen(idle!, 'the reserve waits', (s) => s['current-waiting'] !== '0', ['current-waiting']);
    expect(s2['current-waiting']).toBe('1');
    expect(s2['current-workers']).toBe('1');
    const ts = await statsOf(idle!, 'stats-tube s');
    expect(ts['current-waiting']).toBe('1');
    expect(ts['current-watching']).toBe('1');
    // closing connections: workers and producers are counted over open connections only
    await w!.close();
    await p!.close();
    s2 = await statsWhen(idle!, 'both closes are handled', (s) => s['current-connections'] === '1', ['current-connections']);
    expect(s2).toMatchObject({
      'current-connections': '1',
      'current-producers': '0',
      'current-workers': '0',
      'current-waiting': '0',
      'current-jobs-reserved': '0',
      'current-jobs-ready': '2',
      'total-connections': '3',
    });
  });

  it('stats takes no arguments', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('stats x', 'BAD_FORMAT\r\n');
    expect((await statsOf(c))['cmd-stats']).toBe('1');
  });
});

describe.each(targets())('$name: stats-job', (target) => {
  it('exact keys and values for a ready job', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('use sj', 'USING sj\r\n');
    await c.send(putCmd('hello', 42, 0, 30));
    await c.expect('INSERTED 1\r\n');
    const reply = await c.request('stats-job 1');
    expect(parseYamlDict(reply).map(([k]) => k)).toEqual(STATS_JOB_KEYS);
    const body = '---\nid: 1\ntube: sj\nstate: ready\npri: 42\nage: 0\ndelay: 0\nttr: 30\ntime-left: 0\n' +
      'file: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\nburies: 0\nkicks: 0\n';
    expect(reply).toBe(`OK ${body.length}\r\n${body}\r\n`);
  });

  it('reserved, delayed and buried jobs', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send(putCmd('r', 1, 0, 100) + putCmd('d', 2, 50, 7) + putCmd('b', 3));
    await c.expect('INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\n');
    await c.ask('reserve-job 1', 'RESERVED 1 1\r\nr\r\n');
    let s = await statsOf(c, 'stats-job 1');
    expect(s).toMatchObject({ state: 'reserved', pri: '1', ttr: '100', reserves: '1' });
    // truncated from nanoseconds: a deadline just set N s ahead reads N-1
    expect(s['time-left']).toBe('99');
    s = await statsOf(c, 'stats-job 2');
    expect(s).toMatchObject({ state: 'delayed', delay: '50', ttr: '7' });
    expect(s['time-left']).toBe('49');
    await c.ask('reserve-job 3', 'RESERVED 3 1\r\nb\r\n');
    await c.ask('bury 3 8', 'BURIED\r\n');
    s = await statsOf(c, 'stats-job 3');
    expect(s).toMatchObject({ state: 'buried', pri: '8', 'time-left': '0', buries: '1' });
    await c.ask('kick 1', 'KICKED 1\r\n');
    s = await statsOf(c, 'stats-job 3');
    expect(s).toMatchObject({ state: 'ready', kicks: '1', buries: '1', reserves: '1' });
  });

  it('NOT_FOUND and BAD_FORMAT', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('stats-job 1', 'NOT_FOUND\r\n');
    await c.ask('stats-job 0', 'NOT_FOUND\r\n');
    await c.ask('stats-job 18446744073709551615', 'NOT_FOUND\r\n');
    for (const arg of ['x', '-1', '+1', '1 ', '1x', '18446744073709551616', '99999999999999999999999', '']) {
      await c.ask(`stats-job ${arg}`, 'BAD_FORMAT\r\n');
    }
    expect((await statsOf(c))['cmd-stats-job']).toBe('3');
  });
});

describe.each(targets())('$name: stats-tube', (target) => {
  it('exact keys and values', async (ctx) => {
    const f = await fixture(target, ctx);
    const [a, b] = await f.conns(2);
    await a!.ask('use st', 'USING st\r\n');
    await b!.ask('watch st', 'WATCHING 2\r\n');
    await a!.send(putCmd('1', 5) + putCmd('2', 2000) + putCmd('3', 0, 100) + putCmd('4'));
    await a!.expect('INSERTED 1\r\nINSERTED 2\r\nINSERTED 3\r\nINSERTED 4\r\n');
    await b!.ask('reserve-job 4', 'RESERVED 4 1\r\n4\r\n');
    await b!.ask('delete 4', 'DELETED\r\n');
    await b!.ask('delete 99', 'NOT_FOUND\r\n');
    const reply = await a!.request('stats-tube st');
    expect(parseYamlDict(reply).map(([k]) => k)).toEqual(STATS_TUBE_KEYS);
    const body = '---\nname: st\ncurrent-jobs-urgent: 1\ncurrent-jobs-ready: 2\ncurrent-jobs-reserved: 0\n' +
      'current-jobs-delayed: 1\ncurrent-jobs-buried: 0\ntotal-jobs: 4\ncurrent-using: 1\n' +
      'current-watching: 1\ncurrent-waiting: 0\ncmd-delete: 1\ncmd-pause-tube: 0\npause: 0\n' +
      'pause-time-left: 0\n';
    expect(reply).toBe(`OK ${body.length}\r\n${body}\r\n`);
    const d = await statsOf(a!, 'stats-tube default');
    expect(d).toMatchObject({ name: 'default', 'current-using': '1', 'current-watching': '2', 'total-jobs': '0' });
  });

  it('NOT_FOUND for a missing tube', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.ask('stats-tube nosuch', 'NOT_FOUND\r\n');
    expect((await statsOf(c))['cmd-stats-tube']).toBe('1');
  });
});

describe.each(targets())('$name: stats over time', (target) => {
  it.concurrent('age grows and time-left counts down', async (ctx) => {
    const f = await fixture(target, ctx);
    const c = await f.conn();
    await c.send(putCmd('a', 0, 0, 10) + putCmd('d', 0, 10));
    await c.expect('INSERTED 1\r\nINSERTED 2\r\n');
    await c.ask('reserve', 'RESERVED 1 1\r\na\r\n');
    await sleep(1100); // deliberate: a second must pass for age and time-left to show it
    const s1 = await statsOf(c, 'stats-job 1');
    expect(s1.age).toBe('1');
    expect(s1['time-left']).toBe('8'); // 10 s ttr, a little over 1 s gone, truncated
    const s2 = await statsOf(c, 'stats-job 2');
    expect(s2['time-left']).toBe('8');
    expect(Number((await statsOf(c)).uptime)).toBeGreaterThanOrEqual(1);
  });
});
