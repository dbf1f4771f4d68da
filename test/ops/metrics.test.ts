// /metrics (#14): every number `stats` and `stats-tube` show, under davidtannock/beanstalkd_exporter's
// names, equal to what the protocol says at the same moment; shard, ring and thread figures; label
// escaping; the tube cap; and promtool's own check of a real scrape.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it, type TestContext } from 'vitest';
import { connect, type Client } from '../support/client.ts';
import { parseYamlDict, parseYamlList, putCmd, statsWhen } from '../support/harness.ts';
import { startServer, type RunningServer, type ServerOptions } from '../../src/server.ts';
import { shardOf } from '../../src/route/hash.ts';
import { ExpositionWriter, escapeLabelValue, SERVER_METRICS, TUBE_METRICS } from '../../src/ops/metrics.ts';
import { parseTaskStat } from '../../src/ops/threads.ts';
import { parseExposition, promtoolCheck, scrape, type Exposition } from './support.ts';

async function start(ctx: TestContext, opts: ServerOptions = {}): Promise<{ srv: RunningServer; conn(): Promise<Client> }> {
  const srv = await startServer({ host: '127.0.0.1', port: 0, logLevel: 'silent', http: { host: '127.0.0.1', port: 0 }, ...opts });
  const clients: Client[] = [];
  ctx.onTestFinished(async () => {
    for (const c of clients) c.destroy();
    await srv.close();
  });
  return {
    srv,
    async conn() {
      const c = await connect(srv.port);
      clients.push(c);
      return c;
    },
  };
}

const dict = async (c: Client, cmd: string): Promise<Record<string, string>> => Object.fromEntries(parseYamlDict(await c.request(cmd)));

/** Keys whose values move with the clock between the protocol's answer and the scrape. */
const CLOCK_KEYS = new Set(['uptime', 'rusage-utime', 'rusage-stime', 'pause-time-left']);

/** `stats` keys as the protocol shows them → the number /metrics must show (null: not a number). */
function numberOf(key: string, text: string): number | null {
  if (key === 'draining') return text === 'true' ? 1 : 0;
  return /^-?\d+(\.\d+)?$/.test(text) ? Number(text) : null;
}

function expectSameAsStats(m: Exposition, stats: Record<string, string>): void {
  for (const [key, text] of Object.entries(stats)) {
    const n = numberOf(key, text);
    if (n === null) continue;
    const def = SERVER_METRICS.get(key);
    expect(def, `stats key ${key} has a series`).toBeDefined();
    const got = m.value(def!.name);
    if (CLOCK_KEYS.has(key)) expect(Math.abs(got - n), key).toBeLessThanOrEqual(1);
    else expect(got, key).toBe(n);
  }
}

function expectSameAsTube(m: Exposition, name: string, st: Record<string, string>): void {
  expect(st.name).toBe(name);
  for (const [key, text] of Object.entries(st)) {
    if (key === 'name') continue;
    const def = TUBE_METRICS.get(key);
    expect(def, `stats-tube key ${key} has a series`).toBeDefined();
    const got = m.value(def!.name, { tube: name });
    if (CLOCK_KEYS.has(key)) expect(Math.abs(got - Number(text)), `${name} ${key}`).toBeLessThanOrEqual(1);
    else expect(got, `${name} ${key}`).toBe(Number(text));
  }
}

describe('/metrics', () => {
  it.for([false, true])('shows every stats and stats-tube number as the protocol does at the same moment (2 shards, connection threads %s)', async (connectionThreads, ctx) => {
    const { srv, conn } = await start(ctx, { shards: 2, connectionThreads });
    const [p, w, waiter, idle] = [await conn(), await conn(), await conn(), await conn()];
    // Two tubes with jobs (one urgent, one delayed), a buried job, a paused tube, a waiting reserve.
    await p.ask('use emails', 'USING emails\r\n');
    await p.send(putCmd('a', 10) + putCmd('b', 2000) + putCmd('c', 2000, 120));
    for (let i = 1; i <= 3; i++) expect(await p.readReply()).toBe(`INSERTED ${i}\r\n`);
    await p.ask('use images', 'USING images\r\n');
    await p.send(putCmd('d') + putCmd('e'));
    for (let i = 4; i <= 5; i++) expect(await p.readReply()).toBe(`INSERTED ${i}\r\n`);
    await w.ask('watch images', 'WATCHING 2\r\n');
    expect(await w.request('reserve')).toBe('RESERVED 4 1\r\nd\r\n');
    await w.ask('bury 4 100', 'BURIED\r\n');
    expect(await w.request('reserve')).toBe('RESERVED 5 1\r\ne\r\n'); // stays reserved
    await p.ask('pause-tube emails 100', 'PAUSED\r\n');
    await waiter.ask('watch quiet', 'WATCHING 2\r\n');
    await waiter.ask('ignore default', 'WATCHING 1\r\n');
    await waiter.send('reserve-with-timeout 60\r\n');
    await statsWhen(idle, 'the reserve waits', (s) => s['current-waiting'] === '1');

    // The protocol's view, then the scrape; nothing but the clock moves in between.
    const tubes = parseYamlList(await idle.request('list-tubes'));
    expect(tubes.sort()).toEqual(['default', 'emails', 'images', 'quiet']);
    const perTube: Record<string, Record<string, string>> = {};
    for (const t of tubes) perTube[t] = await dict(idle, `stats-tube ${t}`);
    const stats = await dict(idle, 'stats');
    const text = await scrape(srv.httpPort!);
    const m = parseExposition(text);

    expectSameAsStats(m, stats);
    for (const t of tubes) expectSameAsTube(m, t, perTube[t]);
    // Spot checks of the values themselves, so the comparison above is not of two zeros.
    expect(m.value('beanstalkd_current_jobs_ready_count')).toBe(2);
    expect(m.value('beanstalkd_current_jobs_urgent_count')).toBe(1);
    expect(m.value('beanstalkd_current_jobs_buried_count')).toBe(1);
    expect(m.value('beanstalkd_current_jobs_reserved_count')).toBe(1);
    expect(m.value('beanstalkd_current_jobs_delayed_count')).toBe(1);
    expect(m.value('beanstalkd_cmd_put_total')).toBe(5);
    expect(m.value('beanstalkd_current_waiting_count')).toBe(1);
    expect(m.value('beanstalkd_tube_pause_seconds_total', { tube: 'emails' })).toBe(100);
    expect(m.value('beanstalkd_tube_pause_time_left_seconds_total', { tube: 'emails' })).toBeGreaterThanOrEqual(98);
    expect(m.value('beanstalkd_tube_current_jobs_buried_count', { tube: 'images' })).toBe(1);
    expect(m.value('beanstalkd_tube_current_waiting_count', { tube: 'quiet' })).toBe(1);
    expect(m.value('shardstalk_metrics_tubes_omitted')).toBe(0);
    expect(m.types.get('beanstalkd_cmd_put_total')).toBe('counter');
    expect(m.value('beanstalkd_up')).toBe(1);
    expect(m.value('shardstalk_info', { version: stats.version.replace(/"/g, ''), id: stats.id })).toBe(1);

    // Per shard: the jobs of the tubes it owns; the thread shard's rings are there, the shard here
    // has none (with connection threads the main thread runs no shard: rings to both, each shard on
    // a thread that serves connections).
    expect(m.value('shardstalk_shards')).toBe(2);
    for (const shard of [0, 1]) {
      const mine = tubes.filter((t) => shardOf(t, 2) === shard);
      const sum = (key: string): number => mine.reduce((n, t) => n + Number(perTube[t][key]), 0);
      for (const state of ['ready', 'reserved', 'delayed', 'buried']) {
        expect(m.value('shardstalk_shard_jobs', { shard: String(shard), state }), `shard ${shard} ${state}`).toBe(sum(`current-jobs-${state}`));
      }
      expect(m.value('shardstalk_shard_own_thread', { shard: String(shard) })).toBe(shard === 0 || connectionThreads ? 0 : 1);
      expect(m.value('shardstalk_shard_requests_pending', { shard: String(shard) })).toBeGreaterThanOrEqual(0);
      expect(m.value('shardstalk_shard_request_backlog_bytes', { shard: String(shard) })).toBeGreaterThanOrEqual(0);
    }
    expect(m.all('shardstalk_shard_ring_capacity_bytes').map((s) => s.labels.shard)).toEqual(connectionThreads ? ['0', '1'] : ['1']);
    expect(m.value('shardstalk_shard_ring_capacity_bytes', { shard: '1' })).toBeGreaterThan(0);
    expect(m.value('shardstalk_shard_ring_to_shard_bytes', { shard: '1' })).toBeGreaterThanOrEqual(0);
    expect(m.value('shardstalk_shard_ring_from_shard_bytes', { shard: '1' })).toBeGreaterThanOrEqual(0);
    if (process.platform === 'linux') {
      const threads = m.all('shardstalk_thread_cpu_seconds_total');
      expect(threads.some((s) => s.labels.tid === String(process.pid) && s.labels.mode === 'user')).toBe(true);
    }

    // A scrape adds nothing to the protocol's counters.
    const again = parseExposition(await scrape(srv.httpPort!));
    expect(again.value('beanstalkd_cmd_stats_total')).toBe(Number(stats['cmd-stats']));
    expect(again.value('beanstalkd_exporter_scrapes_total')).toBe(2);

    // promtool accepts the real scrape (lint included: exit code 0, nothing said).
    const check = promtoolCheck(text);
    expect(check.output).toBe('');
    expect(check.status).toBe(0);
  });

  it('has a series for every numeric key, and promtool rejects a broken scrape (the check is real)', async (ctx) => {
    const { srv, conn } = await start(ctx);
    const c = await conn();
    const stats = await dict(c, 'stats');
    for (const [key, text] of Object.entries(stats)) {
      if (numberOf(key, text) !== null) expect(SERVER_METRICS.has(key), key).toBe(true);
    }
    const tube = await dict(c, 'stats-tube default');
    for (const key of Object.keys(tube)) if (key !== 'name') expect(TUBE_METRICS.has(key), key).toBe(true);
    // The exporter's names, kept.
    expect(SERVER_METRICS.get('cmd-reserve-with-timeout')?.name).toBe('beanstalkd_cmd_reserve_with_timeout_total');
    expect(TUBE_METRICS.get('pause-time-left')?.name).toBe('beanstalkd_tube_pause_time_left_seconds_total');

    const text = await scrape(srv.httpPort!);
    expect(promtoolCheck(text).status).toBe(0);
    // Canary: the same scrape with a gauge TYPE on an exporter name ending in _count must fail the lint.
    const broken = text.replace('# TYPE beanstalkd_current_jobs_ready_count untyped', '# TYPE beanstalkd_current_jobs_ready_count gauge');
    expect(broken).not.toBe(text);
    expect(promtoolCheck(broken).status).not.toBe(0);
  });

  it('labels tubes named with every character beanstalkd allows', async (ctx) => {
    const { srv, conn } = await start(ctx, { shards: 2 });
    const c = await conn();
    const names = ['a(b)', '$x;y/z+', '(.)', 'A-Z_0.9', '+', `${'w'.repeat(199)}$`];
    for (const name of names) {
      await c.ask(`use ${name}`, `USING ${name}\r\n`);
      await c.send(putCmd('x'));
      expect(await c.readReply()).toMatch(/^INSERTED \d+\r\n$/);
    }
    const text = await scrape(srv.httpPort!);
    const m = parseExposition(text);
    for (const name of names) expect(m.value('beanstalkd_tube_current_jobs_ready_count', { tube: name }), name).toBe(1);
    expect(promtoolCheck(text).status).toBe(0);
  });

  it('escapes backslash, double quote and line feed in label values and help', () => {
    // beanstalk tube names cannot hold these, but thread names (and later workq names) can.
    expect(escapeLabelValue('a\\b"c\nd')).toBe('a\\\\b\\"c\\nd');
    const odd = 'a\\b"c\nd)(}{,= é';
    const text = new ExpositionWriter()
      .one({ name: 'x_odd', type: 'gauge', help: 'help with \\ and\nline' }, 1, { thread: odd, other: 'plain' })
      .toString();
    expect(text).toBe('# HELP x_odd help with \\\\ and\\nline\n# TYPE x_odd gauge\nx_odd{thread="a\\\\b\\"c\\nd)(}{,= é",other="plain"} 1\n');
    expect(parseExposition(text).value('x_odd', { thread: odd, other: 'plain' })).toBe(1);
    expect(promtoolCheck(text).status).toBe(0);
  });

  it('caps the per-tube series at --http-metrics-tubes and says how many were left out', async (ctx) => {
    const { srv, conn } = await start(ctx, { httpMetricsTubes: 2 });
    const c = await conn();
    for (const t of ['t1', 't2', 't3', 't4']) {
      await c.ask(`use ${t}`, `USING ${t}\r\n`);
      await c.send(putCmd('x'));
      expect(await c.readReply()).toMatch(/^INSERTED/);
    }
    const listed = parseYamlList(await c.request('list-tubes'));
    expect(listed).toHaveLength(5);
    const m = parseExposition(await scrape(srv.httpPort!));
    expect(m.value('shardstalk_metrics_tubes_max')).toBe(2);
    expect(m.value('shardstalk_metrics_tubes_omitted')).toBe(3);
    expect(m.value('beanstalkd_current_tubes_count')).toBe(5);
    // The first two in list-tubes order.
    expect(m.all('beanstalkd_tube_total_jobs_count').map((s) => s.labels.tube)).toEqual(listed.slice(0, 2));
    for (const [name, type] of m.types) if (name.startsWith('beanstalkd_tube_')) expect(m.all(name), `${name} (${type})`).toHaveLength(2);
  });

  it('reads a thread\'s CPU time from a /proc stat line whose name holds spaces and parentheses', () => {
    // Fields 14 and 15 (utime, stime) counted from the last ')'.
    const line = '1234 (a) b (c) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 100 1000 10';
    expect(parseTaskStat(line)).toEqual({ name: 'a) b (c', userTicks: 250, systemTicks: 75 });
    expect(parseTaskStat('garbage')).toBeNull();
  });
});

describe('/metrics latency histograms', () => {
  it.for([false, true])('counts round trips to a shard thread and the log fsyncs, as valid histograms promtool accepts (connection threads %s)', async (connectionThreads, ctx) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ss-hist-'));
    ctx.onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    // Two shards: shard 0 runs on the connections' thread (no hop), shard 1 on a thread of its own.
    // With connection threads the connection is served on shard 1's thread (its first line's
    // tube): shard 0 is the hop, counted by that thread. -f 0: a log fsync before every batch's replies.
    const { srv, conn } = await start(ctx, { shards: 2, binlogDir: dir, fsyncMs: 0, connectionThreads });
    const c = await conn();
    const names = ['h-a', 'h-b', 'h-c', 'h-d', 'h-e', 'h-f'];
    const onOne = names.find((n) => shardOf(n, 2) === 1) as string;
    const onZero = names.find((n) => shardOf(n, 2) === 0) as string;
    for (const t of [onOne, onZero]) {
      expect(await c.request(`use ${t}`)).toBe(`USING ${t}\r\n`);
      for (let i = 0; i < 5; i++) expect(await c.request('put 0 0 60 1\r\nx')).toMatch(/^INSERTED \d+\r\n$/);
    }
    const text = await scrape(srv.httpPort!);
    const m = parseExposition(text);
    expect(m.types.get('shardstalk_shard_hop_seconds')).toBe('histogram');
    expect(m.types.get('shardstalk_shard_fsync_seconds')).toBe('histogram');
    // Hops: to the shard the connection's thread does not run; each put waited for its reply (-b),
    // so at least 5 round trips.
    const hopped = connectionThreads ? '0' : '1';
    expect(m.all('shardstalk_shard_hop_seconds_count').map((s) => s.labels.shard)).toEqual(connectionThreads ? ['0', '1'] : ['1']);
    expect(m.value('shardstalk_shard_hop_seconds_count', { shard: hopped })).toBeGreaterThanOrEqual(5);
    expect(m.value('shardstalk_shard_hop_seconds_sum', { shard: hopped })).toBeGreaterThan(0);
    // Fsyncs on both shards, at least one per put.
    for (const shard of ['0', '1']) {
      expect(m.value('shardstalk_shard_fsync_seconds_count', { shard })).toBeGreaterThanOrEqual(5);
      // Buckets are cumulative and end at the count.
      const buckets = m.all('shardstalk_shard_fsync_seconds_bucket').filter((s) => s.labels.shard === shard);
      for (let i = 1; i < buckets.length; i++) expect(buckets[i].value).toBeGreaterThanOrEqual(buckets[i - 1].value);
      expect(buckets.at(-1)?.labels.le).toBe('+Inf');
      expect(buckets.at(-1)?.value).toBe(m.value('shardstalk_shard_fsync_seconds_count', { shard }));
    }
    const check = promtoolCheck(text);
    expect(check.output).toBe('');
    expect(check.status).toBe(0);
  });
});

